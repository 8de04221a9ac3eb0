//! A missing stream fails a service's start, naming what to create: a
//! processor from `Outbox::processor` publishes under `<prefix>.>`, and
//! `Processor::check` (run by the axum `Runtime`'s `start`) asks JetStream
//! for a stream that captures it. Without one the start fails with
//! `ProcessorError::NoDestination`, before any message could go dead for
//! want of a stream; with one it starts.

use txoutbox_core::processor::ProcessorError;
use txoutbox_nats::{JetStreamPublisher, StreamSpec};
use txoutbox_sea_orm::{Outbox, OutboxConfig};
use txoutbox_suite::jetstream::nats_url;
use txoutbox_suite::{Backend, TestDb};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_without_its_stream_does_not_start() {
    let test = TestDb::new(Backend::Postgres).await;
    let tag = uuid::Uuid::now_v7().simple().to_string();
    let prefix = format!("nostream{}", &tag[20..]);
    let config = OutboxConfig::default()
        .with_subject_prefix(prefix.clone())
        .expect("a prefix");
    txoutbox_sea_orm::create_schema(&test.db, &config)
        .await
        .expect("schema");
    let outbox = Outbox::new(test.db.clone(), config);
    let nats = async_nats::connect(nats_url()).await.expect("NATS answers");
    let publisher = || JetStreamPublisher::new(nats.clone(), "/missing-stream");

    let processor = outbox.processor(publisher()).build().expect("settings");
    let reason = match processor.check().await {
        Err(ProcessorError::NoDestination(err)) => err.reason().to_owned(),
        other => panic!("expected NoDestination, got {other:?}"),
    };
    let subjects = format!("{prefix}.>");
    for what in [subjects.as_str(), "outbox stream ensure", "StreamSpec::new"] {
        assert!(reason.contains(what), "`{what}` in: {reason}");
    }
    let started = txoutbox::axum::Runtime::builder()
        .processor(outbox.processor(publisher()))
        .handle_signals(false)
        .start()
        .await;
    match started {
        Err(txoutbox::axum::RuntimeError::Processor(ProcessorError::NoDestination(err))) => {
            assert_eq!(err.reason(), reason);
        }
        Err(other) => panic!("expected NoDestination, got {other:?}"),
        Ok(_) => panic!("a runtime started without a stream for its subjects"),
    }

    // With the stream, the same start goes through.
    let stream = format!("NOSTREAM_{}", &tag[20..]);
    let jetstream = async_nats::jetstream::new(nats.clone());
    StreamSpec::new(&stream, [subjects.as_str()])
        .ensure(&jetstream)
        .await
        .expect("the stream");
    processor
        .check()
        .await
        .expect("a stream captures the subjects");
    let runtime = txoutbox::axum::Runtime::builder()
        .processor(outbox.processor(publisher()))
        .handle_signals(false)
        .start()
        .await
        .expect("the runtime starts");
    runtime.shutdown().await.expect("a clean stop");
    jetstream.delete_stream(&stream).await.expect("delete");
}
