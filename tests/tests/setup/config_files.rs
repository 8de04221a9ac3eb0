//! Settings loaded from a configuration file (the `serde` features): the
//! processor's, the outbox's and a subscriber's, with humantime durations;
//! what loads is validated like what is set in code.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::time::Duration;

use txoutbox_core::processor::ProcessorConfig;
use txoutbox_nats::JetStreamPublisher;
use txoutbox_nats::subscriber::SubscriberSettings;
use txoutbox_sea_orm::{Outbox, OutboxConfig, Retention};
use txoutbox_suite::subscriber::SubscriberFixture;
use txoutbox_suite::{Backend, TestDb};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_and_an_outbox_from_a_file() {
    let test = TestDb::with_schema(Backend::Sqlite).await;
    let outbox: OutboxConfig = serde_json::from_str(
        r#"{ "subject_prefix": "billing", "retention": "delete", "notify": false }"#,
    )
    .unwrap();
    assert_eq!(outbox.subject_prefix().as_str(), "billing");
    assert_eq!(outbox.retention(), Retention::Delete);
    let outbox = Outbox::new(test.db.clone(), outbox);
    let nats = async_nats::connect(txoutbox_suite::jetstream::nats_url())
        .await
        .unwrap();

    let good: ProcessorConfig =
        serde_json::from_str(r#"{ "lease": "5s", "poll_interval": "250ms" }"#).unwrap();
    let processor = outbox
        .processor(JetStreamPublisher::new(nats.clone(), "/config"))
        .config(good)
        .build()
        .unwrap()
        .spawn();
    processor.shutdown().await.unwrap();

    // Loaded, then refused by the same checks as code: a lease under 5 x
    // the publisher's ack timeout.
    let short: ProcessorConfig = serde_json::from_str(r#"{ "lease": "1s" }"#).unwrap();
    let err = outbox
        .processor(JetStreamPublisher::new(nats, "/config"))
        .config(short)
        .build()
        .map(|_| ())
        .unwrap_err();
    assert_eq!(err.setting, "lease", "{err}");

    // Typos and bad values are errors, not silently ignored.
    assert!(serde_json::from_str::<ProcessorConfig>(r#"{ "leese": "5s" }"#).is_err());
    assert!(serde_json::from_str::<ProcessorConfig>(r#"{ "lease": "five" }"#).is_err());
    let bad_prefix = serde_json::from_str::<OutboxConfig>(r#"{ "subject_prefix": "a.*" }"#);
    assert!(bad_prefix.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_from_a_file() {
    let fx = SubscriberFixture::shared().await;
    let settings: SubscriberSettings = serde_json::from_str(&format!(
        r#"{{ "stream": "{}", "ack_wait": "45s", "max_deliver": 8, "max_ack_pending": 300,
            "backoff": {{ "initial": "200ms", "max": "1m" }}, "unordered": true }}"#,
        fx.stream
    ))
    .unwrap();
    let subscriber = txoutbox_nats::Subscriber::builder(fx.jetstream.clone(), &fx.durable)
        .settings(&settings)
        .on(|_: sample_events::OrderPlaced, _| async { Ok(()) })
        .build()
        .await
        .unwrap();
    let info = fx.consumer_info().await;
    assert_eq!(info.config.ack_wait, Duration::from_secs(45));
    assert_eq!(info.config.max_deliver, 8);
    assert_eq!(info.config.max_ack_pending, 300);
    drop(subscriber);
    fx.delete().await;
}
