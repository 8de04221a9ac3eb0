//! A pull stream that stopped pulling. The client counts the messages its
//! pull requests may still bring and asks for more when that count runs
//! low; messages that arrive before the client has counted the request
//! they answer are not subtracted (the count saturates at zero), so the
//! count can stay above the threshold while the server holds no request
//! of this process. Nothing is then delivered, though messages wait in the
//! stream, until the client's fallback pull, the pull expiry plus 5 s
//! later (35 s). Seen once as a 35-s stall in `subscriber_throughput`.
//!
//! The fetch loop therefore looks, after [`SILENCE`] without a message,
//! whether the consumer has messages to deliver and no pull request
//! waiting (`num_waiting`): then the stream is stalled, and the loop
//! reopens it (a new stream pulls at once). With no request waiting, no
//! message can be on its way to the old stream.

use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use tokio::time::Instant;

use crate::subscriber::setup::Shared;

/// How long the stream may bring nothing before the loop first looks.
pub(crate) const SILENCE: Duration = Duration::from_millis(500);

/// The longest wait between two looks while the stream stays silent (an
/// idle consumer costs one consumer info request per this).
const MOST_BETWEEN_LOOKS: Duration = Duration::from_secs(16);

/// The silence of one message stream: when it last brought a message, and
/// when to look again whether it stalled.
#[derive(Debug)]
pub(crate) struct Silence {
    next_look: Instant,
    wait: Duration,
}

impl Silence {
    /// A stream just opened.
    pub(crate) fn new() -> Self {
        Self {
            next_look: Instant::now() + SILENCE,
            wait: SILENCE,
        }
    }

    /// The stream brought a message.
    pub(crate) fn heard(&mut self) {
        *self = Self::new();
    }

    /// Whether the stream is stalled (see the module docs): looked at after
    /// [`SILENCE`] without a message, then after waits doubling up to
    /// [`MOST_BETWEEN_LOOKS`] while it stays silent. Failing reads count as
    /// not stalled.
    pub(crate) async fn stalled(&mut self, shared: &Shared, consumer: &PullConsumer) -> bool {
        if Instant::now() < self.next_look {
            return false;
        }
        self.wait = (self.wait * 2).min(MOST_BETWEEN_LOOKS);
        self.next_look = Instant::now() + self.wait;
        let info = match consumer.get_info().await {
            Ok(info) => info,
            Err(err) => {
                tracing::debug!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "cannot read the consumer to look for a stalled pull");
                return false;
            }
        };
        let stalled = info.num_pending > 0 && info.num_waiting == 0;
        if stalled {
            tracing::info!(
                consumer = %shared.consumer, pending = info.num_pending,
                ack_pending = info.num_ack_pending,
                "messages wait in the stream and no pull request of this process does: the pull \
                 stream stalled; reopening it"
            );
            self.heard();
        }
        stalled
    }
}
