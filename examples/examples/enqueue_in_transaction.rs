//! Step 2: enqueue an event into a SeaORM transaction the application owns.
//!
//! `cargo run -p txoutbox-examples --example enqueue_in_transaction`
//! (SQLite in the temp directory by default; `DATABASE_URL` for PostgreSQL
//! or MariaDB. No broker needed: the event waits in the outbox table until a
//! processor publishes it; see `processor_process`.)
//!
//! No aggregates, no repository: the application runs its own statements
//! on its own transaction and adds the outbox row to it. The row commits or
//! rolls back with them.

use std::error::Error;

use sea_orm::{ConnectionTrait, TransactionTrait};
use serde::{Deserialize, Serialize};
use txoutbox::OutboxConfig;
use txoutbox::store::OutboxStore;
use txoutbox::{IntegrationEvent, MessageContext};
use txoutbox_examples::support;

#[derive(Debug, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "user.registered")]
struct UserRegistered {
    email: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    txoutbox_examples::support::exit_on_help(include_str!("enqueue_in_transaction.rs"));
    support::init_logging();
    let url = support::database_url("outbox-examples");
    // Subjects `examples.<event name>`, captured by the stream the
    // `processor_process` example publishes to.
    let config = OutboxConfig::default().with_subject_prefix(support::EXAMPLE_PREFIX)?;
    let outbox = support::open_outbox(&url, config).await?;
    outbox
        .db()
        .execute_unprepared(
            "CREATE TABLE IF NOT EXISTS example_users (email VARCHAR(200) NOT NULL)",
        )
        .await?;
    let before = outbox.store().stats().await?.pending;

    // A transaction that commits: the user row and the event, together.
    let txn = outbox.db().begin().await?;
    txn.execute_unprepared("INSERT INTO example_users (email) VALUES ('ada@example.com')")
        .await?;
    let event = UserRegistered {
        email: "ada@example.com".into(),
    };
    let context = MessageContext::new().with_correlation_id("signup-1");
    let id = outbox.enqueue(&txn, &event, &context).await?;
    txn.commit().await?;
    outbox.wake(); // spares processors their polling delay
    println!("committed: user row + outbox message {id}");

    // A transaction that rolls back: neither the row nor the event remain.
    let txn = outbox.db().begin().await?;
    txn.execute_unprepared("INSERT INTO example_users (email) VALUES ('ghost@example.com')")
        .await?;
    let ghost = UserRegistered {
        email: "ghost@example.com".into(),
    };
    outbox.enqueue(&txn, &ghost, &context).await?;
    txn.rollback().await?;
    println!("rolled back: no row, no message");

    let after = outbox.store().stats().await?.pending;
    println!("pending outbox messages: {before} -> {after} (one more, not two)");
    Ok(())
}
