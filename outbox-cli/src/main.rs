//! `outbox`: what an operator needs at 3 a.m. without writing SQL.
//!
//! ```text
//! outbox status                         pending, leased, dead, oldest pending age, per event
//! outbox dead list [--limit N]          dead messages: why, and what waits behind each
//! outbox dead requeue (ID...|--event NAME|--all) --yes
//! outbox holds --consumer NAME          a consumer's aggregates held behind a message it could not apply
//! outbox release --consumer NAME TYPE ID [--skip] --yes
//! outbox verify --stream NAME [--since 1h] [--pending-older-than 5m]
//!                                       the table against the stream; exit 1 on a discrepancy
//! outbox stream ensure --stream NAME --subjects 'events.>' [--replicas N] [--duplicate-window 2m]
//! outbox dlq list --consumer NAME       a consumer's dead letters
//! outbox dlq show --consumer NAME SEQ
//! outbox dlq replay --consumer NAME SEQ... --yes
//! ```
//!
//! Connects with `DATABASE_URL` (PostgreSQL, MariaDB/MySQL, SQLite);
//! `--table` and `--inbox-table` for non-default tables; `--json` on every
//! read command. The broker commands connect with `NATS_URL` (and
//! `NATS_CREDS`, `NATS_NKEY`, `NATS_TOKEN`, `NATS_USER`/`NATS_PASSWORD`,
//! `--nats-tls`, `NATS_CA`, `NATS_CERT`/`NATS_KEY`).

mod broker;
mod commands;
mod dlq;
mod nats;
mod render;
mod stream;
mod verify;

use std::process::ExitCode;

use clap::Parser;

use commands::Cli;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(cli).await {
        Ok(output) => {
            print!("{output}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            if let Some(output) = err.output() {
                print!("{output}");
            }
            eprintln!("outbox: {err}");
            ExitCode::FAILURE
        }
    }
}
