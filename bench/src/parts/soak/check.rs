//! The soak's verdict: the outbox table against the stream read back
//! (`txoutbox_nats::stream_read` and `txoutbox_core::verify::reconcile`, as
//! `outbox verify` does) and against the effects the subscriber applied.
//! An event the writers counted but the table lacks (or a row they did
//! not count), any loss, duplicate, order violation, dead row or dead
//! letter is a [`Violation`]; [`SoakFailed`] names them all.

use std::collections::{HashMap, HashSet};
use std::fmt;

use async_nats::jetstream;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use txoutbox_core::verify::reconcile;
use txoutbox_nats::stream_read;
use txoutbox_sea_orm::Outbox;
use uuid::Uuid;

use crate::harness::error::BoxError;

/// Examples of each kind of violation kept for the report.
const EXAMPLES: usize = 3;

/// One way the soak failed, with how many times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Violation {
    /// The outbox was not drained or the subscriber did not catch up in
    /// time.
    NotCaughtUp(String),
    /// The writers counted this many events committed, the table holds
    /// another number of rows.
    Uncounted { counted: u64, rows: u64 },
    /// Rows still pending at the end.
    Pending(u64),
    /// Rows dead (given up by the processor).
    Dead(u64),
    /// Rows marked published whose message is not in the stream.
    Lost(u64),
    /// Message ids stored more than once in the stream.
    Duplicated(u64),
    /// An aggregate's later message stored before an earlier one.
    OutOfOrder(u64),
    /// Messages in the stream with no row.
    WithoutRow(u64),
    /// Messages the subscriber dead-lettered.
    DeadLetters(u64),
    /// Rows with no effect.
    EffectsMissing(u64),
    /// Rows whose effect was applied more than once.
    EffectsRepeated(u64),
    /// An aggregate's effect applied before an earlier one's.
    EffectsOutOfOrder(u64),
    /// Effects of no row.
    EffectsUnknown(u64),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotCaughtUp(what) => write!(f, "not caught up: {what}"),
            Self::Uncounted { counted, rows } => write!(
                f,
                "the writers counted {counted} events committed, the outbox holds {rows} rows"
            ),
            Self::Pending(n) => write!(f, "{n} rows still pending"),
            Self::Dead(n) => write!(f, "{n} dead rows"),
            Self::Lost(n) => write!(f, "{n} published rows lost (not in the stream)"),
            Self::Duplicated(n) => write!(f, "{n} messages stored more than once"),
            Self::OutOfOrder(n) => write!(f, "{n} order violations in the stream"),
            Self::WithoutRow(n) => write!(f, "{n} messages in the stream without a row"),
            Self::DeadLetters(n) => write!(f, "{n} dead letters"),
            Self::EffectsMissing(n) => write!(f, "{n} rows without an effect"),
            Self::EffectsRepeated(n) => write!(f, "{n} effects applied more than once"),
            Self::EffectsOutOfOrder(n) => write!(f, "{n} effects applied out of order"),
            Self::EffectsUnknown(n) => write!(f, "{n} effects of no row"),
        }
    }
}

/// The soak found violations.
#[derive(Debug)]
pub(crate) struct SoakFailed {
    pub(crate) violations: Vec<Violation>,
    pub(crate) examples: Vec<String>,
}

impl fmt::Display for SoakFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.violations.iter().map(ToString::to_string).collect();
        write!(f, "soak FAILED: {}", list.join("; "))?;
        for example in &self.examples {
            write!(f, "\n  e.g. {example}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SoakFailed {}

/// What the checks counted.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    /// Rows in the outbox.
    pub(crate) rows: u64,
    /// Messages read back from the stream.
    pub(crate) stored: u64,
    /// Aggregates whose order was checked.
    pub(crate) aggregates: u64,
    /// Rows of `effects`.
    pub(crate) effects: u64,
    /// Every violation found, and a few examples.
    pub(crate) violations: Vec<Violation>,
    pub(crate) examples: Vec<String>,
}

impl Findings {
    fn count(&mut self, n: usize, violation: fn(u64) -> Violation) {
        if n > 0 {
            self.violations.push(violation(n as u64));
        }
    }

    /// `Err` naming every violation, if any.
    pub(crate) fn verdict(self) -> Result<(), SoakFailed> {
        if self.violations.is_empty() {
            Ok(())
        } else {
            Err(SoakFailed {
                violations: self.violations,
                examples: self.examples,
            })
        }
    }
}

/// One row of the outbox: (id, aggregate id, sequence, status).
type Row = (Uuid, String, i64, i16);

/// Runs every check; `written` is how many events the writers counted
/// committed.
pub(crate) async fn check(
    outbox: &Outbox,
    db: &DatabaseConnection,
    jetstream: &jetstream::Context,
    stream: &str,
    written: u64,
) -> Result<Findings, BoxError> {
    let mut findings = Findings::default();
    let rows: Vec<Row> = query(
        db,
        "SELECT id, aggregate_id, sequence, status FROM outbox_messages",
        |r| {
            Ok((
                r.try_get("", "id")?,
                r.try_get("", "aggregate_id")?,
                r.try_get("", "sequence")?,
                r.try_get("", "status")?,
            ))
        },
    )
    .await?;
    findings.rows = rows.len() as u64;
    if findings.rows != written {
        findings.violations.push(Violation::Uncounted {
            counted: written,
            rows: findings.rows,
        });
    }
    let with_status = |s: i16| rows.iter().filter(|r| r.3 == s).count();
    findings.count(with_status(0), Violation::Pending);
    findings.count(with_status(2), Violation::Dead);

    // The stream against the published rows.
    let published = outbox.store().published_records(None).await?;
    let messages = stream_read::stored_messages(jetstream, stream, None).await?;
    findings.stored = messages.len() as u64;
    let report = reconcile(&published, &messages, Vec::new());
    findings.aggregates = report.aggregates_checked;
    findings.count(report.count("missing"), Violation::Lost);
    findings.count(report.count("duplicate"), Violation::Duplicated);
    findings.count(report.count("out-of-order"), Violation::OutOfOrder);
    findings.count(report.messages_without_row as usize, Violation::WithoutRow);
    let mut shown: HashMap<&str, usize> = HashMap::new();
    for discrepancy in &report.discrepancies {
        let seen = shown.entry(discrepancy.kind()).or_default();
        if *seen < EXAMPLES {
            *seen += 1;
            findings.examples.push(discrepancy.to_string());
        }
    }
    findings.count(
        dead_letters(jetstream).await? as usize,
        Violation::DeadLetters,
    );

    check_effects(db, &rows, &mut findings).await?;
    Ok(findings)
}

/// Every row's effect once, each aggregate's in sequence order.
async fn check_effects(
    db: &DatabaseConnection,
    rows: &[Row],
    findings: &mut Findings,
) -> Result<(), BoxError> {
    let effects: Vec<(Uuid, String, i64)> = query(
        db,
        "SELECT message_id, aggregate_id, sequence FROM effects ORDER BY id",
        |r| {
            Ok((
                r.try_get("", "message_id")?,
                r.try_get("", "aggregate_id")?,
                r.try_get("", "sequence")?,
            ))
        },
    )
    .await?;
    findings.effects = effects.len() as u64;
    let ids: HashSet<Uuid> = rows.iter().map(|r| r.0).collect();
    let mut applied: HashMap<Uuid, u32> = HashMap::new();
    let mut last: HashMap<&str, i64> = HashMap::new();
    let (mut unknown, mut out_of_order) = (0, 0);
    for (id, aggregate, sequence) in &effects {
        let times = applied.entry(*id).or_default();
        *times += 1;
        if !ids.contains(id) {
            unknown += 1;
        }
        if *times > 1 {
            continue; // counted as repeated
        }
        let previous = last.insert(aggregate.as_str(), *sequence);
        if previous.is_some_and(|p| p > *sequence) {
            out_of_order += 1;
            if out_of_order <= EXAMPLES {
                findings.examples.push(format!(
                    "effect of {aggregate} #{sequence} applied after #{}",
                    previous.unwrap_or_default()
                ));
            }
        }
    }
    let missing = rows.iter().filter(|r| !applied.contains_key(&r.0)).count();
    let repeated = applied.values().filter(|n| **n > 1).count();
    findings.count(missing, Violation::EffectsMissing);
    findings.count(repeated, Violation::EffectsRepeated);
    findings.count(out_of_order, Violation::EffectsOutOfOrder);
    findings.count(unknown, Violation::EffectsUnknown);
    Ok(())
}

/// Messages in the dead-letter stream (none if it was never created).
async fn dead_letters(jetstream: &jetstream::Context) -> Result<u64, BoxError> {
    let name = txoutbox_nats::StreamSpec::dead_letters().name().to_owned();
    match stream_read::open_stream(jetstream, &name).await {
        Ok(mut stream) => Ok(stream.info().await?.state.messages),
        Err(stream_read::ReadError::StreamNotFound { .. }) => Ok(0),
        Err(err) => Err(err.into()),
    }
}

async fn query<T>(
    db: &DatabaseConnection,
    sql: &str,
    row: impl Fn(&sea_orm::QueryResult) -> Result<T, sea_orm::DbErr>,
) -> Result<Vec<T>, BoxError> {
    let rows = db
        .query_all_raw(Statement::from_string(db.get_database_backend(), sql))
        .await?;
    Ok(rows.iter().map(row).collect::<Result<_, _>>()?)
}
