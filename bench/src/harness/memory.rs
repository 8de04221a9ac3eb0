//! This process's memory, from `/proc/self/status`: resident now (`VmRSS`),
//! the peak (`VmHWM`), and a sampler for "is it flat?".

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::harness::error::BoxError;

/// Resident and peak resident memory, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Memory {
    /// `VmRSS`.
    pub(crate) rss_kib: u64,
    /// `VmHWM`: the process's peak.
    pub(crate) peak_kib: u64,
}

/// Reads `/proc/self/status`.
pub(crate) fn now() -> Result<Memory, BoxError> {
    of_status("/proc/self/status")
}

/// The memory of process `pid` (a child), from `/proc/<pid>/status`.
pub(crate) fn of(pid: u32) -> Result<Memory, BoxError> {
    of_status(&format!("/proc/{pid}/status"))
}

fn of_status(path: &str) -> Result<Memory, BoxError> {
    let status = std::fs::read_to_string(path)?;
    let field = |name: &str| -> Result<u64, BoxError> {
        let line = status
            .lines()
            .find(|line| line.starts_with(name))
            .ok_or_else(|| format!("no {name} in {path}"))?;
        let kib = line
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| format!("malformed {name} line: {line}"))?;
        Ok(kib.parse()?)
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        peak_kib: field("VmHWM:")?,
    })
}

/// MiB with one decimal.
pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Samples `VmRSS` every period on a task of its own.
#[derive(Debug)]
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<(Duration, u64)>>,
}

impl Sampler {
    /// Starts sampling now (a first sample at once).
    pub(crate) fn start(period: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut samples = Vec::new();
            let mut ticks = tokio::time::interval(period);
            while !stopped.load(Ordering::Acquire) {
                ticks.tick().await;
                if let Ok(memory) = now() {
                    samples.push((started.elapsed(), memory.rss_kib));
                }
            }
            samples
        });
        Self { stop, task }
    }

    /// Stops and returns (time since start, `VmRSS` KiB) samples.
    pub(crate) async fn stop(self) -> Result<Vec<(Duration, u64)>, BoxError> {
        self.stop.store(true, Ordering::Release);
        Ok(self.task.await?)
    }
}
