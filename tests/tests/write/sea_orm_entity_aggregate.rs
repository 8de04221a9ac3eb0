//! The "entity is the aggregate" style: a SeaORM model with an ignored
//! `EventBuffer` field is itself the aggregate, mapped by
//! `#[derive(AggregateRoot)]` with `entity` and `version_column`.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use sea_orm::{ConnectionTrait, DbBackend};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use txoutbox_core::{AggregateRoot, EventBuffer, IntegrationEvent, OutboxStore};
use txoutbox_sea_orm::{Outbox, OutboxConfig, OutboxError, SeaOrmOutboxStore};
use txoutbox_suite::TestDb;

#[allow(unreachable_pub)]
mod account {
    use sea_orm::entity::prelude::*;

    // The whole mapping: the model is its own row, so the derive writes
    // `AggregateEntity` too.
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, txoutbox_core::AggregateRoot)]
    #[sea_orm(table_name = "accounts")]
    #[aggregate(
        type = "account",
        entity = "Entity",
        version_column = "Column::Version"
    )]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        #[aggregate(id)]
        pub id: i64,
        pub balance: i64,
        pub version: i32,
        #[sea_orm(ignore)]
        pub events: txoutbox_core::EventBuffer,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

#[derive(Debug, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "test.account.credited")]
struct Credited {
    account: i64,
    amount: i64,
}

impl account::Model {
    fn credit(&mut self, amount: i64) -> Result<(), txoutbox_core::RecordError> {
        self.balance += amount;
        let account = self.id;
        self.record(Credited { account, amount })
    }
}

async fn model_is_the_aggregate(test: TestDb) {
    let int = if test.db_backend() == DbBackend::Sqlite {
        "INTEGER"
    } else {
        "BIGINT"
    };
    test.db
        .execute_unprepared(&format!(
            "CREATE TABLE accounts (id {int} NOT NULL PRIMARY KEY, balance BIGINT NOT NULL, version INTEGER NOT NULL)"
        ))
        .await
        .unwrap();
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default());
    let accounts = outbox.repository::<account::Model>();

    let mut account = account::Model {
        id: 7,
        balance: 0,
        version: 0,
        events: EventBuffer::new(),
    };
    account.credit(50).unwrap();
    accounts.save(&mut account).await.unwrap();

    let mut loaded = accounts.load(7).await.unwrap().expect("saved");
    assert_eq!(
        (
            loaded.balance,
            loaded.version,
            AggregateRoot::version(&loaded)
        ),
        (50, 1, 1)
    );
    loaded.credit(25).unwrap();
    loaded.credit(5).unwrap();
    accounts.save(&mut loaded).await.unwrap();

    // A stale copy (still at version 0 in its buffer) cannot overwrite.
    account.credit(1).unwrap();
    assert!(matches!(
        accounts.save(&mut account).await,
        Err(OutboxError::ConcurrencyConflict { .. })
    ));

    let stored = accounts.load(7).await.unwrap().expect("saved");
    assert_eq!(
        (stored.balance, stored.version),
        (80, 3),
        "the 32-bit version column works too"
    );

    let store = SeaOrmOutboxStore::new(test.db.clone(), OutboxConfig::default());
    let batch = store.claim(10, Duration::from_secs(30)).await.unwrap();
    let sequences: Vec<u64> = batch.messages.iter().map(|m| m.message.sequence).collect();
    assert_eq!(sequences, [1, 2, 3]);
    assert!(
        batch
            .messages
            .iter()
            .all(|m| m.message.aggregate_type == "account")
    );
}

txoutbox_suite::each_backend!(model_is_the_aggregate);
