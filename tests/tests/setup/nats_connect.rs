//! `NatsConnect` against private nats-servers that require credentials:
//! the builder's shortcuts, and `connect_with` on the application's own
//! `ConnectOptions` with the builder's settings on top.

use std::time::Duration;

use txoutbox_nats::async_nats::ConnectOptions;
use txoutbox_nats::async_nats::connection::State;
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

/// A server away at start (its port refuses connections): by default the
/// client is returned at once and connects when the server starts;
/// `fail_when_away` fails with a typed error instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_away_at_start_is_connected_to_when_it_starts() {
    let mut server = NatsServer::start().await.expect("a private nats-server");
    server.stop().expect("nats-server stops");

    match NatsConnect::new(server.url())
        .fail_when_away()
        .connect()
        .await
    {
        Err(err @ ConnectError::Connect { .. }) => assert!(err.is_away(), "{err:?}"),
        other => panic!("expected a connection refused, got {other:?}"),
    }
    let client = NatsConnect::new(server.url())
        .connect()
        .await
        .expect("a client that connects in the background");
    assert_eq!(client.connection_state(), State::Pending);

    server.restart().await.expect("nats-server starts");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while client.connection_state() != State::Connected {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not connected within 2 s of the server's start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.flush().await.expect("a round trip");
}

/// What is wrong rather than away fails at start, retrying or not:
/// credentials the server refuses are `Unauthorized`, not a client left
/// connecting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_fail_at_start_although_retrying_is_the_default() {
    let server = token_server().await;
    for connect in [
        NatsConnect::new(server.url()).auth(Auth::Token("wrong".to_owned())),
        NatsConnect::new(server.url())
            .auth(Auth::Token("wrong".to_owned()))
            .retry_initial_connect(),
    ] {
        match connect.connect().await {
            Err(err @ ConnectError::Unauthorized { .. }) => assert!(!err.is_away(), "{err:?}"),
            other => panic!("expected refused credentials, got {other:?}"),
        }
    }
}
