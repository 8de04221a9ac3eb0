//! Consumers: lag and held aggregates; releasing one after a confirmation.

use std::time::Duration;

use axum::Form;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::Response;
use txoutbox_core::consumer::{Hold, Release};
use txoutbox_sea_orm::Inbox;

use super::{Ctx, field};
use crate::pages::consumers::{ConsumerView, Lag};
use crate::pages::{self, Section};
use crate::state::ConsumerSpec;

/// How long the consumer info may take before the page says "unknown".
const LAG_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) async fn list(ctx: Ctx) -> Response {
    let views =
        futures::future::join_all(ctx.state.consumers.iter().map(|spec| view(&ctx, spec))).await;
    let body = pages::consumers::list(&ctx.session, &views, ctx.can_change());
    ctx.page("Consumers", Section::Consumers, body)
}

async fn view(ctx: &Ctx, spec: &ConsumerSpec) -> ConsumerView {
    let holds = async {
        let inbox = Inbox::new(&ctx.state.outbox, spec.name.clone())?;
        inbox.holds().await
    };
    let (lag, holds) = futures::join!(lag(ctx, spec), holds);
    ConsumerView {
        name: spec.name.clone(),
        stream: spec.stream.clone(),
        lag,
        holds: holds.map_err(|err| txoutbox_core::ErrorChain(&err).to_string()),
    }
}

/// The consumer's info from NATS, if the console has a connection and
/// knows its stream.
async fn lag(ctx: &Ctx, spec: &ConsumerSpec) -> Option<Result<Lag, String>> {
    let jetstream = ctx.state.jetstream.as_ref()?;
    let stream = spec.stream.as_ref()?;
    let ask = async {
        let stream = jetstream
            .get_stream(stream)
            .await
            .map_err(|e| format!("stream {stream}: {e}"))?;
        stream
            .consumer_info(&spec.name)
            .await
            .map_err(|e| format!("consumer {}: {e}", spec.name))
    };
    Some(match tokio::time::timeout(LAG_TIMEOUT, ask).await {
        Ok(Ok(info)) => Ok(Lag {
            pending: info.num_pending,
            ack_pending: info.num_ack_pending,
            redelivered: info.num_redelivered,
            delivered: info.delivered.stream_sequence,
        }),
        Ok(Err(err)) => Err(err),
        Err(_) => Err(format!("NATS did not answer within {LAG_TIMEOUT:?}")),
    })
}

/// The hold `fields` name for `consumer`, or the page to answer instead.
async fn find_hold(
    ctx: &Ctx,
    consumer: &str,
    fields: &[(String, String)],
) -> Result<(Inbox, Hold, Release), Response> {
    if !ctx.state.consumers.iter().any(|c| c.name == consumer) {
        return Err(ctx.not_found(
            Section::Consumers,
            &format!("This console does not show consumer {consumer}."),
        ));
    }
    let how = match field(fields, "how").and_then(Release::parse) {
        Some(how) => how,
        None => return Err(ctx.not_found(Section::Consumers, "Say how: retry or skip.")),
    };
    let (Some(aggregate_type), Some(aggregate_id)) = (
        field(fields, "aggregate_type"),
        field(fields, "aggregate_id"),
    ) else {
        return Err(ctx.not_found(Section::Consumers, "Name the aggregate."));
    };
    let inbox = Inbox::new(&ctx.state.outbox, consumer.to_owned())
        .map_err(|err| ctx.failed(Section::Consumers, &err))?;
    let holds = inbox
        .holds()
        .await
        .map_err(|err| ctx.failed(Section::Consumers, &err))?;
    match holds
        .into_iter()
        .find(|h| h.aggregate_type == aggregate_type && h.aggregate_id == aggregate_id)
    {
        Some(hold) => Ok((inbox, hold, how)),
        None => Err(ctx.not_found(
            Section::Consumers,
            &format!("{aggregate_type}/{aggregate_id} is not held for consumer {consumer}."),
        )),
    }
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
    let (_, hold, how) = match find_hold(&ctx, &consumer, &fields).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let body =
        pages::consumers::confirm_release(&ctx.session, operator.name(), &consumer, &hold, how);
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
    let (inbox, hold, how) = match find_hold(&ctx, &consumer, &fields).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let what = format!(
        "release {}/{} of consumer {consumer} ({})",
        hold.aggregate_type,
        hold.aggregate_id,
        how.as_str()
    );
    match inbox
        .release(&hold.aggregate_type, &hold.aggregate_id, how)
        .await
    {
        Ok(released) => {
            let outcome = if released {
                "released"
            } else {
                "no longer held"
            };
            ctx.state.audit.record(&operator, &what, outcome);
            let text = if released {
                format!(
                    "{}/{} released ({}): consumer {consumer} applies what was parked, in order, within a second.",
                    hold.aggregate_type,
                    hold.aggregate_id,
                    how.as_str()
                )
            } else {
                format!(
                    "{}/{} was no longer held.",
                    hold.aggregate_type, hold.aggregate_id
                )
            };
            ctx.still(
                StatusCode::OK,
                "Done",
                Section::Consumers,
                pages::status::result(&ctx.session, "good", &text, "/consumers"),
            )
        }
        Err(err) => {
            ctx.state.audit.record(&operator, &what, "failed");
            ctx.failed(Section::Consumers, &err)
        }
    }
}
