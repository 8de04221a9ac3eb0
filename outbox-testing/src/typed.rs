//! Messages back into the Rust types a test names.

use txoutbox_core::{Delivery, EventRegistry, IntegrationEvent, OutboxMessage};

/// A published event in its Rust type, with its envelope.
#[derive(Debug, Clone)]
pub struct PublishedEvent<E> {
    /// The event.
    pub event: E,
    /// The envelope it travelled in (id, aggregate, sequence, context,
    /// headers).
    pub message: OutboxMessage,
}

impl<E> PublishedEvent<E> {
    /// The message as a consumer's handler receives it the first time (no
    /// broker needed: feed it to a handler or `Inbox::process_with`).
    pub fn delivery(&self) -> Delivery {
        Delivery::new(self.message.clone()).with_consumer("test")
    }

    /// The same message delivered again (delivery count 2), as after a
    /// lost ack or a consumer crash.
    pub fn redelivery(&self) -> Delivery {
        self.delivery().with_delivery_count(2)
    }
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
        .unwrap_or_else(|err| {
            panic!(
                "{} cannot be registered: {}",
                E::NAME,
                txoutbox_core::ErrorChain(&err)
            )
        });
    messages
        .into_iter()
        .filter(|message| message.event_name == E::NAME)
        .map(|message| {
            let event = registry
                .decode_message::<E>(&message)
                .unwrap_or_else(|err| {
                    panic!(
                        "message {} does not decode into {}: {}",
                        message.id,
                        E::NAME,
                        txoutbox_core::ErrorChain(&err)
                    )
                });
            PublishedEvent { event, message }
        })
        .collect()
}
