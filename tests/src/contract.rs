//! The SQL stores under the store contract of `outbox-testing`: a fresh
//! database per check, written through the real unit of work.

use std::time::Duration;

use txoutbox_core::chrono::{self, Utc};
use txoutbox_core::{AggregateRoot, MessageId};
use txoutbox_sea_orm::{Outbox, OutboxConfig, SeaOrmOutboxStore};
use txoutbox_testing::contract::ContractWriter;

use crate::orders::{Order, OrderAmended};
use crate::{Backend, TestDb};

/// Writes the contract's events as `Order` amendments through the
/// repository, into the database it keeps alive.
pub struct SqlWriter {
    outbox: Outbox,
    _db: TestDb,
}

impl ContractWriter for SqlWriter {
    async fn append(&self, aggregate_id: &str, count: usize) -> Vec<MessageId> {
        let orders = self.outbox.repository::<Order>();
        let found = orders
            .load(aggregate_id.to_owned())
            .await
            .unwrap_or_else(|err| panic!("loading {aggregate_id}: {err}"));
        let (mut order, amendments) = match found {
            Some(order) => (order, count),
            None => (
                Order::place(aggregate_id, 100).unwrap_or_else(|err| panic!("{err}")),
                count - 1,
            ),
        };
        for k in 0..amendments {
            order
                .amend(101 + k as i64)
                .unwrap_or_else(|err| panic!("{err}"));
        }
        let mut uow = self.outbox.begin();
        uow.save(&mut order)
            .await
            .unwrap_or_else(|err| panic!("saving {aggregate_id}: {err}"));
        uow.commit()
            .await
            .unwrap_or_else(|err| panic!("committing {aggregate_id}: {err}"))
    }

    async fn append_delayed(&self, aggregate_id: &str, delay: Duration) -> MessageId {
        let orders = self.outbox.repository::<Order>();
        let found = orders
            .load(aggregate_id.to_owned())
            .await
            .unwrap_or_else(|err| panic!("loading {aggregate_id}: {err}"));
        let mut order = match found {
            Some(order) => order,
            None => {
                let mut order =
                    Order::place(aggregate_id, 100).unwrap_or_else(|err| panic!("{err}"));
                // Only the delayed event is written.
                order.take_events();
                order
            }
        };
        let due = Utc::now() + chrono::Duration::from_std(delay).expect("a short delay");
        order
            .record_delayed(
                OrderAmended {
                    order_id: aggregate_id.to_owned(),
                    total_cents: 150,
                },
                due,
            )
            .unwrap_or_else(|err| panic!("{err}"));
        let mut uow = self.outbox.begin();
        uow.save(&mut order)
            .await
            .unwrap_or_else(|err| panic!("saving {aggregate_id}: {err}"));
        let ids = uow
            .commit()
            .await
            .unwrap_or_else(|err| panic!("committing {aggregate_id}: {err}"));
        ids[0]
    }

    fn keeps_published(&self) -> bool {
        self.outbox.config().retention() == txoutbox_sea_orm::Retention::KeepPublished
    }
}

/// A fresh database of `backend` with the outbox schema: its store and a
/// writer into it.
pub async fn sql_store(backend: Backend) -> (SeaOrmOutboxStore, SqlWriter) {
    let db = TestDb::with_schema(backend).await;
    let outbox = Outbox::new(db.db.clone(), OutboxConfig::default().without_notify());
    (outbox.store(), SqlWriter { outbox, _db: db })
}

/// [`sql_store`] on PostgreSQL.
pub async fn postgres() -> (SeaOrmOutboxStore, SqlWriter) {
    sql_store(Backend::Postgres).await
}

/// [`sql_store`] on MariaDB.
pub async fn mysql() -> (SeaOrmOutboxStore, SqlWriter) {
    sql_store(Backend::MySql).await
}

/// [`sql_store`] on SQLite.
pub async fn sqlite() -> (SeaOrmOutboxStore, SqlWriter) {
    sql_store(Backend::Sqlite).await
}
