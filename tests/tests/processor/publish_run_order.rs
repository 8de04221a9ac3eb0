//! `JetStreamPublisher::publish_run` keeps one aggregate's messages in order
//! with several in flight: each message after the first carries
//! `Nats-Expected-Last-Msg-Id` = its predecessor, so a message is stored
//! only right after its predecessor. A failure in the middle of a run
//! leaves nothing after it in the stream; a chain broken by another
//! message stored in between falls back to one message at a time.

mod processor_support;

use processor_support::read_all;
use txoutbox_core::publisher::PublishErrorKind;
use txoutbox_core::{
    AggregateRef, MessageContext, OutboxMessage, PendingMessage, Publisher, SubjectPrefix,
};
use txoutbox_nats::JetStreamPublisher;
use txoutbox_suite::jetstream::{TestStream, nats_url};
use txoutbox_suite::orders::OrderAmended;

/// Message `sequence` of aggregate `order/o-1`, under `prefix`.
fn message(prefix: &str, sequence: u64) -> OutboxMessage {
    OutboxMessage::seal(
        PendingMessage::new(&OrderAmended {
            order_id: "o-1".to_owned(),
            total_cents: sequence as i64,
        })
        .expect("serializable"),
        AggregateRef {
            aggregate_type: "order".to_owned(),
            aggregate_id: "o-1".to_owned(),
            sequence,
        },
        &MessageContext::new(),
        &SubjectPrefix::new(prefix).expect("prefix"),
    )
}

/// The stream's messages' aggregate sequences, in stream order.
async fn stored_sequences(stream: &TestStream) -> Vec<u64> {
    read_all(stream)
        .await
        .into_iter()
        .map(|(_, m)| m.sequence)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_in_the_middle_of_a_run_stores_nothing_after_it() {
    let client = async_nats::connect(nats_url()).await.expect("nats");
    let stream = TestStream::new(client.clone()).await;
    let publisher = JetStreamPublisher::new(client, "/run-test");

    // A run that holds grows the window past 2.
    let warm: Vec<OutboxMessage> = (1..=2).map(|s| message(&stream.prefix, s)).collect();
    let results = publisher
        .publish_run(&warm.iter().collect::<Vec<_>>())
        .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");

    // 3, then 4 on a subject no stream captures, then 5: sent together.
    let third = message(&stream.prefix, 3);
    let mut fourth = message(&stream.prefix, 4);
    fourth.subject = format!("nowhere-{}.order.amended", stream.prefix);
    let fifth = message(&stream.prefix, 5);
    let results = publisher.publish_run(&[&third, &fourth, &fifth]).await;
    assert_eq!(
        results.len(),
        2,
        "3 published, 4 failed, 5 not reported: {results:?}"
    );
    assert!(results[0].is_ok());
    let failure = results[1].as_ref().expect_err("4 has no stream");
    assert_eq!(failure.kind(), PublishErrorKind::Rejected, "{failure}");
    assert_eq!(
        stored_sequences(&stream).await,
        vec![1, 2, 3],
        "5 was sent right behind 4 but must not be stored without it"
    );
    stream.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_broken_by_another_message_goes_on_one_at_a_time() {
    let client = async_nats::connect(nats_url()).await.expect("nats");
    let stream = TestStream::new(client.clone()).await;
    let publisher = JetStreamPublisher::new(client, "/run-test");

    // 1 is stored, then another aggregate's message: the stream's last
    // message is no longer 1.
    let first = message(&stream.prefix, 1);
    publisher.publish(&first).await.expect("stored");
    let mut other = message(&stream.prefix, 1);
    other.aggregate_id = "o-2".to_owned();
    publisher.publish(&other).await.expect("stored");

    // A re-publish of 1 (a duplicate), chained to 2: 2 expects 1 to be the
    // last message, is refused, and is published again on its own.
    let second = message(&stream.prefix, 2);
    let results = publisher.publish_run(&[&first, &second]).await;
    assert_eq!(results.len(), 2, "{results:?}");
    let acks: Vec<_> = results.into_iter().map(|r| r.expect("published")).collect();
    assert!(acks[0].duplicate, "1 was stored already");
    assert!(!acks[1].duplicate);
    let stored = read_all(&stream).await;
    let order: Vec<(String, u64)> = stored
        .iter()
        .map(|(_, m)| (m.aggregate_id.clone(), m.sequence))
        .collect();
    assert_eq!(
        order,
        vec![
            ("o-1".to_owned(), 1),
            ("o-2".to_owned(), 1),
            ("o-1".to_owned(), 2)
        ]
    );
    stream.delete().await;
}

/// A chain of 64 in flight when the broker stops answering (SIGSTOP) ends
/// within about one ack timeout (5 s), and its failure says "unavailable",
/// so no attempt is spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_broker_ends_a_chain_within_one_ack_timeout() {
    let mut server = txoutbox_suite::nats::NatsServer::start()
        .await
        .expect("a private nats-server");
    let client = server
        .connect()
        .await
        .expect("a client of the private nats-server");
    let stream = processor_support::file_stream(client.clone(), "frozen").await;
    let publisher = JetStreamPublisher::new(client, "/run-test");
    // Runs that hold grow the window to 64.
    let mut sequence = 0;
    for _ in 0..8 {
        let run: Vec<OutboxMessage> = (0..64)
            .map(|_| {
                sequence += 1;
                message(&stream.prefix, sequence)
            })
            .collect();
        let results = publisher.publish_run(&run.iter().collect::<Vec<_>>()).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }
    let run: Vec<OutboxMessage> = (0..64)
        .map(|_| {
            sequence += 1;
            message(&stream.prefix, sequence)
        })
        .collect();
    server.freeze().expect("SIGSTOP");
    let started = std::time::Instant::now();
    let results = publisher.publish_run(&run.iter().collect::<Vec<_>>()).await;
    let took = started.elapsed();
    server.thaw().expect("SIGCONT");
    assert!(
        took < std::time::Duration::from_secs(15),
        "the chain took {took:?} to give up"
    );
    let last = results
        .last()
        .expect("a result")
        .as_ref()
        .expect_err("the broker is frozen");
    assert_eq!(last.kind(), PublishErrorKind::Unavailable, "{last}");
}
