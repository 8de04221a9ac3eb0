//! A row's processing state as an operator sees it, read from its state
//! columns against the database clock.

use chrono::{DateTime, Utc};
use sea_orm::{DbErr, QueryResult};
use txoutbox_core::store::LeaseToken;

use crate::dialect::Dialect;

/// Where a message stands, by the database clock at the time it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageState {
    /// Pending and due: a claim takes it once every earlier message of its
    /// aggregate is settled.
    Pending,
    /// Pending, not due before `until`: a retry's backoff (`attempts` > 0)
    /// or a delayed message.
    NotBefore {
        /// When it is due.
        until: DateTime<Utc>,
    },
    /// Pending under a live lease: a processor is publishing it.
    Leased {
        /// The lease's fencing token (shared by the messages of one claim).
        token: LeaseToken,
        /// When the lease runs out unless renewed.
        until: DateTime<Utc>,
    },
    /// Will not be retried: it holds back the later messages of its
    /// aggregate until it is requeued or skipped.
    Dead,
    /// Published.
    Published {
        /// When.
        at: DateTime<Utc>,
        /// The stream sequence from the ack, when known.
        stream_sequence: Option<u64>,
    },
    /// A dead message an operator deliberately left unpublished
    /// ([`OutboxAdmin::skip_dead`](txoutbox_core::store::OutboxAdmin::skip_dead)).
    Skipped {
        /// When.
        at: DateTime<Utc>,
        /// Who.
        by: Option<String>,
        /// Why.
        reason: Option<String>,
    },
}

impl MessageState {
    /// A short name: `pending`, `not-before`, `leased`, `dead`, `published`,
    /// `skipped`.
    pub fn name(&self) -> &'static str {
        match self {
            MessageState::Pending => "pending",
            MessageState::NotBefore { .. } => "not-before",
            MessageState::Leased { .. } => "leased",
            MessageState::Dead => "dead",
            MessageState::Published { .. } => "published",
            MessageState::Skipped { .. } => "skipped",
        }
    }

    /// Whether it is settled (published or skipped): it holds nothing back.
    pub fn is_settled(&self) -> bool {
        matches!(
            self,
            MessageState::Published { .. } | MessageState::Skipped { .. }
        )
    }
}

/// The columns [`read_state`] expects (with the table alias prefix, e.g.
/// `"m."`), the database's clock as `db_now` included.
pub(super) fn state_columns(dialect: Dialect, alias: &str) -> String {
    let c = |column: &str| format!("{alias}{column}");
    [
        c("status"),
        c("next_attempt_at"),
        c("lease_token"),
        c("lease_expires_at"),
        c("published_at"),
        c("stream_sequence"),
        c("skipped_at"),
        c("skipped_by"),
        c("skip_reason"),
        format!("{} AS db_now", dialect.now()),
    ]
    .join(", ")
}

/// The state of a row selected with [`state_columns`].
pub(super) fn read_state(dialect: Dialect, row: &QueryResult) -> Result<MessageState, DbErr> {
    // smallint on PostgreSQL and MySQL/MariaDB, INTEGER on SQLite.
    let status: i64 = match row.try_get::<i16>("", "status") {
        Ok(status) => i64::from(status),
        Err(_) => row.try_get::<i64>("", "status")?,
    };
    let now = dialect.time(row, "db_now")?;
    match status {
        0 => {
            if let Some(until) = dialect.time_opt(row, "lease_expires_at")?
                && until > now
            {
                let token: Option<uuid::Uuid> = row.try_get("", "lease_token")?;
                if let Some(token) = token {
                    return Ok(MessageState::Leased {
                        token: LeaseToken::from_uuid(token),
                        until,
                    });
                }
            }
            let due = dialect.time(row, "next_attempt_at")?;
            Ok(if due > now {
                MessageState::NotBefore { until: due }
            } else {
                MessageState::Pending
            })
        }
        1 => match dialect.time_opt(row, "skipped_at")? {
            Some(at) => Ok(MessageState::Skipped {
                at,
                by: row.try_get("", "skipped_by")?,
                reason: row.try_get("", "skip_reason")?,
            }),
            None => {
                let sequence: Option<i64> = row.try_get("", "stream_sequence")?;
                Ok(MessageState::Published {
                    at: dialect.time_opt(row, "published_at")?.unwrap_or(now),
                    stream_sequence: sequence.and_then(|s| u64::try_from(s).ok()),
                })
            }
        },
        2 => Ok(MessageState::Dead),
        other => Err(DbErr::Type(format!(
            "outbox column `status`: unknown value {other}"
        ))),
    }
}
