//! The subscriber checks at build time that a stream keeps its dead letters
//! (without one, dead-lettering would fail and nak the message again and
//! again), and creates the stream when given one with `dead_letter_stream`.

use std::time::Duration;

use async_nats::jetstream::stream::StorageType;
use txoutbox_core::{Delivery, HandlerError};
use txoutbox_nats::StreamSpec;
use txoutbox_nats::subscriber::{Subscriber, SubscriberBuildError};
use txoutbox_suite::orders::OrderPlaced;
use txoutbox_suite::subscriber::{SubscriberFixture, header};

fn rejecting(_: OrderPlaced, _: Delivery) -> std::future::Ready<Result<(), HandlerError>> {
    std::future::ready(Err(HandlerError::permanent("never")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_fails_when_no_stream_captures_the_dead_letter_subject() {
    let fx = SubscriberFixture::shared().await;
    let durable = format!("{}_orphan", fx.durable);
    let err = Subscriber::builder(fx.jetstream.clone(), &durable)
        .unordered()
        .stream(&fx.stream)
        .on(rejecting)
        .build()
        .await
        .expect_err("no stream captures dlq.<durable>");
    match &err {
        SubscriberBuildError::DeadLettersUncaptured { subject, consumer } => {
            assert_eq!(subject, &format!("dlq.{durable}"));
            assert_eq!(consumer, &durable);
        }
        other => panic!("expected DeadLettersUncaptured, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(&format!("`dlq.{durable}`")) && text.contains("dead_letter_stream"),
        "{text}"
    );
    // Nothing was created on the way.
    let stream = fx.jetstream.get_stream(&fx.stream).await.unwrap();
    assert!(stream.consumer_info(&durable).await.is_err());
    fx.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_stream_is_created_and_keeps_them() {
    let fx = SubscriberFixture::shared().await;
    let durable = format!("{}_own", fx.durable);
    let name = format!("{}_OWN", fx.dead_letters);
    let spec = StreamSpec::new(&name, [format!("dlq.{durable}")])
        .storage(StorageType::Memory)
        .max_age(Duration::from_secs(600));

    // A spec that does not capture the subject is refused.
    let wrong = StreamSpec::new(&name, ["dlq.somebody-else"]).storage(StorageType::Memory);
    let err = Subscriber::builder(fx.jetstream.clone(), &durable)
        .unordered()
        .stream(&fx.stream)
        .dead_letter_stream(wrong)
        .on(rejecting)
        .build()
        .await
        .expect_err("the spec misses the subject");
    assert!(
        matches!(&err, SubscriberBuildError::InvalidConfig(text) if text.contains(&format!("`dlq.{durable}`"))),
        "{err}"
    );

    let running = Subscriber::builder(fx.jetstream.clone(), &durable)
        .unordered()
        .stream(&fx.stream)
        .ack_wait(Duration::from_secs(2))
        .dead_letter_stream(spec)
        .on(rejecting)
        .build()
        .await
        .expect("the subscriber creates its dead-letter stream")
        .spawn();
    let message = fx.message(
        &OrderPlaced {
            order_id: "o-1".into(),
            total_cents: 1,
        },
        "o-1",
        1,
    );
    fx.publish(&message).await;
    let mut stream = fx.jetstream.get_stream(&name).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while stream.info().await.unwrap().state.messages == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no dead letter");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let dead = stream.get_raw_message(1).await.unwrap();
    assert_eq!(dead.subject.as_str(), format!("dlq.{durable}"));
    assert_eq!(header(&dead, "Outbox-Dead-Kind"), Some("rejected"));
    running.shutdown().await.unwrap();
    let _ = fx.jetstream.delete_stream(&name).await;
    fx.delete().await;
}
