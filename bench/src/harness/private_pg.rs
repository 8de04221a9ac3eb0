//! A private PostgreSQL server for a part that needs settings the shared
//! server must not be given (`wal_level = logical`): its own data directory
//! and port, started with the machine's `initdb` and `pg_ctl` (as the
//! `postgres` user when the bench runs as root, since `initdb` refuses
//! root), stopped and removed on drop. The same recipe as the suite's
//! `tests/src/private_postgres.rs`, with the server settings the part asks
//! for and the CPU time of the server's processes. The soak crashes it
//! ([`PrivatePostgres::crash`], `pg_ctl stop -m immediate`) and starts it
//! again on its port and data ([`PrivatePostgres::start_again`]).

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::Command;

use crate::harness::error::BoxError;

/// Kernel clock ticks per second for `/proc` CPU times.
const TICKS_PER_SECOND: f64 = 100.0;

/// A PostgreSQL server in a temporary directory, stopped on drop.
#[derive(Debug)]
pub(crate) struct PrivatePostgres {
    dir: tempfile::TempDir,
    port: u16,
    bindir: PathBuf,
    postmaster: u32,
    /// `pg_ctl -o`: the port, socket directory and settings.
    options: String,
}

impl PrivatePostgres {
    /// `initdb` and start a server on a free port with `settings`
    /// (`-c name=value` each; trust authentication).
    pub(crate) fn start(settings: &[(String, String)]) -> Result<Self, BoxError> {
        let bindir = Command::new("pg_config")
            .arg("--bindir")
            .output()
            .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))?;
        let dir = tempfile::tempdir()?;
        let root = is_root();
        if root {
            run(Command::new("chown")
                .arg("-R")
                .arg("postgres")
                .arg(dir.path()))?;
        }
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let mut server = Self {
            dir,
            port,
            bindir,
            postmaster: 0,
            options: String::new(),
        };
        run(server
            .as_postgres("initdb", root)
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(server.data()))?;
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            server.port,
            server.dir.path().display()
        );
        for (name, value) in settings {
            options.push_str(&format!(" -c {name}={value}"));
        }
        server.options = options;
        server.start_again()?;
        Ok(server)
    }

    /// Starts the server (again) on its port and data directory and waits
    /// until it accepts connections (after a crash: once its recovery from
    /// the WAL is done).
    pub(crate) fn start_again(&mut self) -> Result<(), BoxError> {
        run(self
            .as_postgres("pg_ctl", is_root())
            .args(["-w", "-t", "60", "-D"])
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-o", &self.options, "start"]))?;
        let pid_file = std::fs::read_to_string(self.data().join("postmaster.pid"))?;
        self.postmaster = pid_file
            .lines()
            .next()
            .ok_or("an empty postmaster.pid")?
            .trim()
            .parse()?;
        Ok(())
    }

    /// Crashes the server: `pg_ctl stop -m immediate` ends every process
    /// without a checkpoint, as a power cut or an OOM kill of the
    /// postmaster would (what was committed is in the WAL; what was
    /// committed asynchronously and not yet written is lost). Every client
    /// loses its connections; new ones are refused until
    /// [`start_again`](Self::start_again).
    pub(crate) fn crash(&self) -> Result<(), BoxError> {
        run(self
            .as_postgres("pg_ctl", is_root())
            .args(["-w", "-m", "immediate", "-D"])
            .arg(self.data())
            .arg("stop"))
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// CPU seconds the server's processes used so far: the postmaster's own
    /// and its reaped children's (backends that exited), plus every live
    /// child's (backends, walsenders, background workers).
    pub(crate) fn cpu_seconds(&self) -> f64 {
        let mut ticks = 0;
        if let Some(fields) = stat_fields(self.postmaster) {
            // utime, stime, cutime, cstime.
            ticks += (11..=14)
                .filter_map(|i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
                .sum::<u64>();
        }
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                let Some(fields) = stat_fields(pid) else {
                    continue;
                };
                // After `)`: ppid is the second field.
                if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(self.postmaster) {
                    ticks += (11..=12)
                        .filter_map(|i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
                        .sum::<u64>();
                }
            }
        }
        ticks as f64 / TICKS_PER_SECOND
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn as_postgres(&self, program: &str, root: bool) -> Command {
        let binary = self.bindir.join(program);
        if root {
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
        let _ = self
            .as_postgres("pg_ctl", is_root())
            .args(["-w", "-m", "fast", "-D"])
            .arg(self.data())
            .arg("stop")
            .output();
    }
}

/// The fields of `/proc/<pid>/stat` after the command name.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    Some(
        stat[close + 1..]
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn run(command: &mut Command) -> Result<(), BoxError> {
    let output = command.output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
        .into())
    }
}
