//! TLS and credentials end to end, against private servers: certificates
//! made at test time (a CA, a server certificate for 127.0.0.1, a client
//! certificate, another CA, an expired server certificate), nats-servers
//! that require TLS, client certificates, a user and password, a token or
//! an nkey, and a private PostgreSQL with `ssl = on`. Each right case
//! connects and does a round trip; each wrong one fails at once with a
//! typed error that names the cause, and neither the error nor the logs
//! captured meanwhile show a secret.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use txoutbox_nats::{Auth, ConnectError, NatsConnect, Tls};
use txoutbox_suite::nats::NatsServer;

/// How long a wrong case may take to fail: the connection timeout set
/// below plus a margin, far from a retry loop.
const AT_ONCE: Duration = Duration::from_secs(4);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const PASSWORD: &str = "pw-Zq81-secret";
const TOKEN: &str = "tok-7Hs2-secret";

/// PEM files of a small PKI, in a directory of the test's own.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn create() -> Self {
        let dir = tempfile::tempdir().expect("a directory for the certificates");
        let pki = Self { dir };
        let ca = pki.ca("ca", "outbox test CA");
        let other = pki.ca("other-ca", "another CA");
        pki.leaf("server", &ca, true, false);
        pki.leaf("client", &ca, false, false);
        pki.leaf("expired-server", &ca, true, true);
        pki.leaf("foreign-client", &other, false, false);
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A self-signed CA: writes `<name>.pem` and returns its issuer.
    fn ca(&self, name: &str, common_name: &str) -> Issuer<'static, KeyPair> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("the CA certificate");
        self.write(&format!("{name}.pem"), &cert.pem());
        Issuer::new(params, key)
    }

    /// A certificate signed by `issuer` for 127.0.0.1 and localhost:
    /// writes `<name>.pem` and `<name>-key.pem`.
    fn leaf(&self, name: &str, issuer: &Issuer<'_, KeyPair>, server: bool, expired: bool) {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().expect("a key");
        let cert = params
            .signed_by(&key, issuer)
            .expect("a signed certificate");
        self.write(&format!("{name}.pem"), &cert.pem());
        self.write(&format!("{name}-key.pem"), &key.serialize_pem());
    }

    fn write(&self, name: &str, pem: &str) {
        std::fs::write(self.path(name), pem).expect("write a PEM file");
    }
}

/// A private nats-server with `config` (the kit cannot speak TLS or log
/// in: it waits for the port only).
async fn server(config: String) -> NatsServer {
    NatsServer::builder()
        .config(config)
        .port_only()
        .start()
        .await
        .expect("a private nats-server")
}

fn tls_block(pki: &Pki, server_cert: &str, verify_clients: bool) -> String {
    let mut block = format!(
        "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  timeout: 2\n",
        pki.path(&format!("{server_cert}.pem")).display(),
        pki.path(&format!("{server_cert}-key.pem")).display(),
    );
    if verify_clients {
        block.push_str(&format!(
            "  ca_file: \"{}\"\n  verify: true\n",
            pki.path("ca.pem").display()
        ));
    }
    block.push_str("}\n");
    block
}

/// The server's URL in the `tls://` form.
fn tls_url(server: &NatsServer) -> String {
    format!("tls://127.0.0.1:{}", server.port())
}

/// Connects with `settings`, timing it; a round trip proves the
/// connection.
async fn connect(settings: NatsConnect) -> (Result<(), ConnectError>, Duration) {
    let started = Instant::now();
    let connected = settings.connection_timeout(CONNECT_TIMEOUT).connect().await;
    let elapsed = started.elapsed();
    let result = match connected {
        Ok(client) => {
            client.flush().await.expect("a round trip");
            Ok(())
        }
        Err(err) => Err(err),
    };
    (result, elapsed)
}

/// The error with its whole chain, as a log line would show it.
fn shown(err: &ConnectError) -> String {
    format!("{} | {err:?}", txoutbox_core::ErrorChain(err))
}

/// Logs written while the test runs, to check that no secret is in them.
#[derive(Clone, Default)]
struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .expect("the log buffer")
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLogs {
    /// The logs of every thread of this test binary (async-nats logs from
    /// its own tasks), captured from the first call on; each test checks
    /// them for its own secrets.
    fn everything() -> &'static Self {
        static LOGS: std::sync::OnceLock<CapturedLogs> = std::sync::OnceLock::new();
        LOGS.get_or_init(|| {
            let logs = Self::default();
            let writer = logs.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
            logs
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("the log buffer")).into_owned()
    }
}

fn assert_no_secret(text: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!text.contains(secret), "a secret is shown: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connects_with_the_right_ca_and_fails_at_once_otherwise() {
    let pki = Pki::create();
    let good = server(tls_block(&pki, "server", false)).await;
    let expired = server(tls_block(&pki, "expired-server", false)).await;

    // The server's CA among the roots: connects.
    let right = NatsConnect::new(tls_url(&good)).tls(
        Tls::default()
            .required()
            .root_certificates(pki.path("ca.pem")),
    );
    let (result, _) = connect(right).await;
    result.expect("TLS with the server's CA connects");

    // Another CA, the system roots only, an expired certificate: refused
    // at once as `Tls`.
    let cases = [
        (
            "another CA",
            NatsConnect::new(tls_url(&good)).tls(
                Tls::default()
                    .required()
                    .root_certificates(pki.path("other-ca.pem")),
            ),
        ),
        (
            "the system roots only",
            NatsConnect::new(tls_url(&good)).tls(Tls::default().required()),
        ),
        (
            "an expired server certificate",
            NatsConnect::new(tls_url(&expired)).tls(
                Tls::default()
                    .required()
                    .root_certificates(pki.path("ca.pem")),
            ),
        ),
    ];
    for (case, settings) in cases {
        let (result, elapsed) = connect(settings).await;
        match result {
            Err(ConnectError::Tls { url, .. }) => assert!(url.starts_with("tls://"), "{url}"),
            other => panic!("{case}: expected ConnectError::Tls, got {other:?}"),
        }
        assert!(elapsed < AT_ONCE, "{case}: failed only after {elapsed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_verifies_clients_takes_its_cas_certificates_only() {
    let pki = Pki::create();
    let server = server(tls_block(&pki, "server", true)).await;
    let tls = || {
        Tls::default()
            .required()
            .root_certificates(pki.path("ca.pem"))
    };

    let with_cert = NatsConnect::new(tls_url(&server))
        .tls(tls().client_certificate(pki.path("client.pem"), pki.path("client-key.pem")));
    let (result, _) = connect(with_cert).await;
    result.expect("a client certificate of the server's CA connects");

    let cases = [
        (
            "no client certificate",
            NatsConnect::new(tls_url(&server)).tls(tls()),
        ),
        (
            "a client certificate of another CA",
            NatsConnect::new(tls_url(&server)).tls(tls().client_certificate(
                pki.path("foreign-client.pem"),
                pki.path("foreign-client-key.pem"),
            )),
        ),
    ];
    for (case, settings) in cases {
        let (result, elapsed) = connect(settings).await;
        match result {
            Err(ConnectError::Tls { .. }) => {}
            other => panic!("{case}: expected ConnectError::Tls, got {other:?}"),
        }
        assert!(elapsed < AT_ONCE, "{case}: failed only after {elapsed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_and_password_connect_and_a_wrong_one_is_unauthorized_without_showing_it() {
    let server = server(format!(
        "authorization {{\n  user: alice\n  password: \"{PASSWORD}\"\n}}\n"
    ))
    .await;
    let logs = CapturedLogs::everything();
    let url = server.url();

    let right = NatsConnect::new(&url).auth(Auth::UserPassword {
        user: "alice".to_owned(),
        password: PASSWORD.to_owned(),
    });
    connect(right).await.0.expect("the right password connects");

    // In the URL, percent-encoded where needed: read by NatsConnect.
    let in_url = url.replacen("nats://", &format!("nats://alice:{PASSWORD}@"), 1);
    connect(NatsConnect::new(&in_url))
        .await
        .0
        .expect("the password in the URL connects");

    let wrong_password = "pw-wrong-secret";
    let wrong = NatsConnect::new(&url).auth(Auth::UserPassword {
        user: "alice".to_owned(),
        password: wrong_password.to_owned(),
    });
    let wrong_in_url = url.replacen("nats://", &format!("nats://alice:{wrong_password}@"), 1);
    for (case, settings) in [
        ("a wrong password", wrong),
        (
            "a wrong password in the URL",
            NatsConnect::new(&wrong_in_url),
        ),
        ("no credentials", NatsConnect::new(&url)),
    ] {
        let (result, elapsed) = connect(settings).await;
        let err = match result {
            Err(err @ ConnectError::Unauthorized { .. }) => err,
            other => panic!("{case}: expected Unauthorized, got {other:?}"),
        };
        assert!(elapsed < AT_ONCE, "{case}: failed only after {elapsed:?}");
        assert_no_secret(&shown(&err), &[PASSWORD, wrong_password]);
    }
    assert_no_secret(&logs.text(), &[PASSWORD, wrong_password]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_and_an_nkey_connect_and_wrong_ones_are_unauthorized() {
    let user = nkeys::KeyPair::new_user();
    let seed = user.seed().expect("the user's seed");
    let stranger = nkeys::KeyPair::new_user()
        .seed()
        .expect("another user's seed");
    let nkey_server = server(format!(
        "authorization {{\n  users = [ {{ nkey: {} }} ]\n}}\n",
        user.public_key()
    ))
    .await;
    let token_server = server(format!("authorization {{\n  token: \"{TOKEN}\"\n}}\n")).await;
    let logs = CapturedLogs::everything();

    connect(NatsConnect::new(nkey_server.url()).auth(Auth::NKey(seed.clone())))
        .await
        .0
        .expect("the registered nkey connects");
    connect(NatsConnect::new(token_server.url()).auth(Auth::Token(TOKEN.to_owned())))
        .await
        .0
        .expect("the token connects");
    let token_in_url = token_server
        .url()
        .replacen("nats://", &format!("nats://{TOKEN}@"), 1);
    connect(NatsConnect::new(&token_in_url))
        .await
        .0
        .expect("the token in the URL connects");

    for (case, settings) in [
        (
            "an nkey the server does not know",
            NatsConnect::new(nkey_server.url()).auth(Auth::NKey(stranger.clone())),
        ),
        (
            "a wrong token",
            NatsConnect::new(token_server.url()).auth(Auth::Token("tok-wrong-secret".to_owned())),
        ),
    ] {
        let (result, elapsed) = connect(settings).await;
        let err = match result {
            Err(err @ ConnectError::Unauthorized { .. }) => err,
            other => panic!("{case}: expected Unauthorized, got {other:?}"),
        };
        assert!(elapsed < AT_ONCE, "{case}: failed only after {elapsed:?}");
        assert_no_secret(&shown(&err), &[&seed, &stranger, TOKEN, "tok-wrong-secret"]);
    }
    assert_no_secret(&logs.text(), &[&seed, &stranger, TOKEN, "tok-wrong-secret"]);
}

async fn pg_connects(url: &str) -> Result<(), sea_orm::DbErr> {
    let mut options = sea_orm::ConnectOptions::new(url);
    options
        .max_connections(1)
        .connect_timeout(CONNECT_TIMEOUT)
        .sqlx_logging(false);
    let db = sea_orm::Database::connect(options).await?;
    db.ping().await?;
    db.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls_verifies_the_server_with_the_right_ca_only() {
    let pki = Pki::create();
    // The copies the postgres user reads for `sslrootcert`.
    let ca = pki.path("ca.pem");
    let other = pki.path("other-ca.pem");
    let postgres = txoutbox_suite::private_postgres::PrivatePostgres::start_with_tls(
        &pki.path("server.pem"),
        &pki.path("server-key.pem"),
    );
    let root = |path: &Path| format!("sslrootcert={}", path.display());

    for query in [
        "sslmode=require".to_owned(),
        format!("sslmode=verify-full&{}", root(&ca)),
        format!("sslmode=verify-ca&{}", root(&ca)),
    ] {
        pg_connects(&format!("{}?{query}", postgres.url()))
            .await
            .unwrap_or_else(|err| panic!("{query}: {err}"));
    }
    for query in [
        format!("sslmode=verify-full&{}", root(&other)),
        format!("sslmode=verify-ca&{}", root(&other)),
    ] {
        let started = Instant::now();
        let err = pg_connects(&format!("{}?{query}", postgres.url()))
            .await
            .expect_err("a server certificate of another CA is refused");
        assert!(
            started.elapsed() < AT_ONCE,
            "{query}: failed only after {:?}",
            started.elapsed()
        );
        // sqlx reports the rustls verdict as an I/O error carrying it
        // (`InvalidCertificate(UnknownIssuer)`), or as its own `Tls`.
        let named = matches!(
            &err,
            sea_orm::DbErr::Conn(sea_orm::RuntimeErr::SqlxError(sqlx_err))
                if matches!(**sqlx_err, sea_orm::sqlx::Error::Tls(_))
                    || format!("{sqlx_err:?}").contains("InvalidCertificate(UnknownIssuer)")
        );
        assert!(
            named,
            "{query}: expected the untrusted certificate named, got {err:?}"
        );
    }
}
