//! `drain-skew`: the same 200,000-row backlog spread over 200,000, 1,000,
//! 100, 10 and 1 aggregates, each drained by one processor with the default
//! settings, in one run. Per-aggregate order makes hot aggregates the hard
//! shape: each aggregate's messages go out one after another in sequence
//! order, and a claim must find the few heads that are free among many
//! blocked rows. Targets are ratios to the uniform drain of the same run.

use std::time::Duration;

use crate::children::drain::Settings;
use crate::harness::error::BoxError;
use crate::harness::report::{Check, thousands};
use crate::parts::drain::{Ceilings, drain};
use crate::parts::naive;

/// Rows of every backlog.
const ROWS: u64 = naive::ROWS;
/// Aggregates the backlog is spread over, and each one's target as a ratio
/// to the uniform drain (`None`: the uniform drain itself).
const SHAPES: [(u64, Option<f64>); 5] = [
    (ROWS, None),
    (1_000, None),
    (100, Some(0.8)),
    (10, Some(0.5)),
    (1, Some(0.25)),
];
/// The uniform drain against the naive loop of the same run.
const UNIFORM_OVER_NAIVE: f64 = 1.5;

/// `drain-skew`: every shape, then the targets.
pub(crate) async fn run(ceilings: Ceilings) -> Result<Vec<Check>, BoxError> {
    println!(
        "== drain-skew: {} rows over 200,000 / 1,000 / 100 / 10 / 1 aggregates, one processor ==",
        thousands(ROWS as f64)
    );
    let mut rates = Vec::new();
    for (aggregates, _) in SHAPES {
        println!("-- {} aggregates", thousands(aggregates as f64));
        let drained = drain(
            Settings::default(),
            ROWS,
            aggregates,
            Duration::from_millis(100),
        )
        .await?;
        drained.print();
        println!("   {}", drained.cpu);
        rates.push(drained.rate());
    }
    let uniform = rates[0];
    println!(
        "{:>12}  {:>14}  {:>10}",
        "aggregates", "events/s", "x uniform"
    );
    for ((aggregates, _), rate) in SHAPES.iter().zip(&rates) {
        println!(
            "{:>12}  {:>14}  {:>10.2}",
            thousands(*aggregates as f64),
            thousands(*rate),
            rate / uniform
        );
    }
    let mut checks: Vec<Check> = SHAPES
        .iter()
        .zip(&rates)
        .filter_map(|((aggregates, target), rate)| {
            let target = (*target)?;
            Some(Check::new(
                format!("drain over {aggregates} aggregate(s) / uniform drain"),
                format!("x{:.2} ({}/s)", rate / uniform, thousands(*rate)),
                format!(">= x{target}"),
                *rate >= target * uniform,
            ))
        })
        .collect();
    match ceilings.naive {
        Some(naive) => checks.push(Check::new(
            "uniform drain (200,000 aggregates) / naive loop",
            format!(
                "x{:.2} (naive {}/s)",
                uniform / naive.one,
                thousands(naive.one)
            ),
            format!(">= x{UNIFORM_OVER_NAIVE}"),
            uniform >= UNIFORM_OVER_NAIVE * naive.one,
        )),
        None => println!("(no naive-loop ratio: run the `naive` part in the same run)"),
    }
    Ok(checks)
}
