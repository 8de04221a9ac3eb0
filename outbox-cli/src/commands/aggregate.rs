//! `outbox aggregate TYPE ID`: one aggregate's unsettled messages and what
//! holds them back.

use txoutbox_sea_orm::Outbox;

use crate::error::CliError;
use crate::render;

pub(super) async fn run(
    outbox: &Outbox,
    aggregate_type: &str,
    aggregate_id: &str,
    limit: u32,
    json: bool,
) -> Result<(), CliError> {
    let queue = outbox
        .store()
        .aggregate_queue(aggregate_type, aggregate_id, limit)
        .await?;
    print!("{}", render::aggregate(&queue, json));
    Ok(())
}
