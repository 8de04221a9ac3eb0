//! `outbox holds` and `outbox release`: a consumer's aggregates held behind a
//! message it could not apply; releasing one, or every one a filter keeps.

use txoutbox_core::consumer::Release;
use txoutbox_sea_orm::Inbox;
use txoutbox_sea_orm::inbox::HoldFilter;

use crate::confirm::confirm;
use crate::context::Context;
use crate::error::CliError;
use crate::opt::{ReleaseArgs, ReleaseFilter};
use crate::render;

/// How many of the holds `release --all` takes it lists before asking.
const PREVIEWED: u32 = 5;

pub(super) async fn list(context: &Context, consumer: String) -> Result<(), CliError> {
    let outbox = context.outbox().await?;
    let inbox = Inbox::new(&outbox, consumer)?;
    print!(
        "{}",
        render::holds::list(&inbox.holds().await?, context.json())
    );
    Ok(())
}

pub(super) async fn release(context: &Context, args: ReleaseArgs) -> Result<(), CliError> {
    let how = if args.skip {
        Release::Skip
    } else {
        Release::Retry
    };
    let outbox = context.outbox().await?;
    let inbox = Inbox::new(&outbox, args.consumer.clone())?;
    match (args.all, args.aggregate_type, args.aggregate_id) {
        (true, _, _) => {
            let filter = filter_of(&args.filter);
            release_all(
                &inbox,
                &args.consumer,
                &filter,
                how,
                args.batch_size,
                args.yes,
            )
            .await
        }
        (false, Some(aggregate_type), Some(aggregate_id)) => {
            release_one(
                &inbox,
                &args.consumer,
                &aggregate_type,
                &aggregate_id,
                how,
                args.yes,
            )
            .await
        }
        _ => Err(CliError::Usage(
            "name the aggregate (TYPE ID) or release --all".to_owned(),
        )),
    }
}

/// The filter the command line names, ages counted back from now.
fn filter_of(args: &ReleaseFilter) -> HoldFilter {
    let now = chrono::Utc::now();
    let mut filter = HoldFilter::all();
    if let Some(aggregate_type) = &args.aggregate_type {
        filter = filter.aggregate_type(aggregate_type);
    }
    if let Some(text) = &args.reason {
        filter = filter.reason_contains(text);
    }
    if let Some(when) = args.held_before {
        filter = filter.held_before(when.resolve(now));
    }
    if let Some(when) = args.held_after {
        filter = filter.held_after(when.resolve(now));
    }
    filter
}

async fn release_all(
    inbox: &Inbox,
    consumer: &str,
    filter: &HoldFilter,
    how: Release,
    batch_size: u32,
    yes: bool,
) -> Result<(), CliError> {
    let total = inbox.count_holds(filter).await?;
    if total == 0 {
        print!("{}", render::holds::none_to_release(consumer, filter));
        return Ok(());
    }
    let first = inbox.holds_matching(filter, PREVIEWED).await?;
    print!(
        "{}",
        render::holds::preview(consumer, filter, total, &first)
    );
    confirm(
        &format!(
            "release {total} held aggregate(s) of consumer {consumer} ({}: {})",
            how.as_str(),
            render::holds::what_release_does(how)
        ),
        yes,
    )?;
    let released = inbox.release_all(filter, how, batch_size).await?;
    print!("{}", render::holds::released_all(consumer, released, how));
    Ok(())
}

async fn release_one(
    inbox: &Inbox,
    consumer: &str,
    aggregate_type: &str,
    aggregate_id: &str,
    how: Release,
    yes: bool,
) -> Result<(), CliError> {
    let not_held = || {
        CliError::NotFound(format!(
            "{aggregate_type}/{aggregate_id} is not held for consumer {consumer}"
        ))
    };
    let holds = inbox.holds().await?;
    let hold = holds
        .iter()
        .find(|h| h.aggregate_type == aggregate_type && h.aggregate_id == aggregate_id)
        .ok_or_else(not_held)?;
    confirm(
        &format!(
            "release {aggregate_type}/{aggregate_id} of consumer {consumer} ({}: {} {}, {} \
             parked behind it)",
            how.as_str(),
            match how {
                Release::Retry => "apply again",
                Release::Skip => "leave unapplied",
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
        Err(not_held())
    }
}
