//! `relay-candidates [--rows N]`: the relays issue 35 asks to measure,
//! beside today's processor, in one run, on one private PostgreSQL server
//! with `wal_level = logical` (started and stopped by the part, its other
//! settings copied from the shared server's, so every candidate runs on the
//! same settings):
//!
//! - `drain`: today's processor (the `drain` part's child process);
//! - `locks`: row locks as leases ([`row_locks`]), one and two relays, and
//!   one relay deleting instead of marking (uniform backlog only);
//! - `wal`: a logical replication slot streamed with `pgwire-replication`
//!   ([`wal`]).
//!
//! On fresh backlogs of N rows (200,000 by default): uniform, 100 hot
//! aggregates, 10 hot aggregates, and 100 aggregates one of whose heads waits
//! out a retry. The raw JetStream ceiling and the naive loop are measured
//! before and after the candidates (their mean is the baseline). Then the
//! takeover of a row-lock relay's rows when its connection drops mid-batch.
//! Every figure is checked: the stream holds each publishable row once, the
//! table has exactly the blocked rows left.

mod row;
mod row_locks;
mod wal;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::join_all;
use sea_orm::ConnectionTrait;
use txoutbox_nats::JetStreamPublisher;

use crate::children::drain::Settings;
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, BenchDb, BenchStream, Broker, fill};
use crate::harness::machine;
use crate::harness::pgstats::{self, TableStats};
use crate::harness::private_pg::PrivatePostgres;
use crate::harness::report::thousands;
use crate::parts::drain::{Shape, drain_shape, prepare, settle_counters};
use crate::parts::{jetstream, naive};
use row_locks::{Counts, Relay, Settle};

/// Settings copied from the shared server to the private one.
const COPIED: [&str; 9] = [
    "shared_buffers",
    "synchronous_commit",
    "fsync",
    "full_page_writes",
    "autovacuum",
    "max_wal_size",
    "checkpoint_timeout",
    "work_mem",
    "wal_buffers",
];

/// One candidate's drain of one shape.
#[derive(Debug)]
struct Figures {
    candidate: String,
    shape: Shape,
    published: u64,
    elapsed: Duration,
    /// CPU seconds of the private server's processes.
    pg_cpu: f64,
    /// Row versions left by updates and deletes.
    dead_versions: i64,
    /// `n_dead_tup` afterwards minus before.
    dead_tuples: i64,
    hot_updates: i64,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.published as f64 / self.elapsed.as_secs_f64()
    }

    fn per_event(&self, n: i64) -> f64 {
        n as f64 / self.published as f64
    }

    fn from_table(
        candidate: String,
        shape: Shape,
        published: u64,
        elapsed: Duration,
        pg_cpu: f64,
        before: &TableStats,
        after: &TableStats,
    ) -> Self {
        Self {
            candidate,
            shape,
            published,
            elapsed,
            pg_cpu,
            dead_versions: after.dead_versions_since(before),
            dead_tuples: after.dead - before.dead,
            hot_updates: after.hot_updates - before.hot_updates,
        }
    }

    fn print(&self) {
        println!(
            "   {:<22} {:>8} events/s in {:5.1} s | PG CPU {:5.1} s ({:.0} µs/event) | \
             dead versions {:.2}/event, n_dead_tup {:+.2}/event, HOT {}",
            self.candidate,
            thousands(self.rate()),
            self.elapsed.as_secs_f64(),
            self.pg_cpu,
            self.pg_cpu * 1e6 / self.published as f64,
            self.per_event(self.dead_versions),
            self.per_event(self.dead_tuples),
            self.hot_updates
        );
    }
}

/// `relay-candidates` with its flags.
pub(crate) async fn run(flags: &[String]) -> Result<(), BoxError> {
    let rows: u64 = match flags.iter().position(|f| f == "--rows") {
        Some(at) => flags.get(at + 1).ok_or("--rows needs a number")?.parse()?,
        None => naive::ROWS,
    };
    let settings = shared_settings().await?;
    println!(
        "== relay-candidates (issue 35): {} rows a backlog, on a private PostgreSQL with wal_level=logical ==",
        thousands(rows as f64)
    );
    println!(
        "   private server settings (from the shared server): {}",
        settings
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let server = PrivatePostgres::start(&settings)?;
    fixture::use_postgres(Some(server.url()));
    let result = measure(&server, rows).await;
    fixture::use_postgres(None);
    drop(server);
    result
}

/// The shared server's settings, plus what logical decoding needs.
async fn shared_settings() -> Result<Vec<(String, String)>, BoxError> {
    let admin = fixture::admin().await?;
    let mut settings = Vec::new();
    for name in COPIED {
        let value: String = pgstats::scalar(
            &admin,
            format!("SELECT current_setting('{name}') AS v"),
            "v",
        )
        .await?;
        settings.push((name.to_owned(), value.replace(' ', "")));
    }
    admin.close().await?;
    for (name, value) in [
        ("wal_level", "logical"),
        ("max_replication_slots", "4"),
        ("max_connections", "100"),
    ] {
        settings.push((name.to_owned(), value.to_owned()));
    }
    Ok(settings)
}

async fn measure(server: &PrivatePostgres, rows: u64) -> Result<(), BoxError> {
    let shapes = [
        Shape::Uniform,
        Shape::Hot(100),
        Shape::Hot(10),
        Shape::BlockedHead(100),
    ];
    let mut raw = vec![raw_jetstream(rows).await?];
    let mut naive = vec![naive_loop(rows).await?];
    let mut figures: Vec<Figures> = Vec::new();
    for shape in shapes {
        println!(
            "-- {shape} ({})",
            machine::load_state(Duration::from_secs(1)).await
        );
        let one = today(server, rows, shape).await?;
        one.print();
        figures.push(one);
        for relays in [1, 2] {
            let one = locks(server, rows, shape, relays, Settle::Mark).await?;
            one.print();
            figures.push(one);
        }
        if shape == Shape::Uniform {
            let one = locks(server, rows, shape, 1, Settle::Delete).await?;
            one.print();
            figures.push(one);
        }
        if !matches!(shape, Shape::BlockedHead(_)) {
            let one = log(server, rows, shape).await?;
            one.print();
            figures.push(one);
        }
    }
    raw.push(raw_jetstream(rows).await?);
    naive.push(naive_loop(rows).await?);
    let takeover = takeover().await?;

    let raw_mean = raw.iter().sum::<f64>() / raw.len() as f64;
    let naive_mean = naive.iter().sum::<f64>() / naive.len() as f64;
    println!(
        "== relay-candidates summary: raw JetStream {} msgs/s (runs {}), naive loop {} rows/s (runs {}); {} ==",
        thousands(raw_mean),
        raw.iter()
            .map(|r| thousands(*r))
            .collect::<Vec<_>>()
            .join(" / "),
        thousands(naive_mean),
        naive
            .iter()
            .map(|r| thousands(*r))
            .collect::<Vec<_>>()
            .join(" / "),
        machine::load_state(Duration::from_secs(1)).await
    );
    println!(
        "| candidate | shape | events/s | x naive | % raw JetStream | x own uniform | PG CPU s | PG CPU µs/event | dead versions/event | n_dead_tup/event |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for f in &figures {
        let uniform = figures
            .iter()
            .find(|u| u.candidate == f.candidate && u.shape == Shape::Uniform)
            .map_or(f64::NAN, Figures::rate);
        println!(
            "| {} | {} | {} | {:.2} | {:.0}% | {:.2} | {:.1} | {:.0} | {:.2} | {:.2} |",
            f.candidate,
            f.shape,
            thousands(f.rate()),
            f.rate() / naive_mean,
            100.0 * f.rate() / raw_mean,
            f.rate() / uniform,
            f.pg_cpu,
            f.pg_cpu * 1e6 / f.published as f64,
            f.per_event(f.dead_versions),
            f.per_event(f.dead_tuples),
        );
    }
    println!(
        "row-lock takeover: a relay holding {} locked rows dropped its connection; the other relay had them locked again after {:.1} ms and published (acked) after {:.1} ms",
        takeover.rows,
        takeover.locked.as_secs_f64() * 1e3,
        takeover.published.as_secs_f64() * 1e3
    );
    Ok(())
}

/// The raw JetStream ceiling of `rows` publishes (after a warm-up).
async fn raw_jetstream(rows: u64) -> Result<f64, BoxError> {
    let stream = BenchStream::create().await?;
    jetstream::raw(&stream, 10_000).await?;
    let rate = jetstream::raw(&stream, rows as usize).await?;
    stream.delete().await?;
    println!("   raw JetStream publishing: {} msgs/s", thousands(rate));
    Ok(rate)
}

/// The naive loop on the private server.
async fn naive_loop(rows: u64) -> Result<f64, BoxError> {
    print!("   naive loop on the private server: ");
    naive::measure(1, rows).await
}

/// Today's processor (the `drain` parts' child) on the private server.
async fn today(server: &PrivatePostgres, rows: u64, shape: Shape) -> Result<Figures, BoxError> {
    let drained = drain_shape(
        &Broker::shared(),
        Settings::default(),
        rows,
        shape,
        Some(server),
        Duration::from_millis(100),
    )
    .await?;
    Ok(Figures::from_table(
        "today's processor".to_owned(),
        shape,
        drained.rows,
        drained.child.elapsed,
        drained.server_cpu.unwrap_or(f64::NAN),
        &drained.table_before,
        &drained.table,
    ))
}

/// A fresh backlog of `shape` with its stream; returns the publishable rows.
async fn backlog(rows: u64, shape: Shape) -> Result<(BenchDb, BenchStream, u64), BoxError> {
    let bench = BenchDb::create().await?;
    let stream = BenchStream::create().await?;
    fill(&bench, &stream.prefix, rows).await?;
    let publishable = prepare(&bench, rows, shape).await?;
    settle_counters().await;
    Ok((bench, stream, publishable))
}

/// Checks the stream holds `published` messages and the table `left` rows
/// not yet published (or, deleting, `left` rows at all).
async fn check(
    admin: &sea_orm::DatabaseConnection,
    bench: &BenchDb,
    stream: &BenchStream,
    published: u64,
    left: u64,
    unpublished_sql: &str,
) -> Result<(), BoxError> {
    let remaining: i64 = pgstats::scalar(
        admin,
        format!(
            "SELECT count(*) AS n FROM {}.outbox_messages {unpublished_sql}",
            bench.schema
        ),
        "n",
    )
    .await?;
    let stored = stream.messages().await?;
    if stored != published || remaining as u64 != left {
        return Err(format!(
            "the stream holds {stored} messages for {published} published; {remaining} rows left, {left} expected"
        )
        .into());
    }
    Ok(())
}

/// Row locks as leases with `relays` relays.
async fn locks(
    server: &PrivatePostgres,
    rows: u64,
    shape: Shape,
    relays: usize,
    settle: Settle,
) -> Result<Figures, BoxError> {
    let (bench, stream, publishable) = backlog(rows, shape).await?;
    let admin = fixture::admin().await?;
    let before = pgstats::table_stats(&admin, &bench.schema).await?;
    let mut connected = Vec::new();
    for _ in 0..relays {
        connected.push(Relay::connect(&fixture::postgres_url(), &bench.schema, settle).await?);
    }
    let counts = Arc::new(Counts::default());
    let publisher = JetStreamPublisher::new(stream.client.clone(), "/txoutbox-bench");
    let cpu = server.cpu_seconds();
    let started = Instant::now();
    let results =
        join_all(connected.into_iter().map(|relay| {
            row_locks::drain(relay, publisher.clone(), Arc::clone(&counts), publishable)
        }))
        .await;
    let elapsed = started.elapsed();
    for result in results {
        result?;
    }
    // The relays' backends exited with their connections; their counters
    // are flushed.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let pg_cpu = server.cpu_seconds() - cpu;
    let after = pgstats::table_stats(&admin, &bench.schema).await?;
    let published = counts.published.load(Ordering::Relaxed);
    let duplicates = counts.duplicates.load(Ordering::Relaxed);
    let unpublished = match settle {
        Settle::Mark => "WHERE status <> 1",
        Settle::Delete => "",
    };
    check(
        &admin,
        &bench,
        &stream,
        published,
        rows - publishable,
        unpublished,
    )
    .await?;
    if published != publishable || duplicates != 0 {
        return Err(format!(
            "row locks published {published} of {publishable} ({duplicates} duplicates)"
        )
        .into());
    }
    println!(
        "   (row locks x{relays}: {} batches, {} empty)",
        counts.batches.load(Ordering::Relaxed),
        counts.empty.load(Ordering::Relaxed)
    );
    admin.close().await?;
    stream.delete().await?;
    drop(bench);
    let name = match settle {
        Settle::Mark => format!("row locks x{relays}"),
        Settle::Delete => format!("row locks x{relays}, delete"),
    };
    Ok(Figures::from_table(
        name, shape, published, elapsed, pg_cpu, &before, &after,
    ))
}

/// The write-ahead-log relay.
async fn log(server: &PrivatePostgres, rows: u64, shape: Shape) -> Result<Figures, BoxError> {
    let (bench, stream, publishable) = backlog(rows, shape).await?;
    let slot = wal::capture(&bench).await?;
    settle_counters().await;
    let admin = fixture::admin().await?;
    let before = pgstats::table_stats(&admin, &bench.schema).await?;
    let publisher = JetStreamPublisher::new(stream.client.clone(), "/txoutbox-bench");
    let cpu = server.cpu_seconds();
    let relayed = wal::drain(server.port(), &slot, &publisher, &admin, publishable).await?;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let pg_cpu = server.cpu_seconds() - cpu;
    wal::drop_slot(&admin, &slot).await?;
    let after = pgstats::table_stats(&admin, &bench.schema).await?;
    check(
        &admin,
        &bench,
        &stream,
        relayed.published,
        rows,
        "WHERE status <> 1",
    )
    .await?;
    if relayed.published != publishable || relayed.duplicates != 0 {
        return Err(format!(
            "the WAL relay published {} of {publishable} ({} duplicates)",
            relayed.published, relayed.duplicates
        )
        .into());
    }
    println!(
        "   (WAL relay: {} transactions confirmed)",
        relayed.transactions
    );
    admin.close().await?;
    stream.delete().await?;
    drop(bench);
    Ok(Figures::from_table(
        "WAL (pgoutput slot)".to_owned(),
        shape,
        relayed.published,
        relayed.elapsed,
        pg_cpu,
        &before,
        &after,
    ))
}

/// What the takeover measured.
struct Takeover {
    rows: usize,
    /// From the drop until the other relay held the rows.
    locked: Duration,
    /// From the drop until their acks.
    published: Duration,
}

/// Relay A locks a batch and its connection drops (as its process dies);
/// relay B, polling, takes the rows over.
async fn takeover() -> Result<Takeover, BoxError> {
    let rows = 2 * row_locks::BATCH as u64;
    let (bench, stream, _) = backlog(rows, Shape::Uniform).await?;
    let url = fixture::postgres_url();
    let mut a = Relay::connect(&url, &bench.schema, Settle::Mark).await?;
    let held = a.lock_batch().await?;
    let held_ids: HashSet<String> = held.iter().map(|m| m.id.to_string()).collect();
    let mut b = Relay::connect(&url, &bench.schema, Settle::Mark).await?;
    let publisher = JetStreamPublisher::new(stream.client.clone(), "/txoutbox-bench");
    let dropped = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let b_dropped = Arc::clone(&dropped);
    let b_task = tokio::spawn(async move {
        let mut published = 0;
        let mut locked_at = None;
        let mut acked_at = None;
        let started = Instant::now();
        while published < rows {
            if started.elapsed() > Duration::from_secs(60) {
                return Err::<_, BoxError>("the takeover took a minute".into());
            }
            let messages = b.lock_batch().await?;
            if messages.is_empty() {
                b.finish(&[]).await?;
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
            let taken = messages
                .iter()
                .any(|m| held_ids.contains(&m.id.to_string()));
            if taken && locked_at.is_none() {
                locked_at = Some(Instant::now());
            }
            let (done, _) = row_locks::publish(&publisher, &messages).await?;
            if taken && acked_at.is_none() {
                acked_at = Some(Instant::now());
            }
            b.finish(&done).await?;
            published += done.len() as u64;
        }
        b.close().await?;
        let at = b_dropped
            .lock()
            .map_err(|_| "poisoned")?
            .ok_or("the held rows moved before the drop")?;
        let (locked, acked) = locked_at
            .zip(acked_at)
            .ok_or("relay B never got the held rows")?;
        if locked < at {
            return Err("the held rows moved before the drop".into());
        }
        Ok((locked - at, acked - at))
    });
    // B publishes the free half, then polls while A holds the rest.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    *dropped.lock().map_err(|_| "poisoned")? = Some(Instant::now());
    drop(a);
    let (locked, published) = b_task.await??;
    let admin = fixture::admin().await?;
    check(&admin, &bench, &stream, rows, 0, "WHERE status <> 1").await?;
    admin.execute_unprepared("SELECT 1").await.map(|_| ())?;
    admin.close().await?;
    stream.delete().await?;
    drop(bench);
    Ok(Takeover {
        rows: held.len(),
        locked,
        published,
    })
}
