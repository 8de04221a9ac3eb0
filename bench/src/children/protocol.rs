//! The one protocol between a part and the children it starts: this binary
//! as the processor (`processor-child`), the drain (`drain-child`), the
//! writers (`writer-child`) or the soak's subscriber (`soak-subscriber`), each a file of
//! `children/`, none of which this file imports:
//!
//! - spawn: the part starts this binary with the child's part name and its
//!   flags ([`Proc::start`]);
//! - ready: the child prints `ready` once it is set up ([`ready`]); the
//!   part waits for it (at most a minute);
//! - work: the child may read lines from its standard input (`mark`) and
//!   print progress lines (`dups <n>`, see [`print_count`]; `drained`);
//!   the part reads its output meanwhile ([`Proc::wait_for`], [`Proc::last`]);
//! - done: the part closes the child's standard input (a graceful stop) or
//!   SIGKILLs it (a crash); a child that stops prints its figures and a
//!   last `done …` line ([`Proc::output`], [`Proc::stopped`]).

use std::io::Write;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::harness::error::BoxError;

/// Longest a child may take to print `ready`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A child process started by a part.
#[derive(Debug)]
pub(crate) struct Proc {
    name: String,
    child: Child,
    /// Every line it printed after `ready`, in order.
    lines: Arc<Mutex<Vec<String>>>,
    /// How many lines it printed so far; closed when its output ends.
    printed: watch::Receiver<usize>,
    reader: JoinHandle<()>,
}

impl Proc {
    /// Starts this binary with `args`, called `name` in messages, and waits
    /// for its `ready`.
    pub(crate) async fn start(name: &str, args: &[String]) -> Result<Self, BoxError> {
        Self::start_with(name, args, &[]).await
    }

    /// [`start`](Self::start) with `env` added to its environment.
    pub(crate) async fn start_with(
        name: &str,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Result<Self, BoxError> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| format!("the {name} has no stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(START_TIMEOUT, lines.next_line())
            .await
            .map_err(|_| format!("the {name} did not start within {START_TIMEOUT:?}"))??;
        if first.as_deref().map(str::trim) != Some("ready") {
            return Err(format!("the {name} said {first:?} instead of `ready`").into());
        }
        let printed = Arc::new(Mutex::new(Vec::new()));
        let (count, counted) = watch::channel(0);
        let reader = {
            let printed = Arc::clone(&printed);
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    let mut printed = printed.lock().unwrap_or_else(PoisonError::into_inner);
                    printed.push(line);
                    count.send_replace(printed.len());
                }
            })
        };
        Ok(Self {
            name: name.to_owned(),
            child,
            lines: printed,
            printed: counted,
            reader,
        })
    }

    /// Writes `line` to its standard input (e.g. `mark`).
    pub(crate) async fn send(&mut self, line: &str) -> Result<(), BoxError> {
        let stdin = self
            .child
            .stdin
            .as_mut()
            .ok_or_else(|| format!("the {} has no stdin", self.name))?;
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Sends `line` (e.g. `mark`) and waits up to `timeout` for the first
    /// line starting with `prefix` it prints after that.
    pub(crate) async fn ask(
        &mut self,
        line: &str,
        prefix: &str,
        timeout: Duration,
    ) -> Result<String, BoxError> {
        let before = *self.printed.borrow_and_update();
        self.send(line).await?;
        let answer = async {
            loop {
                let found = self
                    .lines
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .skip(before)
                    .find(|l| l.starts_with(prefix))
                    .cloned();
                if let Some(found) = found {
                    return Some(found);
                }
                self.printed.changed().await.ok()?;
            }
        };
        tokio::time::timeout(timeout, answer)
            .await
            .ok()
            .flatten()
            .ok_or_else(|| {
                format!(
                    "the {} did not answer `{line}` with `{prefix} …`",
                    self.name
                )
                .into()
            })
    }

    /// Its process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Waits until it prints a line starting with `prefix` and returns that
    /// line, or `None` once its output ended without one.
    pub(crate) async fn wait_for(&mut self, prefix: &str) -> Option<String> {
        loop {
            if let Some(line) = self.first(prefix) {
                return Some(line);
            }
            if self.printed.changed().await.is_err() {
                return self.first(prefix);
            }
        }
    }

    /// The first line it printed starting with `prefix`.
    fn first(&self, prefix: &str) -> Option<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|line| line.starts_with(prefix))
            .cloned()
    }

    /// The last line it printed starting with `prefix`, so far.
    pub(crate) fn last(&self, prefix: &str) -> Option<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .rev()
            .find(|line| line.starts_with(prefix))
            .cloned()
    }

    /// The last duplicate count it printed (`dups <n>`), 0 if none.
    fn dups(&self) -> u64 {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .rev()
            .filter_map(|line| line.strip_prefix("dups "))
            .find_map(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// SIGKILL, as a crash; reaps the process and reads what it printed.
    /// Returns the last duplicate count it printed.
    pub(crate) async fn kill(&mut self) -> Result<u64, BoxError> {
        self.child.start_kill()?;
        self.child.wait().await?;
        (&mut self.reader).await?;
        Ok(self.dups())
    }

    /// Closes its standard input (a graceful stop) and waits up to
    /// `timeout` for it to exit successfully. Returns its duplicate count.
    pub(crate) async fn stop(self, timeout: Duration) -> Result<u64, BoxError> {
        Ok(self.stopped(timeout).await?.0)
    }

    /// [`stop`](Self::stop), also returning the `done …` line it printed
    /// on its way out.
    pub(crate) async fn stopped(
        mut self,
        timeout: Duration,
    ) -> Result<(u64, Option<String>), BoxError> {
        self.end(Some(timeout)).await?;
        Ok((self.dups(), self.done()))
    }

    /// Closes its standard input (a graceful stop), waits for it to exit
    /// successfully, however long it takes, and returns every line it
    /// printed after `ready`.
    pub(crate) async fn output(mut self) -> Result<Vec<String>, BoxError> {
        self.end(None).await?;
        let lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(PoisonError::into_inner));
        Ok(lines)
    }

    /// Closes its standard input, waits (up to `timeout`, if any) for it to
    /// exit successfully and for its output to end.
    async fn end(&mut self, timeout: Option<Duration>) -> Result<(), BoxError> {
        drop(self.child.stdin.take());
        let status = match timeout {
            Some(timeout) => tokio::time::timeout(timeout, self.child.wait())
                .await
                .map_err(|_| format!("the {} did not stop within {timeout:?}", self.name))??,
            None => self.child.wait().await?,
        };
        if !status.success() {
            return Err(format!("the {} failed: {status}", self.name).into());
        }
        (&mut self.reader).await?;
        Ok(())
    }

    /// The `done …` line, once it printed it.
    pub(crate) fn done(&self) -> Option<String> {
        self.last("done")
    }

    /// Whether the process has exited.
    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Its name in messages.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

/// `args` as owned strings.
pub(crate) fn args(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// The child's side: prints `ready`, once it is set up.
pub(crate) fn ready() -> Result<(), std::io::Error> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()
}

/// The child's side: prints `line` (an answer to a `mark`) at once.
pub(crate) fn say(line: &str) -> Result<(), std::io::Error> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

/// Prints `<label> <n>` whenever `count()` changed, checked every 250 ms,
/// until aborted: progress a parent still has after SIGKILLing the process.
pub(crate) async fn print_count(
    label: &'static str,
    count: impl Fn() -> u64,
) -> Result<(), std::io::Error> {
    let mut shown = 0;
    let mut every = tokio::time::interval(std::time::Duration::from_millis(250));
    loop {
        every.tick().await;
        let now = count();
        if now != shown {
            shown = now;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{label} {now}")?;
            out.flush()?;
        }
    }
}
