//! A restart guard run without stopping the pulls. The guards of a
//! takeover and of a reconnect (`restart::expect_taken_over`,
//! `restart::expect_lost_in_transit`) run in the fetch loop before the
//! first message after the event is admitted, and may take seconds (many
//! messages to read, a slow inbox). Meanwhile the message stream is still
//! polled, so that its pull requests are renewed as they expire: a
//! failover pin lives on them (the server pins another process when the
//! pinned one has not pulled for the pin timeout, 4 s by default). What
//! arrives meanwhile is kept, alive with progress acks as are the messages
//! waiting in lanes, and admitted after the guard, in order.

use std::future::Future;

use async_nats::jetstream;
use async_nats::jetstream::consumer::pull::{MessagesError, Stream};
use futures::StreamExt;
use tokio::time::{Instant, MissedTickBehavior, interval_at};

use crate::subscriber::lanes::Incoming;
use crate::subscriber::lanes::Lanes;
use crate::subscriber::lanes::settle;
use crate::subscriber::setup::Shared;

/// What the message stream gave while a guard ran.
#[derive(Default)]
pub(crate) struct Arrived {
    /// The messages received, in order: to be admitted after the guard.
    pub(crate) messages: Vec<jetstream::Message>,
    /// What stopped the reading, for the fetch loop to handle as it would
    /// have: an error, or `None` when the stream ended.
    pub(crate) stopped: Option<Option<MessagesError>>,
}

/// Runs `guard` to its end while polling `stream` (see the module docs);
/// stops polling at the stream's first error or its end.
pub(crate) async fn while_pulling<F: Future<Output = ()>>(
    shared: &Shared,
    lanes: &Lanes<Incoming>,
    stream: &mut Stream,
    guard: F,
) -> Arrived {
    tokio::pin!(guard);
    let period = shared.progress_interval();
    let mut progress = interval_at(Instant::now() + period, period);
    progress.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut arrived = Arrived::default();
    loop {
        tokio::select! {
            biased;
            () = &mut guard => return arrived,
            _ = progress.tick() => {
                let waiting = lanes.waiting(|waiting| waiting.message.reply.clone());
                let kept = arrived.messages.iter().map(|message| message.reply.clone());
                for reply in waiting.into_iter().chain(kept.collect::<Vec<_>>()) {
                    settle::progress(shared, reply).await;
                }
            }
            next = stream.next(), if arrived.stopped.is_none() => match next {
                Some(Ok(message)) => arrived.messages.push(message),
                Some(Err(err)) => arrived.stopped = Some(Some(err)),
                None => arrived.stopped = Some(None),
            },
        }
    }
}
