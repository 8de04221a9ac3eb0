//! Connecting to NATS with the options production needs, and reconnects
//! observed through `tracing`.
//!
//! A server that is away at start (the connection refused, timed out, its
//! name not resolved) is not an error by default: [`NatsConnect::connect`]
//! returns a client that connects in the background, so a service starts
//! and takes writes during a broker outage. What is wrong rather than away
//! (credentials refused, a credentials file that cannot be read, TLS that
//! cannot work, a URL that is not one) fails at once, with its own
//! [`ConnectError`].

use std::path::PathBuf;
use std::time::Duration;

use async_nats::{Client, ConnectOptions, Event, ServerAddr};
use txoutbox_core::redact::{REDACTED, redact_url};

/// How to authenticate. Its `Debug` output hides the nkey seed, the token
/// and the password (`"<redacted>"`).
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Auth {
    /// No credentials (default).
    #[default]
    None,
    /// A `.creds` file (JWT + nkey seed), as issued by `nsc`.
    CredentialsFile(PathBuf),
    /// An nkey seed (`SU...`).
    NKey(String),
    /// A token.
    Token(String),
    /// User and password.
    UserPassword {
        /// The user.
        user: String,
        /// The password.
        password: String,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::CredentialsFile(path) => f.debug_tuple("CredentialsFile").field(path).finish(),
            Auth::NKey(_) => f.debug_tuple("NKey").field(&REDACTED).finish(),
            Auth::Token(_) => f.debug_tuple("Token").field(&REDACTED).finish(),
            Auth::UserPassword { user, password: _ } => f
                .debug_struct("UserPassword")
                .field("user", user)
                .field("password", &REDACTED)
                .finish(),
        }
    }
}

/// TLS settings. The server's certificate is verified against the system
/// roots plus `root_certificates`.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Tls {
    /// Require TLS even if the server does not ask for it.
    pub required: bool,
    /// Extra CA certificates (PEM).
    pub root_certificates: Option<PathBuf>,
    /// A client certificate and its key (PEM), for mutual TLS.
    pub client_certificate: Option<(PathBuf, PathBuf)>,
}

/// Connection settings for the publisher and subscribers.
///
/// By default, a server that cannot be reached at start is retried in the
/// background ([`retry_initial_connect`](Self::retry_initial_connect)):
/// the first attempt tells what is away from what is wrong, see
/// [`connect`](Self::connect).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_nats::{Auth, NatsConnect};
/// let client = NatsConnect::new("nats://127.0.0.1:4222")
///     .name("orders-outbox")
///     .auth(Auth::CredentialsFile("/etc/nats/orders.creds".into()))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
///
/// Its `Debug` output hides the secrets of its [`Auth`] and the password
/// or token of its URL (`nats://user:<redacted>@host`), and so does
/// [`ConnectError`]'s message.
#[derive(Clone)]
pub struct NatsConnect {
    url: String,
    name: Option<String>,
    auth: Auth,
    tls: Tls,
    connection_timeout: Option<Duration>,
    retry_initial_connect: bool,
    max_reconnect_delay: Option<Duration>,
}

impl Tls {
    /// TLS required, even if the server does not ask for it.
    #[must_use]
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Extra CA certificates (PEM) to verify the server with.
    #[must_use]
    pub fn root_certificates(mut self, path: impl Into<PathBuf>) -> Self {
        self.root_certificates = Some(path.into());
        self
    }

    /// A client certificate and its key (PEM), for mutual TLS.
    #[must_use]
    pub fn client_certificate(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_certificate = Some((cert.into(), key.into()));
        self
    }
}

impl std::fmt::Debug for NatsConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsConnect")
            .field("url", &redact_url(&self.url))
            .field("name", &self.name)
            .field("auth", &self.auth)
            .field("tls", &self.tls)
            .field("connection_timeout", &self.connection_timeout)
            .field("retry_initial_connect", &self.retry_initial_connect)
            .field("max_reconnect_delay", &self.max_reconnect_delay)
            .finish()
    }
}

/// The connection timeout [`NatsConnect::connect`] uses unless told
/// otherwise.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest pause between two reconnect attempts [`NatsConnect::connect`]
/// makes unless told otherwise. async-nats's own pauses double up to 4 s,
/// so a broker back after an outage of a few seconds was noticed up to 4 s
/// late, while the outbox waited for it (see BENCHMARKS.md, "outage").
/// Attempts against a server that is down are refused at once and cost
/// the server nothing; each pause is drawn from its upper half, so clients
/// that lost the same server do not come back in lockstep.
pub const DEFAULT_MAX_RECONNECT_DELAY: Duration = Duration::from_millis(250);

/// Connecting failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The credentials file could not be read.
    #[error("reading NATS credentials file {path}")]
    Credentials {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A server URL of the list is not a NATS address (or the list is
    /// empty).
    #[error("`{url}` is not a NATS server URL")]
    InvalidUrl {
        /// The URL, credentials redacted.
        url: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The server refused the credentials (a wrong or missing user,
    /// password, token, nkey or credentials file): fix them, retrying does
    /// not help.
    #[error("NATS at {url} refused the credentials")]
    Unauthorized {
        /// The server URL(s), credentials redacted.
        url: String,
        /// The cause.
        #[source]
        source: async_nats::ConnectError,
    },
    /// The TLS handshake failed: the server's certificate is not trusted
    /// (another CA than the roots given, expired, another name), the
    /// server wants a client certificate, or one side requires TLS and the
    /// other does not offer it.
    #[error("TLS with NATS at {url} failed")]
    Tls {
        /// The server URL(s), credentials redacted.
        url: String,
        /// The cause.
        #[source]
        source: async_nats::ConnectError,
    },
    /// The server could not be reached (refused, timed out, unknown
    /// host), or the connection failed otherwise.
    #[error("connecting to NATS at {url}")]
    Connect {
        /// The server URL(s), credentials redacted.
        url: String,
        /// The cause.
        #[source]
        source: async_nats::ConnectError,
    },
}

impl ConnectError {
    /// The error for a failed connect to `url` (redacted here), by what
    /// failed.
    fn connecting(url: &str, source: async_nats::ConnectError) -> Self {
        use async_nats::ConnectErrorKind as Kind;
        let url = redact_url(url);
        match source.kind() {
            Kind::Authentication | Kind::AuthorizationViolation => {
                Self::Unauthorized { url, source }
            }
            Kind::Tls => Self::Tls { url, source },
            _ if failed_in_tls(&source) => Self::Tls { url, source },
            _ => Self::Connect { url, source },
        }
    }
}

impl ConnectError {
    /// Whether the server was away rather than something wrong: the
    /// connection refused, reset or timed out, a name that did not resolve
    /// ([`Connect`](Self::Connect)). Retrying helps when the server is
    /// back; for the other kinds it does not.
    pub fn is_away(&self) -> bool {
        matches!(self, Self::Connect { .. })
    }
}

/// Whether `err` comes from the TLS handshake: async-nats reports a
/// certificate it does not trust, or an alert from the server, as an I/O
/// error carrying the rustls error.
fn failed_in_tls(err: &async_nats::ConnectError) -> bool {
    let mut cause = std::error::Error::source(err);
    while let Some(current) = cause {
        if current.is::<async_nats::rustls::Error>() {
            return true;
        }
        let carried = current
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .is_some_and(|inner| inner.is::<async_nats::rustls::Error>());
        if carried {
            return true;
        }
        cause = current.source();
    }
    false
}

impl NatsConnect {
    /// Settings for `url`: one server, or a cluster's nodes comma-separated
    /// (`nats://a:4222,nats://b:4222,nats://c:4222`): the client connects to
    /// one of them and reconnects to the others when it goes away.
    /// Credentials in a URL (`nats://user:password@host` or
    /// `nats://token@host`, percent-encoded; the first URL that has some)
    /// are used unless [`auth`](Self::auth) gives others.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            name: None,
            auth: Auth::None,
            tls: Tls::default(),
            connection_timeout: None,
            retry_initial_connect: true,
            max_reconnect_delay: None,
        }
    }

    /// The connection's name, shown by the server's monitoring.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How to authenticate (default: not at all).
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// TLS settings.
    pub fn tls(mut self, tls: Tls) -> Self {
        self.tls = tls;
        self
    }

    /// How long one connection attempt may take (default
    /// [`DEFAULT_CONNECTION_TIMEOUT`], 5 s).
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = Some(timeout);
        self
    }

    /// Keep trying in the background when the server cannot be reached at
    /// start (refused, timed out, its name not resolved), instead of
    /// failing: the default. The outbox keeps every message meanwhile; the
    /// processor waits for the broker as during an outage, and subscribers
    /// set up their consumers once it answers. Credentials or TLS the
    /// server refuses still fail at once (see [`connect`](Self::connect)).
    pub fn retry_initial_connect(mut self) -> Self {
        self.retry_initial_connect = true;
        self
    }

    /// Fail when the server cannot be reached at start, after one attempt
    /// ([`ConnectError::Connect`]), instead of connecting in the
    /// background: for a command-line tool, or a check that wants an
    /// answer now.
    pub fn fail_when_away(mut self) -> Self {
        self.retry_initial_connect = false;
        self
    }

    /// The longest pause between two reconnect attempts after the
    /// connection was lost (default [`DEFAULT_MAX_RECONNECT_DELAY`], 250 ms,
    /// with [`connect`](Self::connect)): the pauses double from nothing up
    /// to it, each drawn from its upper half. A broker that comes back is
    /// noticed at most this long after it accepts connections.
    pub fn max_reconnect_delay(mut self, max: Duration) -> Self {
        self.max_reconnect_delay = Some(max);
        self
    }

    /// Connects. Reconnects afterwards are async-nats's, paced by
    /// [`max_reconnect_delay`](Self::max_reconnect_delay), logged here and
    /// observed by the processor through the connection state.
    ///
    /// The first attempt is made at once. When it fails because the server
    /// is **away** (connection refused or reset, timed out, a name that
    /// does not resolve), the client is returned anyway and connects in the
    /// background, each attempt paced like a reconnect (a warning is
    /// logged; its `connection_state()` is `Pending` until it connects),
    /// unless [`fail_when_away`](Self::fail_when_away) was set. When it
    /// fails because something is **wrong**, it returns the error at once,
    /// whatever the setting: credentials refused
    /// ([`ConnectError::Unauthorized`]), TLS that cannot work
    /// ([`ConnectError::Tls`]), a credentials file that cannot be read
    /// ([`ConnectError::Credentials`]), a URL that is not one
    /// ([`ConnectError::InvalidUrl`]).
    pub async fn connect(self) -> Result<Client, ConnectError> {
        let max = self
            .max_reconnect_delay
            .unwrap_or(DEFAULT_MAX_RECONNECT_DELAY);
        let base = ConnectOptions::new()
            .connection_timeout(DEFAULT_CONNECTION_TIMEOUT)
            .reconnect_delay_callback(move |attempts| reconnect_delay(attempts, max));
        self.connect_with(base).await
    }

    /// Connects with `options` as the base: anything async-nats offers
    /// that this builder does not (reconnect limits, ping interval, an auth
    /// callback, a custom inbox prefix, ...). What was set on this builder
    /// applies on top: its name, its [`Auth`] unless `Auth::None`, its TLS
    /// settings where given, its connection timeout and initial-connect
    /// retry if set, its [`max_reconnect_delay`](Self::max_reconnect_delay)
    /// if set (otherwise the pauses are those of `options`: async-nats's
    /// default doubles up to 4 s). The event callback is this crate's: it
    /// logs connection events (`tracing`).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use txoutbox_nats::NatsConnect;
    /// use txoutbox_nats::async_nats::ConnectOptions;
    ///
    /// let options = ConnectOptions::new()
    ///     .ping_interval(Duration::from_secs(10))
    ///     .max_reconnects(None); // forever
    /// let nats = NatsConnect::new("nats://127.0.0.1:4222")
    ///     .name("orders")
    ///     .connect_with(options)
    ///     .await?;
    /// # let _ = nats; Ok(()) }
    /// ```
    pub async fn connect_with(self, options: ConnectOptions) -> Result<Client, ConnectError> {
        let addrs = server_addrs(&self.url)?;
        let url_credentials = credentials_in(&addrs);
        // async-nats logs the addresses it tries (at debug level, password
        // and all) and reads no credentials from them: they go as options.
        let addrs = without_credentials(addrs);
        let mut options =
            match &self.auth {
                Auth::CredentialsFile(path) => options
                    .credentials_file(path.clone())
                    .await
                    .map_err(|source| ConnectError::Credentials {
                        path: path.clone(),
                        source,
                    })?,
                Auth::NKey(seed) => options.nkey(seed.clone()),
                Auth::Token(token) => options.token(token.clone()),
                Auth::UserPassword { user, password } => {
                    options.user_and_password(user.clone(), password.clone())
                }
                Auth::None => match url_credentials {
                    Some(UrlCredentials::UserPassword(user, password)) => {
                        options.user_and_password(user, password)
                    }
                    Some(UrlCredentials::Token(token)) => options.token(token),
                    None => options,
                },
            };
        options = options.event_callback(|event| async move { log_event(&event) });
        if let Some(timeout) = self.connection_timeout {
            options = options.connection_timeout(timeout);
        }
        if self.tls.required {
            options = options.require_tls(true);
        }
        if let Some(name) = &self.name {
            options = options.name(name);
        }
        if let Some(roots) = &self.tls.root_certificates {
            options = options.add_root_certificates(roots.clone());
        }
        if let Some((cert, key)) = &self.tls.client_certificate {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        if let Some(max) = self.max_reconnect_delay {
            options =
                options.reconnect_delay_callback(move |attempts| reconnect_delay(attempts, max));
        }
        let first = options.clone().connect(addrs.clone()).await;
        match first.map_err(|source| ConnectError::connecting(&self.url, source)) {
            Ok(client) => Ok(client),
            Err(err) if self.retry_initial_connect && err.is_away() => {
                tracing::warn!(
                    url = %redact_url(&self.url),
                    error = %txoutbox_core::ErrorChain(&err),
                    "NATS cannot be reached at start; connecting in the background"
                );
                options
                    .retry_on_initial_connect()
                    .connect(addrs)
                    .await
                    .map_err(|source| ConnectError::connecting(&self.url, source))
            }
            Err(err) => Err(err),
        }
    }
}

/// Credentials written into a server URL.
enum UrlCredentials {
    /// `nats://user:password@host`.
    UserPassword(String, String),
    /// `nats://token@host`.
    Token(String),
}

/// The credentials of the first URL of `addrs` that carries some
/// (async-nats reads none from a URL): `user:password@` or `token@`.
fn credentials_in(addrs: &[ServerAddr]) -> Option<UrlCredentials> {
    addrs
        .iter()
        .find(|addr| addr.has_user_pass())
        .and_then(|addr| match (addr.username(), addr.password()) {
            (Some(user), Some(password)) => Some(UrlCredentials::UserPassword(
                decoded(user),
                decoded(password),
            )),
            (Some(token), None) => Some(UrlCredentials::Token(decoded(token))),
            _ => None,
        })
}

/// `addrs` without the user, password or token written into them.
fn without_credentials(addrs: Vec<ServerAddr>) -> Vec<ServerAddr> {
    addrs
        .into_iter()
        .map(|addr| {
            if !addr.has_user_pass() {
                return addr;
            }
            let mut url = addr.clone().into_inner();
            let cleared = url.set_username("").is_ok() && url.set_password(None).is_ok();
            match ServerAddr::from_url(url) {
                Ok(bare) if cleared => bare,
                _ => addr,
            }
        })
        .collect()
}

/// A URL's percent-encoded user or password, as written before encoding.
fn decoded(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// The pause before reconnect attempt `attempts` (counted by async-nats from
/// 1 since the connection was lost, one per server tried): none for the
/// first, then 2, 4, 8, … ms up to `max`, each drawn from its upper half.
fn reconnect_delay(attempts: usize, max: Duration) -> Duration {
    if attempts <= 1 {
        return Duration::ZERO;
    }
    let doublings = u32::try_from(attempts - 1).unwrap_or(u32::MAX).min(32);
    let step = Duration::from_millis(1_u64 << doublings).min(max);
    txoutbox_core::backoff::jittered(step)
}

/// The servers of `urls`, a comma-separated list (async-nats parses one
/// address per string).
fn server_addrs(urls: &str) -> Result<Vec<ServerAddr>, ConnectError> {
    let invalid = |url: &str, source| ConnectError::InvalidUrl {
        url: redact_url(url),
        source,
    };
    let addrs = urls
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| url.parse::<ServerAddr>().map_err(|err| invalid(url, err)))
        .collect::<Result<Vec<_>, _>>()?;
    if addrs.is_empty() {
        return Err(invalid(
            urls,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no server URL given"),
        ));
    }
    Ok(addrs)
}

fn log_event(event: &Event) {
    match event {
        Event::ServerError(async_nats::ServerError::Other(text)) => {
            match crate::permissions::record(text) {
                Some(denied) => tracing::error!(%denied, "NATS refused an operation"),
                None => tracing::warn!(error = %text, "NATS server error"),
            }
        }
        Event::Connected => tracing::info!("NATS connected"),
        Event::Disconnected => tracing::warn!("NATS disconnected; reconnecting"),
        Event::Closed => tracing::warn!("NATS connection closed"),
        other => tracing::debug!(event = %other, "NATS event"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_a_comma_separated_list() {
        let addrs = server_addrs("nats://a:4222, nats://b:4223,nats://c:4224").unwrap();
        assert_eq!(addrs.len(), 3);
        assert_eq!(addrs[1].port(), 4223);
        assert_eq!(server_addrs("nats://127.0.0.1:4222").unwrap().len(), 1);
    }

    #[test]
    fn a_bad_url_of_the_list_is_named_without_its_password() {
        let err = server_addrs("nats://a:4222,nats://u:urlpass-4@b:notaport").unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(matches!(err, ConnectError::InvalidUrl { .. }), "{shown}");
        assert!(shown.contains("b:notaport"), "{shown}");
        assert_hidden(&shown);
        assert!(matches!(
            server_addrs(" , "),
            Err(ConnectError::InvalidUrl { .. })
        ));
    }

    #[test]
    fn credentials_in_a_url_are_read_decoded() {
        let addrs = server_addrs("nats://a:4222,nats://alice:p%40ss%3Aword@b:4222").unwrap();
        match credentials_in(&addrs) {
            Some(UrlCredentials::UserPassword(user, password)) => {
                assert_eq!((user.as_str(), password.as_str()), ("alice", "p@ss:word"));
            }
            _ => panic!("user and password expected"),
        }
        let addrs = server_addrs("nats://s3cret@a:4222").unwrap();
        assert!(matches!(
            credentials_in(&addrs),
            Some(UrlCredentials::Token(token)) if token == "s3cret"
        ));
        assert!(credentials_in(&server_addrs("nats://a:4222").unwrap()).is_none());
        let bare = without_credentials(server_addrs("nats://alice:pw@a:4222,nats://b:1").unwrap());
        assert!(bare.iter().all(|addr| !addr.has_user_pass()));
        assert_eq!(format!("{bare:?}").matches("pw").count(), 0, "{bare:?}");
    }

    #[test]
    fn reconnects_start_at_once_and_pause_at_most_the_maximum() {
        let max = Duration::from_millis(250);
        assert_eq!(reconnect_delay(0, max), Duration::ZERO);
        assert_eq!(reconnect_delay(1, max), Duration::ZERO);
        let second = reconnect_delay(2, max);
        assert!(second <= Duration::from_millis(2), "{second:?}");
        for attempts in [10, 100, usize::MAX] {
            let pause = reconnect_delay(attempts, max);
            assert!(pause >= max / 2 && pause <= max, "{attempts}: {pause:?}");
        }
    }

    const SECRETS: [&str; 4] = ["pass-1", "tok-2", "SUSEED3", "urlpass-4"];

    fn assert_hidden(shown: &str) {
        for secret in SECRETS {
            assert!(!shown.contains(secret), "{secret} shown in {shown}");
        }
    }

    fn every_auth() -> [Auth; 5] {
        [
            Auth::None,
            Auth::CredentialsFile("/etc/nats/app.creds".into()),
            Auth::NKey("SUSEED3".into()),
            Auth::Token("tok-2".into()),
            Auth::UserPassword {
                user: "app".into(),
                password: "pass-1".into(),
            },
        ]
    }

    /// `Debug` of every connection setting, and the message of a failed
    /// connection, show no token, password, nkey seed or URL password.
    #[test]
    fn settings_show_no_secret() {
        for auth in every_auth() {
            assert_hidden(&format!("{auth:?} {auth:#?}"));
            let connect = NatsConnect::new("nats://app:urlpass-4@n1:4222,nats://tok-2@n2:4222")
                .name("svc")
                .auth(auth)
                .tls(
                    Tls::default()
                        .required()
                        .root_certificates("/ca.pem")
                        .client_certificate("/c.pem", "/k.pem"),
                );
            let shown = format!("{connect:?} {connect:#?}");
            assert_hidden(&shown);
            assert!(shown.contains("app:<redacted>@n1"), "{shown}");
        }
    }

    #[tokio::test]
    async fn a_server_away_at_start_is_connected_to_in_the_background() {
        let client = NatsConnect::new("nats://127.0.0.1:1")
            .connection_timeout(Duration::from_millis(500))
            .connect()
            .await
            .expect("a client that connects in the background");
        assert_eq!(
            client.connection_state(),
            async_nats::connection::State::Pending
        );
    }

    #[tokio::test]
    async fn a_failed_connection_names_no_secret() {
        let err = NatsConnect::new("nats://app:urlpass-4@127.0.0.1:1")
            .fail_when_away()
            .auth(Auth::Token("tok-2".into()))
            .connection_timeout(Duration::from_millis(500))
            .connect()
            .await
            .expect_err("nothing listens on port 1");
        let cause = std::error::Error::source(&err)
            .expect("a cause")
            .to_string();
        assert!(!err.to_string().contains(&cause), "{err} repeats {cause}");
        let mut shown = format!("{err} {err:?}");
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            shown.push_str(&format!(" {cause} {cause:?}"));
            source = cause.source();
        }
        assert_hidden(&shown);
        assert!(shown.contains("app:<redacted>@127.0.0.1:1"), "{shown}");
    }
}
