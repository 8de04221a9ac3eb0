//! `history`: commit-to-ack for an aggregate with a long published history,
//! measured as in [`latency`](crate::parts::latency).

use crate::harness::error::BoxError;
use crate::harness::report::{Check, thousands};
use crate::harness::stats::{ms, percentile};
use crate::parts::latency::{Placement, WRITERS, Writes, measure};

/// `history`: commit-to-ack at 1,000 events/s when every writer amends an
/// aggregate with 100,000 published events (kept, as by default), beside
/// the same writers amending aggregates with one published event, with the
/// processor in the writers' process and in another one.
pub(crate) async fn run() -> Result<Vec<Check>, BoxError> {
    const RATE: u64 = 1_000;
    const HISTORY: u64 = 100_000;
    println!(
        "== history: {WRITERS} writers amending their own aggregate at {RATE}/s, 1 vs {} published events each ==",
        thousands(HISTORY as f64)
    );
    let mut checks = Vec::new();
    for placement in [Placement::InProcess, Placement::OtherProcess] {
        let mut p50s = Vec::new();
        for history in [1, HISTORY] {
            let mut case = measure(placement, RATE, Writes::Amend { history }).await?;
            let p50 = percentile(&mut case.latencies, 0.5);
            let p99 = percentile(&mut case.latencies, 0.99);
            println!(
                "{:<30} history {:>7}: achieved {:>6} tx/s | commit-to-ack p50 {} p99 {} | {} missing | commit p50 {}\n   {}",
                placement.label(),
                thousands(history as f64),
                thousands(case.achieved),
                ms(p50),
                ms(p99),
                case.missing,
                ms(percentile(&mut case.commit_latencies, 0.5)),
                case.cpu
            );
            p50s.push((p50, p99, case.missing));
        }
        let ((fresh, fresh_p99, _), (long, long_p99, missing)) = (p50s[0], p50s[1]);
        let ratio = long.as_secs_f64() / fresh.as_secs_f64().max(1e-9);
        checks.push(Check::new(
            format!(
                "commit-to-ack p50, 100,000-event histories / fresh, {}",
                placement.label()
            ),
            format!("x{ratio:.2} ({} vs {})", ms(long), ms(fresh)),
            "<= x1.2",
            ratio <= 1.2 && missing == 0,
        ));
        checks.push(Check::new(
            format!(
                "commit-to-ack p99, 100,000-event histories, {}",
                placement.label()
            ),
            format!("{} (fresh {})", ms(long_p99), ms(fresh_p99)),
            "(info)",
            true,
        ));
    }
    Ok(checks)
}
