//! The endurance verdict: the late part of a run against its early part,
//! each ratio held to its target. Pure arithmetic on the per-minute
//! figures, so it is tested without a run.

use std::fmt::Write as _;
use std::ops::Range;

/// What a minute of the run contributes to the verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Minute {
    /// Events applied by the consumer per second.
    pub(crate) applied_per_s: f64,
    /// p99 commit-to-apply, in ms.
    pub(crate) p99_ms: f64,
    /// RSS of the writer, processor and consumer processes, in MiB.
    pub(crate) rss_mib: [f64; 3],
    /// `outbox_messages` heap (data) + index bytes.
    pub(crate) outbox_bytes: f64,
}

/// The processes whose RSS is held to the target, in [`Minute::rss_mib`]'s
/// order.
pub(crate) const PROCESSES: [&str; 3] = ["writer", "processor", "consumer"];

/// Targets (issue 45).
pub(crate) const THROUGHPUT_AT_LEAST: f64 = 0.95;
pub(crate) const P99_AT_MOST: f64 = 1.5;
/// Each process's RSS and the `outbox_messages` bytes may grow less than
/// this share from the early part's mean to the late part's. A mean, not a
/// sample: the table's size swings with each purge (on MariaDB, with each
/// estimate too) and a process's RSS with what its allocator keeps (the
/// consumer's ~2 MB of ~25 from one minute to the next), so a late peak
/// against one early sample read a swing as growth; a plateau is a mean
/// that stays.
pub(crate) const GROWTH_BELOW: f64 = 0.10;

/// The minutes compared, as indices into the run's minutes (minute `m` is
/// index `m - 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Windows {
    pub(crate) early: Range<usize>,
    pub(crate) late: Range<usize>,
}

impl Windows {
    /// For a run of 30 minutes or more: minutes 6-15 (after the first 5)
    /// against the last 10. For a shorter one: its second third against
    /// its last third. `None` for fewer than 3 minutes.
    pub(crate) fn of(minutes: usize) -> Option<Self> {
        if minutes >= 30 {
            return Some(Self {
                early: 5..15,
                late: minutes - 10..minutes,
            });
        }
        if minutes < 3 {
            return None;
        }
        let (a, b) = (minutes / 3, 2 * minutes / 3);
        Some(Self {
            early: a..b,
            late: b..minutes,
        })
    }

    /// `minutes 6-15 vs 51-60` (one-based, inclusive).
    pub(crate) fn describe(&self) -> String {
        format!(
            "minutes {}-{} vs {}-{}",
            self.early.start + 1,
            self.early.end,
            self.late.start + 1,
            self.late.end
        )
    }
}

/// One ratio against its target.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ratio {
    /// Its name in the verdict (and in the list of what drifted).
    pub(crate) name: String,
    /// The figure, formatted.
    pub(crate) figure: String,
    /// The target, formatted.
    pub(crate) target: String,
    pub(crate) pass: bool,
}

/// Every ratio of a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) windows: Windows,
    pub(crate) ratios: Vec<Ratio>,
}

impl Verdict {
    /// Whether every target holds.
    pub(crate) fn flat(&self) -> bool {
        self.ratios.iter().all(|r| r.pass)
    }

    /// The names of the ratios that missed their target.
    pub(crate) fn drifted(&self) -> Vec<&str> {
        self.ratios
            .iter()
            .filter(|r| !r.pass)
            .map(|r| r.name.as_str())
            .collect()
    }

    /// The `endurance verdict: …` line.
    pub(crate) fn line(&self) -> String {
        let mut line = String::from("endurance verdict: ");
        if self.flat() {
            line.push_str("flat");
        } else {
            let _ = write!(line, "drift ({})", self.drifted().join(", "));
        }
        let _ = write!(line, "; {}", self.windows.describe());
        for ratio in &self.ratios {
            let _ = write!(
                line,
                "; {} {} (target {}) {}",
                ratio.name,
                ratio.figure,
                ratio.target,
                if ratio.pass { "ok" } else { "MISS" }
            );
        }
        line
    }
}

/// The verdict on `minutes` with `errors` errors, or `None` for a run too
/// short to compare (fewer than 3 minutes).
pub(crate) fn judge(minutes: &[Minute], errors: u64) -> Option<Verdict> {
    let windows = Windows::of(minutes.len())?;
    let early = &minutes[windows.early.clone()];
    let late = &minutes[windows.late.clone()];
    let mut ratios = Vec::new();

    let throughput = ratio(
        mean(late.iter().map(|m| m.applied_per_s)),
        mean(early.iter().map(|m| m.applied_per_s)),
    );
    ratios.push(Ratio {
        name: "throughput late/early".into(),
        figure: format!("{throughput:.3}"),
        target: format!(">= {THROUGHPUT_AT_LEAST}"),
        pass: throughput >= THROUGHPUT_AT_LEAST,
    });

    let p99 = ratio(
        mean(late.iter().map(|m| m.p99_ms)),
        mean(early.iter().map(|m| m.p99_ms)),
    );
    ratios.push(Ratio {
        name: "p99 late/early".into(),
        figure: format!("{p99:.3}"),
        target: format!("<= {P99_AT_MOST}"),
        pass: p99 <= P99_AT_MOST,
    });

    for (i, process) in PROCESSES.iter().enumerate() {
        ratios.push(growth(
            format!("{process} RSS growth"),
            mean(late.iter().map(|m| m.rss_mib[i])),
            mean(early.iter().map(|m| m.rss_mib[i])),
        ));
    }
    ratios.push(growth(
        "outbox_messages heap+index growth".into(),
        mean(late.iter().map(|m| m.outbox_bytes)),
        mean(early.iter().map(|m| m.outbox_bytes)),
    ));

    ratios.push(Ratio {
        name: "errors".into(),
        figure: errors.to_string(),
        target: "0".into(),
        pass: errors == 0,
    });
    Some(Verdict { windows, ratios })
}

/// Growth from `from` to `to`, held below [`GROWTH_BELOW`].
fn growth(name: String, to: f64, from: f64) -> Ratio {
    let grown = ratio(to, from) - 1.0;
    Ratio {
        name,
        figure: format!("{:+.1}%", grown * 100.0),
        target: format!("< +{:.0}%", GROWTH_BELOW * 100.0),
        pass: grown < GROWTH_BELOW,
    }
}

/// `late / early`; 1 when both are 0, infinite when only `early` is.
fn ratio(late: f64, early: f64) -> f64 {
    if early > 0.0 {
        late / early
    } else if late > 0.0 {
        f64::INFINITY
    } else {
        1.0
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steady(n: usize) -> Vec<Minute> {
        (0..n)
            .map(|_| Minute {
                applied_per_s: 1_000.0,
                p99_ms: 20.0,
                rss_mib: [30.0, 40.0, 50.0],
                outbox_bytes: 100e6,
            })
            .collect()
    }

    fn drifted(minutes: &[Minute], errors: u64) -> Vec<String> {
        let verdict = judge(minutes, errors).expect("a verdict");
        verdict.drifted().into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn windows_of_an_hour_and_of_short_runs() {
        assert_eq!(
            Windows::of(60),
            Some(Windows {
                early: 5..15,
                late: 50..60
            })
        );
        assert_eq!(
            Windows::of(60).map(|w| w.describe()).as_deref(),
            Some("minutes 6-15 vs 51-60")
        );
        assert_eq!(
            Windows::of(5),
            Some(Windows {
                early: 1..3,
                late: 3..5
            })
        );
        assert_eq!(
            Windows::of(9),
            Some(Windows {
                early: 3..6,
                late: 6..9
            })
        );
        assert_eq!(Windows::of(2), None);
    }

    #[test]
    fn a_steady_run_is_flat() {
        for n in [3, 5, 60] {
            let verdict = judge(&steady(n), 0).expect("a verdict");
            assert!(verdict.flat(), "{}", verdict.line());
            assert!(verdict.line().starts_with("endurance verdict: flat; "));
        }
    }

    #[test]
    fn a_slower_late_part_drifts() {
        let mut minutes = steady(60);
        for m in &mut minutes[50..] {
            m.applied_per_s = 900.0;
        }
        assert_eq!(drifted(&minutes, 0), ["throughput late/early"]);
        // Slow minutes before the late part do not count.
        let mut minutes = steady(60);
        minutes[20].applied_per_s = 100.0;
        assert!(drifted(&minutes, 0).is_empty());
    }

    #[test]
    fn a_longer_late_tail_drifts() {
        let mut minutes = steady(5);
        for m in &mut minutes[3..] {
            m.p99_ms = 31.0;
        }
        assert_eq!(drifted(&minutes, 0), ["p99 late/early"]);
        minutes[3].p99_ms = 29.0;
        minutes[4].p99_ms = 30.0;
        assert!(drifted(&minutes, 0).is_empty());
    }

    #[test]
    fn a_growing_process_drifts() {
        // 40 MiB until minute 15, then 30 kB a minute more: +1.35 MiB in
        // 45 minutes, its late mean 3.0% above the early one.
        let growing = |per_minute: f64| -> Vec<Minute> {
            steady(60)
                .into_iter()
                .enumerate()
                .map(|(i, mut m)| {
                    m.rss_mib[1] += per_minute * i.saturating_sub(14) as f64;
                    m
                })
                .collect()
        };
        assert!(drifted(&growing(0.03), 0).is_empty());
        // 100 kB a minute: +10.1%.
        assert_eq!(drifted(&growing(0.1), 0), ["processor RSS growth"]);
    }

    #[test]
    fn a_process_swinging_around_its_level_is_flat() {
        // The consumer of the each-handler hour of 29 Nov 14:18: ~2 MB of
        // swing on ~25 MB; a late peak against a low early sample read
        // +13.4% where its level had not moved that much.
        let minutes: Vec<Minute> = steady(60)
            .into_iter()
            .enumerate()
            .map(|(i, mut m)| {
                m.rss_mib[2] = if i % 2 == 0 { 23.7 } else { 26.8 };
                m
            })
            .collect();
        assert!(drifted(&minutes, 0).is_empty());
    }

    #[test]
    fn a_table_without_a_plateau_drifts() {
        let minutes: Vec<Minute> = steady(5)
            .into_iter()
            .enumerate()
            .map(|(i, m)| Minute {
                outbox_bytes: 100e6 * (1.0 + i as f64 * 0.1),
                ..m
            })
            .collect();
        assert_eq!(drifted(&minutes, 0), ["outbox_messages heap+index growth"]);
    }

    #[test]
    fn a_table_swinging_around_its_plateau_is_flat() {
        // The MariaDB hour of 29 Nov: 266-322 MB in minutes 6-15, 278-301
        // MB in 51-60 (its late peak 12.5% above minute 15).
        let minutes: Vec<Minute> = steady(60)
            .into_iter()
            .enumerate()
            .map(|(i, m)| Minute {
                outbox_bytes: if i % 2 == 0 { 266e6 } else { 301e6 },
                ..m
            })
            .collect();
        assert!(drifted(&minutes, 0).is_empty());
    }

    #[test]
    fn errors_drift_and_every_miss_is_named() {
        assert_eq!(drifted(&steady(5), 1), ["errors"]);
        let mut minutes = steady(5);
        minutes[4].applied_per_s = 0.0;
        minutes[4].rss_mib[0] = 100.0;
        let verdict = judge(&minutes, 2).expect("a verdict");
        assert!(!verdict.flat());
        assert!(
            verdict.line().starts_with(
                "endurance verdict: drift (throughput late/early, writer RSS growth, errors); "
            ),
            "{}",
            verdict.line()
        );
    }

    #[test]
    fn zero_early_figures_do_not_divide_by_zero() {
        let mut minutes = steady(5);
        for m in &mut minutes {
            m.p99_ms = 0.0;
        }
        assert!(judge(&minutes, 0).expect("a verdict").flat());
        minutes[4].p99_ms = 5.0;
        assert_eq!(drifted(&minutes, 0), ["p99 late/early"]);
    }
}
