//! Helpers for tests of typed subscribers: a stream, a dead-letter stream
//! and a durable name of the test's own; envelopes published as the outbox
//! publishes them; dead letters read back; polling with a deadline.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::consumer::Info as ConsumerInfo;
use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::{Config, StorageType};
use async_nats::jetstream::{self, Context};
use async_nats::{HeaderMap, Subject};
use txoutbox_core::{
    AggregateRef, IntegrationEvent, MessageContext, OutboxMessage, PendingMessage, SubjectPrefix,
    wire,
};
use txoutbox_nats::subscriber::{
    Backoff, BuildError, RunningSubscriber, Subscriber, SubscriberBuilder,
};

/// A stream capturing `<prefix>.>`, a dead-letter stream capturing
/// `dlq.<durable>`, and a durable name, all unique to one test; deleted by
/// [`delete`](Self::delete) (and, as a fallback, on drop).
#[derive(Debug)]
pub struct SubscriberFixture {
    /// JetStream on the test's server.
    pub jetstream: Context,
    /// The stream the subscriber reads.
    pub stream: String,
    /// Subjects of the stream start with `<prefix>.`.
    pub prefix: String,
    /// The durable consumer's name.
    pub durable: String,
    /// The stream holding dead letters.
    pub dead_letters: String,
}

impl SubscriberFixture {
    /// A fixture on `client`'s server; `storage` File survives a server restart.
    ///
    /// # Panics
    /// When the server refuses the streams.
    pub async fn new(client: async_nats::Client, storage: StorageType) -> Self {
        let tag = &uuid::Uuid::now_v7().simple().to_string()[16..];
        let jetstream = jetstream::new(client);
        let fixture = Self {
            stream: format!("S_{tag}"),
            prefix: format!("s{tag}"),
            durable: format!("c_{tag}"),
            dead_letters: format!("DLQ_{tag}"),
            jetstream,
        };
        for (name, subject) in [
            (&fixture.stream, format!("{}.>", fixture.prefix)),
            (&fixture.dead_letters, format!("dlq.{}", fixture.durable)),
        ] {
            fixture
                .jetstream
                .create_stream(Config {
                    name: name.clone(),
                    subjects: vec![subject],
                    storage,
                    max_age: Duration::from_secs(600),
                    ..Default::default()
                })
                .await
                .expect("create a test stream");
        }
        fixture
    }

    /// A fixture with memory streams on the shared server
    /// ([`nats_url`](crate::jetstream::nats_url)).
    ///
    /// # Panics
    /// When the server is unreachable.
    pub async fn shared() -> Self {
        let client = async_nats::connect(crate::jetstream::nats_url())
            .await
            .expect("the shared nats-server (scripts/ensure-services.sh)");
        Self::new(client, StorageType::Memory).await
    }

    /// A subscriber builder on the fixture's stream and durable, with test
    /// timings: 2 s ack wait, 100 ms backoff doubling to 1 s, 5 s shutdown.
    pub fn subscriber(&self) -> SubscriberBuilder {
        Subscriber::builder(self.jetstream.clone(), &self.durable)
            .stream(&self.stream)
            .ack_wait(Duration::from_secs(2))
            .backoff(Backoff::exponential(
                Duration::from_millis(100),
                Duration::from_secs(1),
            ))
            .shutdown_timeout(Duration::from_secs(5))
    }

    /// The envelope of `event` as message `sequence` of aggregate
    /// `order/<aggregate_id>`, on the fixture's subjects, correlation `corr-1`.
    ///
    /// # Panics
    /// When the event cannot be serialized.
    pub fn message<E: IntegrationEvent>(
        &self,
        event: &E,
        aggregate_id: &str,
        sequence: u64,
    ) -> OutboxMessage {
        let prefix = SubjectPrefix::new(self.prefix.as_str()).expect("a valid prefix");
        OutboxMessage::seal(
            PendingMessage::new(event).expect("serializable"),
            AggregateRef {
                aggregate_type: "order".to_owned(),
                aggregate_id: aggregate_id.to_owned(),
                sequence,
            },
            &MessageContext::new().with_correlation_id("corr-1"),
            &prefix,
        )
    }

    /// Publishes `message` as the outbox publisher does (headers from
    /// [`wire::encode`]) and waits for JetStream's ack.
    pub async fn publish(&self, message: &OutboxMessage) {
        let headers = wire::encode(message, "/tests")
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v))
            .collect();
        self.publish_raw(&message.subject, headers, message.payload.as_bytes())
            .await;
    }

    /// Publishes anything on `subject` and waits for JetStream's ack.
    ///
    /// # Panics
    /// When JetStream does not store it.
    pub async fn publish_raw(&self, subject: &str, headers: Vec<(String, String)>, payload: &[u8]) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(name.as_str(), value.as_str());
        }
        self.jetstream
            .publish_with_headers(Subject::from(subject), map, payload.to_vec().into())
            .await
            .expect("publish")
            .await
            .expect("stored");
    }

    /// Waits (up to 15 s) until the dead-letter stream holds `count`
    /// messages, and returns them in order.
    ///
    /// # Panics
    /// When they do not arrive.
    pub async fn dead_letters(&self, count: u64) -> Vec<StreamMessage> {
        let mut stream = self
            .jetstream
            .get_stream(&self.dead_letters)
            .await
            .expect("dead-letter stream");
        eventually(
            &format!("{count} dead letters"),
            Duration::from_secs(15),
            || {
                let mut stream = stream.clone();
                async move { stream.info().await.is_ok_and(|i| i.state.messages >= count) }
            },
        )
        .await;
        let last = stream.info().await.expect("info").state.last_sequence;
        let mut out = Vec::new();
        for sequence in 1..=last {
            out.push(stream.get_raw_message(sequence).await.expect("dead letter"));
        }
        out
    }

    /// The durable consumer's state.
    ///
    /// # Panics
    /// When it does not exist.
    pub async fn consumer_info(&self) -> ConsumerInfo {
        self.jetstream
            .get_stream(&self.stream)
            .await
            .expect("stream")
            .consumer_info(&self.durable)
            .await
            .expect("consumer info")
    }

    /// Waits (up to `timeout`) until every message was delivered and none
    /// awaits an ack.
    pub async fn settled(&self, timeout: Duration) {
        eventually("every message acked", timeout, || async {
            let info = self.consumer_info().await;
            info.num_pending == 0 && info.num_ack_pending == 0
        })
        .await;
    }

    /// Waits (up to 5 s) until every message is acked, then shuts `running`
    /// down.
    ///
    /// # Panics
    /// When it does not settle, or the subscriber ended with an error.
    pub async fn settle_and_shut_down(&self, running: RunningSubscriber) {
        self.settled(Duration::from_secs(5)).await;
        running
            .shutdown()
            .await
            .expect("the subscriber stops cleanly");
    }

    /// Deletes both streams.
    pub async fn delete(&self) {
        let _ = self.jetstream.delete_stream(&self.stream).await;
        let _ = self.jetstream.delete_stream(&self.dead_letters).await;
    }
}

impl Drop for SubscriberFixture {
    fn drop(&mut self) {
        let (jetstream, names) = (
            self.jetstream.clone(),
            [self.stream.clone(), self.dead_letters.clone()],
        );
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                for name in names {
                    let _ = jetstream.delete_stream(&name).await;
                }
            });
        }
    }
}

/// Builds a subscriber from the settings a test chose and runs it.
pub trait StartSubscriber {
    /// `build()` (the test's settings are valid, so a refusal panics), then
    /// `spawn()`.
    fn start(self) -> impl Future<Output = RunningSubscriber> + Send;
}

impl StartSubscriber for SubscriberBuilder {
    async fn start(self) -> RunningSubscriber {
        self.build().await.expect("the subscriber builds").spawn()
    }
}

/// Asserts that a build was refused because the durable consumer's
/// `setting` differs from the subscriber's.
///
/// # Panics
/// When `error` is anything else.
pub fn assert_consumer_mismatch(error: &BuildError, setting: &str) {
    assert!(
        matches!(error, BuildError::ConsumerMismatch { setting: differs, .. } if *differs == setting),
        "{error}"
    );
}

/// The value of header `name` of a stored message.
pub fn header<'a>(message: &'a StreamMessage, name: &str) -> Option<&'a str> {
    message.headers.get(name).map(|value| value.as_str())
}

/// Polls `check` every 20 ms until it holds.
///
/// # Panics
/// When it does not hold within `timeout`; the panic names `what`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
