//! `outbox`: what an operator needs at 3 a.m. without writing SQL.
//!
//! ```text
//! outbox status                         pending, leased, dead, oldest pending age, per event
//! outbox dead list [--limit N]          dead messages: why, and what waits behind each
//! outbox dead requeue (ID...|--event NAME|--all) --yes
//! outbox holds --consumer NAME          a consumer's aggregates held behind a message it could not apply
//! outbox release --consumer NAME TYPE ID [--skip] --yes
//! ```
//!
//! Connects with `DATABASE_URL` (PostgreSQL, MariaDB/MySQL, SQLite);
//! `--table` and `--inbox-table` for non-default tables; `--json` on every
//! read command.

mod commands;
mod render;

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
            eprintln!("outbox: {err}");
            ExitCode::FAILURE
        }
    }
}
