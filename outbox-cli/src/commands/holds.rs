//! `outbox holds` and `outbox release`: a consumer's aggregates held behind a
//! message it could not apply.

use txoutbox_core::consumer::Release;
use txoutbox_sea_orm::Inbox;

use crate::confirm::confirm;
use crate::context::Context;
use crate::error::CliError;
use crate::render;

pub(super) async fn list(context: &Context, consumer: String) -> Result<(), CliError> {
    let outbox = context.outbox().await?;
    let inbox = Inbox::new(&outbox, consumer)?;
    print!(
        "{}",
        render::holds::list(&inbox.holds().await?, context.json())
    );
    Ok(())
}

pub(super) async fn release(
    context: &Context,
    consumer: String,
    aggregate_type: &str,
    aggregate_id: &str,
    skip: bool,
    yes: bool,
) -> Result<(), CliError> {
    let outbox = context.outbox().await?;
    let how = if skip { Release::Skip } else { Release::Retry };
    let inbox = Inbox::new(&outbox, consumer.clone())?;
    let holds = inbox.holds().await?;
    let Some(hold) = holds
        .iter()
        .find(|h| h.aggregate_type == aggregate_type && h.aggregate_id == aggregate_id)
    else {
        return Err(CliError::NotFound(format!(
            "{aggregate_type}/{aggregate_id} is not held for consumer {consumer}"
        )));
    };
    confirm(
        &format!(
            "release {aggregate_type}/{aggregate_id} of consumer {consumer} ({}: {} {}, {} \
             parked behind it)",
            how.as_str(),
            if skip {
                "leave unapplied"
            } else {
                "apply again"
            },
            hold.message_id,
            hold.waiting
        ),
        yes,
    )?;
    if inbox.release(aggregate_type, aggregate_id, how).await? {
        print!(
            "{}",
            render::holds::released(aggregate_type, aggregate_id, how)
        );
        Ok(())
    } else {
        Err(CliError::NotFound(format!(
            "{aggregate_type}/{aggregate_id} is not held for consumer {consumer}"
        )))
    }
}
