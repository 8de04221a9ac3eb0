//! The soak's figures, printed: the writers, each fault and how publishing
//! and consuming went on after it, what was read back, and the verdict.

use std::time::Duration;

use crate::harness::stats::ms;
use crate::parts::soak::check::Findings;
use crate::parts::soak::faults::FaultKind;
use crate::parts::soak::held_up::HeldUp;
use crate::parts::soak::timeline::{self, Hit, Sample};

/// Everything the report shows.
pub(crate) struct Figures<'a> {
    /// The writers' `done …` line.
    pub(crate) writers_said: &'a str,
    /// From the start until the writers were done.
    pub(crate) written_for: Duration,
    /// From the start until everything was published and applied.
    pub(crate) total: Duration,
    pub(crate) hits: &'a [Hit],
    /// What each database outage held up, in the order of `hits`.
    pub(crate) held: &'a [HeldUp],
    /// The stream's duplicate window.
    pub(crate) window: Duration,
    pub(crate) samples: &'a [Sample],
    pub(crate) findings: &'a Findings,
    /// Acks of re-publishes the broker dropped as duplicates.
    pub(crate) republished: u64,
    /// Deliveries the inbox found applied already.
    pub(crate) absorbed: u64,
}

/// Prints the figures and the verdict.
pub(crate) fn print(figures: &Figures<'_>) {
    let Figures {
        findings, total, ..
    } = figures;
    let rows = findings.rows as f64;
    println!(
        "writers: {} ({} events in {}, {:.0} events/s); everything published and applied {} \
         after the start ({:.0} events/s end to end)",
        figures.writers_said,
        findings.rows,
        ms(figures.written_for),
        rows / figures.written_for.as_secs_f64(),
        ms(*total),
        rows / total.as_secs_f64(),
    );
    let shown = |d: Option<Duration>| d.map_or("-".to_owned(), ms);
    for (i, hit) in figures.hits.iter().enumerate() {
        let until = figures.hits.get(i + 1).map_or(*total, |next| next.at);
        let recovery = timeline::recovery(figures.samples, hit, until);
        println!(
            "fault {}: {} at {}, down {}; after it was back, publishing went on after {} and \
             consuming after {}; backlog peak {} rows, back to its level before the fault after \
             {} (published) and {} (applied)",
            i + 1,
            hit.kind,
            ms(hit.at),
            ms(hit.back - hit.at),
            shown(recovery.publishing),
            shown(recovery.consuming),
            recovery.peak_backlog,
            shown(recovery.published_up),
            shown(recovery.applied_up),
        );
    }
    let outages = figures
        .hits
        .iter()
        .enumerate()
        .filter(|(_, hit)| hit.kind == FaultKind::Database);
    for ((i, hit), held) in outages.zip(figures.held) {
        let until = figures.hits.get(i + 1).map_or(*total, |next| next.at);
        let recovery = timeline::recovery(figures.samples, hit, until);
        let down = hit.back - hit.at;
        println!(
            "database outage (fault {}): down {} ({} the stream's {} s duplicate window); after \
             its return publishing went on after {}, the subscriber applied again after {}, and \
             every one of the {} aggregates with events not applied at the crash applied again \
             after {} (those events recorded published {}); backlog peak {} rows",
            i + 1,
            ms(down),
            if down > figures.window {
                "longer than"
            } else {
                "within"
            },
            figures.window.as_secs_f64(),
            shown(recovery.publishing),
            shown(held.first_applied),
            held.aggregates,
            shown(held.every_aggregate),
            held.every_published
                .map_or("before the crash".to_owned(), |d| format!(
                    "by {} after the return",
                    ms(d)
                )),
            recovery.peak_backlog,
        );
    }
    println!(
        "read back: {} rows, {} messages in the stream, {} aggregates, {} effects; re-publishes \
         absorbed by deduplication {}, duplicate deliveries absorbed by the inbox {}",
        findings.rows,
        findings.stored,
        findings.aggregates,
        findings.effects,
        figures.republished,
        figures.absorbed
    );
    if findings.violations.is_empty() {
        println!(
            "soak PASSED: 0 lost, 0 duplicates, 0 order violations, 0 dead, every effect once and \
             in order"
        );
    } else {
        let list: Vec<String> = findings
            .violations
            .iter()
            .map(ToString::to_string)
            .collect();
        println!("soak FAILED: {}", list.join("; "));
        for example in &findings.examples {
            println!("  e.g. {example}");
        }
    }
}
