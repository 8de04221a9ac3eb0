//! A private MariaDB server for database fault tests: its own data
//! directory and port (`mariadb-install-db`, then `mariadbd`), restarted
//! (a clean shutdown or SIGKILL), frozen (SIGSTOP) and its connections
//! killed at will; never the machine's shared server. It runs without
//! grant tables (no passwords: a throwaway server on loopback).

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

use crate::private_postgres::Shutdown;

/// A MariaDB server in a temporary directory, killed on drop.
#[derive(Debug)]
pub struct PrivateMariaDb {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl PrivateMariaDb {
    /// Installs a data directory, starts the server on a free port, and
    /// creates the database `test`.
    ///
    /// # Panics
    /// When the binaries are missing or the server does not start.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut server = Self {
            port: TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port"),
            dir,
            child: None,
        };
        let mut install = Command::new("mariadb-install-db");
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", server.data().display()))
            .arg("--skip-test-db")
            .arg("--auth-root-authentication-method=normal");
        if crate::private_postgres::is_root() {
            install.arg("--user=root");
        }
        let output = install
            .output()
            .expect("mariadb-install-db (apt install mariadb-server)");
        assert!(
            output.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        server.spawn().await;
        let admin = Database::connect(server.admin_url())
            .await
            .expect("connect");
        admin
            .execute_unprepared("CREATE DATABASE test")
            .await
            .expect("create the database test");
        admin.close().await.ok();
        server
    }

    /// `mysql://root@127.0.0.1:<port>/test`.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }

    /// Stops the server (`Fast`: a clean shutdown, `Immediate`: SIGKILL,
    /// a crash recovered at the next start) and starts it again.
    pub async fn restart(&mut self, mode: Shutdown) {
        self.stop(mode);
        self.spawn().await;
    }

    /// Starts the server again after [`stop`](Self::stop) (or after
    /// [`crash_command`](Self::crash_command) killed it), on the same port
    /// and data; returns once it accepts connections.
    pub async fn start_again(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.wait(); // killed by `crash_command`: reaped
        }
        self.spawn().await;
    }

    /// Stops the server (`Fast`: a clean shutdown, `Immediate`: SIGKILL, a
    /// crash recovered at the next start) and waits for it to exit.
    pub fn stop(&mut self, mode: Shutdown) {
        if let Some(mut child) = self.child.take() {
            let signal = match mode {
                Shutdown::Fast => "-TERM",
                Shutdown::Immediate => "-KILL",
            };
            let _ = Command::new("kill")
                .arg(signal)
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }

    /// A crash of the server (SIGKILL) from anywhere, e.g. inside a
    /// publisher at the moment a test chooses: a command that kills it;
    /// [`start_again`](Self::start_again) restarts it.
    pub fn crash_command(&self) -> Command {
        let mut kill = Command::new("kill");
        kill.arg("-KILL");
        if let Some(child) = &self.child {
            kill.arg(child.id().to_string());
        }
        kill
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Continues a frozen server (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Kills every client connection but the one asking; returns how many.
    pub async fn terminate_connections(&self) -> u64 {
        let admin = Database::connect(self.admin_url()).await.expect("connect");
        let rows = admin
            .query_all_raw(Statement::from_string(
                DbBackend::MySql,
                "SELECT id FROM information_schema.processlist \
                 WHERE id <> CONNECTION_ID() AND user <> 'system user' AND command <> 'Daemon'",
            ))
            .await
            .expect("list the connections");
        let mut killed = 0;
        for row in rows {
            let id: i64 = row.try_get("", "id").expect("an id");
            if admin
                .execute_unprepared(&format!("KILL {id}"))
                .await
                .is_ok()
            {
                killed += 1;
            }
        }
        admin.close().await.ok();
        killed
    }

    fn admin_url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .arg(signal)
                .arg(child.id().to_string())
                .status();
        }
    }

    async fn spawn(&mut self) {
        let mut command = Command::new("mariadbd");
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data().display()))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!(
                "--socket={}",
                self.dir.path().join("mariadb.sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.dir.path().join("mariadb.pid").display()
            ))
            .arg(format!(
                "--log-error={}",
                self.dir.path().join("error.log").display()
            ))
            .arg("--skip-grant-tables")
            .arg("--innodb-flush-log-at-trx-commit=2")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if crate::private_postgres::is_root() {
            command.arg("--user=root");
        }
        self.child = Some(
            command
                .spawn()
                .expect("mariadbd (apt install mariadb-server)"),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(db) = Database::connect(self.admin_url()).await {
                db.close().await.ok();
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "mariadbd did not start: {}",
                std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        self.thaw();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
