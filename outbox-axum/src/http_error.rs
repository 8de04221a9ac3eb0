//! [`HttpError`]: a request handler's error as an HTTP answer.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use txoutbox_core::consumer::BoxError;

use crate::outbox_errors::{self, Answer};

/// A request handler's error, answered as a status and a one-line body.
///
/// `?` turns any error into one (as `anyhow::Error` takes any error), and
/// the answer depends on what failed, found anywhere in the error's chain:
///
/// | error | status | body |
/// |---|---|---|
/// | the SeaORM outbox's `ConcurrencyConflict` (the aggregate changed under the request, and [`Outbox::transaction`] ran out of attempts) | `409 Conflict` | which aggregate; the client may reload and try again |
/// | its `Contention` (deadlocks, lock waits, serialization failures past the attempts) | `503 Service Unavailable`, `Retry-After: 1` | "database busy" |
/// | a database that is away ([`OutboxError::is_unavailable`]: refused, lost, read-only after a failover) | `503 Service Unavailable`, `Retry-After: 5` | "database unavailable" |
/// | anything else | `500 Internal Server Error` | "internal error" |
///
/// The outbox's errors are told apart with the `sea-orm` feature (the
/// `txoutbox` facade turns it on with its own `sea-orm`); without it every
/// error is a 500. The error is logged with its whole chain when answered
/// (`error` for a 500, `warn` for the others), never sent: a database URL
/// or a payload must not reach the client.
/// [`not_found`](Self::not_found) and [`new`](Self::new) answer other
/// statuses. It converts from the outbox's errors, so
/// [`Outbox::transaction`] takes it as the caller's error type.
///
/// [`Outbox::transaction`]: https://docs.rs/txoutbox-sea-orm/latest/txoutbox_sea_orm/struct.Outbox.html#method.transaction
/// [`OutboxError::is_unavailable`]: https://docs.rs/txoutbox-sea-orm/latest/txoutbox_sea_orm/enum.OutboxError.html#method.is_unavailable
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
    /// Seconds a client should wait before it tries again (`Retry-After`).
    retry_after: Option<u32>,
    /// The error behind the answer, logged when the answer is sent (not
    /// when converted: a retried transaction converts errors it recovers
    /// from).
    cause: Option<BoxError>,
}

impl HttpError {
    /// An answer with `status` and `message` as its body.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
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

    /// The body it answers.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl<E: Into<BoxError>> From<E> for HttpError {
    fn from(err: E) -> Self {
        let cause = err.into();
        let Answer {
            status,
            message,
            retry_after,
        } = outbox_errors::answer(&*cause);
        Self {
            status,
            message,
            retry_after,
            cause: Some(cause),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        if let Some(cause) = &self.cause {
            let error = txoutbox_core::ErrorChain(&**cause);
            if self.status.is_server_error() && self.retry_after.is_none() {
                tracing::error!(%error, status = %self.status, "request failed");
            } else {
                tracing::warn!(%error, status = %self.status, "request failed");
            }
        }
        let mut response = (self.status, self.message).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_other_error_is_a_500_without_detail() {
        let err = HttpError::from(std::io::Error::other("postgres://user:secret@db"));
        assert_eq!(err.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(err.message(), "internal error");
        let response = err.into_response();
        assert!(response.headers().get(header::RETRY_AFTER).is_none());
    }
}
