//! The child processes of the soak (and of `outage`): this binary as a processor
//! ([`child`](crate::children::processor)), the writers
//! ([`writer_child`](crate::children::writer)) or the subscriber
//! ([`soak_subscriber`](crate::children::subscriber)), each started and waited
//! for until it prints `ready`, then SIGKILLed or stopped (its standard
//! input closed). Its output is read meanwhile: the last `dups <n>` and the
//! `done …` line.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::harness::error::BoxError;

/// Longest a child may take to print `ready`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A child process of the soak.
#[derive(Debug)]
pub(crate) struct Proc {
    name: String,
    child: Child,
    dups: Arc<AtomicU64>,
    done: Arc<Mutex<Option<String>>>,
    reader: JoinHandle<()>,
}

impl Proc {
    /// Starts this binary with `args`, called `name` in messages, and waits
    /// for its `ready`.
    pub(crate) async fn start(name: &str, args: &[String]) -> Result<Self, BoxError> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(args)
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
        let dups = Arc::new(AtomicU64::new(0));
        let done = Arc::new(Mutex::new(None));
        let reader = {
            let (dups, done) = (Arc::clone(&dups), Arc::clone(&done));
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(n) = line.strip_prefix("dups ") {
                        if let Ok(n) = n.trim().parse() {
                            dups.store(n, Ordering::Relaxed);
                        }
                    } else if line.starts_with("done") {
                        *done.lock().unwrap_or_else(PoisonError::into_inner) = Some(line);
                    }
                }
            })
        };
        Ok(Self {
            name: name.to_owned(),
            child,
            dups,
            done,
            reader,
        })
    }

    /// SIGKILL, as a crash; reaps the process and reads what it printed.
    /// Returns the last duplicate count it printed.
    pub(crate) async fn kill(&mut self) -> Result<u64, BoxError> {
        self.child.start_kill()?;
        self.child.wait().await?;
        (&mut self.reader).await?;
        Ok(self.dups.load(Ordering::Relaxed))
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
        drop(self.child.stdin.take());
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .map_err(|_| format!("the {} did not stop within {timeout:?}", self.name))??;
        if !status.success() {
            return Err(format!("the {} failed: {status}", self.name).into());
        }
        (&mut self.reader).await?;
        Ok((self.dups.load(Ordering::Relaxed), self.done()))
    }

    /// The `done …` line, once it printed it.
    pub(crate) fn done(&self) -> Option<String> {
        self.done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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
