//! The ingest limit of current servers (nats-server 2.11+): past a stream's
//! `max_buffered_msgs` the server refuses publishes with 429 / 10167, "too
//! many requests". That is the broker asking the publisher to come back
//! later, not a verdict on the message: the processor must slow down and
//! spend no attempt, or under load good messages would go dead.
//!
//! On a private nats-server 2.14 (`current_nats_server`, installed by
//! `scripts/ensure-services.sh`) whose streams buffer 20 messages: a raw
//! burst first shows the server refusing (the premise), then the processor
//! drains a backlog on PostgreSQL, MariaDB and SQLite: every row published,
//! once, in each aggregate's order, no attempt spent, nothing dead.

mod processor_support;

use std::time::{Duration, Instant};

use async_nats::jetstream;
use processor_support::{
    Setup, assert_all_published_cleanly, assert_stream_matches_outbox, private_setup,
    spawn_processor, wait_all_published_within, write_orders,
};
use txoutbox_suite::Backend;
use txoutbox_suite::nats::{NatsServer, current_nats_server};

/// What a server with a small ingest buffer answers to `count` publishes
/// sent at once: how many it refused with 10167.
async fn refused_of_a_burst(client: &async_nats::Client, subject: &str, count: usize) -> usize {
    let jetstream = jetstream::new(client.clone());
    jetstream
        .create_stream(jetstream::stream::Config {
            name: "PROBE".into(),
            subjects: vec![subject.to_owned()],
            ..Default::default()
        })
        .await
        .expect("the probe's stream");
    let mut acks = Vec::with_capacity(count);
    for i in 0..count {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("burst-{i}").as_str());
        acks.push(
            jetstream
                .publish_with_headers(subject.to_owned(), headers, vec![b'x'; 300].into())
                .await
                .expect("sent"),
        );
    }
    let mut refused = 0;
    for ack in acks {
        if let Err(err) = ack.await
            && err.to_string().contains("10167")
        {
            refused += 1;
        }
    }
    refused
}

async fn a_full_ingest_buffer_spends_no_attempt(backend: Backend) {
    let server = NatsServer::builder()
        .binary(current_nats_server().display().to_string())
        .config("jetstream { max_buffered_msgs: 20 }")
        .start()
        .await
        .expect("a private nats-server 2.14");
    let setup: Setup = private_setup(&server, backend, "ingest").await;
    let client = setup.stream.jetstream.client();
    assert!(
        client.server_info().version.starts_with("2.14"),
        "{}",
        client.server_info().version
    );

    // The premise: this server refuses a burst past its buffer.
    let refused = refused_of_a_burst(&client, "ingest_probe.x", 2_000).await;
    println!("a raw burst of 2,000: {refused} refused with 10167");
    assert!(refused > 0, "the server refused nothing: no ingest limit");

    let total = write_orders(&setup.outbox, "i", 50, 10, 50).await as i64;
    let started = Instant::now();
    let processor = spawn_processor(&setup.outbox, client.clone(), "/ingest");
    wait_all_published_within(&setup.test, &setup.table, total, Duration::from_secs(120)).await;
    let report = processor.shutdown().await.expect("clean shutdown");
    println!(
        "{total} events drained in {:.1} s through a 20-message ingest buffer: {report:?}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        report.released > 0,
        "the processor never met the limit (no batch released as unavailable): {report:?}"
    );
    assert_eq!(report.failed, 0, "no publish counted as a rejection");
    assert_eq!(report.dead, 0);
    assert_all_published_cleanly(&setup.test, &setup.table).await;
    assert_stream_matches_outbox(&setup.stream, &setup.test, &setup.table).await;
}

txoutbox_suite::backend_tests!(a_full_ingest_buffer_spends_no_attempt:
    a_full_ingest_buffer_spends_no_attempt_on_postgres => Postgres,
    a_full_ingest_buffer_spends_no_attempt_on_mariadb => MySql,
    a_full_ingest_buffer_spends_no_attempt_on_sqlite => Sqlite,
);
