//! The write-ahead log: a logical replication slot (`pgoutput`, a
//! publication of the outbox table's inserts) streamed with the
//! `pgwire-replication` crate, every insert published in commit order, the
//! slot's position confirmed after the acks of a whole transaction. No row
//! is ever updated.
//!
//! The crate streams and confirms; decoding `pgoutput`'s relation and insert
//! messages into rows is left to its user (a non-goal of the crate), done
//! here in [`decode`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesOrdered;
use pgwire_replication::client::ReplicationEvent;
use pgwire_replication::{Lsn, ReplicationClient, ReplicationConfig, TlsConfig};
use sea_orm::{ConnectionTrait, DatabaseConnection};
use txoutbox_core::publisher::PublishAck;
use txoutbox_core::{OutboxMessage, PublishError, Publisher};
use txoutbox_nats::JetStreamPublisher;

use super::row;
use crate::harness::error::BoxError;
use crate::harness::fixture::BenchDb;
use crate::harness::pgstats;

/// Publishes in flight (the processor's default `max_in_flight`).
const IN_FLIGHT: usize = 2048;
/// Rows per re-inserted transaction (the fill's).
const PER_TRANSACTION: i64 = 5_000;

/// The slot and publication of one bench schema.
pub(super) struct Slot {
    pub(super) name: String,
    pub(super) publication: String,
}

/// Re-writes the prepared backlog of `bench` as fresh inserts captured by a
/// new slot: the rows (shape included) are copied aside, the table emptied,
/// the publication and slot created, then the rows inserted again in id
/// order, 5,000 per transaction, as the fill wrote them.
pub(super) async fn capture(bench: &BenchDb) -> Result<Slot, BoxError> {
    let tag = &bench.schema["outbox_bench_".len()..];
    let slot = Slot {
        name: format!("relay_{tag}"),
        publication: format!("relay_{tag}"),
    };
    let db = bench.connect(1).await?;
    for sql in [
        "CREATE TABLE staged AS SELECT row_number() OVER (ORDER BY m.id) AS n, m AS r \
         FROM outbox_messages m"
            .to_owned(),
        "TRUNCATE outbox_messages".to_owned(),
        format!(
            "CREATE PUBLICATION {} FOR TABLE {}.outbox_messages WITH (publish = 'insert')",
            slot.publication, bench.schema
        ),
        format!(
            "SELECT pg_create_logical_replication_slot('{}', 'pgoutput')",
            slot.name
        ),
    ] {
        db.execute_unprepared(&sql).await?;
    }
    let rows: i64 = pgstats::scalar(&db, "SELECT count(*) AS n FROM staged", "n").await?;
    let mut from = 0;
    while from < rows {
        db.execute_unprepared(&format!(
            "INSERT INTO outbox_messages SELECT (s.r).* FROM staged s \
             WHERE s.n > {from} AND s.n <= {} ORDER BY s.n",
            from + PER_TRANSACTION
        ))
        .await?;
        from += PER_TRANSACTION;
    }
    db.execute_unprepared("DROP TABLE staged").await?;
    db.execute_unprepared("VACUUM ANALYZE outbox_messages")
        .await?;
    db.close().await?;
    Ok(slot)
}

/// What a WAL drain did.
#[derive(Debug, Default)]
pub(super) struct Relayed {
    pub(super) published: u64,
    pub(super) duplicates: u64,
    pub(super) transactions: u64,
    /// Until the slot's confirmed position passed the last commit.
    pub(super) elapsed: Duration,
}

/// Streams the slot until `expected` rows are published and confirmed.
pub(super) async fn drain(
    port: u16,
    slot: &Slot,
    publisher: &JetStreamPublisher,
    admin: &DatabaseConnection,
    expected: u64,
) -> Result<Relayed, BoxError> {
    let config = ReplicationConfig::new(
        "127.0.0.1",
        "postgres",
        "",
        "postgres",
        slot.name.clone(),
        slot.publication.as_str(),
    )
    .with_port(port)
    .with_tls(TlsConfig::disabled())
    .with_status_interval(Duration::from_millis(20))
    .with_buffer_size(8192);
    let started = Instant::now();
    let mut client = ReplicationClient::connect(config).await?;
    let mut relations: HashMap<u32, Vec<String>> = HashMap::new();
    let mut in_flight = FuturesOrdered::new();
    let mut relayed = Relayed::default();
    let mut last_commit = None;
    // An insert was read whose transaction's commit was not yet.
    let mut open = false;
    while relayed.published < expected || !in_flight.is_empty() || open {
        if started.elapsed() > Duration::from_secs(900) {
            return Err("the WAL relay ran 15 minutes".into());
        }
        tokio::select! {
            biased;
            Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                match done? {
                    Step::Acked(ack) => {
                        relayed.published += 1;
                        relayed.duplicates += u64::from(ack.duplicate);
                    }
                    Step::Committed(end) => {
                        client.update_applied_lsn(end);
                        relayed.transactions += 1;
                        last_commit = Some(end);
                    }
                }
            }
            event = client.recv(), if in_flight.len() < IN_FLIGHT => {
                match event? {
                    Some(ReplicationEvent::XLogData { data, .. }) => {
                        if let Some(message) = decode(&data, &mut relations)? {
                            open = true;
                            in_flight.push_back(step(publisher, Item::Publish(Box::new(message))));
                        }
                    }
                    Some(ReplicationEvent::Commit { end_lsn, .. }) => {
                        open = false;
                        in_flight.push_back(step(publisher, Item::Commit(end_lsn)));
                    }
                    Some(_) => {}
                    None => return Err("the replication stream ended".into()),
                }
            }
        }
    }
    // The position reaches the server within the status interval.
    let last = last_commit.ok_or("the WAL relay saw no commit")?;
    loop {
        let confirmed: String = pgstats::scalar(
            admin,
            format!(
                "SELECT confirmed_flush_lsn::text AS l FROM pg_replication_slots WHERE slot_name = '{}'",
                slot.name
            ),
            "l",
        )
        .await?;
        if Lsn::parse(&confirmed).is_ok_and(|c| c >= last) {
            break;
        }
        if started.elapsed() > Duration::from_secs(900) {
            return Err("the slot's position never reached the last commit".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    relayed.elapsed = started.elapsed();
    client.shutdown().await?;
    Ok(relayed)
}

/// Drops the slot (after its stream closed).
pub(super) async fn drop_slot(admin: &DatabaseConnection, slot: &Slot) -> Result<(), BoxError> {
    for _ in 0..50 {
        let sql = format!("SELECT pg_drop_replication_slot('{}')", slot.name);
        if admin.execute_unprepared(&sql).await.is_ok() {
            break;
        }
        // Still active for a moment after the stream closed.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin
        .execute_unprepared(&format!("DROP PUBLICATION IF EXISTS {}", slot.publication))
        .await?;
    Ok(())
}

enum Item {
    Publish(Box<OutboxMessage>),
    Commit(Lsn),
}

enum Step {
    Acked(PublishAck),
    Committed(Lsn),
}

/// One entry of the ordered pipeline: a publish, or a commit that confirms
/// once everything before it was acked.
async fn step(publisher: &JetStreamPublisher, item: Item) -> Result<Step, PublishError> {
    match item {
        Item::Publish(message) => publisher.publish(&message).await.map(Step::Acked),
        Item::Commit(end) => Ok(Step::Committed(end)),
    }
}

/// A `pgoutput` (protocol 1, text values) message: a relation is
/// remembered, an insert becomes the message of its row; others are skipped.
fn decode(
    data: &[u8],
    relations: &mut HashMap<u32, Vec<String>>,
) -> Result<Option<OutboxMessage>, BoxError> {
    let mut r = Reader { data, at: 1 };
    match data.first() {
        Some(b'R') => {
            let id = r.u32()?;
            r.string()?; // namespace
            r.string()?; // name
            r.take(1)?; // replica identity
            let columns = r.u16()?;
            let mut names = Vec::with_capacity(usize::from(columns));
            for _ in 0..columns {
                r.take(1)?; // flags
                names.push(r.string()?);
                r.take(8)?; // type oid, type modifier
            }
            relations.insert(id, names);
            Ok(None)
        }
        Some(b'I') => {
            let id = r.u32()?;
            let names = relations.get(&id).ok_or("an insert before its relation")?;
            r.take(1)?; // 'N'
            let columns = r.u16()?;
            let mut values: HashMap<&str, &str> = HashMap::with_capacity(usize::from(columns));
            for name in names.iter().take(usize::from(columns)) {
                match r.take(1)?[0] {
                    b't' => {
                        let len = r.u32()? as usize;
                        values.insert(name, std::str::from_utf8(r.take(len)?)?);
                    }
                    b'n' | b'u' => {}
                    other => return Err(format!("tuple value kind {other}").into()),
                }
            }
            Ok(Some(row::message(|c| values.get(c).copied())?))
        }
        _ => Ok(None),
    }
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BoxError> {
        let bytes = self
            .data
            .get(self.at..self.at + n)
            .ok_or("a short pgoutput message")?;
        self.at += n;
        Ok(bytes)
    }

    fn u16(&mut self) -> Result<u16, BoxError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, BoxError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self) -> Result<String, BoxError> {
        let rest = self.data.get(self.at..).ok_or("a short pgoutput message")?;
        let end = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or("an unterminated pgoutput string")?;
        self.at += end + 1;
        Ok(String::from_utf8(rest[..end].to_vec())?)
    }
}
