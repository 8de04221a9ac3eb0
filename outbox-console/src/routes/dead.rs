//! Dead messages: list, show, and requeue or skip them (one, selected, by
//! event, all) after a confirmation.

use axum::Form;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::Response;
use txoutbox_core::MessageId;
use txoutbox_core::redact::redact_fields;
use txoutbox_core::store::{DeadSelector, OutboxAdmin, OutboxStore, SkipNote};
use txoutbox_sea_orm::admin::MessageState;

use super::{Ctx, field};
use crate::pages::dead::Planned;
use crate::pages::{self, Section};

/// Dead messages the list shows at most.
const LISTED: u32 = 200;
/// Skipped messages the list shows at most.
const SKIPPED_LISTED: u32 = 20;
/// Messages behind a dead one its page lists at most.
const SHOWN_BEHIND: u32 = 10;

pub(super) async fn list(ctx: Ctx) -> Response {
    let store = &ctx.state.store;
    let read = async {
        let dead = store.dead_messages(LISTED).await?;
        let stats = store.stats().await?;
        let skipped = store.skipped_messages(SKIPPED_LISTED).await?;
        Ok::<_, txoutbox_core::StoreError>((dead, stats, skipped))
    };
    let (dead, stats, skipped) = match read.await {
        Ok(read) => read,
        Err(err) => return ctx.failed(Section::Dead, &err),
    };
    let body = pages::dead::list(
        &ctx.session,
        &dead,
        &stats.by_event,
        &skipped,
        ctx.can_change(),
    );
    ctx.page(
        format!("Dead messages ({})", stats.dead),
        Section::Dead,
        body,
    )
}

pub(super) async fn show(ctx: Ctx, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<MessageId>() else {
        return ctx.not_found(Section::Dead, "That is not a message id.");
    };
    let store = &ctx.state.store;
    let message = match store.message(id).await {
        Ok(Some(message)) => message,
        Ok(None) => return ctx.not_found(Section::Dead, &format!("No message {id} in the table.")),
        Err(err) => return ctx.failed(Section::Dead, &err),
    };
    let behind = match store.waiting_behind(&message, SHOWN_BEHIND).await {
        Ok(behind) => behind,
        Err(err) => return ctx.failed(Section::Dead, &err),
    };
    let sensitive = &ctx.state.sensitive;
    let headers = message
        .headers
        .as_deref()
        .map(|headers| redact_fields(headers, sensitive));
    let payload = redact_fields(&message.payload, sensitive);
    let body = pages::dead::show(
        &ctx.session,
        &message,
        headers.as_deref(),
        &payload,
        &behind,
        ctx.can_change(),
    );
    ctx.page(
        format!("Message {} #{}", message.event_name, message.sequence),
        Section::Dead,
        body,
    )
}

/// The ids named by the `id` fields; `None` if one is not an id.
fn ids(fields: &[(String, String)]) -> Option<Vec<MessageId>> {
    fields
        .iter()
        .filter(|(key, _)| key == "id")
        .map(|(_, value)| value.parse().ok())
        .collect()
}

/// What a requeue or skip of `fields` will touch.
async fn plan(ctx: &Ctx, fields: &[(String, String)]) -> Result<Planned, Response> {
    let store = &ctx.state.store;
    let action = match field(fields, "action") {
        Some("requeue") => "requeue",
        Some("skip") => "skip",
        _ => return Err(ctx.not_found(Section::Dead, "Say what to do: requeue or skip.")),
    };
    let Some(ids) = ids(fields) else {
        return Err(ctx.not_found(Section::Dead, "That is not a message id."));
    };
    if !ids.is_empty() {
        let mut lines = Vec::new();
        let mut selector = Vec::new();
        for id in ids {
            match store.message(id).await {
                Ok(Some(message)) if message.state == MessageState::Dead => {
                    let waiting = match store.waiting_behind(&message, 0).await {
                        Ok(queue) => queue.unsettled,
                        Err(err) => return Err(ctx.failed(Section::Dead, &err)),
                    };
                    lines.push(format!(
                        "{} #{} of {}/{} ({waiting} message(s) wait behind it)",
                        message.event_name,
                        message.sequence,
                        message.aggregate_type,
                        message.aggregate_id
                    ));
                    selector.push(("id", id.to_string()));
                }
                Ok(Some(message)) => lines.push(format!(
                    "{id} is not dead (it is {}): left alone",
                    message.state.name()
                )),
                Ok(None) => lines.push(format!("{id} is not in the table: left alone")),
                Err(err) => return Err(ctx.failed(Section::Dead, &err)),
            }
        }
        let n = selector.len();
        return Ok(Planned {
            action,
            summary: format!("{} {n} dead message(s)?", capitalised(action)),
            selector,
            lines,
        });
    }
    if action == "skip" {
        return Err(ctx.not_found(
            Section::Dead,
            "Skipping is one message at a time, or the messages selected: select them.",
        ));
    }
    let stats = match store.stats().await {
        Ok(stats) => stats,
        Err(err) => return Err(ctx.failed(Section::Dead, &err)),
    };
    if let Some(event) = field(fields, "event") {
        let n = stats
            .by_event
            .iter()
            .find(|e| e.event_name == event)
            .map_or(0, |e| e.dead);
        return Ok(Planned {
            action,
            summary: format!("Requeue {n} dead {event} message(s)?"),
            selector: vec![("event", event.to_owned())],
            lines: Vec::new(),
        });
    }
    if field(fields, "all") == Some("yes") {
        return Ok(Planned {
            action,
            summary: format!("Requeue all {} dead message(s)?", stats.dead),
            selector: vec![("all", "yes".to_owned())],
            lines: Vec::new(),
        });
    }
    Err(ctx.not_found(
        Section::Dead,
        "Name the messages: select some, an event, or all.",
    ))
}

fn capitalised(action: &str) -> &'static str {
    if action == "skip" { "Skip" } else { "Requeue" }
}

pub(super) async fn confirm(ctx: Ctx, Query(fields): Query<Vec<(String, String)>>) -> Response {
    let operator = match ctx.operator_for_form() {
        Ok(operator) => operator,
        Err(refusal) => return ctx.refused(Section::Dead, &refusal),
    };
    let planned = match plan(&ctx, &fields).await {
        Ok(planned) => planned,
        Err(response) => return response,
    };
    let body = pages::dead::confirm(&ctx.session, operator.name(), &planned);
    ctx.still(StatusCode::OK, "Confirm", Section::Dead, body)
}

pub(super) async fn requeue(ctx: Ctx, Form(fields): Form<Vec<(String, String)>>) -> Response {
    let operator = match ctx.authorise(field(&fields, "csrf").unwrap_or("")) {
        Ok(operator) => operator,
        Err(refusal) => return ctx.refused(Section::Dead, &refusal),
    };
    let (selector, what) = match (ids(&fields), field(&fields, "event"), field(&fields, "all")) {
        (Some(ids), _, _) if !ids.is_empty() => {
            let what = format!(
                "requeue {}",
                ids.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            (DeadSelector::Ids(ids), what)
        }
        (_, Some(event), _) => (
            DeadSelector::EventName(event.to_owned()),
            format!("requeue every dead {event}"),
        ),
        (_, None, Some("yes")) => (DeadSelector::All, "requeue every dead message".to_owned()),
        _ => return ctx.not_found(Section::Dead, "Name the messages to requeue."),
    };
    match ctx.state.store.requeue_dead(selector).await {
        Ok(requeued) => {
            let outcome = format!("{requeued} requeued");
            ctx.state.audit.record(&operator, &what, &outcome);
            done(
                &ctx,
                &format!("{requeued} dead message(s) requeued: they are published next, in order."),
            )
        }
        Err(err) => {
            ctx.state.audit.record(&operator, &what, "failed");
            ctx.failed(Section::Dead, &err)
        }
    }
}

pub(super) async fn skip(ctx: Ctx, Form(fields): Form<Vec<(String, String)>>) -> Response {
    let operator = match ctx.authorise(field(&fields, "csrf").unwrap_or("")) {
        Ok(operator) => operator,
        Err(refusal) => return ctx.refused(Section::Dead, &refusal),
    };
    let Some(ids) = ids(&fields).filter(|ids| !ids.is_empty()) else {
        return ctx.not_found(Section::Dead, "Name the messages to skip.");
    };
    let reason = field(&fields, "reason").map(str::trim).unwrap_or("");
    if reason.is_empty() {
        return ctx.still(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Say why",
            Section::Dead,
            pages::status::result(
                &ctx.session,
                "bad",
                "A skip needs a reason: it is kept on the message with your name.",
                "/dead",
            ),
        );
    }
    let note = SkipNote::by(operator.name()).because(reason);
    let mut skipped = 0;
    for id in &ids {
        match ctx.state.store.skip_dead(*id, &note).await {
            Ok(true) => {
                skipped += 1;
                ctx.state
                    .audit
                    .record(&operator, &format!("skip {id} ({reason})"), "skipped");
            }
            Ok(false) => ctx.state.audit.record(
                &operator,
                &format!("skip {id} ({reason})"),
                "not dead any more: left alone",
            ),
            Err(err) => return ctx.failed(Section::Dead, &err),
        }
    }
    done(
        &ctx,
        &format!(
            "{skipped} of {} message(s) skipped by {operator}: the messages behind them are published next, in order.",
            ids.len()
        ),
    )
}

fn done(ctx: &Ctx, text: &str) -> Response {
    ctx.still(
        StatusCode::OK,
        "Done",
        Section::Dead,
        pages::status::result(&ctx.session, "good", text, "/dead"),
    )
}
