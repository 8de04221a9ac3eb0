//! Benchmarks of the outbox on this machine's real PostgreSQL and nats-server.
//!
//! ```sh
//! cargo run --release -p txoutbox-bench              # the default parts
//! cargo run --release -p txoutbox-bench -- drain     # one part (or several)
//! ```
//!
//! | part | what |
//! |---|---|
//! | `save-cost` | saving an aggregate with its events vs. the aggregate alone |
//! | `writers` | writer throughput with and without wake-ups |
//! | `jetstream` | the broker's ceiling: pipelined publishes, no database |
//! | `naive` | the naive relay loop (claim, publish, await, complete, repeat) |
//! | `drain` | one processor draining 200,000 rows: rate, statements, memory |
//! | `latency` | commit-to-ack latency at 1,000 and 5,000 events/s, both placements |
//! | `history` | commit-to-ack for an aggregate with a long published history |
//! | `outage` | back to steady after 2-s and 10-s broker outages with writers in another process, on PostgreSQL, MariaDB and SQLite |
//! | `crash` | a processor process killed holding 1,000+ leased rows: time until its aggregates move again; an idle processor's database cost |
//! | `drain-1m` | memory while 1,000,000 rows drain (not in the default run) |
//! | `drain-tune` | the drain with several settings (not in the default run) |
//! | `ingest` | on a private nats-server 2.14: pipelined publishing vs a fast-ingest (ADR-50) prototype, and the drain beside both and beside a drain whose publishes cost nothing (not in the default run) |
//! | `drain-cluster` | the drain on a single private server vs. a 3-node cluster with 3 replicas, each beside its raw ceiling (not in the default run) |
//! | `relay-candidates` | issue 35's relays beside today's processor on one private PostgreSQL with `wal_level=logical`: row locks as leases (1 and 2 relays, takeover) and a logical-replication slot, on uniform, hot and blocked-head backlogs (not in the default run; `--rows N` for a quick run) |
//! | `endurance` | issue 45: the whole pipeline (writers, processor, consumer with an inbox, each its own process) for `--minutes N` (60) at 80% of the best rate a short calibration finds, one line a minute (rates, commit-to-apply p50/p99, RSS, CPU, `outbox_messages` bytes and tuples, inbox and stream bytes, PostgreSQL's WAL syncs) and an `endurance verdict:` line, late part vs early part (not in the default run; `endurance --minutes 60 [--db postgres\|mariadb] [--handler batch\|each] [--retention-secs N] [--writers N] [--rate N] [--table-defaults] [--shared-pg]`: a private PostgreSQL with its defaults (the shared one runs with autovacuum off: `--shared-pg`) and a private nats-server; details in `parts/endurance/mod.rs`) |
//! | `soak` | the chaos soak: 100,000 events through processor, broker and subscriber kills, read back and checked (not in the default run; `soak --short` is the suite's 5,000-event variant; flags in `parts/soak/mod.rs`) |
//!
//! `OUTBOX_BENCH_RATES=5000` limits `latency` to the listed offered rates.
//!
//! Each part runs in a fresh schema (and a fresh stream) deleted afterwards.
//! SIGTERM or Ctrl-C stops a run the same way: its private servers, child
//! processes and temporary directories go with it. Figures go to standard
//! output; `BENCHMARKS.md` records them with the machine.

mod children;
mod harness;
mod parts;

use std::time::Duration;

use crate::children::{processor, subscriber, writer};
use crate::harness::error::BoxError;
use crate::harness::report::{self, Check};
use crate::harness::{fixture, machine, stats, stop_signal};
use crate::parts::drain::{self, Ceilings};
use crate::parts::{
    crash, drain_1m, drain_cluster, drain_skew, drain_tune, endurance, history, ingest, jetstream,
    latency, naive, outage, relay_candidates, save_cost, soak, writers,
};

/// Every part, in running order, and whether the default run includes it.
const PARTS: [(&str, bool); 17] = [
    ("save-cost", true),
    ("writers", true),
    ("jetstream", true),
    ("naive", true),
    ("drain", true),
    ("drain-skew", true),
    ("latency", true),
    ("history", true),
    ("crash", true),
    ("outage", true),
    ("drain-1m", false),
    ("drain-tune", false),
    ("drain-cluster", false),
    ("ingest", false),
    ("soak", false),
    ("endurance", false),
    ("relay-candidates", false),
];

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `--help`: this file's documentation (the parts and how to run them).
    txoutbox_examples::support::exit_on_help(include_str!("main.rs"));
    match args.first().map(String::as_str) {
        Some(processor::PART) => return processor::run(&args[1..]).await,
        Some(children::drain::PART) => return children::drain::run(&args[1..]).await,
        Some(writer::PART) => return writer::run(&args[1..]).await,
        Some(subscriber::PART) => return subscriber::run(&args[1..]).await,
        _ => {}
    }
    // On SIGTERM or Ctrl-C the parts' work is dropped: its private servers,
    // children and temporary directories stop and go with it.
    tokio::select! {
        outcome = parts(args) => outcome,
        signal = stop_signal::received() => {
            Err(format!("{signal}: the run stopped (its private servers and children with it)").into())
        }
    }
}

/// The parts named in `args` (the default ones without), one after another.
async fn parts(args: Vec<String>) -> Result<(), BoxError> {
    // What follows `soak`, `relay-candidates` or `endurance` are its flags.
    let (args, soak_flags) = match args
        .iter()
        .position(|a| a == "soak" || a == "relay-candidates" || a == "endurance")
    {
        Some(at) => (args[..=at].to_vec(), args[at + 1..].to_vec()),
        None => (args, Vec::new()),
    };
    if let Some(unknown) = args.iter().find(|a| !PARTS.iter().any(|(p, _)| p == a)) {
        let names: Vec<&str> = PARTS.iter().map(|(p, _)| *p).collect();
        return Err(format!("unknown part `{unknown}`; parts: {}", names.join(", ")).into());
    }
    let wants = |part: &str| {
        if args.is_empty() {
            PARTS.iter().any(|(p, default)| *p == part && *default)
        } else {
            args.iter().any(|a| a == part)
        }
    };

    machine::print().await?;
    let mut summary: Vec<(&str, Vec<Check>)> = Vec::new();
    let mut ceilings = Ceilings::default();
    if wants("save-cost") {
        save_cost::run().await?;
    }
    if wants("writers") {
        writers::run().await?;
    }
    if wants("jetstream") {
        ceilings.jetstream = Some(jetstream::run().await?);
        between_parts().await;
    }
    if wants("naive") {
        ceilings.naive = Some(naive::run().await?);
        between_parts().await;
    }
    if wants("drain") {
        let checks = drain::run(ceilings).await?;
        report::print("drain targets", &checks);
        summary.push(("drain", checks));
        between_parts().await;
    }
    if wants("drain-skew") {
        let checks = drain_skew::run(ceilings).await?;
        report::print("drain-skew targets", &checks);
        summary.push(("drain-skew", checks));
        between_parts().await;
    }
    if wants("latency") {
        let checks = latency::run().await?;
        report::print("latency targets", &checks);
        summary.push(("latency", checks));
        between_parts().await;
    }
    if wants("history") {
        let checks = history::run().await?;
        report::print("history targets", &checks);
        summary.push(("history", checks));
        between_parts().await;
    }
    if wants("crash") {
        let checks = crash::run().await?;
        report::print("crash targets", &checks);
        summary.push(("crash", checks));
        between_parts().await;
    }
    if wants("outage") {
        let checks = outage::run().await?;
        report::print("outage targets", &checks);
        summary.push(("outage", checks));
        between_parts().await;
    }
    if wants("drain-1m") {
        let checks = drain_1m::run().await?;
        report::print("drain-1m targets", &checks);
        summary.push(("drain-1m", checks));
        between_parts().await;
    }
    if wants("drain-tune") {
        drain_tune::run().await?;
    }
    if wants("drain-cluster") {
        drain_cluster::run().await?;
    }
    if wants("ingest") {
        ingest::run().await?;
    }
    if wants("soak") {
        soak::run(&soak_flags).await?;
    }
    if wants("relay-candidates") {
        relay_candidates::run(&soak_flags).await?;
    }
    if wants("endurance") {
        endurance::run(&soak_flags).await?;
    }
    if !summary.is_empty() {
        println!("== summary ==");
        for (part, checks) in &summary {
            report::print(part, checks);
        }
        println!(
            "load after the run: {}; {}",
            machine::load_state(Duration::from_secs(1)).await,
            machine::speed_probe()
        );
    }
    Ok(())
}

/// Writes the previous part's dirty pages out (`CHECKPOINT`, timed), lets
/// autovacuum catch up, and reports the load, before the next part measures:
/// a part should not pay for the checkpoint its predecessor's writes make due.
async fn between_parts() {
    let checkpoint = match checkpoint().await {
        Ok(took) => format!("CHECKPOINT took {}", stats::ms(took)),
        Err(err) => format!("CHECKPOINT failed: {err}"),
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "({checkpoint}; load between parts: {})",
        machine::load_state(Duration::from_secs(1)).await
    );
}

async fn checkpoint() -> Result<Duration, BoxError> {
    use sea_orm::ConnectionTrait;
    let admin = fixture::admin().await?;
    let started = std::time::Instant::now();
    admin.execute_unprepared("CHECKPOINT").await?;
    let took = started.elapsed();
    admin.close().await?;
    Ok(took)
}
