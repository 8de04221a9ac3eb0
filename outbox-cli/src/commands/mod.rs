//! [`run`]: hands each command of the command line (`crate::opt`) to its
//! own module, with the [`Context`] it connects through. Each is a thin
//! layer over one library call of `outbox-sea-orm` or `outbox-nats`, and
//! prints what `crate::render` makes of its result.

mod aggregate;
mod completions;
mod console;
mod dead;
mod dlq;
mod holds;
mod migrate;
mod purge;
mod status;
mod stream;
mod verify;

use crate::context::Context;
use crate::error::CliError;
use crate::opt::{Cli, Command};

/// Runs `cli`, printing what it finds or changes on stdout.
pub(crate) async fn run(cli: Cli) -> Result<(), CliError> {
    let Cli { target, command } = cli;
    let context = Context::new(target);
    match command {
        Command::Status { watch, blocked } => status::run(&context, watch, blocked).await,
        Command::Dead(dead) => dead::run(&context, dead).await,
        Command::Aggregate {
            aggregate_type,
            aggregate_id,
            limit,
        } => aggregate::run(&context, &aggregate_type, &aggregate_id, limit).await,
        Command::Purge(args) => purge::run(&context, args).await,
        Command::Holds { consumer } => holds::list(&context, consumer).await,
        Command::Release(args) => holds::release(&context, args).await,
        Command::Migrate => migrate::run(&context).await,
        Command::Completions { shell } => {
            completions::print(shell);
            Ok(())
        }
        Command::Verify(args) => verify::run(&context, args).await,
        Command::Stream(command) => stream::run(&context, command).await,
        Command::Dlq(command) => dlq::run(&context, command).await,
        Command::Console(args) => console::run(&context, args).await,
    }
}
