//! What every example needs before the interesting part: a database and a
//! NATS server with JetStream, found or started.
//!
//! - Database: `DATABASE_URL` if set (PostgreSQL, MySQL/MariaDB or SQLite),
//!   else an SQLite file in the system's temp directory.
//! - NATS: `NATS_URL` if set, else `127.0.0.1:4222` if something answers
//!   there, else a private `nats-server` with JetStream on a free port and a
//!   temporary store directory, stopped when the [`Nats`] guard is dropped.
//!   When `nats-server` is not installed, the error says which package to
//!   install.

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DbErr, EntityTrait, Schema};
use txoutbox::sea_orm::migration::{MigratorTrait, OutboxMigrator};
use txoutbox::{Outbox, OutboxConfig};

/// Something the examples could not set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `nats-server` is neither reachable nor installed.
    #[error(
        "no NATS server answers at {tried} and `nats-server` is not installed: \
         install it with `apt-get install -y nats-server`, or set NATS_URL"
    )]
    NatsMissing {
        /// The address tried.
        tried: String,
    },
    /// The private nats-server did not come up.
    #[error("the private nats-server did not accept connections on {0} within 10 s")]
    NatsDidNotStart(SocketAddr),
    /// An I/O error while starting it.
    #[error("starting nats-server: {0}")]
    Io(#[from] std::io::Error),
    /// Connecting failed (the error names the server).
    #[error(transparent)]
    Connect(#[from] txoutbox::nats::ConnectError),
}

/// The NATS server the example uses, and the private one it started, if any.
#[derive(Debug)]
pub struct Nats {
    /// The URL to connect to.
    pub url: String,
    private: Option<(Child, tempfile::TempDir)>,
}

impl Nats {
    /// Finds a NATS server or starts a private one (see the module docs).
    pub fn find_or_start() -> Result<Self, SetupError> {
        if let Ok(url) = std::env::var("NATS_URL") {
            return Ok(Self { url, private: None });
        }
        let default: SocketAddr = (Ipv4Addr::LOCALHOST, 4222).into();
        if TcpStream::connect_timeout(&default, Duration::from_millis(300)).is_ok() {
            return Ok(Self {
                url: default.to_string(),
                private: None,
            });
        }
        let binary = nats_server_binary().ok_or_else(|| SetupError::NatsMissing {
            tried: default.to_string(),
        })?;
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let store = tempfile::tempdir()?;
        let child = Command::new(binary)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let address: SocketAddr = (Ipv4Addr::LOCALHOST, port).into();
        let nats = Self {
            url: address.to_string(),
            private: Some((child, store)),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline {
                return Err(SetupError::NatsDidNotStart(address));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        tracing::info!(%address, "started a private nats-server with JetStream");
        Ok(nats)
    }

    /// Whether this example started its own server.
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }

    /// Connects a client (to any server of a comma-separated list).
    pub async fn connect(&self) -> Result<async_nats::Client, SetupError> {
        Ok(txoutbox::NatsConnect::new(self.url.as_str())
            .connect()
            .await?)
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        if let Some((child, _store)) = &mut self.private {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn nats_server_binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nats-server"))
            .collect::<Vec<_>>()
    });
    on_path
        .chain([PathBuf::from("/usr/sbin/nats-server")])
        .find(|path| path.is_file())
}

/// A private `nats-server` with JetStream on a port of its own, which can be
/// stopped and started again (same port, same store): for showing what the
/// outbox does while the broker is down. Stopped when dropped.
#[derive(Debug)]
pub struct PrivateNats {
    binary: PathBuf,
    address: SocketAddr,
    store: tempfile::TempDir,
    child: Option<Child>,
}

impl PrivateNats {
    /// Picks a free port and a temporary store directory; does not start
    /// the server yet.
    pub fn new() -> Result<Self, SetupError> {
        let binary = nats_server_binary().ok_or_else(|| SetupError::NatsMissing {
            tried: "a private server".to_owned(),
        })?;
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        Ok(Self {
            binary,
            address: (Ipv4Addr::LOCALHOST, port).into(),
            store: tempfile::tempdir()?,
            child: None,
        })
    }

    /// The URL clients connect to (whether or not the server is running).
    pub fn url(&self) -> String {
        self.address.to_string()
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(&mut self) -> Result<(), SetupError> {
        if self.child.is_some() {
            return Ok(());
        }
        let child = Command::new(&self.binary)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.address.port().to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&self.address, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline {
                return Err(SetupError::NatsDidNotStart(self.address));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Stops the server (its store is kept for the next start).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The stream the single-file examples publish to and consume from.
pub const EXAMPLE_STREAM: &str = "OUTBOX_EXAMPLES";

/// The subject prefix of the single-file examples' events (the stream
/// captures `examples.>`).
pub const EXAMPLE_PREFIX: &str = "examples";

/// Answers `--help` (or `-h`) on the command line: prints the program's
/// own documentation, the `//!` lines of `source` (pass
/// `include_str!("this_file.rs")`), and exits; returns otherwise.
///
/// ```
/// let doc = txoutbox_examples::support::doc_of("//! Line one.\n//!\n//! Line two.\nfn main() {}\n");
/// assert_eq!(doc, "Line one.\n\nLine two.\n");
/// ```
pub fn exit_on_help(source: &str) {
    if std::env::args()
        .skip(1)
        .any(|arg| arg == "--help" || arg == "-h")
    {
        print!("{}", doc_of(source));
        std::process::exit(0);
    }
}

/// The `//!` documentation of a Rust source file, as text.
pub fn doc_of(source: &str) -> String {
    source
        .lines()
        .map_while(|line| line.strip_prefix("//!"))
        .map(|line| format!("{}\n", line.strip_prefix(' ').unwrap_or(line)))
        .collect()
}

/// Logs of the libraries at WARN (`RUST_LOG` overrides), to stderr, so the
/// examples' own output stays readable.
pub fn init_logging() {
    init_logging_at("warn");
}

/// Logs of the libraries at `default` (`RUST_LOG` overrides), to stderr.
pub fn init_logging_at(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Connects to `url` and creates what the outbox needs (the outbox and
/// inbox tables, through their migrations), returning an [`Outbox`] with
/// `config`.
pub async fn open_outbox(url: &str, config: OutboxConfig) -> Result<Outbox, Box<dyn Error>> {
    let db = sea_orm::Database::connect(url).await?;
    OutboxMigrator::up(&db, None).await?;
    Ok(Outbox::new(db, config))
}

/// A printable form of a database URL without its password.
pub fn display_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// `DATABASE_URL`, or an SQLite file named `name` in the temp directory.
pub fn database_url(name: &str) -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| {
        let path = std::env::temp_dir().join(format!("{name}.sqlite"));
        format!("sqlite://{}?mode=rwc", path.display())
    })
}

/// Creates `entity`'s table if it does not exist, on any backend (the
/// examples' own tables; the outbox's come from its migrations).
pub async fn create_entity_table<E: EntityTrait>(
    db: &impl ConnectionTrait,
    entity: E,
) -> Result<(), DbErr> {
    let schema = Schema::new(db.get_database_backend());
    let mut statement = schema.create_table_from_entity(entity);
    statement.if_not_exists();
    db.execute(&statement).await?;
    Ok(())
}
