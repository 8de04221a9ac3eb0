//! Typed handlers behind one object-safe interface, looked up by event name.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use txoutbox_core::consumer::{
    ConsumerInbox, GroupHandlerFuture, Handler, HandlerFuture, InboxGroup,
};
use txoutbox_core::registry::EventRegistration;
use txoutbox_core::{DecodeError, Delivery, EventRegistry, IntegrationEvent};

use crate::subscriber::config::SubscriberBuildError;

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

    /// The inbox it applies its effects through, if any.
    fn inbox(&self) -> Option<Arc<dyn ConsumerInbox>>;

    /// Whether its messages may be applied in an inbox group transaction
    /// (it offers the group protocol, [`Handler::grouped`]).
    fn applies_in_group(&self) -> bool;

    /// Decodes the delivered message (as [`call`](Self::call)) and starts
    /// the handler inside `group`.
    fn call_in_group<'a>(
        &'a self,
        registry: &EventRegistry,
        delivery: Delivery,
        group: &'a mut dyn InboxGroup,
    ) -> Result<GroupHandlerFuture<'a>, DecodeError>;

    /// Whether it takes several messages of a group at once.
    fn applies_in_batches(&self) -> bool;

    /// Decodes each delivered message (as [`call`](Self::call)) and starts
    /// the handler on all of them inside `group`; the position of the first
    /// message that cannot be decoded, with why.
    fn call_batch_in_group<'a>(
        &'a self,
        registry: &EventRegistry,
        deliveries: Vec<Delivery>,
        group: &'a mut dyn InboxGroup,
    ) -> Result<GroupHandlerFuture<'a>, (usize, DecodeError)>;
}

/// `H`, a handler of `E`.
pub(crate) struct Typed<E, H> {
    handler: H,
    event: PhantomData<fn(E)>,
}

impl<E, H> Typed<E, H> {
    pub(crate) fn new(handler: H) -> Self {
        Self {
            handler,
            event: PhantomData,
        }
    }
}

impl<E, H> ErasedHandler for Typed<E, H>
where
    E: IntegrationEvent,
    H: Handler<E>,
{
    fn registration(&self) -> EventRegistration {
        E::REGISTRATION
    }

    fn call(
        &self,
        registry: &EventRegistry,
        delivery: Delivery,
    ) -> Result<HandlerFuture, DecodeError> {
        let event = decode::<E>(registry, &delivery)?;
        Ok(self.handler.call(event, delivery))
    }

    fn inbox(&self) -> Option<Arc<dyn ConsumerInbox>> {
        self.handler.inbox()
    }

    fn applies_in_group(&self) -> bool {
        self.handler.grouped().is_some()
    }

    fn call_in_group<'a>(
        &'a self,
        registry: &EventRegistry,
        delivery: Delivery,
        group: &'a mut dyn InboxGroup,
    ) -> Result<GroupHandlerFuture<'a>, DecodeError> {
        let event = decode::<E>(registry, &delivery)?;
        Ok(match self.handler.grouped() {
            Some(grouped) => grouped.call_in_group(event, delivery, group),
            // Not asked of a handler without the group protocol
            // (`applies_in_group`); it would run outside the group.
            None => self.handler.call(event, delivery),
        })
    }

    fn applies_in_batches(&self) -> bool {
        self.handler
            .grouped()
            .is_some_and(|grouped| grouped.applies_in_batches())
    }

    fn call_batch_in_group<'a>(
        &'a self,
        registry: &EventRegistry,
        deliveries: Vec<Delivery>,
        group: &'a mut dyn InboxGroup,
    ) -> Result<GroupHandlerFuture<'a>, (usize, DecodeError)> {
        let mut batch = Vec::with_capacity(deliveries.len());
        for (position, delivery) in deliveries.into_iter().enumerate() {
            let event = decode::<E>(registry, &delivery).map_err(|err| (position, err))?;
            batch.push((event, delivery));
        }
        Ok(match self.handler.grouped() {
            Some(grouped) => grouped.call_batch_in_group(batch, group),
            // As `call_in_group`: one by one, outside the group.
            None => Box::pin(async move {
                for (event, delivery) in batch {
                    self.handler.call(event, delivery).await?;
                }
                Ok(())
            }),
        })
    }
}

/// The delivered message's payload as an `E`, upcast from older versions.
fn decode<E: IntegrationEvent>(
    registry: &EventRegistry,
    delivery: &Delivery,
) -> Result<E, DecodeError> {
    let message = delivery.message();
    registry.decode_as(
        &message.event_name,
        message.event_version,
        message.payload.as_bytes(),
    )
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

    /// The inbox the handlers apply through: the one every inbox handler
    /// names, or an error when two consumers' inboxes are mixed.
    pub(crate) fn inbox(&self) -> Result<Option<Arc<dyn ConsumerInbox>>, SubscriberBuildError> {
        let mut found: Option<Arc<dyn ConsumerInbox>> = None;
        for inbox in self.0.values().filter_map(|handler| handler.inbox()) {
            match &found {
                Some(first) if first.consumer() != inbox.consumer() => {
                    return Err(SubscriberBuildError::InvalidConfig(format!(
                        "the handlers apply through the inboxes of two consumers, `{}` and `{}`: \
                         one subscriber, one inbox",
                        first.consumer(),
                        inbox.consumer()
                    )));
                }
                Some(_) => {}
                None => found = Some(inbox),
            }
        }
        Ok(found)
    }

    /// Every handled type's registration.
    pub(crate) fn registrations(&self) -> impl Iterator<Item = EventRegistration> + '_ {
        self.0.values().map(|handler| handler.registration())
    }
}
