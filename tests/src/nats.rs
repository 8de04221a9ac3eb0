//! A private nats-server for fault tests: its own port and store
//! directory, killed and restarted at will, never the machine's shared one.
//!
//! ```ignore
//! let mut server = NatsServer::start().await;           // -js on a free port
//! let client = server.connect().await;                  // reconnects quickly
//! server.kill();                                        // SIGKILL: a crash
//! server.restart().await;                               // same port and store
//! let big = NatsServer::builder().config("max_payload: 4096").start().await;
//! ```
//!
//! The binary is `nats-server` from `PATH`, or `OUTBOX_TEST_NATS_SERVER`.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a start may take before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Options of a [`NatsServer`] beyond `-js`, its port and store directory.
#[derive(Debug, Default, Clone)]
pub struct NatsServerBuilder {
    config: Option<String>,
    args: Vec<String>,
    token: Option<String>,
}

impl NatsServerBuilder {
    /// Contents of a configuration file the server is started with (`-c`),
    /// for settings without a flag, e.g. `max_payload: 4096` or a
    /// `jetstream { max_memory_store: ... }` block.
    pub fn config(mut self, text: impl Into<String>) -> Self {
        self.config = Some(text.into());
        self
    }

    /// Clients must authenticate with `token` (`--auth`); the readiness
    /// probe does.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.args.extend(["--auth".to_owned(), token.clone()]);
        self.token = Some(token);
        self
    }

    /// An extra command-line argument, e.g. `--max_pending`.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Starts the server and waits until JetStream answers.
    ///
    /// # Panics
    /// When the binary is missing or the server does not come up (its log
    /// is in the panic message).
    pub async fn start(self) -> NatsServer {
        let dir = tempfile::tempdir().expect("temp dir for nats-server");
        let config = self.config.map(|text| {
            let path = dir.path().join("nats.conf");
            std::fs::write(&path, text).expect("write nats.conf");
            path
        });
        let mut server = NatsServer {
            port: free_port(),
            dir,
            config,
            args: self.args,
            token: self.token,
            child: None,
        };
        server.spawn().await;
        server
    }
}

/// A nats-server child process with JetStream, on `127.0.0.1`, killed when
/// dropped.
#[derive(Debug)]
pub struct NatsServer {
    port: u16,
    dir: tempfile::TempDir,
    config: Option<PathBuf>,
    args: Vec<String>,
    token: Option<String>,
    child: Option<Child>,
}

impl NatsServer {
    /// Options first.
    pub fn builder() -> NatsServerBuilder {
        NatsServerBuilder::default()
    }

    /// A server with default options.
    pub async fn start() -> Self {
        Self::builder().start().await
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The port it listens on (the same across restarts).
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

    /// A connected client that reconnects every 100 ms, forever (so it
    /// rides out [`kill`](Self::kill) and [`restart`](Self::restart)).
    ///
    /// # Panics
    /// When the options are refused.
    pub async fn connect(&self) -> async_nats::Client {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .reconnect_delay_callback(|_| Duration::from_millis(100))
            .connect(self.url())
            .await
            .expect("connect to the private nats-server");
        // `retry_on_initial_connect` returns at once; the server is up, so
        // wait for the connection before handing the client out.
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        while client.connection_state() != async_nats::connection::State::Connected {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no connection to the private nats-server"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        client
    }

    /// Whether the process is alive.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Freezes the process with SIGSTOP: its connections stay open but
    /// nothing is answered, as a hung broker. [`resume`](Self::resume)
    /// continues it; [`kill`](Self::kill) and drop still work.
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn pause(&mut self) {
        self.signal("-STOP");
    }

    /// Continues a [`pause`](Self::pause)d process (SIGCONT).
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn resume(&mut self) {
        self.signal("-CONT");
    }

    fn signal(&mut self, signal: &str) {
        let pid = self.child.as_ref().expect("the server runs").id();
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid} failed: {status}");
    }

    /// Kills the process with SIGKILL, as a crash would, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the process if it runs, then starts it again on the same port
    /// with the same store, and waits until JetStream answers (streams and
    /// consumers recovered).
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("nats.log")
    }

    async fn spawn(&mut self) {
        let binary =
            std::env::var("OUTBOX_TEST_NATS_SERVER").unwrap_or_else(|_| "nats-server".to_owned());
        let mut command = Command::new(&binary);
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
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{binary}`: {e}"));
        self.child = Some(child);
        self.wait_ready().await;
    }

    async fn wait_ready(&mut self) {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            if !self.is_running() {
                panic!("nats-server exited at start; log:\n{}", self.log());
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "nats-server not ready in {START_TIMEOUT:?}; log:\n{}",
                    self.log()
                );
            }
            if jetstream_ready(self.port, self.token.as_deref()).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn jetstream_ready(port: u16, token: Option<&str>) -> bool {
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
    // JetStream answers (here: "no such stream") once it has recovered
    // its streams and consumers.
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
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn config_applies_and_restart_keeps_port_and_store() {
        let mut server = NatsServer::builder()
            .config("max_payload: 4096")
            .start()
            .await;
        let client = server.connect().await;
        assert_eq!(client.server_info().max_payload, 4096);
        let jetstream = async_nats::jetstream::new(client.clone());
        jetstream
            .create_stream(async_nats::jetstream::stream::Config {
                name: "KEPT".into(),
                subjects: vec!["kept.>".into()],
                ..Default::default()
            })
            .await
            .expect("a file stream");
        let port = server.port();
        server.kill();
        assert!(!server.is_running());
        server.restart().await;
        assert_eq!(server.port(), port);
        assert!(
            jetstream.get_stream("KEPT").await.is_ok(),
            "the stream survived in the store directory"
        );
    }
}
