//! Handing pending messages back to JetStream for an immediate redelivery,
//! when the process that received them is gone: after a restart (see
//! `restart`) and, with failover, when the pinned process is (see
//! `handover`).
//!
//! A hand-back is a negative acknowledgement (`-NAK`) of each message on
//! the consumer's acknowledgement subject in its first form,
//! `$JS.ACK.<stream>.<consumer>.<deliveries>.<stream seq>.<delivery seq>.<time>.<pending>`,
//! which every server version from 2.9 on listens to (2.14 and later also
//! listen to the second form, with a domain and an account hash). The
//! server takes a nak for a message still pending on the consumer whose
//! delivery sequence lies between the consumer's ack floor and its last
//! delivery, and reads nothing else from the subject but the delivery
//! count (for its advisory); so each nak names the last delivery sequence
//! of the consumer's info. A message no longer pending (acknowledged
//! meanwhile, or never this consumer's) is left alone by the server; a nak
//! that does not arrive leaves its message to its ack wait.

use async_nats::jetstream::consumer;

use crate::subscriber::setup::Shared;

/// The most messages read or handed back at once, past the consumer's ack
/// floor (the consumer's window is usually far smaller).
pub(crate) const MOST: u64 = 20_000;

/// A negative acknowledgement: redeliver now.
const NAK: &str = "-NAK";

/// Hands back `sequences` (stream sequences, in the order given) of the
/// consumer `info` describes, and flushes the connection.
pub(crate) async fn hand_back(
    shared: &Shared,
    info: &consumer::Info,
    sequences: impl IntoIterator<Item = u64>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let delivery = info.delivered.consumer_sequence;
    let prefix = format!("$JS.ACK.{}.{}", info.stream_name, info.name);
    for sequence in sequences {
        let subject = format!("{prefix}.1.{sequence}.{delivery}.0.0");
        shared.client.publish(subject, NAK.into()).await?;
    }
    shared.client.flush().await?;
    Ok(())
}
