//! Releasing many held aggregates of a consumer at once: the selected
//! ones (`hold` fields, each the message an aggregate is held behind), or
//! all of them not released yet (`all=yes`, narrowed by `aggregate_type`
//! and `reason`), after a confirmation that shows how many; recorded in
//! the audit log with the count and what was chosen.

use axum::Form;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::Response;
use txoutbox_core::MessageId;
use txoutbox_core::consumer::{Hold, Release};
use txoutbox_sea_orm::Inbox;
use txoutbox_sea_orm::inbox::HoldFilter;

use super::{Ctx, field};
use crate::pages::bulk_release::PlannedRelease;
use crate::pages::{self, Section};

/// Holds the confirmation lists by name at most.
const LISTED: u32 = 20;
/// Holds a release of all takes per statement.
const BATCH: u32 = 100;

/// What a bulk release takes.
enum Chosen {
    /// These holds, those of them still held and not released.
    Selected(Vec<MessageId>),
    /// Every hold the filter keeps.
    All(HoldFilter),
}

/// The bulk release `fields` ask for, or the page to answer instead.
async fn plan(
    ctx: &Ctx,
    consumer: &str,
    fields: &[(String, String)],
) -> Result<(Inbox, Chosen, PlannedRelease), Response> {
    if !ctx.state.consumers.iter().any(|c| c.name == consumer) {
        return Err(ctx.not_found(
            Section::Consumers,
            &format!("This console does not show consumer {consumer}."),
        ));
    }
    let Some(how) = field(fields, "how").and_then(Release::parse) else {
        return Err(ctx.not_found(Section::Consumers, "Say how: retry or skip."));
    };
    let inbox = Inbox::new(&ctx.state.outbox, consumer.to_owned())
        .map_err(|err| ctx.failed(Section::Consumers, &err))?;
    let failed = |err: txoutbox_sea_orm::OutboxError| ctx.failed(Section::Consumers, &err);
    let (chosen, count, what, first, selector) = if field(fields, "all") == Some("yes") {
        let filter = filter_of(fields);
        let count = inbox.count_holds(&filter).await.map_err(failed)?;
        let first = inbox
            .holds_matching(&filter, LISTED)
            .await
            .map_err(failed)?;
        let mut selector = vec![("all", "yes".to_owned())];
        if let Some(aggregate_type) = filter.aggregate_type_is() {
            selector.push(("aggregate_type", aggregate_type.to_owned()));
        }
        if let Some(reason) = filter.reason_text() {
            selector.push(("reason", reason.to_owned()));
        }
        let what = filter.to_string();
        (Chosen::All(filter), count, what, first, selector)
    } else {
        let Some(named) = selected(fields) else {
            return Err(ctx.not_found(Section::Consumers, "That is not a hold's message id."));
        };
        if named.is_empty() {
            return Err(ctx.not_found(
                Section::Consumers,
                "Select the held aggregates to release, or release all.",
            ));
        }
        let held: Vec<Hold> = inbox
            .holds()
            .await
            .map_err(failed)?
            .into_iter()
            .filter(|hold| hold.release.is_none() && named.contains(&hold.message_id))
            .collect();
        let ids: Vec<MessageId> = held.iter().map(|hold| hold.message_id).collect();
        let selector = ids.iter().map(|id| ("hold", id.to_string())).collect();
        let what = format!("{} selected", named.len());
        let first = held.into_iter().take(LISTED as usize).collect();
        (
            Chosen::Selected(ids.clone()),
            ids.len() as u64,
            what,
            first,
            selector,
        )
    };
    let planned = PlannedRelease {
        consumer: consumer.to_owned(),
        how,
        count,
        what,
        lines: first.iter().map(line).collect(),
        names: first
            .iter()
            .map(|hold| format!("{}/{}", hold.aggregate_type, hold.aggregate_id))
            .collect(),
        selector,
    };
    Ok((inbox, chosen, planned))
}

/// The filter of a release of all: `aggregate_type` and `reason`, when
/// filled in.
fn filter_of(fields: &[(String, String)]) -> HoldFilter {
    let given = |name| field(fields, name).map(str::trim).filter(|v| !v.is_empty());
    let mut filter = HoldFilter::all();
    if let Some(aggregate_type) = given("aggregate_type") {
        filter = filter.aggregate_type(aggregate_type);
    }
    if let Some(reason) = given("reason") {
        filter = filter.reason_contains(reason);
    }
    filter
}

/// The holds named by the `hold` fields; `None` if one is not an id.
fn selected(fields: &[(String, String)]) -> Option<Vec<MessageId>> {
    fields
        .iter()
        .filter(|(key, _)| key == "hold")
        .map(|(_, value)| value.parse().ok())
        .collect()
}

fn line(hold: &Hold) -> String {
    format!(
        "{}/{} held behind {} ({} parked behind it): {}",
        hold.aggregate_type, hold.aggregate_id, hold.event_name, hold.waiting, hold.reason
    )
}

pub(super) async fn confirm(
    ctx: Ctx,
    Path(consumer): Path<String>,
    Query(fields): Query<Vec<(String, String)>>,
) -> Response {
    let operator = match ctx.operator_for_form() {
        Ok(operator) => operator,
        Err(refusal) => return ctx.refused(Section::Consumers, &refusal),
    };
    let (_, _, planned) = match plan(&ctx, &consumer, &fields).await {
        Ok(planned) => planned,
        Err(response) => return response,
    };
    if planned.count == 0 {
        return done(
            &ctx,
            "warn",
            &format!(
                "No held aggregate of consumer {consumer} left to release ({}).",
                planned.what
            ),
        );
    }
    let body = pages::bulk_release::confirm(&ctx.session, operator.name(), &planned);
    ctx.still(StatusCode::OK, "Confirm", Section::Consumers, body)
}

pub(super) async fn release(
    ctx: Ctx,
    Path(consumer): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let operator = match ctx.authorise(field(&fields, "csrf").unwrap_or("")) {
        Ok(operator) => operator,
        Err(refusal) => return ctx.refused(Section::Consumers, &refusal),
    };
    let (inbox, chosen, planned) = match plan(&ctx, &consumer, &fields).await {
        Ok(planned) => planned,
        Err(response) => return response,
    };
    let how = planned.how;
    let what = match &chosen {
        Chosen::Selected(ids) => format!(
            "release {} selected held aggregate(s) of consumer {consumer} ({}): {}{}",
            ids.len(),
            how.as_str(),
            planned.names.join(", "),
            if ids.len() > planned.names.len() {
                ", …"
            } else {
                ""
            }
        ),
        Chosen::All(filter) => format!(
            "release all held aggregates of consumer {consumer} ({filter}) ({})",
            how.as_str()
        ),
    };
    let released = match chosen {
        Chosen::Selected(ids) => inbox.release_many(&ids, how).await,
        Chosen::All(filter) => inbox.release_all(&filter, how, BATCH).await,
    };
    match released {
        Ok(released) => {
            ctx.state
                .audit
                .record(&operator, &what, &format!("{released} released"));
            done(
                &ctx,
                "good",
                &format!(
                    "{released} held aggregate(s) of consumer {consumer} released ({}): it applies what was parked, in order, within a second or so.",
                    how.as_str()
                ),
            )
        }
        Err(err) => {
            ctx.state.audit.record(&operator, &what, "failed");
            ctx.failed(Section::Consumers, &err)
        }
    }
}

fn done(ctx: &Ctx, kind: &str, text: &str) -> Response {
    ctx.still(
        StatusCode::OK,
        "Done",
        Section::Consumers,
        pages::status::result(&ctx.session, kind, text, "/consumers"),
    )
}
