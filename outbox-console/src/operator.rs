//! Who may change things: [`Operator`] and the [`Authorizer`] hook. A
//! console built without one is read-only.

use std::fmt;

use axum::http::request::Parts;

/// The person (or system) a change is made by, as the application's
/// authorisation hook names them: recorded as a skip's `by`, in the audit
/// event of every change and in the console's recent actions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Operator {
    name: String,
}

impl Operator {
    /// An operator called `name` (an e-mail address, `user@host`, a login).
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }

    /// The operator's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Decides who may change things through the console: given a request's
/// head (its headers, extensions, URI), the [`Operator`] it comes from, or
/// `None` to refuse the change (the page says so, with 403).
///
/// Called on every request, so pages show the operator and only their
/// forms; every change is checked again when it is submitted. Reading is
/// never refused by the hook: put the console behind the application's own
/// authentication layer for that.
///
/// Any `Fn(&Parts) -> Option<Operator>` is an authorizer. An application
/// whose own tower layer authenticates requests and inserts an [`Operator`]
/// into the request's extensions passes [`FromExtensions`]:
///
/// ```
/// use txoutbox_console::{FromExtensions, Operator};
/// use axum::http::request::Parts;
///
/// // A header set by the authenticating proxy in front of the service.
/// let by_proxy = |request: &Parts| {
///     let user = request.headers.get("x-authenticated-user")?.to_str().ok()?;
///     Some(Operator::new(user))
/// };
/// # let _ = (by_proxy, FromExtensions);
/// ```
pub trait Authorizer: Send + Sync + 'static {
    /// The operator `request` comes from, if they may change things.
    fn operator(&self, request: &Parts) -> Option<Operator>;
}

impl<F> Authorizer for F
where
    F: Fn(&Parts) -> Option<Operator> + Send + Sync + 'static,
{
    fn operator(&self, request: &Parts) -> Option<Operator> {
        self(request)
    }
}

/// The [`Authorizer`] that reads an [`Operator`] from the request's
/// extensions, where the application's own authentication layer (a tower
/// layer around the console's router) put it: requests without one may
/// read, not change.
///
/// ```
/// # fn run(console: txoutbox_console::Console) {
/// use axum::{Router, middleware};
/// use txoutbox_console::Operator;
///
/// // The application's authentication, in front of the console.
/// async fn authenticate(mut request: axum::extract::Request, next: middleware::Next) -> axum::response::Response {
///     if let Some(user) = request.headers().get("x-authenticated-user").and_then(|v| v.to_str().ok()) {
///         let operator = Operator::new(user);
///         request.extensions_mut().insert(operator);
///     }
///     next.run(request).await
/// }
/// let app: Router = Router::new().nest(
///     "/outbox",
///     console.router().layer(middleware::from_fn(authenticate)),
/// );
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct FromExtensions;

impl Authorizer for FromExtensions {
    fn operator(&self, request: &Parts) -> Option<Operator> {
        request.extensions.get::<Operator>().cloned()
    }
}
