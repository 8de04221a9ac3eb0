//! Errors of building and running a [`Subscriber`](super::Subscriber).

use async_nats::jetstream::context::GetStreamError;
use txoutbox_core::consumer::BoxError;
use txoutbox_core::registry::RegistryError;

/// The subscriber could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubscriberBuildError {
    /// A setting is missing or out of range.
    #[error("invalid subscriber setting: {0}")]
    InvalidConfig(String),
    /// No handler was registered.
    #[error("the subscriber has no handler; add one with `on`")]
    NoHandlers,
    /// Two handlers take the same event name (one handler per name; it
    /// receives older versions through upcasts).
    #[error("`{name}` has two handlers, taking {first} and {second}")]
    DuplicateHandler {
        /// The event name.
        name: &'static str,
        /// The type the first handler takes.
        first: &'static str,
        /// The type the second handler takes.
        second: &'static str,
    },
    /// The registry given with `registry(..)` cannot decode a type a
    /// handler takes.
    #[error("the registry has no {rust_type} (`{name}` v{version}), which a handler takes")]
    Unregistered {
        /// The event name.
        name: &'static str,
        /// Its version.
        version: u32,
        /// The Rust type.
        rust_type: &'static str,
    },
    /// The registry refused to build (duplicate or broken registrations).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The stream does not exist or cannot be read.
    #[error("reading stream `{stream}`")]
    Stream {
        /// The stream.
        stream: String,
        /// What JetStream said.
        #[source]
        source: GetStreamError,
    },
    /// The dead-letter policy publishes to `subject`, but no stream
    /// captures it: dead-lettering would fail and the message be nakked
    /// again and again.
    #[error(
        "no stream captures the dead-letter subject `{subject}` of consumer `{consumer}`: create \
         one (e.g. `outbox stream ensure --stream DLQ --subjects 'dlq.>'`), let the subscriber \
         create it with `dead_letter_stream(StreamSpec::dead_letters())`, or choose another \
         `DeadLetterPolicy`"
    )]
    DeadLettersUncaptured {
        /// The dead-letter subject.
        subject: String,
        /// The durable name.
        consumer: String,
    },
    /// The dead-letter stream given with `dead_letter_stream` could not be
    /// created or does not fit.
    #[error("dead-letter stream")]
    DeadLetterStream(#[from] crate::StreamError),
    /// The durable consumer exists with settings other than this
    /// subscriber's. Change the settings, or delete the consumer (it then
    /// starts again from its deliver policy).
    #[error(
        "consumer `{consumer}` exists with {setting} = {existing}, but this subscriber wants {wanted}"
    )]
    ConsumerMismatch {
        /// The durable name.
        consumer: String,
        /// The setting that differs.
        setting: &'static str,
        /// The consumer's value.
        existing: String,
        /// The subscriber's value.
        wanted: String,
    },
    /// JetStream refused to create or describe the consumer.
    #[error("creating or describing consumer `{consumer}`")]
    Consumer {
        /// The durable name.
        consumer: String,
        /// What went wrong.
        #[source]
        source: BoxError,
    },
}

/// The subscriber stopped on its own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubscriberError {
    /// Someone deleted the durable consumer. The subscriber does not
    /// recreate it: a new consumer would start over from its deliver policy
    /// and replay the stream.
    #[error("consumer `{consumer}` was deleted while the subscriber ran")]
    ConsumerDeleted {
        /// The durable name.
        consumer: String,
    },
    /// The subscriber's task panicked or was aborted.
    #[error("the subscriber task failed")]
    Task(#[from] tokio::task::JoinError),
}
