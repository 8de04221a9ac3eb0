//! What a [`RuntimeBuilder`](crate::RuntimeBuilder) accepts as its processor
//! and its subscribers: built or not, running or not.

use futures::future::{BoxFuture, Either};
use txoutbox_core::processor::{Processor, ProcessorBuilder, ProcessorHandle};
use txoutbox_core::publisher::Publisher;
use txoutbox_core::store::OutboxStore;
use txoutbox_nats::subscriber::{
    RunningSubscriber, Subscriber, SubscriberBuildError, SubscriberBuilder,
};

use crate::RuntimeError;
use crate::database::DatabaseProbe;

/// A processor on its way to running, and a probe of its store's database
/// (for `/health/ready`), from [`ProcessorSource::spawn_processor`].
#[doc(hidden)]
pub struct ProcessorStart {
    /// Checks its table and spawns it (or takes it as it runs).
    pub(crate) spawn: BoxFuture<'static, Result<ProcessorHandle, RuntimeError>>,
    /// Probes its store; `None` for a processor given running.
    pub(crate) database: Option<DatabaseProbe>,
}

impl std::fmt::Debug for ProcessorStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessorStart")
            .field("database", &self.database.is_some())
            .finish_non_exhaustive()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A processor for [`RuntimeBuilder::processor`](crate::RuntimeBuilder::processor):
/// a [`ProcessorBuilder`] (from `txoutbox_sea_orm::Outbox::processor`), a
/// built [`Processor`], or a [`ProcessorHandle`] already running. The
/// runtime builds it, checks its table
/// ([`Processor::check`]: its table and its stream) and spawns it in
/// [`start`](crate::RuntimeBuilder::start). Built or not, its store is
/// what `/health/ready` probes; a `ProcessorHandle` given running has none
/// to offer. Sealed.
pub trait ProcessorSource: sealed::Sealed + Send + 'static {
    /// Builds it, checks its table and spawns it (or takes it as it runs).
    #[doc(hidden)]
    fn spawn_processor(self) -> ProcessorStart;
}

impl<S: OutboxStore + 'static, P: Publisher> sealed::Sealed for ProcessorBuilder<S, P> {}
impl<S: OutboxStore + 'static, P: Publisher> ProcessorSource for ProcessorBuilder<S, P> {
    fn spawn_processor(self) -> ProcessorStart {
        match self.build() {
            Ok(processor) => processor.spawn_processor(),
            Err(err) => ProcessorStart {
                spawn: Box::pin(std::future::ready(Err(err.into()))),
                database: None,
            },
        }
    }
}

impl<S: OutboxStore + 'static, P: Publisher> sealed::Sealed for Processor<S, P> {}
impl<S: OutboxStore + 'static, P: Publisher> ProcessorSource for Processor<S, P> {
    fn spawn_processor(self) -> ProcessorStart {
        ProcessorStart {
            database: Some(DatabaseProbe::store(self.store())),
            spawn: Box::pin(async move {
                self.check().await?;
                Ok(self.spawn())
            }),
        }
    }
}

impl sealed::Sealed for ProcessorHandle {}
impl ProcessorSource for ProcessorHandle {
    fn spawn_processor(self) -> ProcessorStart {
        ProcessorStart {
            spawn: Box::pin(std::future::ready(Ok(self))),
            database: None,
        }
    }
}

/// A subscriber for [`RuntimeBuilder::subscriber`](crate::RuntimeBuilder::subscriber):
/// a [`SubscriberBuilder`] (built in
/// [`start`](crate::RuntimeBuilder::start): its consumer is created or
/// verified there, or, while the broker is away, by the running subscriber
/// once it answers), a built [`Subscriber`], or a [`RunningSubscriber`].
/// Sealed.
pub trait SubscriberSource: sealed::Sealed + Send + 'static {
    /// Builds it: a subscriber to spawn, or one already running.
    #[doc(hidden)]
    fn build_subscriber(
        self,
    ) -> BoxFuture<'static, Result<Either<Subscriber, RunningSubscriber>, SubscriberBuildError>>;
}

impl sealed::Sealed for SubscriberBuilder {}
impl SubscriberSource for SubscriberBuilder {
    fn build_subscriber(
        self,
    ) -> BoxFuture<'static, Result<Either<Subscriber, RunningSubscriber>, SubscriberBuildError>>
    {
        Box::pin(async move { Ok(Either::Left(self.build().await?)) })
    }
}

impl sealed::Sealed for Subscriber {}
impl SubscriberSource for Subscriber {
    fn build_subscriber(
        self,
    ) -> BoxFuture<'static, Result<Either<Subscriber, RunningSubscriber>, SubscriberBuildError>>
    {
        Box::pin(std::future::ready(Ok(Either::Left(self))))
    }
}

impl sealed::Sealed for RunningSubscriber {}
impl SubscriberSource for RunningSubscriber {
    fn build_subscriber(
        self,
    ) -> BoxFuture<'static, Result<Either<Subscriber, RunningSubscriber>, SubscriberBuildError>>
    {
        Box::pin(std::future::ready(Ok(Either::Right(self))))
    }
}
