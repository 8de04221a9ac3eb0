//! The broker's conditions are not the message's: an account over its
//! JetStream storage limit answers every publish with 400 / 10002
//! ("resource limits exceeded for account"); the processor pauses without
//! spending attempts, and publishes everything once there is room again.

mod processor_support;

use std::time::Duration;

use processor_support::{private_setup, spawn_tuned, wait_for_rows, wait_until, write_orders};
use txoutbox_suite::Backend;
use txoutbox_suite::nats::NatsServer;

/// An account whose streams may keep 16 KiB on disk: a few dozen events.
const SMALL_ACCOUNT: &str = "
accounts {
  SMALL: {
    jetstream: { max_mem: 16KB, max_file: 16KB }
    users: [{ user: small, password: small }]
  }
}
no_auth_user: small
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_over_its_limits_spends_no_attempts() {
    let server = NatsServer::builder()
        .config(SMALL_ACCOUNT)
        .start()
        .await
        .expect("a private nats-server");
    let setup = private_setup(&server, Backend::Postgres, "fullaccount").await;
    let (test, stream, outbox, table) = setup.into_parts();
    let processor = spawn_tuned(
        &outbox,
        server
            .connect()
            .await
            .expect("a client of the private nats-server"),
        "/full-account",
        |builder| {
            builder.unavailable_backoff(Duration::from_millis(50), Duration::from_millis(200))
        },
    );

    // 100 orders of 2 events: far more than the account can hold.
    write_orders(&outbox, "full", 100, 2, 100).await;
    wait_until(Duration::from_secs(20), "publishing started", || async {
        stream.count().await > 0
    })
    .await;
    // The account fills up; from then on every publish is answered 10002,
    // and the processor keeps trying for a while.
    let mut stored = stream.count().await;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = stream.count().await;
        if now == stored {
            break;
        }
        stored = now;
    }
    assert!(stored < 200, "the account held everything: {stored}");
    assert_eq!(
        test.count(&table, "attempts > 0 OR status = 2").await,
        0,
        "a full account spent attempts"
    );

    // Room again, a little at a time: everything is published, in order.
    let purger = {
        let jetstream = stream.jetstream.clone();
        let name = stream.name.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(s) = jetstream.get_stream(&name).await {
                    let _ = s.purge().await;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    wait_for_rows(
        &test,
        &table,
        "status = 1",
        200,
        Duration::from_secs(60),
        "every event is published",
    )
    .await;
    purger.abort();
    assert_eq!(test.count(&table, "attempts > 0").await, 0);
    processor.shutdown().await.expect("clean shutdown");
}
