//! What the console's router tests share: the operator taken from the
//! `x-user` header, one request through the router
//! (`tower::ServiceExt::oneshot`), and its answer.

#![allow(dead_code, clippy::unwrap_used)] // each test binary uses its part

use axum::Router;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{Request, StatusCode, header};
use tower::ServiceExt;
use txoutbox_console::Operator;

/// The operator a request names in `x-user`, if any.
pub(crate) fn by_header(request: &Parts) -> Option<Operator> {
    let user = request.headers.get("x-user")?.to_str().ok()?;
    Some(Operator::new(user))
}

/// A response, read whole.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: header::HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    /// Asserts that the body holds `text`.
    #[track_caller]
    pub(crate) fn has(&self, text: &str) {
        assert!(self.body.contains(text), "{text:?} not in {}", self.body);
    }

    /// Asserts that the body does not hold `text`.
    #[track_caller]
    pub(crate) fn lacks(&self, text: &str) {
        assert!(!self.body.contains(text), "{text:?} in {}", self.body);
    }

    /// The session's token from the answer's `Set-Cookie`.
    pub(crate) fn token(&self) -> String {
        let cookie = self.headers[header::SET_COOKIE].to_str().unwrap();
        cookie
            .split(';')
            .next()
            .and_then(|pair| pair.split_once('='))
            .map(|(_, value)| value.to_owned())
            .unwrap()
    }
}

/// `request` through `app`.
pub(crate) async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// `GET path`, as `user` if any.
pub(crate) async fn get(app: &Router, path: &str, user: Option<&str>) -> Answer {
    let mut request = Request::get(path).header(header::HOST, "console.test");
    if let Some(user) = user {
        request = request.header("x-user", user);
    }
    send(app, request.body(Body::empty()).unwrap()).await
}

/// A form `POST` of `fields` with the session cookie `token`, from
/// `origin`, as `user` if any.
pub(crate) async fn post(
    app: &Router,
    path: &str,
    token: &str,
    origin: &str,
    user: Option<&str>,
    fields: &[(&str, &str)],
) -> Answer {
    let body = fields
        .iter()
        .map(|(k, v)| format!("{k}={}", v.replace(' ', "+")))
        .collect::<Vec<_>>()
        .join("&");
    let mut request = Request::post(path)
        .header(header::HOST, "console.test")
        .header(header::ORIGIN, origin)
        .header(header::COOKIE, format!("txoutbox_console_csrf={token}"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(user) = user {
        request = request.header("x-user", user);
    }
    send(app, request.body(Body::from(body)).unwrap()).await
}
