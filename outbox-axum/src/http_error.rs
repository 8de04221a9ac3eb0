//! [`HttpError`]: a request handler's error as an HTTP answer.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use txoutbox_core::consumer::BoxError;

/// A request handler's error, answered as a status and a one-line body.
///
/// `?` turns any error into one (as `anyhow::Error` takes any error): it is
/// answered, and then logged with its whole chain at `error` level, `500 Internal
/// Server Error` with a body that names no detail (a database URL or a
/// payload must not reach the client). [`not_found`](Self::not_found) and
/// [`new`](Self::new) answer other statuses. It converts from the outbox's
/// errors, so `Outbox::transaction` takes it as the caller's error type.
///
/// ```
/// use axum::http::StatusCode;
/// use axum::response::IntoResponse;
/// use txoutbox_axum::HttpError;
///
/// fn parse(total: &str) -> Result<i64, HttpError> {
///     Ok(total.parse::<i64>()?) // a ParseIntError: 500, logged
/// }
/// assert_eq!(parse("x").unwrap_err().status(), StatusCode::INTERNAL_SERVER_ERROR); // logged when answered
/// let missing = HttpError::not_found("order o-1");
/// assert_eq!(missing.into_response().status(), StatusCode::NOT_FOUND);
/// ```
#[derive(Debug)]
pub struct HttpError {
    status: StatusCode,
    message: String,
    /// The error behind a 500, logged when the answer is sent (not when
    /// converted: a retried transaction converts errors it recovers from).
    cause: Option<BoxError>,
}

impl HttpError {
    /// An answer with `status` and `message` as its body.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            cause: None,
        }
    }

    /// `404 Not Found`: "no `what`".
    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("no {what}"))
    }

    /// The status it answers.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl<E: Into<BoxError>> From<E> for HttpError {
    fn from(err: E) -> Self {
        Self {
            cause: Some(err.into()),
            ..Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        if let Some(cause) = &self.cause {
            tracing::error!(error = %txoutbox_core::ErrorChain(&**cause), "request failed");
        }
        (self.status, self.message).into_response()
    }
}
