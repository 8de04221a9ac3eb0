//! Where the outbox lives and how it behaves.

use txoutbox_core::{Partitions, SubjectPrefix};

use crate::error::OutboxError;

/// The outbox table's name: an SQL identifier of ASCII letters, digits and
/// `_`, not starting with a digit, at most 48 bytes (index names derive from it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableName(String);

impl TableName {
    /// The default, `outbox_messages`.
    pub const DEFAULT: &'static str = "outbox_messages";

    /// The default name of the inbox table, `outbox_inbox`.
    pub const DEFAULT_INBOX: &'static str = "outbox_inbox";

    /// A validated table name.
    ///
    /// ```
    /// use txoutbox_sea_orm::TableName;
    /// assert!(TableName::new("billing_outbox").is_ok());
    /// assert!(TableName::new("outbox; DROP TABLE users").is_err());
    /// ```
    pub fn new(name: impl Into<String>) -> Result<Self, OutboxError> {
        let name = name.into();
        let valid = !name.is_empty()
            && name.len() <= 48
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if valid {
            Ok(Self(name))
        } else {
            Err(OutboxError::InvalidConfig(format!(
                "table name `{name}` must be 1-48 ASCII letters, digits or `_`, not starting with a digit"
            )))
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for TableName {
    fn default() -> Self {
        Self(Self::DEFAULT.to_owned())
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What happens to a message once the broker acknowledged it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Retention {
    /// Keep the row as `published`, with its stream sequence and time, for
    /// a while (the default: an audit trail, `outbox verify`, and replays
    /// by id). The processor deletes rows published more than 7 days ago
    /// ([`Outbox::processor`](crate::Outbox::processor)'s
    /// [cleanup](txoutbox_core::processor::ProcessorBuilder::cleanup)).
    #[default]
    KeepPublished,
    /// Delete the row at once (the smallest table).
    Delete,
}

/// The outbox's settings, shared by the unit of work and the store.
///
/// ```
/// use txoutbox_sea_orm::{OutboxConfig, Retention};
/// let config = OutboxConfig::default()
///     .with_table("billing_outbox")?
///     .with_subject_prefix("billing")?
///     .with_retention(Retention::Delete);
/// assert_eq!(config.table().as_str(), "billing_outbox");
/// # Ok::<(), txoutbox_sea_orm::OutboxError>(())
/// ```
///
/// With the `serde` feature it loads from a configuration file, every key
/// optional and validated as the `with_*` methods validate it:
///
#[cfg_attr(feature = "serde", doc = "```")]
#[cfg_attr(not(feature = "serde"), doc = "```ignore")]
/// use txoutbox_sea_orm::{OutboxConfig, Retention};
/// let config: OutboxConfig = serde_json::from_str(r#"{
///     "table": "billing_outbox", "subject_prefix": "billing",
///     "retention": "delete", "notify": false, "partitions": 8
/// }"#)?;
/// assert_eq!(config.table().as_str(), "billing_outbox");
/// assert_eq!(config.subject_prefix().partitions().map(|p| p.count()), Some(8));
/// assert_eq!(config.retention(), Retention::Delete);
/// assert_eq!(config.notify_channel(), None);
/// assert!(serde_json::from_str::<OutboxConfig>(r#"{"table": "x; DROP"}"#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct OutboxConfig {
    table: TableName,
    subject_prefix: SubjectPrefix,
    retention: Retention,
    notify_disabled: bool,
    inbox_table: Option<TableName>,
}

/// The inbox table's default name.
static DEFAULT_INBOX_TABLE: std::sync::LazyLock<TableName> =
    std::sync::LazyLock::new(|| TableName(TableName::DEFAULT_INBOX.to_owned()));

impl OutboxConfig {
    /// Uses another outbox table (default `outbox_messages`).
    pub fn with_table(mut self, table: impl Into<String>) -> Result<Self, OutboxError> {
        self.table = TableName::new(table)?;
        Ok(self)
    }

    /// Publishes derived subjects under this prefix (default `events`).
    pub fn with_subject_prefix(mut self, prefix: impl Into<String>) -> Result<Self, OutboxError> {
        let partitions = self.subject_prefix.partitions();
        self.subject_prefix = SubjectPrefix::new(prefix)?;
        if let Some(partitions) = partitions {
            self.subject_prefix = self.subject_prefix.with_partitions(partitions);
        }
        Ok(self)
    }

    /// Splits derived subjects into `partitions` by aggregate, for consumers
    /// on several processes (`txoutbox_nats`' `SubscriberBuilder::partitions`):
    /// an event of an aggregate in partition `k` goes to
    /// `<prefix>.p<k>.<event name>` ([`Partitions::of`]). Events with a fixed
    /// subject (`#[event(subject = "..")]`) keep it; standalone messages
    /// (no aggregate) take the partition of (`standalone`, their id).
    ///
    /// Writers and subscribers must agree on the count; changing it moves
    /// aggregates between partitions (the guide's chapter on consuming,
    /// `txoutbox::guide::consuming`, "Changing the count", for the procedure).
    ///
    /// ```
    /// use txoutbox_core::Partitions;
    /// use txoutbox_sea_orm::OutboxConfig;
    /// let config = OutboxConfig::default().with_partitions(Partitions::new(8)?);
    /// assert_eq!(config.subject_prefix().partitions(), Some(Partitions::new(8)?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_partitions(mut self, partitions: Partitions) -> Self {
        self.subject_prefix = self.subject_prefix.with_partitions(partitions);
        self
    }

    /// Keeps or deletes published rows (default: keep).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Stops sending PostgreSQL `NOTIFY` wake-ups to processors in other
    /// processes after commits (they then find new messages by polling).
    pub fn without_notify(mut self) -> Self {
        self.notify_disabled = true;
        self
    }

    /// The PostgreSQL `LISTEN`/`NOTIFY` channel processors in other processes
    /// listen on: the table's name; `None` when disabled.
    pub fn notify_channel(&self) -> Option<&str> {
        (!self.notify_disabled).then(|| self.table.as_str())
    }

    /// The outbox table.
    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// Uses another inbox table (default `outbox_inbox`), where
    /// [`Inbox`](crate::Inbox) consumers record the messages they processed.
    pub fn with_inbox_table(mut self, table: impl Into<String>) -> Result<Self, OutboxError> {
        self.inbox_table = Some(TableName::new(table)?);
        Ok(self)
    }

    /// The inbox table.
    pub fn inbox_table(&self) -> &TableName {
        self.inbox_table.as_ref().unwrap_or(&DEFAULT_INBOX_TABLE)
    }

    /// The subject prefix, with its partitions if any.
    pub fn subject_prefix(&self) -> &SubjectPrefix {
        &self.subject_prefix
    }

    /// The retention.
    pub fn retention(&self) -> Retention {
        self.retention
    }
}

/// The configuration-file form of [`OutboxConfig`].
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OutboxConfigFile {
    table: Option<String>,
    inbox_table: Option<String>,
    subject_prefix: Option<String>,
    partitions: Option<u32>,
    #[serde(default)]
    retention: Retention,
    notify: Option<bool>,
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for OutboxConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let file = OutboxConfigFile::deserialize(deserializer)?;
        let mut config = OutboxConfig::default().with_retention(file.retention);
        if let Some(table) = file.table {
            config = config.with_table(table).map_err(D::Error::custom)?;
        }
        if let Some(table) = file.inbox_table {
            config = config.with_inbox_table(table).map_err(D::Error::custom)?;
        }
        if let Some(prefix) = file.subject_prefix {
            config = config
                .with_subject_prefix(prefix)
                .map_err(D::Error::custom)?;
        }
        if let Some(count) = file.partitions {
            config = config.with_partitions(Partitions::new(count).map_err(D::Error::custom)?);
        }
        if file.notify == Some(false) {
            config = config.without_notify();
        }
        Ok(config)
    }
}
