//! `NatsConnect` against private nats-servers that require credentials:
//! the builder's shortcuts, and `connect_with` on the application's own
//! `ConnectOptions` with the builder's settings on top.

use std::time::Duration;

use txoutbox_nats::async_nats::ConnectOptions;
use txoutbox_nats::{Auth, ConnectError, NatsConnect};
use txoutbox_suite::nats::NatsServer;

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
        Err(ConnectError::Unauthorized { url, .. }) => assert_eq!(url, server.url()),
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

/// A comma-separated list of servers (a cluster's nodes): the client
/// connects to one and, when that one dies, reconnects to another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_servers_survives_the_loss_of_the_one_connected_to() {
    let mut servers = [
        NatsServer::start().await.expect("a private nats-server"),
        NatsServer::start()
            .await
            .expect("another private nats-server"),
    ];
    let urls = format!("{},{}", servers[0].url(), servers[1].url());
    let client = NatsConnect::new(&urls)
        .connect()
        .await
        .expect("connects to one of the list");
    client.flush().await.expect("a round trip");
    let connected = client.server_info().port;
    let (dead, alive) = if connected == servers[0].port() {
        (0, 1)
    } else {
        (1, 0)
    };
    servers[dead].kill();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let answered = tokio::time::timeout(Duration::from_secs(1), client.flush()).await;
        if matches!(answered, Ok(Ok(()))) && client.server_info().port == servers[alive].port() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reconnect to the other server of {urls} within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A list with a URL that is not one: a typed error naming it.
    match NatsConnect::new(format!(
        "{},nats://127.0.0.1:notaport",
        servers[alive].url()
    ))
    .connect()
    .await
    {
        Err(ConnectError::InvalidUrl { url, .. }) => assert!(url.contains("notaport"), "{url}"),
        other => panic!("expected InvalidUrl, got {other:?}"),
    }
}
