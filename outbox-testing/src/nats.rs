//! [`NatsServer`]: a private nats-server for integration tests (feature
//! `nats-server`), on its own port and store directory, stopped, killed,
//! frozen and restarted at will.

pub use crate::nats_cluster::NatsCluster;

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a start may take.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// The environment variable naming the binary (default: `nats-server` on
/// `PATH`).
pub const NATS_SERVER_ENV: &str = "OUTBOX_TEST_NATS_SERVER";

/// A private server could not be started or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsServerError {
    /// The binary is not installed (or not where `OUTBOX_TEST_NATS_SERVER`
    /// says).
    #[error(
        "`{binary}` was not found: install nats-server (Debian/Ubuntu: `apt install nats-server`; \
         or a release from github.com/nats-io/nats-server), or set {NATS_SERVER_ENV} to its path"
    )]
    NotInstalled {
        /// The binary looked for.
        binary: String,
    },
    /// The server exited at start or did not answer in time.
    #[error("nats-server did not come up: {reason}; its log:\n{log}")]
    NotReady {
        /// What happened.
        reason: String,
        /// The server's log.
        log: String,
    },
    /// A file, a port, a signal or a connection failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The client could not connect.
    #[error("connecting to the private nats-server")]
    Connect(#[from] async_nats::ConnectError),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> NatsServerError {
    move |source| NatsServerError::Io { what, source }
}

/// Options of a [`NatsServer`] beyond JetStream, its port and its store.
/// `Debug` hides the token.
#[derive(Default, Clone)]
pub struct NatsServerBuilder {
    binary: Option<String>,
    config: Option<String>,
    args: Vec<String>,
    token: Option<String>,
    /// Start-up ends when the port answers, not JetStream (a cluster node's
    /// JetStream answers only once a quorum of nodes runs).
    port_only: bool,
}

/// `args` with the value of `--auth` (the token) redacted.
fn shown_args(args: &[String]) -> Vec<&str> {
    let mut after_auth = false;
    args.iter()
        .map(|arg| {
            let shown = if after_auth {
                txoutbox_core::redact::REDACTED
            } else {
                arg.as_str()
            };
            after_auth = arg == "--auth";
            shown
        })
        .collect()
}

impl std::fmt::Debug for NatsServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsServerBuilder")
            .field("binary", &self.binary)
            .field("config", &self.config)
            .field("args", &shown_args(&self.args))
            .field(
                "token",
                &self.token.as_ref().map(|_| txoutbox_core::redact::REDACTED),
            )
            .finish()
    }
}

impl std::fmt::Debug for NatsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsServer")
            .field("binary", &self.binary)
            .field("port", &self.port)
            .field("dir", &self.dir)
            .field("config", &self.config)
            .field("args", &shown_args(&self.args))
            .field(
                "token",
                &self.token.as_ref().map(|_| txoutbox_core::redact::REDACTED),
            )
            .field("child", &self.child)
            .finish()
    }
}

impl NatsServerBuilder {
    /// Contents of a configuration file the server starts with (`-c`), for
    /// settings without a flag, e.g. `max_payload: 4096` or a
    /// `jetstream { max_memory_store: ... }` block.
    pub fn config(mut self, text: impl Into<String>) -> Self {
        self.config = Some(text.into());
        self
    }

    /// The nats-server binary to run (default: [`NATS_SERVER_ENV`], else
    /// `nats-server` on `PATH`).
    pub fn binary(mut self, path: impl Into<String>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// Clients must authenticate with `token` (`--auth`).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.args.extend(["--auth".to_owned(), token.clone()]);
        self.token = Some(token);
        self
    }

    /// Starting (and restarting) ends once the server accepts connections,
    /// without waiting for JetStream: for a node of a cluster, whose
    /// JetStream answers only once a quorum of nodes runs
    /// ([`NatsCluster`] waits for that).
    pub fn port_only(mut self) -> Self {
        self.port_only = true;
        self
    }

    /// An extra command-line argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Starts the server and waits until JetStream answers.
    pub async fn start(self) -> Result<NatsServer, NatsServerError> {
        let dir = tempfile::tempdir().map_err(io("creating the server's directory"))?;
        let config = match self.config {
            Some(text) => {
                let path = dir.path().join("nats.conf");
                std::fs::write(&path, text).map_err(io("writing nats.conf"))?;
                Some(path)
            }
            None => None,
        };
        let binary = self
            .binary
            .or_else(|| std::env::var(NATS_SERVER_ENV).ok())
            .unwrap_or_else(|| "nats-server".to_owned());
        let mut server = NatsServer {
            binary,
            port: free_port()?,
            dir,
            config,
            args: self.args,
            port_only: self.port_only,
            token: self.token,
            child: None,
        };
        // The free port may be taken between choosing it and the server
        // binding it (tests run at once): choose another.
        let mut attempts = 1;
        loop {
            match server.spawn().await {
                Err(err) if err.port_taken() && attempts < PORT_ATTEMPTS => {
                    attempts += 1;
                    server.port = free_port()?;
                }
                spawned => return spawned.map(|()| server),
            }
        }
    }
}

/// How many ports a server start tries when the chosen one is taken.
pub(crate) const PORT_ATTEMPTS: u32 = 3;

impl NatsServerError {
    /// Whether the server exited because a port it was to listen on was
    /// taken (chosen free, then bound by another process first).
    pub fn port_taken(&self) -> bool {
        matches!(self, Self::NotReady { log, .. } if log.contains("address already in use"))
    }
}

/// A nats-server child process with JetStream on `127.0.0.1`, a free port
/// and a temporary store directory; killed when dropped. The binary is
/// `nats-server` from `PATH`, or [`NATS_SERVER_ENV`].
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_testing::nats::NatsServer;
///
/// let mut server = NatsServer::start().await?;
/// let client = server.connect().await?; // rides out restarts
/// server.freeze()?;                     // SIGSTOP: a hung broker
/// server.thaw()?;
/// server.kill();                        // SIGKILL: a crash
/// server.restart().await?;              // same port, same store
/// # drop(client); Ok(()) }
/// ```
pub struct NatsServer {
    binary: String,
    port: u16,
    dir: tempfile::TempDir,
    config: Option<PathBuf>,
    args: Vec<String>,
    token: Option<String>,
    port_only: bool,
    child: Option<Child>,
}

impl NatsServer {
    /// Options first.
    pub fn builder() -> NatsServerBuilder {
        NatsServerBuilder::default()
    }

    /// A server with default options.
    pub async fn start() -> Result<Self, NatsServerError> {
        Self::builder().start().await
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The port (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The JetStream store directory (kept across restarts).
    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("jetstream")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// A client that reconnects every 100 ms, forever (so it rides out
    /// [`kill`](Self::kill), [`stop`](Self::stop) and
    /// [`restart`](Self::restart)), connected when returned.
    pub async fn connect(&self) -> Result<async_nats::Client, NatsServerError> {
        let mut options = async_nats::ConnectOptions::new();
        if let Some(token) = &self.token {
            options = async_nats::ConnectOptions::with_token(token.clone());
        }
        let client = options
            .retry_on_initial_connect()
            .reconnect_delay_callback(|_| Duration::from_millis(100))
            .connect(self.url())
            .await?;
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        while client.connection_state() != async_nats::connection::State::Connected {
            if tokio::time::Instant::now() > deadline {
                return Err(self.not_ready("no connection within 15 s"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(client)
    }

    /// Whether the process is alive.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Freezes the process (SIGSTOP): connections stay open, nothing is
    /// answered, as a hung broker. [`thaw`](Self::thaw) continues it.
    pub fn freeze(&mut self) -> Result<(), NatsServerError> {
        self.signal("-STOP")
    }

    /// Continues a frozen process (SIGCONT).
    pub fn thaw(&mut self) -> Result<(), NatsServerError> {
        self.signal("-CONT")
    }

    /// Kills the process (SIGKILL), as a crash, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the process cleanly (SIGTERM: the server flushes its store)
    /// and waits for it.
    pub fn stop(&mut self) -> Result<(), NatsServerError> {
        if self.child.is_none() {
            return Ok(());
        }
        // A frozen process does not handle SIGTERM until continued.
        self.signal("-CONT")?;
        self.signal("-TERM")?;
        if let Some(mut child) = self.child.take() {
            child.wait().map_err(io("waiting for nats-server"))?;
        }
        Ok(())
    }

    /// Kills the process if it runs, starts it again on the same port with
    /// the same store, and waits until JetStream answers (its streams and
    /// consumers recovered).
    pub async fn restart(&mut self) -> Result<(), NatsServerError> {
        self.kill();
        self.spawn().await
    }

    fn signal(&mut self, signal: &str) -> Result<(), NatsServerError> {
        let Some(child) = self.child.as_ref() else {
            return Ok(());
        };
        let status = Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .map_err(io("running kill"))?;
        if status.success() {
            Ok(())
        } else {
            Err(NatsServerError::Io {
                what: "signalling nats-server",
                source: std::io::Error::other(format!("kill {signal} exited with {status}")),
            })
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("nats.log")
    }

    fn not_ready(&self, reason: &str) -> NatsServerError {
        NatsServerError::NotReady {
            reason: reason.to_owned(),
            log: self.log(),
        }
    }

    async fn spawn(&mut self) -> Result<(), NatsServerError> {
        let mut command = Command::new(&self.binary);
        if let Some(config) = &self.config {
            command.arg("-c").arg(config);
        }
        command
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.store_dir())
            .arg("-l")
            .arg(self.log_path())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command.spawn().map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => NatsServerError::NotInstalled {
                binary: self.binary.clone(),
            },
            _ => NatsServerError::Io {
                what: "starting nats-server",
                source,
            },
        })?;
        self.child = Some(child);
        self.wait_ready().await
    }

    async fn wait_ready(&mut self) -> Result<(), NatsServerError> {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            if !self.is_running() {
                return Err(self.not_ready("it exited at start"));
            }
            if tokio::time::Instant::now() > deadline {
                return Err(self.not_ready("JetStream did not answer within 15 s"));
            }
            let ready = if self.port_only {
                TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok()
            } else {
                jetstream_ready(self.port, self.token.as_deref()).await
            };
            if ready {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        // A frozen process ignores SIGKILL's reaping until continued.
        let _ = self.signal("-CONT");
        self.kill();
    }
}

/// JetStream answers ("no such stream") once it recovered its streams.
pub(crate) async fn jetstream_ready(port: u16, token: Option<&str>) -> bool {
    if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        return false;
    }
    let options = match token {
        Some(token) => async_nats::ConnectOptions::with_token(token.to_owned()),
        None => async_nats::ConnectOptions::new(),
    };
    let Ok(client) = options.connect(format!("nats://127.0.0.1:{port}")).await else {
        return false;
    };
    let probe = tokio::time::timeout(
        Duration::from_secs(2),
        async_nats::jetstream::new(client.clone()).get_stream("READINESS_PROBE"),
    )
    .await;
    let ready = matches!(
        probe,
        Ok(Err(err)) if matches!(err.kind(), async_nats::jetstream::context::GetStreamErrorKind::JetStream(_))
    );
    let _ = client.drain().await;
    ready
}

/// A port nothing listens on right now.
pub(crate) fn free_port() -> Result<u16, NatsServerError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(io("finding a free port"))
}

#[cfg(test)]
mod redaction_tests {
    use super::NatsServer;

    #[test]
    fn the_builder_shows_no_token() {
        let builder = NatsServer::builder().token("s3cret-tok").arg("--debug");
        let shown = format!("{builder:?} {builder:#?}");
        assert!(!shown.contains("s3cret-tok"), "{shown}");
        assert!(
            shown.contains("--auth") && shown.contains("--debug"),
            "{shown}"
        );
    }
}
