//! `outbox aggregate TYPE ID`: one aggregate's unsettled messages and what
//! holds them back.

use crate::context::Context;
use crate::error::CliError;
use crate::render;

pub(super) async fn run(
    context: &Context,
    aggregate_type: &str,
    aggregate_id: &str,
    limit: u32,
) -> Result<(), CliError> {
    let outbox = context.outbox().await?;
    let queue = outbox
        .store()
        .aggregate_queue(aggregate_type, aggregate_id, limit)
        .await?;
    print!("{}", render::aggregate::queue(&queue, context.json()));
    Ok(())
}
