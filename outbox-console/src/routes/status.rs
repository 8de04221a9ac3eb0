//! The overview, verify, health and recent-actions pages.

use std::time::Instant;

use axum::Form;
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;
use txoutbox_nats::{VerifyRequest, verify_stream};

use super::{Ctx, field};
use crate::pages::{self, Section};
use crate::state::VerifyRecord;

/// Blocked aggregates the overview lists at most.
const BLOCKED_SHOWN: u32 = 50;

pub(super) async fn overview(ctx: Ctx) -> Response {
    let store = &ctx.state.store;
    let overview = match store.overview(BLOCKED_SHOWN).await {
        Ok(overview) => overview,
        Err(err) => return ctx.failed(Section::Overview, &err),
    };
    let rate = store
        .published_per_minute(ctx.state.rate_minutes)
        .await
        .map_err(|err| txoutbox_core::ErrorChain(&err).to_string());
    let actions = ctx.state.audit.recent();
    let body = pages::overview::body(&ctx.session, &overview, &rate, &actions);
    ctx.page(
        format!("Outbox {}", ctx.state.outbox.config().table().as_str()),
        Section::Overview,
        body,
    )
}

pub(super) async fn verify(ctx: Ctx) -> Response {
    let last = ctx
        .state
        .last_verify
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let body = pages::status::verify(
        &ctx.session,
        ctx.state.stream.as_deref(),
        ctx.state.jetstream.is_some(),
        last.as_ref(),
        ctx.can_change(),
    );
    ctx.page("Verify against the stream", Section::Verify, body)
}

pub(super) async fn run_verify(ctx: Ctx, Form(fields): Form<Vec<(String, String)>>) -> Response {
    let operator = match ctx.authorise(field(&fields, "csrf").unwrap_or("")) {
        Ok(operator) => operator,
        Err(refusal) => return ctx.refused(Section::Verify, &refusal),
    };
    let state = &ctx.state;
    let (Some(jetstream), Some(stream)) = (&state.jetstream, &state.stream) else {
        return ctx.not_found(
            Section::Verify,
            "This console has no NATS connection or stream to verify against.",
        );
    };
    let Ok(_running) = state.verifying.try_lock() else {
        return ctx.still(
            axum::http::StatusCode::CONFLICT,
            "Verify is running",
            Section::Verify,
            pages::status::result(
                &ctx.session,
                "warn",
                "A verify run is already under way; its result will be on this page.",
                "/verify",
            ),
        );
    };
    let started = Instant::now();
    let result = verify_stream(&state.outbox, jetstream, &VerifyRequest::new(stream))
        .await
        .map_err(|err| txoutbox_core::ErrorChain(&err).to_string());
    let outcome = match &result {
        Ok(outcome) if outcome.report.is_clean() => "clean".to_owned(),
        Ok(outcome) => format!("{} discrepancies", outcome.report.discrepancies.len()),
        Err(err) => format!("failed: {err}"),
    };
    state.audit.record(
        &operator,
        &format!("verify against stream {stream}"),
        &outcome,
    );
    *state.last_verify.lock().unwrap_or_else(|e| e.into_inner()) = Some(VerifyRecord {
        at: Utc::now(),
        by: operator.name().to_owned(),
        stream: stream.clone(),
        took: started.elapsed(),
        result,
    });
    Redirect::to(&ctx.session.href("/verify")).into_response()
}

pub(super) async fn health(ctx: Ctx) -> Response {
    let report = match &ctx.state.health {
        Some(source) => Some(source.report().await),
        None => None,
    };
    let body = pages::status::health(report.as_ref());
    ctx.page("Processor and subscribers", Section::Health, body)
}

pub(super) async fn actions(ctx: Ctx) -> Response {
    let actions = ctx.state.audit.recent();
    let body = pages::status::actions_table(actions.iter());
    ctx.page("Recent actions", Section::Actions, body)
}
