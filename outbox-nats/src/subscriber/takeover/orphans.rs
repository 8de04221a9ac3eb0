//! Failover: the messages of a pinned process that is gone, handed back.
//!
//! Without the reader lease only (an inbox that keeps none, see `lease`):
//! under the lease the standbys do not pull, and the next holder's
//! restart guard hands back what the previous one held.
//!
//! The server moves the pin only when it delivers a message: after the pin
//! timeout it unpins the silent process and pins the next one whose pull
//! meets a deliverable message. A pinned process that died mid-burst held
//! up to `max_ack_pending` messages, and while they are pending the server
//! delivers nothing new, so no process would be pinned until their ack
//! wait ran out. Every process in failover mode therefore looks, every
//! pull expiry, for "no process pinned, messages pending": the pinned one
//! is gone (it has not pulled for the pin timeout), and what it held is
//! handed back with a nak, so that the server redelivers it at once and,
//! delivering, pins a standby process. That process's restart guard (run
//! at its first message with a new pin) then waits for what was not
//! applied, as after a restart.
//!
//! When the dead process's window was not full, the server has new
//! messages to deliver: after the pin timeout it pins a standby with them
//! at once, and no process ever finds the durable unpinned with messages
//! pending. The newly pinned process's restart guard therefore also hands
//! back what was delivered before its first message and not acknowledged
//! (`restart::expect_taken_over`); otherwise those messages would come
//! back only after their ack wait, and the new messages of their
//! aggregates would wait for them here that long.
//!
//! A pinned process that stops in order releases its pin instead
//! ([`release_pin`]): a standby is pinned at the server's next delivery,
//! without waiting for the pin timeout.
//!
//! A pinned process that was not dead but frozen or cut off has lost its
//! pin all the same; should it go on with what it held, the inbox applies
//! each message once and each process applies an aggregate's messages in
//! order.

use async_nats::jetstream::consumer::PullConsumer;

use super::failover::GROUP;
use super::hand_back::{MOST, hand_back};
use crate::subscriber::setup::Shared;

/// Hands back what the consumer has pending when no process is pinned (see
/// the module docs). Failing reads and publishes are logged: the messages
/// then come back after their ack wait.
pub(crate) async fn hand_back_orphans(shared: &Shared, consumer: &PullConsumer) {
    let info = match consumer.get_info().await {
        Ok(info) => info,
        Err(err) => {
            tracing::debug!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&err), "cannot read the consumer's pin");
            return;
        }
    };
    let pinned = info
        .priority_groups
        .iter()
        .any(|group| group.pinned_client_id.is_some());
    let (floor, delivered) = (
        info.ack_floor.stream_sequence,
        info.delivered.stream_sequence,
    );
    if pinned || info.num_ack_pending == 0 || delivered <= floor {
        return;
    }
    let last = delivered.min(floor + MOST);
    if let Err(err) = hand_back(shared, &info, (floor + 1)..=last).await {
        tracing::warn!(consumer = %shared.consumer, error = %txoutbox_core::ErrorChain(&*err), "cannot hand back the messages of a pinned process that is gone; they come back after their ack wait");
        return;
    }
    tracing::info!(
        consumer = %shared.consumer, pending = info.num_ack_pending,
        "no process is pinned and messages are pending: the pinned process is gone; \
         its messages are handed back so that a standby is pinned and receives them"
    );
}

/// At the end of an orderly shutdown (what this process held is handed
/// back): releases the pin if this process still holds it (`pin`), so the
/// server pins a standby at its next delivery instead of after the pin
/// timeout. Failures are logged: the pin then times out.
pub(crate) async fn release_pin(shared: &Shared, consumer: &PullConsumer, pin: &str) {
    let released = async {
        let info = consumer.get_info().await.map_err(|err| err.to_string())?;
        let ours = info
            .priority_groups
            .iter()
            .any(|group| group.pinned_client_id.as_deref() == Some(pin));
        if !ours {
            return Ok(false);
        }
        let stream = shared
            .context
            .get_stream(shared.stream.as_ref())
            .await
            .map_err(|err| err.to_string())?;
        stream
            .unpin_consumer(&info.name, GROUP)
            .await
            .map_err(|err| err.to_string())?;
        Ok::<_, String>(true)
    };
    match released.await {
        Ok(true) => {
            tracing::info!(consumer = %shared.consumer, "released the pin: a standby process takes over at once");
        }
        Ok(false) => {}
        Err(err) => {
            tracing::warn!(consumer = %shared.consumer, error = %err, "cannot release the pin; a standby process takes over after the pin timeout");
        }
    }
}
