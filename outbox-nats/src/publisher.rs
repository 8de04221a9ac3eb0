//! [`JetStreamPublisher`]: the [`Publisher`] that sends outbox messages to
//! NATS JetStream.

use std::future::IntoFuture;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::context::{GetStreamByNameErrorKind, PublishErrorKind as JsErrorKind};
use async_nats::jetstream::{self, message::PublishMessage};
use async_nats::{Client, HeaderMap};
use txoutbox_core::publisher::PublishAck;
use txoutbox_core::{OutboxMessage, PublishError, Publisher, wire};

use crate::reconnects::Reconnects;
use crate::run_window::RunWindow;
use crate::server_version::refused_chain_stops_replicated_streams;
use crate::subject;

/// Publishes outbox messages to JetStream as CloudEvents (binary mode, see
/// [`txoutbox_core::wire`]) with `Nats-Msg-Id` = the message id, so a message
/// published twice inside the stream's duplicate window is stored once (a
/// `duplicate` ack counts as success).
///
/// Acks are pipelined: `publish` is called concurrently by the processor,
/// each call sends at once and waits only for its own ack. One aggregate's
/// run ([`Publisher::publish_run`]) is chained: each message after the first
/// carries `Nats-Expected-Last-Msg-Id` = its predecessor's id, so the stream
/// stores it only right after its predecessor, and up to 64 are in flight
/// at once while nothing else interleaves (see `run_window.rs`). Not on a
/// server of a cluster from nats-server 2.14 on: there a chained message
/// the stream refuses stops a replicated stream (a server bug, see
/// `server_version.rs`), so a run goes one message at a time, each sent
/// once its predecessor's ack came.
///
/// How failures are classified (see [`txoutbox_core::publisher::PublishErrorKind`]):
///
/// | what happened | kind |
/// |---|---|
/// | not connected, ack timed out, connection lost | `Unavailable`: no attempt spent |
/// | no responders, but a stream does capture the subject (JetStream not ready) | `Unavailable` |
/// | no stream captures the subject, within 10 s of a reconnect (the server may still be recovering its streams) | `Unavailable` |
/// | no stream captures the subject | `Rejected` |
/// | message over the server's `max_payload` | `Rejected` |
/// | the stream answered 503: it cannot store now (full with `discard: new`, storage exhausted, JetStream temporarily unavailable) | `Unavailable` |
/// | the account, server or cluster cannot store now, whatever the status (account resources exceeded: 400 / 10002; storage or memory exhausted; no cluster leader) | `Unavailable` |
/// | the stream's ingest buffer is full (nats-server 2.11+: 429 / 10167, "too many requests", past its `max_buffered_msgs` or `max_buffered_size`) | `Unavailable`: the processor slows down, no attempt spent |
/// | any other error the stream answered with (e.g. over its `max_msg_size`) | `Rejected` |
/// | invalid subject | `Permanent` |
/// | a value its headers would not carry as it is (a line break, whitespace at either end: [`wire::check`]) | `Permanent`, nothing sent |
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_nats::JetStreamPublisher;
/// let client = async_nats::connect("127.0.0.1:4222").await?;
/// let publisher = JetStreamPublisher::new(client, "/orders-service");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct JetStreamPublisher {
    client: Client,
    jetstream: jetstream::Context,
    /// The context is the publisher's own (not the application's): its
    /// timeout follows the ack timeout.
    own_context: bool,
    source: String,
    run_window: RunWindow,
    ack_timeout: Duration,
    reconnects: Reconnects,
}

/// How long an ack may take by default before the broker counts as
/// unavailable: a fifth of the processor's default lease (see
/// [`Publisher::ack_timeout`]). A healthy server acks within milliseconds;
/// a publish that times out is released without spending an attempt and
/// re-published after the pause (deduplicated if it was stored after all).
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_millis(600);

/// Publishes in flight per connection by default (JetStream acks awaited).
pub const DEFAULT_MAX_ACKS_IN_FLIGHT: usize = 4096;

impl JetStreamPublisher {
    /// A publisher on `client`; `source` becomes every message's `ce-source`
    /// (the producing service, e.g. `/orders-service`).
    pub fn new(client: Client, source: impl Into<String>) -> Self {
        let jetstream = own_context(&client, DEFAULT_ACK_TIMEOUT);
        let reconnects = Reconnects::new(&client);
        Self {
            client,
            jetstream,
            own_context: true,
            source: source.into(),
            run_window: RunWindow::default(),
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            reconnects,
        }
    }

    /// How long a publish waits for its ack before the broker counts as
    /// unavailable (default [`DEFAULT_ACK_TIMEOUT`], 600 ms). The processor
    /// needs its lease to be at least five times this.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let client = async_nats::connect("127.0.0.1:4222").await?;
    /// let publisher = txoutbox_nats::JetStreamPublisher::new(client, "/orders-service")
    ///     .with_ack_timeout(Duration::from_secs(2)); // with a lease of 10 s or more
    /// # Ok(()) }
    /// ```
    pub fn with_ack_timeout(mut self, timeout: Duration) -> Self {
        if self.own_context {
            self.jetstream = own_context(&self.client, timeout);
        }
        self.ack_timeout = timeout;
        self
    }

    /// Uses a JetStream context configured by the application (domain, API
    /// prefix, timeout). An ack waits at most the shorter of the context's
    /// timeout and the publisher's [ack timeout](Self::with_ack_timeout),
    /// whichever is set first or last.
    pub fn with_context(mut self, jetstream: jetstream::Context) -> Self {
        self.jetstream = jetstream;
        self.own_context = false;
        self
    }

    /// The JetStream context.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.jetstream
    }

    /// The `ce-source` written on every message.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The headers to send `message` with, or why it can never be sent.
    fn headers(&self, message: &OutboxMessage) -> Result<HeaderMap, PublishError> {
        nats_headers(message, &self.source)
    }

    /// Classifies a failed publish of `message`.
    async fn classify(
        &self,
        message: &OutboxMessage,
        err: jetstream::context::PublishError,
        acked: bool,
    ) -> PublishError {
        let subject = &message.subject;
        match err.kind() {
            JsErrorKind::MaxPayloadExceeded => PublishError::rejected(format!(
                "message {} is larger than the server's max_payload ({} bytes): {err}",
                message.id,
                self.client.server_info().max_payload
            )),
            JsErrorKind::StreamNotFound => self.no_responders(subject).await,
            JsErrorKind::TimedOut => match crate::permissions::publish_denied(subject) {
                // The server refused it: no ack comes, whatever the wait.
                Some(denied) => PublishError::rejected(denied.to_string()),
                None => PublishError::unavailable(format!("publishing on `{subject}`: {err}")),
            },
            JsErrorKind::BrokenPipe | JsErrorKind::MaxAckPending => {
                PublishError::unavailable(format!("publishing on `{subject}`: {err}"))
            }
            JsErrorKind::WrongLastMessageId | JsErrorKind::WrongLastSequence => {
                PublishError::rejected(format!(
                    "the stream refused the message on `{subject}`: {err}"
                ))
            }
            JsErrorKind::Other if acked && is_server_unavailable(&err) => {
                PublishError::unavailable(format!(
                    "JetStream cannot store on `{subject}` right now: {err}"
                ))
            }
            JsErrorKind::Other if acked => PublishError::rejected(format!(
                "the stream refused the message on `{subject}`: {err}"
            )),
            JsErrorKind::Other if !subject::is_publishable(subject) => {
                PublishError::permanent(format!("`{subject}` is not a valid NATS subject"))
            }
            JsErrorKind::Other => {
                PublishError::unavailable(format!("publishing on `{subject}`: {err}"))
            }
        }
        .with_source(err)
    }

    /// "No responders": either no stream captures the subject (the
    /// message's problem) or JetStream is not ready (the broker's: a
    /// restarted server answers before it has recovered every stream). One
    /// lookup tells them apart; it runs only on this error. Within
    /// [`STREAM_RECOVERY_GRACE`](crate::reconnects::STREAM_RECOVERY_GRACE)
    /// of a reconnect, even "no stream matches" is the broker not being
    /// ready: no attempt is spent.
    async fn no_responders(&self, subject: &str) -> PublishError {
        match self.jetstream.stream_by_subject(subject).await {
            Err(_) if self.reconnects.recently(&self.client) => PublishError::unavailable(format!(
                "no stream answered on `{subject}` within {grace:?} of a reconnect \
                     (the server may still be recovering its streams)",
                grace = crate::reconnects::STREAM_RECOVERY_GRACE
            )),
            Err(err) if err.kind() == GetStreamByNameErrorKind::NotFound => {
                PublishError::rejected(format!("no JetStream stream captures subject `{subject}`"))
            }
            Ok(stream) => PublishError::unavailable(format!(
                "stream `{stream}` captures `{subject}` but did not answer (JetStream not ready)"
            )),
            Err(err) => PublishError::unavailable(format!(
                "no responders on `{subject}` and the stream lookup failed: {err}"
            )),
        }
    }
}

/// The headers `message` is sent with (`wire::encode`); a message with a
/// value NATS would not carry as it is is a permanent failure (async-nats
/// panics on a value with a line break: nothing unchecked reaches it).
fn nats_headers(message: &OutboxMessage, source: &str) -> Result<HeaderMap, PublishError> {
    let encoded = wire::encode(message, source).map_err(|err| {
        PublishError::permanent(format!(
            "message {} cannot be sent as a NATS message",
            message.id
        ))
        .with_source(err)
    })?;
    let mut headers = HeaderMap::new();
    for (name, value) in encoded {
        headers.insert(name.as_ref(), value);
    }
    Ok(headers)
}

/// The publisher's own JetStream context: requests (acks included) time
/// out after `timeout`, at most [`DEFAULT_MAX_ACKS_IN_FLIGHT`] acks pending.
fn own_context(client: &Client, timeout: Duration) -> jetstream::Context {
    jetstream::ContextBuilder::new()
        .timeout(timeout)
        .max_ack_inflight(DEFAULT_MAX_ACKS_IN_FLIGHT)
        .backpressure_on_inflight(true)
        .build(client.clone())
}

/// JetStream answered that it cannot store anything right now: any 503
/// (the stream is full and discards new messages, the store failed,
/// JetStream temporarily unavailable), and the error codes of conditions of
/// the account, the server or the cluster, whatever their status (an
/// account over its storage or memory limits answers 400 / 10002; a
/// cluster without a leader answers 500 / 10009). The broker's condition,
/// not the message's: no attempt may be spent on it, or one full account
/// would send every message dead. Also a stream whose ingest buffer is full
/// (nats-server 2.11+ answers 429 / 10167 past `max_buffered_msgs` or
/// `max_buffered_size`): the server asks the publisher to come back later.
fn is_server_unavailable(err: &jetstream::context::PublishError) -> bool {
    use jetstream::ErrorCode;
    const BROKER_CONDITIONS: [ErrorCode; 11] = [
        ErrorCode::ACCOUNT_RESOURCES_EXCEEDED,
        ErrorCode::STORAGE_RESOURCES_EXCEEDED,
        ErrorCode::MEMORY_RESOURCES_EXCEEDED,
        ErrorCode::INSUFFICIENT_RESOURCES,
        ErrorCode::TEMP_STORAGE_FAILED,
        ErrorCode::STREAM_STORE_FAILED,
        ErrorCode::CLUSTER_NOT_AVAILABLE,
        ErrorCode::CLUSTER_NOT_LEADER,
        ErrorCode::CLUSTER_NOT_ACTIVE,
        ErrorCode::JETSTREAM_NOT_ENABLED_FOR_ACCOUNT,
        STREAM_TOO_MANY_REQUESTS,
    ];
    std::error::Error::source(err)
        .and_then(|source| source.downcast_ref::<jetstream::Error>())
        .is_some_and(|error| {
            matches!(error.code(), 429 | 503) || BROKER_CONDITIONS.contains(&error.error_code())
        })
}

/// nats-server 2.11+'s `JSStreamTooManyRequests`: the stream's ingest
/// buffer is full (async-nats 0.51 has no constant for it).
const STREAM_TOO_MANY_REQUESTS: jetstream::ErrorCode = jetstream::ErrorCode(10167);

impl JetStreamPublisher {
    /// Waits for `pending`, at most [the ack timeout](Self::with_ack_timeout) (also
    /// when the application's context allows longer).
    async fn acked(
        &self,
        pending: jetstream::context::PublishAckFuture,
    ) -> Result<jetstream::publish::PublishAck, jetstream::context::PublishError> {
        match tokio::time::timeout(self.ack_timeout, pending.into_future()).await {
            Ok(ack) => ack,
            Err(_) => Err(JsErrorKind::TimedOut.into()),
        }
    }

    /// Sends `message` with `headers` (stored only if `after` is the
    /// stream's last message, when given) and returns its pending ack.
    async fn send(
        &self,
        message: &OutboxMessage,
        headers: HeaderMap,
        after: Option<&OutboxMessage>,
    ) -> Result<jetstream::context::PublishAckFuture, jetstream::context::PublishError> {
        let mut publish = PublishMessage::build()
            .headers(headers)
            .payload(message.payload.as_str().to_owned().into());
        if let Some(previous) = after {
            publish = publish.expected_last_message_id(previous.id.to_string());
        }
        self.jetstream
            .send_publish(message.subject.clone(), publish)
            .await
    }

    /// Publishes a chained run (see the type's docs): sends every message,
    /// then reads the acks in order. A message whose ack came back `Ok` was
    /// stored right after its predecessor, so every message before the last
    /// `Ok` is stored too (also one whose own ack was lost): those are
    /// published. The first message after them was not stored, nor was any
    /// after it. If it was refused because other messages interleaved, it is
    /// published again on its own; any other failure is its result. A
    /// message that cannot be sent at all ends the run before it is sent.
    async fn publish_chained(
        &self,
        run: &[&OutboxMessage],
    ) -> Vec<Result<PublishAck, PublishError>> {
        let mut pending = Vec::with_capacity(run.len());
        let mut send_failure = None;
        let mut unsendable = None;
        for (index, message) in run.iter().enumerate() {
            let after = index.checked_sub(1).map(|previous| run[previous]);
            let headers = match self.headers(message) {
                Ok(headers) => headers,
                Err(err) => {
                    unsendable = Some(err);
                    break;
                }
            };
            match self.send(message, headers, after).await {
                Ok(ack) => pending.push(ack),
                Err(err) => {
                    send_failure = Some(err);
                    break;
                }
            }
        }
        // Awaited together: each ack's timeout starts when it is awaited, so
        // one after the other a lost connection would cost a timeout per
        // message in flight.
        let acks = futures::future::join_all(pending.into_iter().map(|ack| self.acked(ack))).await;
        let stored = acks
            .iter()
            .rposition(Result::is_ok)
            .map_or(0, |last| last + 1);
        let mut results: Vec<Result<PublishAck, PublishError>> = acks
            .iter()
            .take(stored)
            .map(|ack| {
                Ok(ack.as_ref().map_or(PublishAck::default(), |ack| {
                    PublishAck::new(Some(ack.sequence), ack.duplicate)
                }))
            })
            .collect();
        let Some(next) = run.get(stored) else {
            self.run_window.held(run.len());
            return results;
        };
        let failure = match acks.into_iter().nth(stored) {
            Some(Err(err)) => Some((err, true)),
            Some(Ok(_)) => None, // not reached: `stored` counts up to the last Ok
            None => match unsendable {
                // Every message before it was stored: its own failure is
                // the run's last result.
                Some(err) => {
                    results.push(Err(err));
                    return results;
                }
                None => send_failure.map(|err| (err, false)),
            },
        };
        match failure {
            Some((err, _)) if err.kind() == JsErrorKind::WrongLastMessageId => {
                // Other messages were stored in between: no order was broken
                // (the stream refused this one); go on one at a time.
                self.run_window.broke();
                results.push(self.publish(next).await);
            }
            Some((err, acked)) => results.push(Err(self.classify(next, err, acked).await)),
            None => results.push(self.publish(next).await),
        }
        results
    }
}

impl Publisher for JetStreamPublisher {
    async fn publish(&self, message: &OutboxMessage) -> Result<PublishAck, PublishError> {
        if self.client.connection_state() != State::Connected {
            return Err(PublishError::unavailable("not connected to NATS"));
        }
        let headers = self.headers(message)?;
        let pending = match self.send(message, headers, None).await {
            Ok(pending) => pending,
            Err(err) => return Err(self.classify(message, err, false).await),
        };
        match self.acked(pending).await {
            Ok(ack) => Ok(PublishAck::new(Some(ack.sequence), ack.duplicate)),
            Err(err) => Err(self.classify(message, err, true).await),
        }
    }

    async fn publish_run(&self, run: &[&OutboxMessage]) -> Vec<Result<PublishAck, PublishError>> {
        let window = self.run_window.current().min(run.len());
        if window < 2
            || self.client.connection_state() != State::Connected
            || refused_chain_stops_replicated_streams(&self.client.server_info())
        {
            let Some(first) = run.first() else {
                return Vec::new();
            };
            return vec![self.publish(first).await];
        }
        self.publish_chained(&run[..window]).await
    }

    /// Asks JetStream for a stream whose subjects overlap `subjects`
    /// (e.g. `shop.>`): none is `Rejected`, naming the commands that
    /// create one.
    async fn check_destination(&self, subjects: &str) -> Result<(), PublishError> {
        match self.jetstream.stream_by_subject(subjects).await {
            Ok(_) => Ok(()),
            Err(err) if err.kind() == GetStreamByNameErrorKind::NotFound => {
                Err(PublishError::rejected(format!(
                    "no JetStream stream captures `{subjects}`: create one \
                     (`outbox stream ensure --stream <NAME> --subjects '{subjects}'`, or \
                     `StreamSpec::new(\"<NAME>\", [\"{subjects}\"]).ensure(..)` at start)"
                ))
                .with_source(err))
            }
            Err(err) => Err(PublishError::unavailable(format!(
                "cannot ask JetStream which stream captures `{subjects}`"
            ))
            .with_source(err)),
        }
    }

    fn is_available(&self) -> bool {
        self.client.connection_state() == State::Connected
    }

    fn ack_timeout(&self) -> Option<Duration> {
        Some(self.ack_timeout)
    }
}

#[cfg(test)]
mod tests {
    use txoutbox_core::publisher::PublishErrorKind;

    use super::nats_headers;

    /// The input the fuzz target `message_roundtrip` found: an aggregate
    /// type ending in a bare CR. async-nats panics on a header value with a
    /// line break, so publishing it took the processor's task down (and
    /// the next claim of the row, again); it is now a permanent failure
    /// naming the header, and nothing is sent.
    #[test]
    fn a_value_nats_cannot_carry_is_a_permanent_failure_not_a_panic() {
        let input = include_bytes!("../tests/fuzz_inputs/message_roundtrip-cr-in-aggregate-type");
        let message: txoutbox_core::OutboxMessage = serde_json::from_slice(input).unwrap();
        assert_eq!(message.aggregate_type, "ord\r");
        let err = nats_headers(&message, "/fuzz").unwrap_err();
        assert_eq!(err.kind(), PublishErrorKind::Permanent);
        let chain = txoutbox_core::ErrorChain(&err).to_string();
        assert!(chain.contains("ce-aggregatetype"), "{chain}");

        let mut fine = message;
        fine.aggregate_type = "order".to_owned();
        assert!(nats_headers(&fine, "/fuzz").is_ok());
        assert!(
            nats_headers(&fine, "/fuzz\n").is_err(),
            "the source is a header too"
        );
    }
}
