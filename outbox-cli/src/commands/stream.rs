//! `outbox stream ensure`: create the outbox's stream, or verify the
//! existing one, as `StreamSpec::ensure` does at a service's start.

use txoutbox_nats::StreamSpec;
use txoutbox_nats::async_nats::jetstream::stream::StorageType;

use crate::context::Context;
use crate::error::CliError;
use crate::opt::{Storage, StreamCommand};
use crate::render;

/// Runs `outbox stream ...`.
pub(super) async fn run(context: &Context, command: StreamCommand) -> Result<(), CliError> {
    let StreamCommand::Ensure(args) = command;
    let spec = StreamSpec::new(&args.stream, args.subjects.clone())
        .replicas(args.replicas)
        .duplicate_window(args.duplicate_window)
        .max_age(args.max_age)
        .processor_lease(args.lease)
        .storage(match args.storage {
            Storage::File => StorageType::File,
            Storage::Memory => StorageType::Memory,
        });
    let jetstream = context.jetstream(&args.nats).await?;
    let ensured = spec.ensure_reporting(&jetstream).await?;
    print!("{}", render::stream::ensured(&ensured, context.json()));
    Ok(())
}
