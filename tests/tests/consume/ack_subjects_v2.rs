//! v2 ack subjects: nats-server 2.14 with `feature_flags { js_ack_fc_v2:
//! true }` (the default from 2.15 on) delivers messages with the reply
//! subject `$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.
//! <stream seq>.<consumer seq>.<time>.<pending>` instead of v1's
//! `$JS.ACK.<stream>.<consumer>.…`. The subscriber reads a message's
//! metadata from that subject and answers on it: every settlement (ack,
//! nak with a delay, progress, term) must work on both forms. On a private
//! 2.14 server with v2 on (the premise checked first), and a v1-form nak
//! answered by that server, which the restarting subscriber relies on. The
//! shared 2.14 server of `scripts/test.sh` sends v2 too, so the whole
//! subscriber suite runs on it there.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::consumer::{self, PullConsumer};
use async_nats::jetstream::stream::StorageType;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent};
use txoutbox_nats::subscriber::dead_lettering;
use txoutbox_suite::nats::{NatsServer, current_nats_server};
use txoutbox_suite::subscriber::{StartSubscriber, SubscriberFixture, eventually, header};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "ackv2.step")]
struct Step {
    n: u64,
}

/// A private nats-server 2.14 sending v2 ack subjects.
async fn v2_server() -> NatsServer {
    NatsServer::builder()
        .binary(current_nats_server().display().to_string())
        .config("feature_flags { js_ack_fc_v2: true }")
        .start()
        .await
        .expect("a private nats-server 2.14")
}

/// The next message of `consumer`.
async fn next(consumer: &PullConsumer) -> async_nats::jetstream::Message {
    consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .expect("a pull")
        .next()
        .await
        .expect("a message")
        .expect("not an error")
}

/// The premise, and what the restart relies on: the server sends v2 reply
/// subjects, the client reads the message's metadata from them, and a nak
/// sent to the v1 form of the same subject redelivers the message at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sends_v2_subjects_and_takes_v1_acks() {
    let server = v2_server().await;
    let fx =
        SubscriberFixture::new(server.connect().await.expect("a client"), StorageType::File).await;
    fx.publish(&fx.message(&Step { n: 1 }, "a", 1)).await;
    let consumer: PullConsumer = fx
        .jetstream
        .get_stream(&fx.stream)
        .await
        .expect("stream")
        .create_consumer(consumer::pull::Config {
            durable_name: Some("raw".into()),
            ack_wait: Duration::from_secs(30),
            ..Default::default()
        })
        .await
        .expect("a raw consumer");

    let first = next(&consumer).await;
    let reply = first.reply.clone().expect("a reply subject").to_string();
    let tokens: Vec<&str> = reply.split('.').collect();
    assert_eq!(tokens.len(), 11, "a v2 ack subject: {reply}");
    assert_eq!(&tokens[..3], ["$JS", "ACK", "_"], "{reply}");
    assert_eq!(&tokens[4..6], [fx.stream.as_str(), "raw"], "{reply}");
    let info = first.info().expect("metadata from a v2 subject");
    assert_eq!(
        (
            info.stream,
            info.consumer,
            info.stream_sequence,
            info.delivered
        ),
        (fx.stream.as_str(), "raw", 1, 1)
    );

    // The v1 form: `$JS.ACK.<stream>.<consumer>` and the same five numbers.
    let v1 = format!("$JS.ACK.{}", tokens[4..].join("."));
    fx.jetstream
        .client()
        .publish(v1, "-NAK".into())
        .await
        .expect("sent");
    let again = next(&consumer).await;
    let info = again.info().expect("metadata");
    assert_eq!(
        (info.stream_sequence, info.delivered),
        (1, 2),
        "the v1-form nak redelivered the message at once, well before the 30 s ack wait"
    );
    again.ack().await.expect("acked on the v2 subject");
    eventually("acked", Duration::from_secs(5), || {
        let consumer = consumer.clone();
        async move {
            let mut consumer = consumer;
            consumer
                .info()
                .await
                .is_ok_and(|i| i.ack_floor.stream_sequence == 1 && i.num_ack_pending == 0)
        }
    })
    .await;
    fx.delete().await;
}

/// A subscriber settles every way on v2 subjects: an ack, a nak with its
/// backoff (a retried handler), progress acks (a handler twice as long as
/// the ack wait, not redelivered), a term (a rejected message, dead-lettered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_settles_every_way_on_v2_subjects() {
    let server = v2_server().await;
    let fx =
        SubscriberFixture::new(server.connect().await.expect("a client"), StorageType::File).await;
    for (n, aggregate) in [(1, "ok"), (2, "retried"), (3, "slow"), (4, "rejected")] {
        fx.publish(&fx.message(&Step { n }, aggregate, 1)).await;
    }
    let ack_wait = Duration::from_millis(1200);
    let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let running = fx
        .subscriber()
        .unordered()
        .ack_wait(ack_wait)
        .on(move |step: Step, delivery: Delivery| {
            log.lock()
                .expect("not poisoned")
                .push((step.n, delivery.delivery_count()));
            async move {
                match (step.n, delivery.delivery_count()) {
                    (2, 1) => Err(HandlerError::retry("not yet")),
                    (3, _) => {
                        tokio::time::sleep(ack_wait * 2).await;
                        Ok(())
                    }
                    (4, _) => Err(HandlerError::permanent("never")),
                    _ => Ok(()),
                }
            }
        })
        .start()
        .await;
    let dead = fx.dead_letters(1).await;
    eventually("every step handled", Duration::from_secs(15), || async {
        seen.lock().expect("not poisoned").len() == 5
    })
    .await;
    fx.settle_and_shut_down(running).await;

    let mut seen = seen.lock().expect("not poisoned").clone();
    seen.sort_unstable();
    assert_eq!(
        seen,
        [(1, 1), (2, 1), (2, 2), (3, 1), (4, 1)],
        "the nak redelivered step 2 once; progress kept step 3 from coming back"
    );
    assert_eq!(header(&dead[0], dead_lettering::KIND), Some("rejected"));
    let info = fx.consumer_info().await;
    assert_eq!(
        (
            info.ack_floor.stream_sequence,
            info.num_ack_pending,
            info.num_redelivered
        ),
        (4, 0, 0),
        "all four settled"
    );
    fx.delete().await;
}
