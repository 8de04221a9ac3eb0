//! `outbox purge --published-before AGE` and `outbox purge inbox --consumer
//! NAME --before AGE`: bounded batches, a progress bar on a terminal, plain
//! lines otherwise.

use txoutbox_sea_orm::Inbox;

use crate::confirm::confirm;
use crate::context::Context;
use crate::error::CliError;
use crate::opt::{PurgeArgs, PurgeInbox};
use crate::render;
use crate::render::purge::Progress;

pub(super) async fn run(context: &Context, args: PurgeArgs) -> Result<(), CliError> {
    let outbox = &context.outbox().await?;
    match (args.inbox, args.published_before) {
        (
            Some(PurgeInbox::Inbox {
                consumer,
                before,
                run,
            }),
            _,
        ) => {
            let inbox = Inbox::new(outbox, consumer.clone())?;
            let total = inbox.count_processed_before(before).await?;
            let what = format!(
                "delete {total} inbox record(s) of consumer {consumer} processed more than {} ago",
                humantime::format_duration(before)
            );
            if total == 0 {
                print!("{}", render::purge::no_inbox_records(&consumer));
                return Ok(());
            }
            confirm(&what, run.yes)?;
            let progress = Progress::new(total, "inbox records");
            let purged = inbox
                .purge_reporting(before, run.batch_size, |done| progress.update(done))
                .await?;
            progress.finish(purged);
        }
        (None, Some(before)) => {
            let store = outbox.store();
            let total = store.count_published(before).await?;
            if total == 0 {
                print!("{}", render::purge::no_published(before));
                return Ok(());
            }
            confirm(
                &format!(
                    "delete {total} published or skipped message(s) settled more than {} ago",
                    humantime::format_duration(before)
                ),
                args.run.yes,
            )?;
            let progress = Progress::new(total, "messages");
            let purged = store
                .purge_published_reporting(before, args.run.batch_size, |done| {
                    progress.update(done)
                })
                .await?;
            progress.finish(purged);
        }
        (None, None) => {
            return Err(CliError::Usage(
                "say what to purge: --published-before AGE, or inbox --consumer NAME --before AGE"
                    .to_owned(),
            ));
        }
    }
    Ok(())
}
