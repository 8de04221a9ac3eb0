//! A private PostgreSQL server for database fault tests: its own data
//! directory and port, restarted (fast or immediate), paused (SIGSTOP)
//! and its connections terminated at will; never the machine's shared
//! server. Built with the machine's `initdb` and `pg_ctl`
//! (`pg_config --bindir`), run as the `postgres` user when the tests run as
//! root (`initdb` refuses root).

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::Command;

use sea_orm::{ConnectionTrait, Database};

/// How `pg_ctl stop` shuts the server down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Rolls back open transactions, checkpoints, exits.
    Fast,
    /// Exits at once, as a crash; recovery replays the WAL at the next start.
    Immediate,
}

/// A PostgreSQL server in a temporary directory, stopped on drop.
#[derive(Debug)]
pub struct PrivatePostgres {
    dir: tempfile::TempDir,
    port: u16,
    bindir: PathBuf,
    /// Settings added to every start (`-c name=value ...`).
    settings: String,
}

impl PrivatePostgres {
    /// `initdb` and start a server on a free port (trust authentication,
    /// `fsync` off: these tests crash the server, not the machine).
    ///
    /// # Panics
    /// When the binaries are missing or the server does not start.
    pub fn start() -> Self {
        Self::init().started()
    }

    /// [`start`](Self::start) with `ssl = on`, serving the certificate
    /// `cert` and its key `key` (PEM files, copied into the server's
    /// directory).
    ///
    /// # Panics
    /// As [`start`](Self::start), or when the files cannot be copied.
    pub fn start_with_tls(cert: &std::path::Path, key: &std::path::Path) -> Self {
        let mut server = Self::init();
        let (cert_copy, key_copy) = (
            server.dir.path().join("server.crt"),
            server.dir.path().join("server.key"),
        );
        std::fs::copy(cert, &cert_copy).expect("copy the server certificate");
        std::fs::copy(key, &key_copy).expect("copy the server key");
        std::fs::set_permissions(
            &key_copy,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("the key readable by its owner only");
        if is_root() {
            run(Command::new("chown")
                .arg("postgres")
                .arg(&cert_copy)
                .arg(&key_copy));
        }
        server.settings = format!(
            " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            cert_copy.display(),
            key_copy.display()
        );
        server.started()
    }

    /// `initdb` in a new directory; not started.
    fn init() -> Self {
        let bindir = Command::new("pg_config")
            .arg("--bindir")
            .output()
            .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
            .expect("pg_config (apt install postgresql)");
        let dir = tempfile::tempdir().expect("a temp dir");
        if is_root() {
            run(Command::new("chown")
                .arg("-R")
                .arg("postgres")
                .arg(dir.path()));
        }
        let server = Self {
            port: TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port"),
            dir,
            bindir,
            settings: String::new(),
        };
        run(server
            .as_postgres("initdb")
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(server.data()));
        server
    }

    fn started(self) -> Self {
        self.start_server();
        self
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server (`mode`) and starts it again on the same port and
    /// data; returns once it accepts connections.
    pub fn restart(&self, mode: Shutdown) {
        self.stop(mode);
        self.start_server();
    }

    /// Starts the server again after [`stop`](Self::stop), on the same port
    /// and data; returns once it accepts connections.
    pub fn start_again(&self) {
        self.start_server();
    }

    /// Stops the server.
    pub fn stop(&self, mode: Shutdown) {
        let mode = match mode {
            Shutdown::Fast => "fast",
            Shutdown::Immediate => "immediate",
        };
        run(self
            .as_postgres("pg_ctl")
            .args(["-w", "-m", mode, "-D"])
            .arg(self.data())
            .arg("stop"));
    }

    /// Freezes every process of the server (SIGSTOP): connections stay
    /// open and nothing answers, as a hung database. [`thaw`](Self::thaw)
    /// continues them.
    pub fn freeze(&self) {
        self.signal_all("-STOP");
    }

    /// Continues a frozen server (SIGCONT).
    pub fn thaw(&self) {
        self.signal_all("-CONT");
    }

    /// Terminates every client connection (`pg_terminate_backend`) but the
    /// one asking; returns how many.
    pub async fn terminate_connections(&self) -> u64 {
        let admin = Database::connect(self.url())
            .await
            .expect("an admin connection");
        let rows = admin
            .query_all_raw(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Postgres,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            ))
            .await
            .expect("terminate the connections");
        admin.close().await.ok();
        rows.len() as u64
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn start_server(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200{}",
            self.port,
            self.dir.path().display(),
            self.settings
        );
        run(self
            .as_postgres("pg_ctl")
            .args(["-w", "-t", "60", "-D"])
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-o", &options, "start"]));
    }

    /// The postmaster and every process it forked.
    fn signal_all(&self, signal: &str) {
        let pid_file =
            std::fs::read_to_string(self.data().join("postmaster.pid")).expect("postmaster.pid");
        let postmaster = pid_file
            .lines()
            .next()
            .expect("the postmaster's pid")
            .trim();
        let children = Command::new("pgrep")
            .args(["-P", postmaster])
            .output()
            .expect("pgrep");
        let mut pids: Vec<String> = String::from_utf8_lossy(&children.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        pids.push(postmaster.to_owned());
        // A backend may exit between pgrep and kill: kill signals the rest.
        let _ = Command::new("kill").arg(signal).args(&pids).output();
    }

    fn as_postgres(&self, program: &str) -> Command {
        let binary = self.bindir.join(program);
        if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(binary);
            command
        } else {
            Command::new(binary)
        }
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        self.thaw();
        let _ = self
            .as_postgres("pg_ctl")
            .args(["-w", "-m", "immediate", "-D"])
            .arg(self.data())
            .arg("stop")
            .output();
    }
}

/// Whether the tests run as root.
pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn run(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
