//! `ingest`: fast ingest (ADR-50, nats-server 2.14+) beside pipelined
//! publishing and beside the drain, all on one private nats-server 2.14 the
//! part starts (`txoutbox_fixtures::nats::current_nats_server`, installed by
//! `scripts/ensure-services.sh`).
//!
//! 1. The ceilings: 100,000 ~300-byte messages with `Nats-Msg-Id` into one
//!    file stream (1 replica, `allow_batched`), pipelined as the `jetstream`
//!    part publishes (4,096 acks in flight), then through the fast-ingest
//!    prototype below: one batch of all the messages, and batches of 1,000
//!    (a claimed batch of the processor's default size) three at a time
//!    (its default batches in flight). Three rounds, interleaved; the stream
//!    is checked to hold every message and purged after each measurement.
//! 2. What the server does with this project's re-publishes inside a fast
//!    batch: messages already stored, and a chain of
//!    `Nats-Expected-Last-Msg-Id` that breaks (the replies are printed).
//! 3. The drain (`drain`'s 200,000 rows, default settings) on the same
//!    server, and the same drain with every publish acked at once without a
//!    broker, twice each, interleaved: the difference is what publishing
//!    costs the drain, the most a faster publish path could win.
//!
//! The prototype is the bench's only: the client side of fast ingest over
//! async-nats' core client, learned from the server's source
//! (`server/stream.go`, `getFastBatch`; `server/jetstream_batching.go`).
//! Every message carries its batch in its reply subject
//! `<inbox>.<batch id>.<flow>.<gap mode>.<batch sequence>.<op>.$FI` (op 0
//! starts the batch, 1 appends, 2 appends and commits); the server answers
//! on that subject with flow acks (`{"type":"ack","seq":N,"msgs":M}`: every
//! message up to N is stored, the next ack comes M messages later), gaps
//! and errors (`"type":"gap"` / `"err"`), and once the commit is stored a
//! publish ack for the whole batch (`{"stream":…,"seq":…,"batch":…,"count":…}`).
//! The publisher sends while fewer than 2 × M messages are unacked (ADR-50's
//! window), in gap mode `fail`. It does not ping to recover lost flow acks:
//! an ack that does not come within 5 s fails the measurement.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_nats::{Client, HeaderMap, Subscriber, header};
use futures::{FutureExt, StreamExt};
use txoutbox_fixtures::nats::{NatsServer, current_nats_server};

use crate::children::drain::Settings;
use crate::harness::error::BoxError;
use crate::harness::fixture::{BenchEvent, BenchStream, Broker};
use crate::harness::machine::{self, CpuTimes};
use crate::harness::report::thousands;
use crate::parts::drain;
use crate::parts::jetstream;
use txoutbox_core::PendingMessage;
use txoutbox_nats::DEFAULT_MAX_ACKS_IN_FLIGHT;

/// Messages per measurement.
const MESSAGES: usize = 100_000;
/// Messages of each kind sent before measuring.
const WARMUP: usize = 20_000;
/// Measurements of each kind, interleaved.
const ROUNDS: usize = 3;
/// Drains of each kind (today's, publishing free), interleaved.
const DRAIN_ROUNDS: usize = 2;
/// Messages per batch when publishing a claimed batch at a time (the
/// processor's default `batch_size`).
const CLAIMED_BATCH: usize = 1_000;
/// Batches in flight then (the processor's default `batches_in_flight`).
const BATCHES_IN_FLIGHT: usize = 3;
/// The flow the publisher asks for: the server acks at most every this many
/// messages (it caps the interval at 500 shared by the batches in flight).
const FLOW: u16 = 500;
/// Flow-ack intervals the publisher may run ahead of the last ack (ADR-50's
/// recommended 2).
const OUTSTANDING_ACKS: u64 = 2;
/// How long any reply of the server may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the probes wait for replies that may never come.
const PROBE_QUIET: Duration = Duration::from_secs(2);

/// Fast-ingest operations (the reply subject's second-to-last token).
const OP_START: u8 = 0;
const OP_APPEND: u8 = 1;
const OP_COMMIT: u8 = 2;

/// One way of publishing the ceiling's messages.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// `send_publish` with 4,096 acks in flight, as the `jetstream` part.
    Pipelined,
    /// Fast-ingest batches of `batch` messages, `in_flight` at once.
    Fast { batch: usize, in_flight: usize },
}

impl Way {
    fn name(self) -> String {
        match self {
            Self::Pipelined => {
                format!("pipelined send_publish, {DEFAULT_MAX_ACKS_IN_FLIGHT} acks in flight")
            }
            Self::Fast { batch, .. } if batch >= MESSAGES => {
                format!("fast ingest, one batch of {}", thousands(batch as f64))
            }
            Self::Fast { batch, in_flight } => format!(
                "fast ingest, batches of {}, {in_flight} in flight",
                thousands(batch as f64)
            ),
        }
    }
}

const WAYS: [Way; 3] = [
    Way::Pipelined,
    Way::Fast {
        batch: MESSAGES,
        in_flight: 1,
    },
    Way::Fast {
        batch: CLAIMED_BATCH,
        in_flight: BATCHES_IN_FLIGHT,
    },
];

pub(crate) async fn run() -> Result<(), BoxError> {
    let binary = current_nats_server();
    let server = NatsServer::builder()
        .binary(binary.display().to_string())
        .start()
        .await?;
    let broker = Broker {
        urls: server.url(),
        replicas: 1,
    };
    let stream = BenchStream::create_on(&broker).await?;
    let version = stream.client.server_info().version;
    println!(
        "== ingest: {} ~300-byte messages with Nats-Msg-Id into a file stream (1 replica, \
         allow_batched) on a private nats-server {version}, pipelined vs fast ingest; then the drain \
         on the same server ==",
        thousands(MESSAGES as f64)
    );
    allow_batched(&stream).await?;

    for way in WAYS {
        publish(&stream, way, WARMUP).await?;
        purge(&stream, WARMUP).await?;
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); WAYS.len()];
    for round in 1..=ROUNDS {
        for (way, rates) in WAYS.iter().zip(rates.iter_mut()) {
            let cpu = CpuTimes::now();
            let rate = publish(&stream, *way, MESSAGES).await?;
            println!(
                "round {round}: {:<52} {:>8} msgs/s   ({})",
                way.name(),
                thousands(rate),
                CpuTimes::now().since(&cpu)
            );
            purge(&stream, MESSAGES).await?;
            rates.push(rate);
        }
    }

    println!("what the server does with re-publishes inside a fast batch:");
    probe_stored_before(&stream).await?;
    probe_broken_chain(&stream).await?;
    stream.delete().await?;

    println!(
        "(load before the drains: {})",
        machine::load_state(Duration::from_secs(1)).await
    );
    let (mut drains, mut free_drains) = (Vec::new(), Vec::new());
    for _ in 0..DRAIN_ROUNDS {
        for instant_acks in [false, true] {
            let settings = Settings {
                instant_acks,
                ..Settings::default()
            };
            let drained = drain::drain_on(
                &broker,
                settings,
                drain::ROWS,
                drain::ROWS,
                Duration::from_millis(100),
            )
            .await?;
            drained.print();
            println!("   {}", drained.cpu);
            if instant_acks {
                free_drains.push(drained.rate());
            } else {
                drains.push(drained.rate());
            }
        }
    }
    drop(server);

    let best = |rates: &[f64]| rates.iter().copied().fold(0.0, f64::max);
    let pipelined = best(&rates[0]);
    println!("| on nats-server {version} | rate (best of {ROUNDS}; all rounds) | / pipelined |");
    println!("|---|---|---|");
    for (way, rates) in WAYS.iter().zip(&rates) {
        let all: Vec<String> = rates.iter().map(|r| thousands(*r)).collect();
        println!(
            "| {} | {} msgs/s ({}) | {:.2} |",
            way.name(),
            thousands(best(rates)),
            all.join(" / "),
            best(rates) / pipelined
        );
    }
    let (drain_rate, free_rate) = (best(&drains), best(&free_drains));
    let all = |rates: &[f64]| {
        rates
            .iter()
            .map(|r| thousands(*r))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    println!(
        "| drain of {} rows, default settings (JetStreamPublisher), best of {DRAIN_ROUNDS} | {} events/s ({}) | {:.2} |",
        thousands(drain::ROWS as f64),
        thousands(drain_rate),
        all(&drains),
        drain_rate / pipelined
    );
    println!(
        "| the same drain, every publish acked at once (no broker) | {} events/s ({}) | {:.2} |",
        thousands(free_rate),
        all(&free_drains),
        free_rate / pipelined
    );
    if free_rate <= drain_rate {
        println!(
            "the drain with publishing free is no faster (x{:.2}): publishing is not on the drain's \
             critical path, no faster publish path can speed it up",
            free_rate / drain_rate
        );
        return Ok(());
    }
    // Seconds per event: the drain's, and the part of it publishing costs.
    let (per_event, database_part) = (1.0 / drain_rate, 1.0 / free_rate);
    let publishing = per_event - database_part;
    println!(
        "publishing takes {:.0} % of the drain's time per event ({:.1} of {:.1} µs); with publishing \
         free the drain reaches {} events/s (x{:.2})",
        100.0 * publishing / per_event,
        publishing * 1e6,
        per_event * 1e6,
        thousands(free_rate),
        free_rate / drain_rate
    );
    for (way, rates) in WAYS.iter().zip(&rates).skip(1) {
        let ratio = best(rates) / pipelined;
        let estimate = 1.0 / (database_part + publishing / ratio);
        println!(
            "with publishing x{:.2} as fast as today's (as {} against pipelined): ~{} events/s (x{:.2})",
            ratio,
            way.name(),
            thousands(estimate),
            estimate / drain_rate
        );
    }
    Ok(())
}

/// Sets `allow_batched` on the stream through the JetStream API (the
/// field of async-nats' stream config needs its `server_2_14` feature,
/// which the workspace leaves off).
async fn allow_batched(stream: &BenchStream) -> Result<(), BoxError> {
    let info = request(
        &stream.client,
        format!("$JS.API.STREAM.INFO.{}", stream.name),
        Vec::new(),
    )
    .await?;
    let mut config = info
        .get("config")
        .cloned()
        .ok_or("the stream info has no config")?;
    config["allow_batched"] = serde_json::Value::Bool(true);
    let updated = request(
        &stream.client,
        format!("$JS.API.STREAM.UPDATE.{}", stream.name),
        serde_json::to_vec(&config)?,
    )
    .await?;
    if updated["config"]["allow_batched"] != serde_json::Value::Bool(true) {
        return Err(format!("the server did not set allow_batched: {updated}").into());
    }
    Ok(())
}

/// A JetStream API request; its JSON answer, or the error it carries.
async fn request(
    client: &Client,
    subject: String,
    body: Vec<u8>,
) -> Result<serde_json::Value, BoxError> {
    let answer = client.request(subject, body.into()).await?;
    let value: serde_json::Value = serde_json::from_slice(&answer.payload)?;
    if let Some(error) = value.get("error") {
        return Err(format!("JetStream API error: {error}").into());
    }
    Ok(value)
}

/// Checks the stream holds `expected` messages, then empties it (the
/// store stays small over the rounds).
async fn purge(stream: &BenchStream, expected: usize) -> Result<(), BoxError> {
    let stored = stream.messages().await?;
    if stored != expected as u64 {
        return Err(format!("the stream holds {stored} messages, {expected} were sent").into());
    }
    async_nats::jetstream::new(stream.client.clone())
        .get_stream(&stream.name)
        .await?
        .purge()
        .await?;
    Ok(())
}

/// Publishes `count` messages `way`; returns messages per second.
async fn publish(stream: &BenchStream, way: Way, count: usize) -> Result<f64, BoxError> {
    match way {
        Way::Pipelined => jetstream::raw(stream, count).await,
        Way::Fast { batch, in_flight } => fast(stream, count, batch, in_flight).await,
    }
}

/// `count` messages in fast-ingest batches of `batch`, `in_flight` batches
/// at once (each task its own inbox); returns messages per second.
async fn fast(
    stream: &BenchStream,
    count: usize,
    batch: usize,
    in_flight: usize,
) -> Result<f64, BoxError> {
    let subject = format!("{}.bench.fast", stream.prefix);
    let payload = payload();
    let next = Arc::new(AtomicUsize::new(0));
    let mut publishers = Vec::new();
    for _ in 0..in_flight {
        publishers.push(FastPublisher::new(&stream.client, subject.clone()).await?);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut publisher in publishers {
        let (next, payload) = (Arc::clone(&next), payload.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let from = next.fetch_add(batch, Ordering::Relaxed);
                if from >= count {
                    return Ok::<_, BoxError>(());
                }
                let size = batch.min(count - from);
                let ack = publisher.batch(size, &payload).await?;
                if ack.count != size as u64 {
                    return Err(
                        format!("a batch of {size} was acked with count {}", ack.count).into(),
                    );
                }
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// The publish ack that ends a batch.
#[derive(Debug, serde::Deserialize)]
struct BatchAck {
    /// Messages of the batch (its last batch sequence).
    count: u64,
}

/// What one reply of the server says.
enum Reply {
    /// Every message up to `seq` is stored; the next ack comes `every`
    /// messages later.
    Flow { seq: u64, every: u64 },
    /// The batch is committed.
    Done(BatchAck),
}

/// Reads one reply: a flow ack or the batch's publish ack; a gap, an error
/// or anything else is an error.
fn reply(payload: &[u8]) -> Result<Reply, BoxError> {
    let value: serde_json::Value = serde_json::from_slice(payload)?;
    match value.get("type").and_then(serde_json::Value::as_str) {
        Some("ack") => Ok(Reply::Flow {
            seq: value["seq"].as_u64().ok_or("a flow ack without seq")?,
            every: value["msgs"].as_u64().ok_or("a flow ack without msgs")?,
        }),
        Some(_) => Err(format!("the batch failed: {value}").into()),
        None if value.get("error").is_some() => Err(format!("the batch failed: {value}").into()),
        None => Ok(Reply::Done(serde_json::from_value(value)?)),
    }
}

/// A fast-ingest publisher: one batch at a time on its own inbox.
struct FastPublisher {
    client: Client,
    subject: String,
    inbox: String,
    replies: Subscriber,
}

impl FastPublisher {
    async fn new(client: &Client, subject: String) -> Result<Self, BoxError> {
        let inbox = client.new_inbox();
        let replies = client.subscribe(format!("{inbox}.>")).await?;
        Ok(Self {
            client: client.clone(),
            subject,
            inbox,
            replies,
        })
    }

    /// Publishes one batch of `size` messages with fresh `Nats-Msg-Id`s and
    /// waits for its publish ack.
    async fn batch(&mut self, size: usize, payload: &str) -> Result<BatchAck, BoxError> {
        let id = uuid::Uuid::now_v7().simple().to_string();
        let size = size as u64;
        // Until the first flow ack says otherwise, the flow asked for.
        let (mut acked, mut every) = (0_u64, u64::from(FLOW));
        for seq in 1..=size {
            // Take the replies that came, then wait while the window is full.
            while let Some(Some(message)) = self.replies.next().now_or_never() {
                if let Some(Reply::Flow { seq, every: m }) = ours(&id, &message)? {
                    (acked, every) = (acked.max(seq), m);
                }
            }
            while acked + every * OUTSTANDING_ACKS <= seq {
                let message = self.next_reply().await?;
                if let Some(Reply::Flow { seq, every: m }) = ours(&id, &message)? {
                    (acked, every) = (acked.max(seq), m);
                }
            }
            let op = match seq {
                _ if seq == size => OP_COMMIT,
                1 => OP_START,
                _ => OP_APPEND,
            };
            let mut headers = HeaderMap::new();
            headers.insert(header::NATS_MESSAGE_ID, uuid::Uuid::now_v7().to_string());
            self.client
                .publish_with_reply_and_headers(
                    self.subject.clone(),
                    self.reply_subject(&id, seq, op),
                    headers,
                    payload.to_owned().into(),
                )
                .await?;
        }
        loop {
            let message = self.next_reply().await?;
            if let Some(Reply::Done(ack)) = ours(&id, &message)? {
                return Ok(ack);
            }
        }
    }

    fn reply_subject(&self, batch: &str, seq: u64, op: u8) -> String {
        format!("{}.{batch}.{FLOW}.fail.{seq}.{op}.$FI", self.inbox)
    }

    async fn next_reply(&mut self) -> Result<async_nats::Message, BoxError> {
        match tokio::time::timeout(REPLY_TIMEOUT, self.replies.next()).await {
            Ok(Some(message)) => Ok(message),
            Ok(None) => Err("the reply subscription ended".into()),
            Err(_) => Err(format!("no reply from the server within {REPLY_TIMEOUT:?}").into()),
        }
    }
}

/// The reply, if it is of batch `id` (not a late one of an earlier batch).
fn ours(id: &str, message: &async_nats::Message) -> Result<Option<Reply>, BoxError> {
    if !message.subject.contains(id) {
        return Ok(None);
    }
    reply(&message.payload).map(Some)
}

/// A re-publish after a crash: a fast batch of five whose first three were
/// stored before by ordinary publishes.
async fn probe_stored_before(stream: &BenchStream) -> Result<(), BoxError> {
    let ids: Vec<String> = (0..5).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    let subject = format!("{}.bench.probe", stream.prefix);
    let jetstream = async_nats::jetstream::new(stream.client.clone());
    for id in &ids[..3] {
        let mut headers = HeaderMap::new();
        headers.insert(header::NATS_MESSAGE_ID, id.as_str());
        jetstream
            .publish_with_headers(subject.clone(), headers, payload().into())
            .await?
            .await?;
    }
    let before = stream.messages().await?;
    let messages: Vec<(String, Option<String>)> = ids.iter().map(|id| (id.clone(), None)).collect();
    let replies = probe(stream, &subject, &messages).await?;
    println!(
        "   a batch of 5 whose first 3 were stored already: the stream grew by {}; replies: {}",
        stream.messages().await? - before,
        replies.join(" | ")
    );
    Ok(())
}

/// A chained run (`Nats-Expected-Last-Msg-Id` = the previous message's id)
/// in one fast batch of five, whose third message expects an id the stream
/// never stored.
async fn probe_broken_chain(stream: &BenchStream) -> Result<(), BoxError> {
    let ids: Vec<String> = (0..5).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    let subject = format!("{}.bench.probe", stream.prefix);
    let messages: Vec<(String, Option<String>)> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| {
            let expected = match n {
                0 => None,
                2 => Some(uuid::Uuid::now_v7().to_string()),
                _ => Some(ids[n - 1].clone()),
            };
            (id.clone(), expected)
        })
        .collect();
    let before = stream.messages().await?;
    let replies = probe(stream, &subject, &messages).await?;
    println!(
        "   a chained batch of 5 whose 3rd expects an unknown id: the stream grew by {}; replies: {}",
        stream.messages().await? - before,
        replies.join(" | ")
    );
    Ok(())
}

/// Sends `messages` (id, expected last id) as one fast batch and returns
/// every reply, each as `#<batch sequence> <payload>`, until the publish
/// ack or [`PROBE_QUIET`] without one.
async fn probe(
    stream: &BenchStream,
    subject: &str,
    messages: &[(String, Option<String>)],
) -> Result<Vec<String>, BoxError> {
    let mut publisher = FastPublisher::new(&stream.client, subject.to_owned()).await?;
    let batch = uuid::Uuid::now_v7().simple().to_string();
    let last = messages.len() as u64;
    for (seq, (id, expected)) in (1..).zip(messages) {
        let mut headers = HeaderMap::new();
        headers.insert(header::NATS_MESSAGE_ID, id.as_str());
        if let Some(expected) = expected {
            headers.insert(header::NATS_EXPECTED_LAST_MESSAGE_ID, expected.as_str());
        }
        let op = match seq {
            _ if seq == last => OP_COMMIT,
            1 => OP_START,
            _ => OP_APPEND,
        };
        publisher
            .client
            .publish_with_reply_and_headers(
                subject.to_owned(),
                publisher.reply_subject(&batch, seq, op),
                headers,
                payload().into(),
            )
            .await?;
    }
    let mut replies = Vec::new();
    while let Ok(Some(message)) = tokio::time::timeout(PROBE_QUIET, publisher.replies.next()).await
    {
        let seq = message.subject.split('.').rev().nth(2).unwrap_or("?");
        let text = String::from_utf8_lossy(&message.payload).into_owned();
        let done = matches!(reply(&message.payload), Ok(Reply::Done(_)));
        replies.push(format!("#{seq} {text}"));
        if done {
            return Ok(replies);
        }
    }
    replies.push(format!("(no publish ack within {PROBE_QUIET:?})"));
    Ok(replies)
}

/// The JSON of one ~300-byte event, as the `jetstream` part sends.
fn payload() -> String {
    PendingMessage::new(&BenchEvent::new("ceiling".to_owned()))
        .map(|m| m.payload().as_str().to_owned())
        .unwrap_or_default()
}
