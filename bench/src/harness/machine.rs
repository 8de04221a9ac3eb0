//! The machine a run measures: cores, CPU, memory, server versions, and how
//! busy the CPUs are (by process group), since figures taken while something
//! else computes are meaningless.

use std::collections::BTreeMap;
use std::time::Duration;

use sea_orm::{ConnectionTrait, DbBackend, Statement};

use crate::harness::error::BoxError;
use crate::harness::fixture;

/// Kernel clock ticks per second for `/proc` CPU times (`USER_HZ`, 100 on
/// Linux x86-64).
const TICKS_PER_SECOND: f64 = 100.0;

/// Prints the machine and the servers' versions.
pub(crate) async fn print() -> Result<(), BoxError> {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map_or_else(
            || "?".to_owned(),
            |kib| format!("{:.1} GiB", kib as f64 / 1048576.0),
        );
    let admin = fixture::admin().await?;
    let postgres = admin
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT current_setting('server_version') AS v, current_setting('synchronous_commit') AS sc, \
             current_setting('shared_buffers') AS sb",
        ))
        .await?
        .ok_or("no version row")?;
    let (version, sync, buffers): (String, String, String) = (
        postgres.try_get("", "v")?,
        postgres.try_get("", "sc")?,
        postgres.try_get("", "sb")?,
    );
    admin.close().await?;
    let client = async_nats::connect(fixture::nats_url()).await?;
    let nats = client.server_info();
    println!(
        "machine: {cores} cores ({cpu}), {memory}; PostgreSQL {version} (synchronous_commit={sync}, \
         shared_buffers={buffers}); nats-server {} (JetStream file storage)",
        nats.version
    );
    println!(
        "load before the run: {}; {}",
        load_state(Duration::from_secs(1)).await,
        speed_probe()
    );
    Ok(())
}

/// One core's speed right now: a fixed integer loop, in millions of rounds a
/// second (higher is faster). The same binary on the same machine should
/// give the same figure; when it does not, a neighbour on the host is taking
/// CPU time that `/proc/stat` does not show as steal, and figures of that run
/// are lower for it.
pub(crate) fn speed_probe() -> String {
    const ROUNDS: u64 = 50_000_000;
    let started = std::time::Instant::now();
    let mut x = std::hint::black_box(0x9e37_79b9_7f4a_7c15_u64);
    for _ in 0..ROUNDS {
        // xorshift64: a dependent chain the compiler cannot fold away.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x);
    let rate = ROUNDS as f64 / started.elapsed().as_secs_f64() / 1e6;
    format!("speed probe {rate:.0} M rounds/s on one core")
}

/// The load average and how busy the CPUs were over `window` (this sleeps
/// for `window`), e.g. `load 0.31 0.40 0.44, CPUs 3% busy`.
pub(crate) async fn load_state(window: Duration) -> String {
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned());
    let before = stat_totals();
    tokio::time::sleep(window).await;
    let busy = match (before, stat_totals()) {
        (Some((busy0, all0)), Some((busy1, all1))) if all1 > all0 => {
            format!(
                "{:.0}%",
                100.0 * (busy1 - busy0) as f64 / (all1 - all0) as f64
            )
        }
        _ => "?".to_owned(),
    };
    format!(
        "load {load}, CPUs {busy} busy over {}s",
        window.as_secs_f64()
    )
}

/// (busy, all) ticks of every CPU together, from `/proc/stat`.
fn stat_totals() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let all: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4)?; // idle + iowait
    Some((all - idle, all))
}

/// CPU seconds this process used so far (user + system, all threads).
pub(crate) fn own_cpu_seconds() -> f64 {
    cpu_seconds_at("/proc/self/stat")
}

/// CPU seconds process `pid` (a child) used so far, 0 once it is gone.
pub(crate) fn cpu_seconds_of(pid: u32) -> f64 {
    cpu_seconds_at(&format!("/proc/{pid}/stat"))
}

fn cpu_seconds_at(path: &str) -> f64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|stat| {
            let close = stat.rfind(')')?;
            let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            Some((utime + stime) as f64 / TICKS_PER_SECOND)
        })
        .unwrap_or(0.0)
}

/// CPU time used so far by each process, in its group: `postgres`,
/// `mariadbd`, `nats-server`, `txoutbox-bench` (this process and its
/// children) and everything else, plus the machine's total.
///
/// Kept per process, not summed per group: a group's time since an earlier
/// reading is what its processes used since then, so a process that exits
/// in between (a pooled connection's backend at the end of its lifetime)
/// does not take its whole past with it.
#[derive(Debug, Clone, Default)]
pub(crate) struct CpuTimes {
    by_pid: BTreeMap<u32, (&'static str, u64)>,
    machine_busy: u64,
    machine_all: u64,
}

impl CpuTimes {
    /// Reads every `/proc/<pid>/stat`.
    pub(crate) fn now() -> Self {
        let mut times = Self::default();
        if let Some((busy, all)) = stat_totals() {
            times.machine_busy = busy;
            times.machine_all = all;
        }
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return times;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid … utime stime …`: comm may hold spaces.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let comm = &stat[open + 1..close];
            let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            // After `)`: state is field 3 of the full line, utime 14, stime 15.
            let (Some(utime), Some(stime)) = (fields.get(11), fields.get(12)) else {
                continue;
            };
            let ticks = utime.parse::<u64>().unwrap_or(0) + stime.parse::<u64>().unwrap_or(0);
            let group = match comm {
                c if c.starts_with("postgres") => "postgres",
                "mariadbd" | "mysqld" => "mariadbd",
                "nats-server" => "nats-server",
                c if c.starts_with("txoutbox-bench") => "txoutbox-bench",
                _ => "other",
            };
            times.by_pid.insert(pid, (group, ticks));
        }
        times
    }

    /// Ticks per group since `earlier`: each process's ticks past its
    /// earlier reading (all of them for a process started since). A
    /// process that exited in between is missing, with what it used since
    /// `earlier`.
    fn groups_since(&self, earlier: &Self) -> BTreeMap<&'static str, u64> {
        let mut groups = BTreeMap::new();
        for (pid, (group, ticks)) in &self.by_pid {
            let before = match earlier.by_pid.get(pid) {
                Some((was, before)) if was == group => *before,
                _ => 0,
            };
            *groups.entry(*group).or_default() += ticks.saturating_sub(before);
        }
        groups
    }

    /// CPU seconds of `group` since `earlier`.
    pub(crate) fn group_since(&self, earlier: &Self, group: &str) -> f64 {
        let ticks = self.groups_since(earlier).get(group).copied().unwrap_or(0);
        ticks as f64 / TICKS_PER_SECOND
    }

    /// The machine's busy share since `earlier`, 0.0-1.0.
    pub(crate) fn busy_since(&self, earlier: &Self) -> f64 {
        let all = self.machine_all.saturating_sub(earlier.machine_all);
        let busy = self.machine_busy.saturating_sub(earlier.machine_busy);
        if all > 0 {
            busy as f64 / all as f64
        } else {
            0.0
        }
    }

    /// CPU seconds per group since `earlier`, and the machine's busy share,
    /// e.g. `postgres 5.1 s, txoutbox-bench 3.0 s, nats-server 2.2 s, other 0.3 s; CPUs 97% busy`.
    /// Processes that exited in between are missing from their group.
    pub(crate) fn since(&self, earlier: &Self) -> String {
        let mut parts: Vec<(&str, f64)> = self
            .groups_since(earlier)
            .into_iter()
            .map(|(group, ticks)| (group, ticks as f64 / TICKS_PER_SECOND))
            .collect();
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        let groups: Vec<String> = parts
            .iter()
            .map(|(group, secs)| format!("{group} {secs:.1} s"))
            .collect();
        let all = self.machine_all.saturating_sub(earlier.machine_all);
        let busy = self.machine_busy.saturating_sub(earlier.machine_busy);
        let share = if all > 0 {
            format!("{:.0}%", 100.0 * busy as f64 / all as f64)
        } else {
            "?".to_owned()
        };
        format!("CPU time: {}; CPUs {share} busy", groups.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(processes: &[(u32, &'static str, u64)]) -> CpuTimes {
        CpuTimes {
            by_pid: processes
                .iter()
                .map(|&(pid, group, ticks)| (pid, (group, ticks)))
                .collect(),
            ..CpuTimes::default()
        }
    }

    #[test]
    fn a_process_that_exits_takes_only_itself_out_of_its_group() {
        // A backend with 10 s behind it exits; the one that stays used
        // 0.3 s, a new one 0.1 s. Summed per group, the group went
        // backwards and read 0.
        let earlier = times(&[(1, "postgres", 1_000), (2, "postgres", 50), (7, "other", 5)]);
        let now = times(&[(2, "postgres", 80), (3, "postgres", 10), (7, "other", 5)]);
        let secs = now.group_since(&earlier, "postgres");
        assert!((secs - 40.0 / TICKS_PER_SECOND).abs() < 1e-9, "{secs}");
        assert_eq!(now.group_since(&earlier, "other"), 0.0);
        assert_eq!(now.group_since(&earlier, "nats-server"), 0.0);
    }
}
