//! Typed handlers behind one object-safe interface, looked up by event name.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use txoutbox_core::registry::EventRegistration;
use txoutbox_core::{DecodeError, Delivery, EventRegistry, HandlerError, IntegrationEvent};

use super::error::SubscriberBuildError;

/// A running handler.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send>>;

/// A handler of one event type, with the type erased.
pub(crate) trait ErasedHandler: Send + Sync {
    /// The registration of the type it takes (the newest version it knows).
    fn registration(&self) -> EventRegistration;

    /// Decodes the delivered message into the handler's type (upcasting
    /// older versions) and starts the handler.
    fn call(
        &self,
        registry: &EventRegistry,
        delivery: Delivery,
    ) -> Result<HandlerFuture, DecodeError>;
}

/// `F`, a handler of `E`.
pub(crate) struct Typed<E, F> {
    handler: F,
    event: PhantomData<fn(E)>,
}

impl<E, F> Typed<E, F> {
    pub(crate) fn new(handler: F) -> Self {
        Self {
            handler,
            event: PhantomData,
        }
    }
}

impl<E, F, Fut> ErasedHandler for Typed<E, F>
where
    E: IntegrationEvent,
    F: Fn(E, Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    fn registration(&self) -> EventRegistration {
        E::REGISTRATION
    }

    fn call(
        &self,
        registry: &EventRegistry,
        delivery: Delivery,
    ) -> Result<HandlerFuture, DecodeError> {
        let message = delivery.message();
        let event: E = registry.decode_as(
            &message.event_name,
            message.event_version,
            message.payload.as_bytes(),
        )?;
        Ok(Box::pin((self.handler)(event, delivery)))
    }
}

/// The handlers of one subscriber, by event name.
pub(crate) struct Handlers(HashMap<&'static str, Box<dyn ErasedHandler>>);

impl Handlers {
    /// One handler per event name, or the first clash.
    pub(crate) fn new(handlers: Vec<Box<dyn ErasedHandler>>) -> Result<Self, SubscriberBuildError> {
        let mut by_name: HashMap<&'static str, Box<dyn ErasedHandler>> = HashMap::new();
        for handler in handlers {
            let registration = handler.registration();
            if let Some(first) = by_name.get(registration.name()) {
                return Err(SubscriberBuildError::DuplicateHandler {
                    name: registration.name(),
                    first: first.registration().rust_type(),
                    second: registration.rust_type(),
                });
            }
            by_name.insert(registration.name(), handler);
        }
        if by_name.is_empty() {
            return Err(SubscriberBuildError::NoHandlers);
        }
        Ok(Self(by_name))
    }

    /// The handler of `event_name`, if any.
    pub(crate) fn get(&self, event_name: &str) -> Option<&dyn ErasedHandler> {
        self.0.get(event_name).map(Box::as_ref)
    }

    /// Every handled type's registration.
    pub(crate) fn registrations(&self) -> impl Iterator<Item = EventRegistration> + '_ {
        self.0.values().map(|handler| handler.registration())
    }
}
