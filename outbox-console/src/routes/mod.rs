//! The console's routes: reads answer `GET` with a page; every change is a
//! `POST` from a confirmation form, checked by
//! [`check_change`](crate::security::check_change) first.

mod bulk_release;
mod consumers;
mod dead;
mod status;

use std::sync::Arc;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use maud::Markup;

use crate::operator::Operator;
use crate::pages::{self, Frame, Section};
use crate::security::{self, Refusal, Session};
use crate::state::State;

/// The console's router, for any application state `S`.
pub(crate) fn router<S>(state: Arc<State>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/", get(status::overview))
        .route("/console.css", get(stylesheet))
        .route("/dead", get(dead::list))
        .route("/dead/confirm", get(dead::confirm))
        .route("/dead/requeue", axum::routing::post(dead::requeue))
        .route("/dead/skip", axum::routing::post(dead::skip))
        .route("/dead/{id}", get(dead::show))
        .route("/consumers", get(consumers::list))
        .route(
            "/consumers/{name}/release",
            get(consumers::confirm).post(consumers::release),
        )
        .route(
            "/consumers/{name}/release-many",
            get(bulk_release::confirm).post(bulk_release::release),
        )
        .route("/verify", get(status::verify).post(status::run_verify))
        .route("/health", get(status::health))
        .route("/actions", get(status::actions))
        .layer(middleware::from_fn(security::guard))
        .with_state(state)
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        pages::STYLESHEET,
    )
        .into_response()
}

/// What every handler starts from: the state, the session, the request's
/// head and the operator the hook names for it.
pub(crate) struct Ctx {
    pub(crate) state: Arc<State>,
    pub(crate) session: Session,
    pub(crate) parts: Parts,
    pub(crate) operator: Option<Operator>,
}

impl FromRequestParts<Arc<State>> for Ctx {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<State>,
    ) -> Result<Self, Self::Rejection> {
        let Some(session) = parts.extensions.get::<Session>().cloned() else {
            return Err(StatusCode::INTERNAL_SERVER_ERROR.into_response());
        };
        let head = clone_head(parts);
        let operator = security::operator_of(state, &head);
        Ok(Self {
            state: state.clone(),
            session,
            parts: head,
            operator,
        })
    }
}

/// A copy of the request's head (method, URI, headers, extensions).
fn clone_head(parts: &Parts) -> Parts {
    let mut builder = axum::http::Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.clone())
        .version(parts.version);
    if let Some(headers) = builder.headers_mut() {
        *headers = parts.headers.clone();
    }
    if let Some(extensions) = builder.extensions_mut() {
        *extensions = parts.extensions.clone();
    }
    match builder.body(()) {
        Ok(request) => request.into_parts().0,
        Err(_) => axum::http::Request::new(()).into_parts().0,
    }
}

impl Ctx {
    /// Whether this request may see the forms that change things.
    pub(crate) fn can_change(&self) -> bool {
        self.operator.is_some()
    }

    /// A read page: reloads on its own.
    pub(crate) fn page(
        &self,
        title: impl Into<String>,
        section: Section,
        body: Markup,
    ) -> Response {
        self.render(
            StatusCode::OK,
            title.into(),
            section,
            Some(self.state.refresh),
            body,
        )
    }

    /// A form or a result: never reloads.
    pub(crate) fn still(
        &self,
        status: StatusCode,
        title: impl Into<String>,
        section: Section,
        body: Markup,
    ) -> Response {
        self.render(status, title.into(), section, None, body)
    }

    fn render(
        &self,
        status: StatusCode,
        title: String,
        section: Section,
        refresh: Option<std::time::Duration>,
        body: Markup,
    ) -> Response {
        let frame = Frame {
            title,
            section,
            session: &self.session,
            operator: self.operator.as_ref(),
            changes_possible: self.state.authorizer.is_some(),
            refresh,
        };
        (status, Html(pages::layout(&frame, body).into_string())).into_response()
    }

    /// A refused change (403).
    pub(crate) fn refused(&self, section: Section, refusal: &Refusal) -> Response {
        tracing::warn!(
            target: "txoutbox_console::audit",
            refusal = ?refusal,
            path = %self.parts.uri.path(),
            "outbox console change refused"
        );
        self.still(
            StatusCode::FORBIDDEN,
            "Refused",
            section,
            pages::status::result(&self.session, "bad", &refusal.explain(), "/"),
        )
    }

    /// A failure to read or change (500), with its causes on one line.
    pub(crate) fn failed(&self, section: Section, err: &dyn std::error::Error) -> Response {
        let text = txoutbox_core::ErrorChain(err).to_string();
        tracing::error!(error = %text, path = %self.parts.uri.path(), "outbox console request failed");
        self.still(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something failed",
            section,
            pages::notice("bad", &text),
        )
    }

    /// Nothing of that name (404).
    pub(crate) fn not_found(&self, section: Section, text: &str) -> Response {
        self.still(
            StatusCode::NOT_FOUND,
            "Not found",
            section,
            pages::notice("bad", text),
        )
    }

    /// The operator this request comes from, to show a confirmation form
    /// to, or why there is none.
    pub(crate) fn operator_for_form(&self) -> Result<Operator, Refusal> {
        match (&self.operator, self.state.authorizer.is_some()) {
            (Some(operator), _) => Ok(operator.clone()),
            (None, true) => Err(Refusal::NotAuthorised),
            (None, false) => Err(Refusal::ReadOnly),
        }
    }

    /// The operator a change comes from, or why it is refused.
    pub(crate) fn authorise(&self, csrf: &str) -> Result<Operator, Refusal> {
        security::check_change(&self.state, &self.parts, csrf)
    }
}

/// The value of the first field `name` of a form or query.
pub(crate) fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}
