//! Why a command failed, as one line, and its exit code.

use std::process::ExitCode;

use txoutbox_core::StoreError;
use txoutbox_nats::subscriber::dead_letter_replay::DeadLetterError;
use txoutbox_nats::{ConnectError, StreamError, stream_read::ReadError};
use txoutbox_sea_orm::OutboxError;

/// Exit code: done.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: failed (database unreachable, missing table, unknown id, …).
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit code: bad arguments or settings (also: a change refused without
/// `--yes` and no terminal to ask on).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code: the operator answered no; nothing changed.
pub(crate) const EXIT_DECLINED: u8 = 3;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Bad arguments or settings.
    #[error("{0}")]
    Usage(String),
    /// A change needs `--yes` and there is no terminal to ask on.
    #[error("refusing to {0} without --yes (no terminal to ask on)")]
    NeedsYes(String),
    /// The operator answered no.
    #[error("nothing changed")]
    Declined,
    /// What was named does not exist or is not in the state the command
    /// needs.
    #[error("{0}")]
    NotFound(String),
    /// The database could not be reached.
    #[error("connecting to the database: {}", one_line(.0))]
    Connect(#[source] sea_orm::DbErr),
    /// A table the command reads is missing.
    #[error(
        "table {0} does not exist: create it with `outbox migrate`, or name yours with --table / \
         --inbox-table"
    )]
    MissingTable(String),
    /// The outbox refused.
    #[error("{}", chain(.0))]
    Outbox(OutboxError),
    /// The store failed.
    #[error("{}", chain(.0))]
    Store(StoreError),
    /// A migration failed.
    #[error("migrating: {}", one_line(.0))]
    Migration(sea_orm::DbErr),
    /// Writing to the terminal failed.
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
    /// Bad NATS settings (no URL) or dead letters not named. Unlike
    /// [`CliError::Usage`] it exits 1, as the broker commands always have.
    #[error("{0}")]
    BrokerUsage(String),
    /// NATS could not be reached.
    #[error(transparent)]
    NatsConnect(#[from] ConnectError),
    /// The stream could not be created or does not fit.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// The stream could not be read.
    #[error(transparent)]
    StreamRead(#[from] ReadError),
    /// Dead letters could not be read or replayed.
    #[error(transparent)]
    DeadLetter(#[from] DeadLetterError),
    /// `verify` could not read the outbox table: the store's message as it
    /// is (not [`CliError::Store`]'s chain, no missing table named).
    #[error(transparent)]
    VerifyStore(StoreError),
    /// `verify` found discrepancies; `output` is its report.
    #[error("verify found {count} discrepanc{}", if *count == 1 { "y" } else { "ies" })]
    Discrepancies {
        /// The report, printed on standard output.
        output: String,
        /// How many.
        count: usize,
    },
}

impl CliError {
    /// The process's exit code for this error.
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::Usage(_) | CliError::NeedsYes(_) => EXIT_USAGE,
            CliError::Declined => EXIT_DECLINED,
            _ => EXIT_FAILED,
        })
    }

    /// What to print on standard output although the command failed.
    pub(crate) fn output(&self) -> Option<&str> {
        match self {
            CliError::Discrepancies { output, .. } => Some(output),
            _ => None,
        }
    }
}

impl From<StoreError> for CliError {
    fn from(err: StoreError) -> Self {
        match missing_table(&chain(&err)) {
            Some(table) => CliError::MissingTable(table),
            None => CliError::Store(err),
        }
    }
}

impl From<OutboxError> for CliError {
    fn from(err: OutboxError) -> Self {
        match missing_table(&chain(&err)) {
            Some(table) => CliError::MissingTable(table),
            None => CliError::Outbox(err),
        }
    }
}

/// An error and its causes on one line, `a: b: c`, each said once.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    one_line(&text)
}

fn one_line(text: &dyn std::fmt::Display) -> String {
    text.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The table a database error says is missing: PostgreSQL's
/// `relation "t" does not exist`, MySQL/MariaDB's `Table 'db.t' doesn't
/// exist`, SQLite's `no such table: t`.
fn missing_table(text: &str) -> Option<String> {
    let between = |start: &str, end: &str| {
        let from = text.find(start)? + start.len();
        let len = text[from..].find(end)?;
        Some(text[from..from + len].to_owned())
    };
    if let Some(name) = between("relation \"", "\" does not exist") {
        return Some(name);
    }
    if let Some(name) = between("Table '", "' doesn't exist") {
        return Some(name.rsplit('.').next().unwrap_or(&name).to_owned());
    }
    let from = text.find("no such table: ")? + "no such table: ".len();
    let name: String = text[from..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '"' | '`'))
        .collect();
    Some(name.trim_matches(['"', '`']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::missing_table;

    #[test]
    fn names_the_missing_table_of_each_backend() {
        assert_eq!(
            missing_table(
                "error returned from database: relation \"outbox_messages\" does not exist"
            )
            .as_deref(),
            Some("outbox_messages")
        );
        assert_eq!(
            missing_table("Table 'test.outbox_inbox' doesn't exist").as_deref(),
            Some("outbox_inbox")
        );
        assert_eq!(
            missing_table("(code: 1) no such table: outbox_messages").as_deref(),
            Some("outbox_messages")
        );
        assert_eq!(missing_table("connection refused"), None);
    }
}
