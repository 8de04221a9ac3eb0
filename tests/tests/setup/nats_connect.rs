//! `NatsConnect` against private nats-servers that require credentials:
//! the builder's shortcuts, and `connect_with` on the application's own
//! `ConnectOptions` with the builder's settings on top.

use std::time::Duration;

use outbox_nats::async_nats::ConnectOptions;
use outbox_nats::{Auth, ConnectError, NatsConnect};
use outbox_tests::nats::NatsServer;

const TOKEN: &str = "s3cret-token";

async fn token_server() -> NatsServer {
    NatsServer::builder()
        .token(TOKEN)
        .start()
        .await
        .expect("a private nats-server")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_applications_options_are_the_base() {
    let server = token_server().await;

    // No credentials: refused, with a typed error naming the server.
    let refused = NatsConnect::new(server.url())
        .connection_timeout(Duration::from_secs(2))
        .connect()
        .await;
    match refused {
        Err(ConnectError::Connect { url, .. }) => assert_eq!(url, server.url()),
        other => panic!("expected a refused connection, got {other:?}"),
    }

    // The application's options carry the token (and a setting the
    // builder has no shortcut for).
    let options = ConnectOptions::with_token(TOKEN.to_owned())
        .ping_interval(Duration::from_secs(7))
        .custom_inbox_prefix("_OUTBOX_TEST_INBOX");
    let client = NatsConnect::new(server.url())
        .name("connect-with")
        .connect_with(options)
        .await
        .expect("connects with the application's token");
    client.flush().await.expect("a round trip");
    assert!(client.new_inbox().starts_with("_OUTBOX_TEST_INBOX."));

    // The builder's auth applies on top of the options'.
    let client = NatsConnect::new(server.url())
        .auth(Auth::Token(TOKEN.to_owned()))
        .connect_with(ConnectOptions::with_token("wrong".to_owned()))
        .await
        .expect("the builder's token wins");
    client.flush().await.expect("a round trip");
}
