//! The command line, whole: every command, its arguments and their help
//! ([`Cli`]), and [`parse`] / [`command`], which add the environment and
//! exit codes after every help page. Nothing here connects or prints: the
//! arguments are resolved by `context`, run by `commands`. The arguments
//! of the commands that reach NATS are in `broker` (this file would pass
//! 400 lines with them); it imports nothing from here.

mod broker;
mod console;
mod release;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use txoutbox_core::MessageId;
use txoutbox_core::redact::redact_url;

pub(crate) use self::broker::{DlqCommand, Letters, NatsArgs, Storage, StreamCommand, VerifyArgs};
pub(crate) use self::console::ConsoleArgs;
pub(crate) use self::release::{ReleaseArgs, ReleaseFilter};
use crate::help;

/// The operator's view of a transactional outbox and its consumers' inboxes.
#[derive(Debug, Parser)]
#[command(
    name = "outbox",
    version,
    about,
    long_about = help::ABOUT,
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) target: Target,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Where the outbox is. `Debug` hides the database URL's password.
#[derive(Args)]
pub(crate) struct Target {
    /// The database (postgres://, mysql://, sqlite://).
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub(crate) database_url: Option<String>,
    /// The outbox table.
    #[arg(
        long,
        env = "OUTBOX_TABLE",
        default_value = "outbox_messages",
        global = true
    )]
    pub(crate) table: String,
    /// The inbox table (its held messages are in `<inbox>_held`).
    #[arg(
        long,
        env = "OUTBOX_INBOX_TABLE",
        default_value = "outbox_inbox",
        global = true
    )]
    pub(crate) inbox_table: String,
    /// Print JSON instead of text (read commands).
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field(
                "database_url",
                &self.database_url.as_deref().map(redact_url),
            )
            .field("table", &self.table)
            .field("inbox_table", &self.inbox_table)
            .field("json", &self.json)
            .finish()
    }
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Counts (delayed messages too), how long the oldest due message has
    /// waited, per event and aggregate type, blocked aggregates.
    #[command(long_about = help::STATUS)]
    Status {
        /// Redraw every SECS seconds (default 2) until Ctrl-C.
        #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "2")]
        watch: Option<u64>,
        /// At most this many blocked aggregates.
        #[arg(long, default_value_t = 20)]
        blocked: u32,
    },
    /// Messages that will not be retried: list, show, requeue, skip.
    #[command(subcommand)]
    Dead(Dead),
    /// One aggregate's unsettled messages and what holds them back.
    #[command(long_about = help::AGGREGATE)]
    Aggregate {
        /// The aggregate type.
        aggregate_type: String,
        /// The aggregate id.
        aggregate_id: String,
        /// At most this many messages.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Deletes old published (and skipped) messages, or a consumer's old
    /// inbox records.
    #[command(long_about = help::PURGE)]
    Purge(PurgeArgs),
    /// A consumer's aggregates held behind a message it could not apply.
    #[command(long_about = help::HOLDS)]
    Holds {
        /// The consumer (its durable name, the inbox's consumer name).
        #[arg(long)]
        consumer: String,
    },
    /// Lets a held aggregate go on (or, with --all, every one a filter
    /// keeps): its subscriber applies the message it is held behind again
    /// (or skips it with --skip), then what is parked.
    #[command(long_about = help::RELEASE)]
    Release(ReleaseArgs),
    /// Creates or upgrades the outbox and inbox tables (idempotent).
    #[command(long_about = help::MIGRATE)]
    Migrate,
    /// Prints a shell completion script.
    #[command(long_about = help::COMPLETIONS)]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Checks the outbox table against the stream: every row marked
    /// published is in the stream, no message is stored twice, each
    /// aggregate's messages are in order, nothing stays pending too long.
    /// Exits 1 on any discrepancy.
    Verify(VerifyArgs),
    /// The stream the outbox publishes to.
    #[command(subcommand)]
    Stream(StreamCommand),
    /// A consumer's dead letters: list, show, replay.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// Serves the web console: the overview, dead messages, consumers'
    /// holds and lag, verify; read-only unless --allow-changes.
    #[command(long_about = help::CONSOLE)]
    Console(ConsoleArgs),
}

/// Dead messages.
#[derive(Debug, Subcommand)]
pub(crate) enum Dead {
    /// The oldest dead messages, why, and what waits behind each.
    #[command(long_about = help::DEAD_LIST)]
    List {
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// The most recently skipped messages instead.
        #[arg(long)]
        skipped: bool,
    },
    /// One message: envelope, headers, payload, last error, what waits
    /// behind it.
    #[command(long_about = help::DEAD_SHOW)]
    Show {
        /// The message id.
        id: MessageId,
    },
    /// Puts dead messages back to pending, attempts reset.
    #[command(long_about = help::DEAD_REQUEUE)]
    Requeue {
        /// These messages.
        ids: Vec<MessageId>,
        /// Every dead message of this event name.
        #[arg(long, conflicts_with_all = ["ids", "all"])]
        event: Option<String>,
        /// Every dead message.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
        /// Do it without asking.
        #[arg(long, short)]
        yes: bool,
    },
    /// Marks a dead message as deliberately not published: its aggregate
    /// goes on.
    #[command(long_about = help::DEAD_SKIP)]
    Skip {
        /// The message id.
        id: MessageId,
        /// Why (kept on the row).
        #[arg(long)]
        reason: Option<String>,
        /// Who (kept on the row; default: $USER@host).
        #[arg(long)]
        by: Option<String>,
        /// Do it without asking.
        #[arg(long, short)]
        yes: bool,
    },
}

/// `outbox purge`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct PurgeArgs {
    /// Delete published (and skipped) messages settled longer ago than
    /// this (`7d`, `12h`, `90min`).
    #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration, required = true)]
    pub(crate) published_before: Option<Duration>,
    #[command(flatten)]
    pub(crate) run: PurgeRun,
    #[command(subcommand)]
    pub(crate) inbox: Option<PurgeInbox>,
}

/// How a purge runs.
#[derive(Debug, Args)]
pub(crate) struct PurgeRun {
    /// Rows per DELETE statement.
    #[arg(long, default_value_t = 1000)]
    pub(crate) batch_size: u32,
    /// Do it without asking.
    #[arg(long, short)]
    pub(crate) yes: bool,
}

/// `outbox purge inbox`.
#[derive(Debug, Subcommand)]
pub(crate) enum PurgeInbox {
    /// Delete a consumer's inbox records (the "already processed" marks)
    /// older than AGE; a redelivery older than that is applied again.
    Inbox {
        /// The consumer.
        #[arg(long)]
        consumer: String,
        /// Processed longer ago than this (`7d`, `12h`).
        #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
        before: Duration,
        #[command(flatten)]
        run: PurgeRun,
    },
}

/// The command line with the environment and exit codes after every help
/// page, subcommands' included.
pub(crate) fn command() -> clap::Command {
    fn with_after_help(command: clap::Command) -> clap::Command {
        command
            .after_help(help::AFTER_HELP)
            .mut_subcommands(with_after_help)
    }
    with_after_help(<Cli as clap::CommandFactory>::command())
}

/// Parses the process's arguments (exiting with clap's message and code 2
/// on bad usage).
pub(crate) fn parse() -> Cli {
    let matches = command().get_matches();
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|err| err.exit())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Cli;

    /// `Debug` of the parsed command line (what a `dbg!` or a log of it
    /// prints) shows none of the secrets it was given.
    #[test]
    fn debug_output_shows_no_secret() {
        const SECRETS: [&str; 4] = ["db-pass-1", "nats-pass-2", "nats-tok-3", "SUANKEYSEED4"];
        let base = [
            "outbox",
            "--database-url",
            "postgres://app:db-pass-1@db:5432/app",
            "verify",
            "--stream",
            "EVENTS",
            "--nats-url",
            "nats://u:nats-pass-2@n1:4222,nats://nats-tok-3@n2:4222",
        ];
        let variants: [&[&str]; 3] = [
            &["--nats-user", "u", "--nats-password", "nats-pass-2"],
            &["--nats-token", "nats-tok-3"],
            &["--nats-nkey", "SUANKEYSEED4"],
        ];
        for extra in variants {
            let args = base.iter().chain(extra).copied();
            let cli = Cli::try_parse_from(args).expect("the arguments parse");
            let shown = format!("{cli:?} {cli:#?}");
            for secret in SECRETS {
                assert!(!shown.contains(secret), "{secret} in {shown}");
            }
            assert!(shown.contains("<redacted>"), "{shown}");
        }
    }
}
