//! A processor in a process of its own (the `outbox-test-processor` binary),
//! for tests that crash it for real: SIGKILL, SIGSTOP and SIGCONT.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};

use crate::TestDb;
use crate::jetstream::nats_url;

/// A child process (a processor or a consumer) on a test's database (its
/// PostgreSQL schema, its MariaDB database), killed on drop.
#[derive(Debug)]
pub struct ProcessorProcess {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl ProcessorProcess {
    /// Starts `binary` (pass `env!("CARGO_BIN_EXE_outbox-test-processor")`)
    /// on `test`'s isolated schema or database, publishing under `prefix` to the
    /// machine's nats-server, with the extra arguments `args` (e.g.
    /// `--lease-ms`, `--batch-size`, `--write-orders`), and waits until it
    /// prints `started`.
    ///
    /// # Panics
    /// When the process cannot be started or does not start its processor.
    pub async fn start(binary: &str, test: &TestDb, prefix: &str, args: &[&str]) -> Self {
        match Self::try_start(binary, test, prefix, args).await {
            Ok(started) => started,
            Err(output) => panic!("the process did not start: {output}"),
        }
    }

    /// [`start`](Self::start), returning what the process wrote on its
    /// standard error when it exits instead of starting.
    ///
    /// # Panics
    /// When the process cannot be started or its output read.
    pub async fn try_start(
        binary: &str,
        test: &TestDb,
        prefix: &str,
        args: &[&str],
    ) -> Result<Self, String> {
        Self::try_start_on(binary, test, &nats_url(), prefix, args).await
    }

    /// [`try_start`](Self::try_start) on the nats-server at `nats` (a
    /// private server of the test's own) instead of the machine's.
    ///
    /// # Panics
    /// When the process cannot be started or its output read.
    pub async fn try_start_on(
        binary: &str,
        test: &TestDb,
        nats: &str,
        prefix: &str,
        args: &[&str],
    ) -> Result<Self, String> {
        let (url, schema) = test.location();
        let mut command = Command::new(binary);
        command.args(["--database-url", &url]);
        if let Some(schema) = &schema {
            command.args(["--schema", schema]);
        }
        let mut child = command
            .args(["--nats", nats, "--subject-prefix", prefix])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the process");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut stderr = child.stderr.take().expect("stderr");
        let line = tokio::task::block_in_place(|| {
            let mut line = String::new();
            stdout.read_line(&mut line).map(|_| line)
        })
        .expect("read the child's output");
        if line.trim() != "started" {
            let mut output = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut output);
            let status = child.wait().expect("reap it");
            return Err(format!("{status}: {line}{output}"));
        }
        // Its logs go on to ours.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::stderr()));
        Ok(Self { child, stdout })
    }

    /// SIGKILL, as a crash; reaps the process.
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill the processor process");
        self.child.wait().expect("reap it");
    }

    /// Whether the process has exited (crashed, aborted or stopped).
    ///
    /// # Panics
    /// When its status cannot be read.
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().expect("the child's status").is_some()
    }

    /// SIGSTOP: the process stops where it is (a VM pause, a long GC), its
    /// connections open.
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn pause(&mut self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`pause`](Self::pause).
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn resume(&mut self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid} failed: {status}");
    }

    /// Closes its standard input (a graceful stop) and returns its report
    /// line (`report published=N batches=N failed=N dead=N released=N`).
    ///
    /// # Panics
    /// When the process fails.
    pub fn stop(mut self) -> String {
        drop(self.child.stdin.take());
        let mut report = String::new();
        tokio::task::block_in_place(|| {
            self.stdout.read_line(&mut report).expect("read the report");
            let status = self.child.wait().expect("wait for the process");
            assert!(status.success(), "the processor process failed: {status}");
        });
        report
    }
}

impl Drop for ProcessorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The number after `name=` in a report line.
///
/// # Panics
/// When the line has no such field.
pub fn report_field(report: &str, name: &str) -> u64 {
    let prefix = format!("{name}=");
    report
        .split_whitespace()
        .find_map(|field| field.strip_prefix(prefix.as_str()))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{name}` in the report `{report}`"))
}

/// For the child binaries: the arguments [`ProcessorProcess::start`] passes
/// to every child (`--database-url`, `--schema`, `--nats`,
/// `--subject-prefix`).
#[derive(Debug, Default)]
pub struct ChildArgs {
    /// The database's URL.
    pub database_url: String,
    /// The PostgreSQL schema to put on the `search_path`.
    pub schema: Option<String>,
    /// The NATS server's URL.
    pub nats: String,
    /// The outbox's subject prefix.
    pub subject_prefix: String,
}

impl ChildArgs {
    /// Parses the process's arguments: the common ones here, every other
    /// flag through `extra(flag, value)`, which takes the flag's value by
    /// calling `value` and returns whether it knew the flag.
    ///
    /// # Errors
    /// An unknown flag, a missing or bad value, or a missing common one.
    pub fn parse(
        mut extra: impl FnMut(&str, &mut dyn FnMut() -> Result<String, String>) -> Result<bool, String>,
    ) -> Result<Self, String> {
        let mut args = Self::default();
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--database-url" => args.database_url = value()?,
                "--schema" => args.schema = Some(value()?),
                "--nats" => args.nats = value()?,
                "--subject-prefix" => args.subject_prefix = value()?,
                other => {
                    if !extra(other, &mut value)? {
                        return Err(format!("unknown argument `{other}`"));
                    }
                }
            }
        }
        if args.database_url.is_empty() || args.nats.is_empty() || args.subject_prefix.is_empty() {
            return Err("--database-url, --nats and --subject-prefix are required".to_owned());
        }
        Ok(args)
    }

    /// An outbox on the database (the schema on the `search_path`),
    /// publishing under the subject prefix.
    ///
    /// # Errors
    /// When the database cannot be reached or the prefix is invalid.
    pub async fn outbox(&self) -> Result<txoutbox_sea_orm::Outbox, Box<dyn std::error::Error>> {
        let mut options = sea_orm::ConnectOptions::new(&self.database_url);
        if let Some(schema) = &self.schema {
            options.set_schema_search_path(schema.clone());
        }
        options.max_connections(10).sqlx_logging(false);
        let db = sea_orm::Database::connect(options).await?;
        Ok(txoutbox_sea_orm::Outbox::new(
            db,
            txoutbox_sea_orm::OutboxConfig::default().with_subject_prefix(&self.subject_prefix)?,
        ))
    }
}

/// A parsed number, or an error naming `flag`.
///
/// # Errors
/// When `text` is not a number of type `T`.
pub fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|e| format!("{flag}: {e}"))
}

/// For the child binaries: returns once standard input closes (the parent's
/// graceful stop).
///
/// # Errors
/// When the blocking reader task fails.
pub async fn until_stdin_closes() -> Result<(), tokio::task::JoinError> {
    tokio::task::spawn_blocking(|| {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            if line.is_err() {
                break;
            }
        }
    })
    .await
}

/// The dead-letter stream `outbox-test-consumer` creates for the test
/// publishing under `subject_prefix`.
pub fn dead_letter_stream(subject_prefix: &str) -> String {
    format!("DLQ_{subject_prefix}")
}
