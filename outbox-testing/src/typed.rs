//! Messages back into the Rust types a test names.

use outbox_core::{EventRegistry, IntegrationEvent, OutboxMessage};

/// A published event in its Rust type, with its envelope.
#[derive(Debug, Clone)]
pub struct PublishedEvent<E> {
    /// The event.
    pub event: E,
    /// The envelope it travelled in (id, aggregate, sequence, context,
    /// headers).
    pub message: OutboxMessage,
}

/// The messages of `E`'s event name, decoded into `E`, in the given order.
///
/// # Panics
/// When one of them does not decode into `E` (reported with the message
/// id, as a failed assertion).
pub(crate) fn events_of<E: IntegrationEvent>(
    messages: Vec<OutboxMessage>,
) -> Vec<PublishedEvent<E>> {
    let registry = EventRegistry::builder()
        .register::<E>()
        .build()
        .unwrap_or_else(|err| panic!("{} cannot be registered: {err}", E::NAME));
    messages
        .into_iter()
        .filter(|message| message.event_name == E::NAME)
        .map(|message| {
            let event = registry
                .decode_message::<E>(&message)
                .unwrap_or_else(|err| {
                    panic!(
                        "message {} does not decode into {}: {err}",
                        message.id,
                        E::NAME
                    )
                });
            PublishedEvent { event, message }
        })
        .collect()
}
