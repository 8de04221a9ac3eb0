//! Errors of building and running a [`Subscriber`](crate::subscriber::Subscriber).

use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::context::{GetStreamError, GetStreamErrorKind};
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
    /// The subscriber's handlers have no inbox and it was not told to run
    /// [`unordered`](crate::subscriber::SubscriberBuilder::unordered).
    #[error(
        "the handlers of consumer `{consumer}` have no inbox, so their effects would happen at \
         least once and its order hold within one process only: make them with an inbox \
         (`.on(inbox.handler(f))`, `txoutbox_sea_orm::Inbox`) for effects once and in order, or \
         call `.unordered()` to run them as they are"
    )]
    NoInbox {
        /// The durable name.
        consumer: String,
    },
    /// The inbox's tables are missing or out of date.
    #[error("the inbox of consumer `{consumer}` cannot be used")]
    InboxSchema {
        /// The inbox's consumer name.
        consumer: String,
        /// What the inbox found (it names what to run).
        #[source]
        source: BoxError,
    },
    /// Another process is reading the durable consumer of a subscriber that
    /// keeps order, which must be its only reader.
    #[error(
        "consumer `{consumer}` is being read by another process ({waiting} pull request(s) \
         waiting): a subscriber that keeps order must be the only reader of its durable. Stop \
         the other process; or to run several processes, let one receive at a time and the \
         others stand by (`failover()` in every one of them, nats-server 2.11+), give each its \
         own partitions (`partitions(prefix, partitions, owned)`, each partition read by one \
         process), or share the durable without order keeping (`unordered()`)"
    )]
    DurableInUse {
        /// The JetStream consumer's name.
        consumer: String,
        /// Pull requests of other clients the server holds.
        waiting: usize,
    },
    /// [`failover`](crate::subscriber::SubscriberBuilder::failover) was asked of a
    /// server without pinned-client priority groups (before nats-server
    /// 2.11), which would ignore the consumer's priority settings and
    /// spread messages over every process.
    #[error(
        "consumer `{consumer}`: failover needs nats-server 2.11 or later (a priority group with \
         a pinned client), but the server is {server_version}. Upgrade the server; or, to \
         consume on several processes, give each its own partitions (`partitions(prefix, \
         partitions, owned)`, each partition read by one process); or run one process on the \
         durable without `failover()`"
    )]
    FailoverUnsupported {
        /// The durable name.
        consumer: String,
        /// The version the server reported when the client connected.
        server_version: String,
    },
    /// The stream does not exist.
    #[error(
        "stream `{stream}` does not exist: create it (`outbox stream ensure --stream {stream} \
         --subjects '<prefix>.>'`, or `StreamSpec::new(..).ensure(..)` at start)"
    )]
    StreamMissing {
        /// The stream.
        stream: String,
    },
    /// The stream cannot be read.
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
    /// The server refused a JetStream API call `build` made (reading the
    /// stream, creating or reading the consumer, the dead-letter stream)
    /// for want of a permission: the request timed out, and the server
    /// reported the violation. Grant it to the user (the operating
    /// chapter's "NATS permissions").
    #[error("{denied}")]
    PermissionDenied {
        /// What the server refused.
        denied: crate::PermissionDenied,
        /// The failure the refusal caused.
        #[source]
        source: Box<SubscriberBuildError>,
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

impl SubscriberBuildError {
    /// The error of reading `stream`: [`StreamMissing`](Self::StreamMissing)
    /// when it does not exist.
    /// `self`, or the permission denial that explains it: a request to the
    /// server that failed while the server reported a JetStream API call
    /// refused lately.
    pub(crate) fn or_denied(self) -> Self {
        let from_a_request = matches!(
            self,
            Self::Stream { .. } | Self::Consumer { .. } | Self::DeadLetterStream(_)
        );
        match crate::permissions::jetstream_api_denied() {
            Some(denied) if from_a_request => Self::PermissionDenied {
                denied,
                source: Box::new(self),
            },
            _ => self,
        }
    }

    pub(crate) fn stream(stream: &str, source: GetStreamError) -> Self {
        if let GetStreamErrorKind::JetStream(js) = source.kind()
            && js.error_code() == ErrorCode::STREAM_NOT_FOUND
        {
            return Self::StreamMissing {
                stream: stream.to_owned(),
            };
        }
        Self::Stream {
            stream: stream.to_owned(),
            source,
        }
    }
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
    /// Built while the broker was away, the subscriber could not set up
    /// its consumers once it answered (a consumer with other settings, a
    /// permission denied, ...): what [`build`](crate::subscriber::SubscriberBuilder::build)
    /// returns when the broker answers at start.
    #[error("the subscriber could not set up its consumers")]
    Setup(#[source] SubscriberBuildError),
    /// The subscriber's task panicked or was aborted.
    #[error("the subscriber task failed")]
    Task(#[from] tokio::task::JoinError),
}
