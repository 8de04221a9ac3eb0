//! What keeps the doors shut: the security headers of every answer, the
//! per-session CSRF token (a cookie whose value every form carries back),
//! and the checks every change passes before it is made (an operator from
//! the hook, the token, a same-origin request).

use axum::extract::{OriginalUri, Request};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;

use crate::operator::Operator;
use crate::state::State;

/// The cookie holding the session's CSRF token.
pub(crate) const CSRF_COOKIE: &str = "txoutbox_console_csrf";

/// Scripts, frames and foreign forms are refused; styles come from the
/// console's own stylesheet; charts are inline SVG (no script).
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// What a request to the console knows about where it is served and its
/// session: put in its extensions by [`guard`].
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The path the console is mounted under (`""` at the root, `/outbox`).
    pub(crate) base: String,
    /// The CSRF token of this session, for the forms.
    pub(crate) csrf: String,
}

impl Session {
    /// `path` (starting with `/`) under the console's mount point.
    pub(crate) fn href(&self, path: &str) -> String {
        match (self.base.is_empty(), path) {
            (false, "/") => format!("{}/", self.base),
            _ => format!("{}{path}", self.base),
        }
    }
}

/// Middleware around every route: finds the mount point, gives the session
/// a CSRF token (a new cookie when it has none), and sets the security
/// headers on the answer.
pub(crate) async fn guard(mut request: Request, next: Next) -> Response {
    let inner = request.uri().path().to_owned();
    let full = request
        .extensions()
        .get::<OriginalUri>()
        .map_or_else(|| inner.clone(), |uri| uri.0.path().to_owned());
    let base = mount_point(&full, &inner);
    let existing = cookie(request.headers(), CSRF_COOKIE).filter(|t| is_token(t));
    let (csrf, fresh) = match existing {
        Some(token) => (token, false),
        None => match new_token() {
            Some(token) => (token, true),
            None => {
                tracing::error!("the console cannot draw a random CSRF token");
                let mut response =
                    Response::new(axum::body::Body::from("no randomness for a CSRF token"));
                *response.status_mut() = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
                return response;
            }
        },
    };
    let cookie_path = if base.is_empty() {
        "/".to_owned()
    } else {
        base.clone()
    };
    request.extensions_mut().insert(Session {
        base,
        csrf: csrf.clone(),
    });
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // Not `no-referrer`: browsers then send `Origin: null` with forms.
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if fresh {
        let set = format!("{CSRF_COOKIE}={csrf}; Path={cookie_path}; HttpOnly; SameSite=Strict");
        if let Ok(value) = HeaderValue::from_str(&set) {
            headers.append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The prefix `full` has before `inner`, the path the nested router saw.
fn mount_point(full: &str, inner: &str) -> String {
    let base = if inner == "/" {
        full.trim_end_matches('/')
    } else {
        full.strip_suffix(inner).unwrap_or("")
    };
    base.to_owned()
}

/// The value of cookie `name` in `headers`.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

/// 32 random bytes, hex.
fn new_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Why a change was refused (403).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The console has no authorisation hook.
    ReadOnly,
    /// The hook named no operator for this request.
    NotAuthorised,
    /// The request came from another site (`Origin`, `Sec-Fetch-Site`).
    CrossSite(String),
    /// The form's CSRF token is missing or not the session's.
    BadToken,
}

impl Refusal {
    /// What the refusal page says.
    pub(crate) fn explain(&self) -> String {
        match self {
            Refusal::ReadOnly => "This console is read-only: the application gave it no \
                                  authorisation hook, so nothing can be changed from it."
                .to_owned(),
            Refusal::NotAuthorised => "You are not authorised to change anything here.".to_owned(),
            Refusal::CrossSite(why) => format!("Refused: the request came from elsewhere ({why})."),
            Refusal::BadToken => "Refused: the form's token is missing or stale; reload the page \
                                  and try again."
                .to_owned(),
        }
    }
}

/// The operator a change comes from, if it may be made: an operator the
/// hook names, a same-origin request, and the session's token in the form.
pub(crate) fn check_change(
    state: &State,
    parts: &Parts,
    form_token: &str,
) -> Result<Operator, Refusal> {
    let authorizer = state.authorizer.as_ref().ok_or(Refusal::ReadOnly)?;
    same_origin(&parts.headers)?;
    let session = cookie(&parts.headers, CSRF_COOKIE).ok_or(Refusal::BadToken)?;
    if !is_token(&session) || !same(&session, form_token) {
        return Err(Refusal::BadToken);
    }
    authorizer.operator(parts).ok_or(Refusal::NotAuthorised)
}

/// `Sec-Fetch-Site` (when the browser sends it) is `same-origin`, and
/// `Origin` (when sent) names the host the request was sent to.
fn same_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("?");
        if site != "same-origin" {
            return Err(Refusal::CrossSite(format!("Sec-Fetch-Site: {site}")));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("null");
        let authority = origin.split_once("://").map(|(_, rest)| rest);
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        match (authority, host) {
            (Some(authority), Some(host)) if authority.eq_ignore_ascii_case(host) => {}
            _ => return Err(Refusal::CrossSite(format!("Origin: {origin}"))),
        }
    }
    Ok(())
}

/// Whether the hook names an operator for this request (to show forms).
pub(crate) fn operator_of(state: &State, parts: &Parts) -> Option<Operator> {
    state.authorizer.as_ref()?.operator(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_mount_point() {
        assert_eq!(mount_point("/outbox/dead", "/dead"), "/outbox");
        assert_eq!(mount_point("/outbox", "/"), "/outbox");
        assert_eq!(mount_point("/outbox/", "/"), "/outbox");
        assert_eq!(mount_point("/a/b/dead/x", "/dead/x"), "/a/b");
        assert_eq!(mount_point("/dead", "/dead"), "");
        assert_eq!(mount_point("/", "/"), "");
    }

    #[test]
    fn reads_cookies_and_compares_tokens() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; txoutbox_console_csrf=abc; b=2"),
        );
        assert_eq!(cookie(&headers, CSRF_COOKIE).as_deref(), Some("abc"));
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        let token = new_token().expect("randomness");
        assert!(is_token(&token));
        assert_ne!(Some(token), new_token());
    }

    #[test]
    fn refuses_other_origins() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert_eq!(same_origin(&headers), Ok(()));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert_eq!(same_origin(&headers), Ok(()));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(matches!(same_origin(&headers), Err(Refusal::CrossSite(_))));
        headers.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(matches!(same_origin(&headers), Err(Refusal::CrossSite(_))));
        headers.remove(header::ORIGIN);
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(matches!(same_origin(&headers), Err(Refusal::CrossSite(_))));
        headers.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert_eq!(same_origin(&headers), Ok(()));
    }
}
