//! `outbox dead list|show|requeue|skip`.

use txoutbox_core::MessageId;
use txoutbox_core::store::{DeadSelector, OutboxAdmin, OutboxStore, SkipNote};
use txoutbox_sea_orm::admin::{MessageState, StoredMessage};
use txoutbox_sea_orm::{Outbox, SeaOrmOutboxStore};

use crate::confirm::{confirm, operator};
use crate::context::Context;
use crate::error::CliError;
use crate::opt::Dead;
use crate::render;

/// How many of the messages behind a dead one `dead show` lists.
const SHOWN_BEHIND: u32 = 10;

pub(super) async fn run(context: &Context, command: Dead) -> Result<(), CliError> {
    let outbox = &context.outbox().await?;
    let json = context.json();
    let store = outbox.store();
    match command {
        Dead::List {
            limit,
            skipped: false,
        } => print!(
            "{}",
            render::dead::list(&store.dead_messages(limit).await?, json)
        ),
        Dead::List {
            limit,
            skipped: true,
        } => print!(
            "{}",
            render::dead::skipped(&store.skipped_messages(limit).await?, json)
        ),
        Dead::Show { id } => {
            let message = find(&store, id, outbox).await?;
            let behind = store.waiting_behind(&message, SHOWN_BEHIND).await?;
            print!("{}", render::dead::show(&message, &behind, json));
        }
        Dead::Requeue {
            ids,
            event,
            all,
            yes,
        } => requeue(outbox, &store, ids, event, all, yes).await?,
        Dead::Skip {
            id,
            reason,
            by,
            yes,
        } => skip(outbox, &store, id, reason, by, yes).await?,
    }
    Ok(())
}

/// The message `id`, or a clear error.
async fn find(
    store: &SeaOrmOutboxStore,
    id: MessageId,
    outbox: &Outbox,
) -> Result<StoredMessage, CliError> {
    store.message(id).await?.ok_or_else(|| {
        CliError::NotFound(format!(
            "no message {id} in table {}",
            outbox.config().table()
        ))
    })
}

async fn requeue(
    outbox: &Outbox,
    store: &SeaOrmOutboxStore,
    ids: Vec<MessageId>,
    event: Option<String>,
    all: bool,
    yes: bool,
) -> Result<(), CliError> {
    let (selector, what) = match (ids.is_empty(), event, all) {
        (_, Some(event), _) => {
            let stats = store.stats().await?;
            let n = stats
                .by_event
                .iter()
                .find(|e| e.event_name == event)
                .map_or(0, |e| e.dead);
            (
                DeadSelector::EventName(event.clone()),
                format!("requeue {n} dead {event} message(s)"),
            )
        }
        (true, None, true) => (
            DeadSelector::All,
            format!("requeue all {} dead message(s)", store.stats().await?.dead),
        ),
        (false, None, false) => {
            for id in &ids {
                must_be_dead(&find(store, *id, outbox).await?)?;
            }
            let what = format!("requeue {} dead message(s)", ids.len());
            (DeadSelector::Ids(ids), what)
        }
        _ => {
            return Err(CliError::Usage(
                "name the messages: IDs, --event NAME or --all".to_owned(),
            ));
        }
    };
    if what.contains(" 0 dead") {
        print!("{}", render::dead::nothing_to_requeue());
        return Ok(());
    }
    confirm(&what, yes)?;
    let requeued = store.requeue_dead(selector).await?;
    print!("{}", render::dead::requeued(requeued));
    Ok(())
}

async fn skip(
    outbox: &Outbox,
    store: &SeaOrmOutboxStore,
    id: MessageId,
    reason: Option<String>,
    by: Option<String>,
    yes: bool,
) -> Result<(), CliError> {
    let message = find(store, id, outbox).await?;
    must_be_dead(&message)?;
    let waiting = store.waiting_behind(&message, 0).await?.unsettled;
    let aggregate = format!("{}/{}", message.aggregate_type, message.aggregate_id);
    confirm(
        &format!(
            "skip dead message {id} ({} #{} of {aggregate}; {waiting} message(s) wait behind it)",
            message.event_name, message.sequence
        ),
        yes,
    )?;
    let mut note = SkipNote::by(by.unwrap_or_else(operator));
    if let Some(reason) = reason {
        note = note.because(reason);
    }
    if !store.skip_dead(id, &note).await? {
        return Err(CliError::NotFound(format!(
            "message {id} is no longer dead (requeued or skipped meanwhile)"
        )));
    }
    print!("{}", render::dead::skipped_one(&message, &note, waiting));
    Ok(())
}

fn must_be_dead(message: &StoredMessage) -> Result<(), CliError> {
    match message.state {
        MessageState::Dead => Ok(()),
        ref other => Err(CliError::NotFound(format!(
            "message {} is not dead (it is {})",
            message.id,
            other.name()
        ))),
    }
}
