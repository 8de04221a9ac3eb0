//! Creating or verifying the JetStream stream the outbox publishes into.

use std::time::Duration;

use async_nats::jetstream::{
    self,
    context::{CreateStreamErrorKind, GetStreamErrorKind},
    stream::{Config, StorageType},
};
use futures::StreamExt;
use txoutbox_core::processor::DEFAULT_LEASE;

use crate::subject;

/// The name of [`StreamSpec::dead_letters`].
pub const DEAD_LETTER_STREAM: &str = "DLQ";

/// JetStream's default duplicate window.
pub const DEFAULT_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// The stream the outbox's subjects are stored in.
///
/// ```
/// use txoutbox_nats::StreamSpec;
/// use std::time::Duration;
/// let spec = StreamSpec::new("EVENTS", ["events.>"])
///     .duplicate_window(Duration::from_secs(300))
///     .processor_lease(Duration::from_secs(10)); // the processor's, if not the default 3 s
/// assert_eq!(spec.name(), "EVENTS");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSpec {
    name: String,
    subjects: Vec<String>,
    duplicate_window: Duration,
    storage: StorageType,
    replicas: usize,
    max_age: Duration,
    processor_lease: Duration,
}

impl StreamSpec {
    /// A file-backed, single-replica stream `name` capturing `subjects`, with
    /// JetStream's default 2-minute duplicate window and no age limit.
    pub fn new<S: Into<String>>(
        name: impl Into<String>,
        subjects: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            name: name.into(),
            subjects: subjects.into_iter().map(Into::into).collect(),
            duplicate_window: DEFAULT_DUPLICATE_WINDOW,
            storage: StorageType::File,
            replicas: 1,
            max_age: Duration::ZERO,
            processor_lease: DEFAULT_LEASE,
        }
    }

    /// How long JetStream remembers message ids to drop re-publishes
    /// (default 2 min). Must exceed the processor's lease.
    pub fn duplicate_window(mut self, window: Duration) -> Self {
        self.duplicate_window = window;
        self
    }

    /// The lease of the processor that publishes into the stream (default
    /// [`DEFAULT_LEASE`], the processor's own default, 3 s): the duplicate
    /// window must outlast it, so a batch re-published after a crashed
    /// processor's lease ran out is still deduplicated;
    /// [`ensure`](Self::ensure) refuses a window that does not
    /// ([`StreamError::WindowTooShort`]). `Duration::ZERO` for a stream
    /// no processor publishes into (dead letters).
    pub fn processor_lease(mut self, lease: Duration) -> Self {
        self.processor_lease = lease;
        self
    }

    /// File (default) or memory storage.
    pub fn storage(mut self, storage: StorageType) -> Self {
        self.storage = storage;
        self
    }

    /// Replicas in a cluster (default 1; use 3 in production clusters).
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// How long messages are kept (default: no limit).
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// One stream for every consumer's dead letters: `DLQ`, capturing
    /// `dlq.>` (the default dead-letter subjects are `dlq.<durable>`),
    /// file-backed, messages kept 30 days.
    pub fn dead_letters() -> Self {
        // Dead letters are published once each: no lease to outlast.
        Self::new(DEAD_LETTER_STREAM, ["dlq.>"])
            .max_age(Duration::from_secs(30 * 24 * 3600))
            .processor_lease(Duration::ZERO)
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The subjects it captures.
    pub fn subjects(&self) -> &[String] {
        &self.subjects
    }

    fn config(&self) -> Config {
        Config {
            name: self.name.clone(),
            subjects: self.subjects.clone(),
            duplicate_window: self.duplicate_window,
            storage: self.storage,
            num_replicas: self.replicas,
            max_age: self.max_age,
            ..Config::default()
        }
    }

    /// Creates the stream, or checks that the existing one fits: it must
    /// capture every configured subject and keep message ids for longer than
    /// the [processor's lease](Self::processor_lease) (so a batch
    /// re-published after a crashed processor's lease ran out is still
    /// deduplicated). A different storage type or replica count is logged as
    /// a warning, not changed.
    pub async fn ensure(
        &self,
        jetstream: &jetstream::Context,
    ) -> Result<jetstream::stream::Info, StreamError> {
        Ok(self.ensure_reporting(jetstream).await?.info)
    }

    /// [`ensure`](Self::ensure), telling what it did: whether it created
    /// the stream, and how an existing one differs from this spec where it
    /// may (kept as it is, each difference also logged as a warning).
    pub async fn ensure_reporting(
        &self,
        jetstream: &jetstream::Context,
    ) -> Result<Ensured, StreamError> {
        self.check()?;
        let lease = self.processor_lease;
        let existing = match jetstream.get_stream(&self.name).await {
            Ok(mut stream) => Some(
                stream
                    .info()
                    .await
                    .map_err(|e| self.info_failed(e))?
                    .clone(),
            ),
            Err(err) => match err.kind() {
                GetStreamErrorKind::JetStream(js)
                    if js.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND =>
                {
                    None
                }
                GetStreamErrorKind::Request => return Err(self.unanswered(err)),
                _ => return Err(self.failed(err)),
            },
        };
        let Some(info) = existing else {
            return match jetstream.create_stream(self.config()).await {
                Ok(mut stream) => {
                    tracing::info!(stream = %self.name, subjects = ?self.subjects, "outbox stream created");
                    Ok(Ensured {
                        info: stream
                            .info()
                            .await
                            .map_err(|e| self.info_failed(e))?
                            .clone(),
                        created: true,
                        differences: Vec::new(),
                    })
                }
                Err(err) => match err.kind() {
                    CreateStreamErrorKind::JetStreamUnavailable => {
                        Err(StreamError::JetStreamUnavailable(err.to_string()))
                    }
                    CreateStreamErrorKind::TimedOut => Err(self.unanswered(err)),
                    CreateStreamErrorKind::JetStream(js)
                        if js.error_code() == jetstream::ErrorCode::STREAM_SUBJECT_OVERLAP =>
                    {
                        self.captured_elsewhere(jetstream, lease).await
                    }
                    _ => Err(self.failed(err)),
                },
            };
        };
        let differences = self.verify(&info.config, lease)?;
        Ok(Ensured {
            info,
            created: false,
            differences,
        })
    }

    /// The stream could not be created because others capture some of its
    /// subjects: one that captures all of them is used as it is (a second
    /// service's spec on a shared server, e.g. `BILLING_DLQ` on
    /// `dlq.billing` where `DLQ` captures `dlq.>`); otherwise the error
    /// names the streams in the way.
    async fn captured_elsewhere(
        &self,
        jetstream: &jetstream::Context,
        lease: Duration,
    ) -> Result<Ensured, StreamError> {
        let mut overlapping = Vec::new();
        let mut streams = jetstream.streams();
        while let Some(info) = streams.next().await {
            let info = info.map_err(|e| self.failed(e))?;
            let theirs = &info.config.subjects;
            if !self
                .subjects
                .iter()
                .any(|ours| theirs.iter().any(|s| subject::overlaps(s, ours)))
            {
                continue;
            }
            if self.missing_from(theirs).is_empty() {
                tracing::info!(
                    stream = %self.name,
                    captured_by = %info.config.name,
                    subjects = ?self.subjects,
                    "another stream already captures the outbox stream's subjects; using it"
                );
                let differences = self.verify(&info.config, lease)?;
                return Ok(Ensured {
                    info,
                    created: false,
                    differences,
                });
            }
            overlapping.push(OverlappingStream {
                name: info.config.name.clone(),
                subjects: theirs.clone(),
            });
        }
        Err(StreamError::SubjectsOverlap {
            stream: self.name.clone(),
            subjects: self.subjects.clone(),
            overlapping,
        })
    }

    /// The spec's subjects that none of `subjects` captures.
    fn missing_from(&self, subjects: &[String]) -> Vec<String> {
        self.subjects
            .iter()
            .filter(|ours| !subjects.iter().any(|s| subject::covers(s, ours)))
            .cloned()
            .collect()
    }

    /// What [`ensure`](Self::ensure) can check without the server: the
    /// duplicate window outlasts the [processor's
    /// lease](Self::processor_lease) ([`StreamError::WindowTooShort`]),
    /// so a service can refuse such a spec at start while the broker is
    /// away.
    pub fn check(&self) -> Result<(), StreamError> {
        if self.duplicate_window <= self.processor_lease {
            return Err(StreamError::WindowTooShort {
                stream: self.name.clone(),
                window: self.duplicate_window,
                lease: self.processor_lease,
            });
        }
        Ok(())
    }

    fn verify(
        &self,
        actual: &Config,
        lease: Duration,
    ) -> Result<Vec<StreamDifference>, StreamError> {
        let missing = self.missing_from(&actual.subjects);
        if !missing.is_empty() {
            return Err(StreamError::SubjectsMissing {
                stream: self.name.clone(),
                missing,
                actual: actual.subjects.clone(),
            });
        }
        if actual.duplicate_window <= lease {
            return Err(StreamError::WindowTooShort {
                stream: self.name.clone(),
                window: actual.duplicate_window,
                lease,
            });
        }
        let differences = StreamDifference::between(&self.config(), actual);
        for difference in &differences {
            tracing::warn!(stream = %self.name, %difference, "outbox stream differs from the configuration; keeping it as it is");
        }
        Ok(differences)
    }

    /// A stream info request that failed: unanswered unless the server
    /// answered with an error.
    fn info_failed(&self, err: jetstream::context::RequestError) -> StreamError {
        use jetstream::context::RequestErrorKind;
        match err.kind() {
            RequestErrorKind::TimedOut | RequestErrorKind::NoResponders => self.unanswered(err),
            _ => self.failed(err),
        }
    }

    fn unanswered(&self, err: impl std::error::Error + Send + Sync + 'static) -> StreamError {
        StreamError::Unanswered {
            stream: self.name.clone(),
            source: Box::new(err),
        }
    }

    fn failed(&self, err: impl std::error::Error + Send + Sync + 'static) -> StreamError {
        StreamError::Request {
            stream: self.name.clone(),
            source: Box::new(err),
        }
    }
}

/// What [`StreamSpec::ensure_reporting`] did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Ensured {
    /// The stream as it is now: the spec's, or another (`info.config.name`
    /// differs from the spec's name) that already captured every subject
    /// of the spec, which is then used as it is.
    pub info: jetstream::stream::Info,
    /// It did not exist and was created.
    pub created: bool,
    /// How the existing stream differs from the spec (kept as it is).
    pub differences: Vec<StreamDifference>,
}

/// One way an existing stream differs from its [`StreamSpec`], where it may
/// (the subjects it must capture and the duplicate window it must keep are
/// checked, not reported here).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamDifference {
    /// It captures subjects the spec does not name.
    ExtraSubjects(Vec<String>),
    /// Another duplicate window (long enough).
    DuplicateWindow {
        /// The stream's.
        existing: Duration,
        /// The spec's.
        configured: Duration,
    },
    /// Another storage type.
    Storage {
        /// The stream's.
        existing: StorageType,
        /// The spec's.
        configured: StorageType,
    },
    /// Another replica count.
    Replicas {
        /// The stream's.
        existing: usize,
        /// The spec's.
        configured: usize,
    },
    /// Another age limit (zero: none).
    MaxAge {
        /// The stream's.
        existing: Duration,
        /// The spec's.
        configured: Duration,
    },
}

impl StreamDifference {
    fn between(wanted: &Config, actual: &Config) -> Vec<Self> {
        let mut out = Vec::new();
        let extra: Vec<String> = actual
            .subjects
            .iter()
            .filter(|s| !wanted.subjects.contains(s))
            .cloned()
            .collect();
        if !extra.is_empty() {
            out.push(Self::ExtraSubjects(extra));
        }
        if actual.duplicate_window != wanted.duplicate_window {
            out.push(Self::DuplicateWindow {
                existing: actual.duplicate_window,
                configured: wanted.duplicate_window,
            });
        }
        if actual.storage != wanted.storage {
            out.push(Self::Storage {
                existing: actual.storage,
                configured: wanted.storage,
            });
        }
        if actual.num_replicas != wanted.num_replicas {
            out.push(Self::Replicas {
                existing: actual.num_replicas,
                configured: wanted.num_replicas,
            });
        }
        if actual.max_age != wanted.max_age {
            out.push(Self::MaxAge {
                existing: actual.max_age,
                configured: wanted.max_age,
            });
        }
        out
    }
}

impl std::fmt::Display for StreamDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ExtraSubjects(extra) => write!(f, "it also captures {extra:?}"),
            Self::DuplicateWindow {
                existing,
                configured,
            } => write!(f, "duplicate window is {existing:?}, not {configured:?}"),
            Self::Storage {
                existing,
                configured,
            } => write!(f, "storage is {existing:?}, not {configured:?}"),
            Self::Replicas {
                existing,
                configured,
            } => write!(f, "replicas are {existing}, not {configured}"),
            Self::MaxAge {
                existing,
                configured,
            } => write!(
                f,
                "max age is {existing:?}, not {configured:?} (zero: no limit)"
            ),
        }
    }
}

/// A stream whose subjects overlap a [`StreamSpec`]'s
/// ([`StreamError::SubjectsOverlap`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OverlappingStream {
    /// Its name.
    pub name: String,
    /// The subjects it captures.
    pub subjects: Vec<String>,
}

fn describe(streams: &[OverlappingStream]) -> String {
    let named: Vec<String> = streams
        .iter()
        .map(|stream| format!("stream `{}` on {:?}", stream.name, stream.subjects))
        .collect();
    if named.is_empty() {
        "another stream's".to_owned()
    } else {
        named.join(", ")
    }
}

/// The stream could not be created or does not fit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The stream exists but does not capture every configured subject.
    #[error("stream `{stream}` does not capture {missing:?} (it captures {actual:?})")]
    SubjectsMissing {
        /// The stream.
        stream: String,
        /// Configured subjects it lacks.
        missing: Vec<String>,
        /// The subjects it has.
        actual: Vec<String>,
    },
    /// The duplicate window would not cover the processor's lease, so a
    /// re-publish after a crash could be stored twice.
    #[error(
        "stream `{stream}` keeps message ids for {window:?}, not longer than the processor's lease of {lease:?}: re-publishes after a crash would not be deduplicated"
    )]
    WindowTooShort {
        /// The stream.
        stream: String,
        /// Its duplicate window.
        window: Duration,
        /// The lease it must exceed.
        lease: Duration,
    },
    /// The stream cannot be created: other streams capture some of its
    /// subjects (a subject is stored in one stream only), and none captures
    /// all of them.
    #[error(
        "stream `{stream}` on {subjects:?} cannot be created: its subjects overlap {}; remove \
         that stream (e.g. `nats stream rm NAME`, once what it holds is no longer needed) or \
         give this stream subjects no other stream captures",
        describe(overlapping)
    )]
    SubjectsOverlap {
        /// The stream.
        stream: String,
        /// Its subjects.
        subjects: Vec<String>,
        /// The streams in the way.
        overlapping: Vec<OverlappingStream>,
    },
    /// The server has JetStream disabled.
    #[error("JetStream is not enabled on the server: {0}")]
    JetStreamUnavailable(String),
    /// A JetStream API request failed: the server answered with an error
    /// (a permission, subjects that overlap another stream's, ...).
    #[error("JetStream request about stream `{stream}` failed")]
    Request {
        /// The stream.
        stream: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The server did not answer a JetStream request in time (not
    /// connected, timed out): the broker is away, retrying helps.
    #[error("no answer from JetStream about stream `{stream}`")]
    Unanswered {
        /// The stream.
        stream: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StreamError {
    /// Whether the broker was away rather than the stream wrong: no answer
    /// in time ([`Unanswered`](Self::Unanswered)), or JetStream not
    /// available yet ([`JetStreamUnavailable`](Self::JetStreamUnavailable):
    /// also a server that has it disabled). Retrying the other kinds does
    /// not help.
    pub fn is_away(&self) -> bool {
        matches!(
            self,
            Self::Unanswered { .. } | Self::JetStreamUnavailable(_)
        )
    }
}
