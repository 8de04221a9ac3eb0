//! `txoutbox-bench processor-child --schema S --prefix P`: the processor in a
//! process of its own, for the latency part's "other process" placement.
//!
//! It runs `Outbox::processor` (woken by PostgreSQL `NOTIFY`, as another
//! process is) with a publisher that records each ack's wall-clock time and
//! prints `ready`. Each `mark` line on its standard input snapshots the
//! statements it sent; when its input closes it stops the processor and
//! prints one `ack <message id> <unix nanoseconds>` line per ack, one
//! `stmt <count> <kind>` line per kind of statement sent between the first
//! two marks, then `done <published> <batches>`. Parent and child read the
//! same clock.
//!
//! For the soak: `--nats URL` publishes to that server (a private one,
//! killed and restarted: the client rides that out) instead of the
//! machine's; `--progress` prints `dups <n>` whenever the count of acks
//! that were re-publishes dropped by the broker's deduplication changed
//! (checked every 250 ms), so a parent learns it even if it SIGKILLs the
//! process.
//!
//! For the endurance part: `--url URL` reaches the database by URL
//! (PostgreSQL with `--schema`, or MariaDB) instead of the machine's
//! PostgreSQL; `--retention-secs N` keeps published rows N s (the
//! processor's cleanup, on by default, with its other defaults);
//! `--count-only` counts acks without keeping them (no `ack` lines), and
//! each `mark` line is answered with `published <acks so far>`.
//!
//! With `RUST_LOG` set, it logs to standard error (the parent's): e.g.
//! `RUST_LOG=txoutbox_sea_orm::store::claim=trace` prints every claim.

use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, BufReader};
use txoutbox_core::cleanup::Cleanup;
use txoutbox_nats::JetStreamPublisher;
use txoutbox_sea_orm::Outbox;

use crate::children::protocol::{self, Proc, args};
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, connect_child};
use crate::harness::pgstats::{self, StatementLog};
use crate::harness::record::{Acks, RecordingPublisher};

/// The part's name on the command line.
pub(crate) const PART: &str = "processor-child";

/// Connections of the child's pool.
const POOL: u32 = 8;

/// Runs the child with `args` (what follows the part's name).
pub(crate) async fn run(args: &[String]) -> Result<(), BoxError> {
    let value = |flag: &str| fixture::flag_value(args, PART, flag);
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let prefix = value("--prefix")?;
    let mut db = connect_child(args, PART, POOL).await?;
    let log = StatementLog::install(&mut db);
    let outbox = Outbox::new(db, fixture::config(prefix)?);
    let client = match fixture::flag_value(args, PART, "--nats") {
        Ok(url) => fixture::reconnecting_client(url).await?,
        Err(_) => async_nats::connect(fixture::nats_url()).await?,
    };
    let count_only = args.iter().any(|a| a == "--count-only");
    let acks = if count_only {
        Acks::counting_only()
    } else {
        Acks::default()
    };
    let publisher = RecordingPublisher::new(
        JetStreamPublisher::new(client, "/txoutbox-bench-child"),
        acks.clone(),
    );
    let mut builder = outbox.processor(publisher);
    if let Ok(secs) = value("--retention-secs") {
        builder = builder.cleanup(Cleanup::keep_for(Duration::from_secs(secs.parse()?)));
    }
    let processor = builder.build()?.spawn();
    protocol::ready()?;
    let progress = args.iter().any(|a| a == "--progress").then(|| {
        let acks = acks.clone();
        tokio::spawn(protocol::print_count("dups", move || acks.duplicates()))
    });

    let mut marks = Vec::new();
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = input.next_line().await? {
        if line.trim() == "mark" {
            marks.push(log.snapshot());
            if count_only {
                protocol::say(&format!("published {}", acks.acked()))?;
            }
        }
    }
    let report = processor.shutdown().await?;
    if let Some(progress) = progress {
        progress.abort();
        println!("dups {}", acks.duplicates());
    }

    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (id, at) in acks.take() {
        let nanos = at.duration_since(UNIX_EPOCH)?.as_nanos();
        writeln!(out, "ack {id} {nanos}")?;
    }
    if let [from, to, ..] = marks.as_slice() {
        for (kind, count) in pgstats::between(from, to) {
            writeln!(out, "stmt {count} {kind}")?;
        }
    }
    writeln!(out, "done {} {}", report.published, report.batches)?;
    out.flush()?;
    Ok(())
}

/// Starts this binary as the processor child on `schema` and `prefix` (the
/// machine's nats-server, no progress lines) and waits for its `ready`.
pub(crate) async fn start(schema: &str, prefix: &str) -> Result<Proc, BoxError> {
    Proc::start(
        "processor child",
        &args(&[PART, "--schema", schema, "--prefix", prefix]),
    )
    .await
}
