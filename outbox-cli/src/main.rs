//! `outbox`: what an operator needs at 3 a.m. without writing SQL.
//!
//! ```text
//! outbox status [--watch [SECS]]        counts (delayed too), oldest due wait, per event and aggregate type, blocked aggregates
//! outbox dead list [--limit N] [--skipped]
//! outbox dead show ID                   envelope, headers, payload, last error, what waits behind it
//! outbox dead requeue (ID...|--event NAME|--all) [--yes]
//! outbox dead skip ID [--reason TEXT] [--by NAME] [--yes]
//! outbox aggregate TYPE ID              an aggregate's unsettled messages and what blocks them
//! outbox purge --published-before AGE [--yes]
//! outbox purge inbox --consumer NAME --before AGE [--yes]
//! outbox holds --consumer NAME          a consumer's aggregates held behind a message it could not apply
//! outbox release --consumer NAME TYPE ID [--skip] [--yes]
//! outbox release --consumer NAME --all [--aggregate-type T] [--reason TEXT]
//!                [--held-before WHEN] [--held-after WHEN] [--skip] [--yes]
//!                                       every held aggregate a filter keeps, oldest first
//! outbox migrate                        create or upgrade the tables
//! outbox completions SHELL
//! outbox verify --stream NAME [--since 1h] [--pending-older-than 5m]
//!                                       the table against the stream; exit 1 on a discrepancy
//! outbox stream ensure --stream NAME --subjects 'events.>' [--replicas N] [--duplicate-window 2m]
//! outbox dlq list --consumer NAME       a consumer's dead letters
//! outbox dlq show --consumer NAME SEQ
//! outbox dlq replay --consumer NAME SEQ... [--yes]
//! outbox console [--listen 127.0.0.1:8089] [--stream NAME] [--consumer NAME]... [--allow-changes [--operator NAME]]
//!                                       the web console; loopback only unless --allow-public
//! ```
//!
//! Connects with `DATABASE_URL` (PostgreSQL, MariaDB/MySQL, SQLite);
//! `--table` and `--inbox-table` for non-default tables; `--json` on every
//! read command. Commands that change something ask on a terminal, and need
//! `--yes` elsewhere. Each command is a thin layer over a library call of
//! `outbox-sea-orm` (`SeaOrmOutboxStore`, `Inbox`).
//! The broker commands connect with `NATS_URL` (and `NATS_CREDS`,
//! `NATS_NKEY`, `NATS_TOKEN`, `NATS_USER`/`NATS_PASSWORD`, `--nats-tls`,
//! `NATS_CA`, `NATS_CERT`/`NATS_KEY`).

mod commands;
mod confirm;
mod context;
mod error;
mod help;
mod opt;
mod render;

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // A bug is still one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("outbox: internal error (please report): {info}");
    }));
    let cli = opt::parse();
    match commands::run(cli).await {
        Ok(()) => ExitCode::from(error::EXIT_OK),
        Err(err) => {
            if let Some(output) = err.output() {
                print!("{output}");
            }
            eprintln!("outbox: {err}");
            err.exit_code()
        }
    }
}
