//! An inbox transaction commits only what it applied. On MariaDB a
//! handler meets a real deadlock (two connections locking two rows in
//! opposite order; InnoDB picks the handler's transaction, the lighter one,
//! as the victim: error 1213, the whole transaction rolled back), catches
//! it and retries its statement, as handlers often do; in a group of
//! several messages and on the one-message path, every message's effects
//! end up applied exactly once, none acknowledged without them, nothing
//! dead-lettered, no delivery spent (the failure is a conflict). A unit of work that saw the deadlock (`UnitOfWork::checked`)
//! fails its message even though its handler returned `Ok`. An inbox
//! transaction dropped mid-handler (a panic, a cancelled future) leaves its
//! pooled connection with `autocommit` on again. On PostgreSQL,
//! a handler that swallows a failed statement (which aborts the
//! transaction) gets the same outcome.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, TransactionTrait};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use txoutbox_core::{Delivery, HandlerError, IntegrationEvent, OutboxMessage};
use txoutbox_nats::subscriber::{InboxGroups, RunningSubscriber};
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, OutboxError, UnitOfWork};
use txoutbox_suite::subscriber::SubscriberFixture;
use txoutbox_suite::{Backend, TestDb};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "commit_check.stock.moved")]
struct StockMoved {
    step: u64,
}

/// The aggregate whose message meets the trouble on MariaDB: in the
/// middle of a group, so later handlers run after the rollback.
const VICTIM: &str = "o-3";

/// `effects`: how many times each message's first statement was applied;
/// `locks`: two rows the victim's handler also updates (and the rival);
/// `ballast`: what the rival writes to be the heavier transaction.
async fn create_tables(test: &TestDb) {
    for sql in [
        "CREATE TABLE effects (message_id VARCHAR(64) PRIMARY KEY, applied BIGINT NOT NULL, \
         delivery BIGINT NOT NULL)",
        "CREATE TABLE locks (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)",
        "INSERT INTO locks (id, n) VALUES (1, 0), (2, 0)",
        "CREATE TABLE ballast (id BIGINT PRIMARY KEY, pad VARCHAR(64) NOT NULL)",
    ] {
        test.db.execute_unprepared(sql).await.unwrap();
    }
}

/// What the victim's handler meets on its first delivery.
enum Trouble {
    /// MariaDB: a real deadlock with [`Rival`], caught and the statement
    /// retried.
    Deadlock(Arc<Rival>),
    /// A statement that fails (`1/0` on PostgreSQL aborts the
    /// transaction), caught.
    FailedStatement,
}

/// The other transaction of the deadlock: it writes many rows (so InnoDB
/// rolls back the handler's, the lighter one), locks row 2, waits until
/// the handler holds row 1, then asks for row 1.
struct Rival {
    /// The handler holds row 1.
    handler_holds_row_1: Notify,
    /// The rival's session (`CONNECTION_ID()`).
    session: u64,
    /// Watches the rival's session in `information_schema.processlist`.
    watch: DatabaseConnection,
}

impl Rival {
    /// Starts the rival's transaction on a pool of its own; it has locked
    /// row 2 when this returns. The task ends with the rival's commit.
    async fn start(test: &TestDb) -> (Arc<Self>, JoinHandle<Result<(), DbErr>>) {
        let db = test.connect_with(1).await;
        let txn = db.begin().await.unwrap();
        let session = query_u64(&txn, "SELECT CONNECTION_ID() AS n").await;
        txn.execute_unprepared(
            "INSERT INTO ballast (id, pad) WITH RECURSIVE s(n) AS \
             (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 500) SELECT n, 'ballast' FROM s",
        )
        .await
        .unwrap();
        txn.execute_unprepared("UPDATE locks SET n = n + 1 WHERE id = 2")
            .await
            .unwrap();
        let rival = Arc::new(Self {
            handler_holds_row_1: Notify::new(),
            session,
            watch: test.connect_with(1).await,
        });
        let signalled = Arc::clone(&rival);
        let task = tokio::spawn(async move {
            signalled.handler_holds_row_1.notified().await;
            txn.execute_unprepared("UPDATE locks SET n = n + 1 WHERE id = 1")
                .await?;
            txn.commit().await?;
            drop(db);
            Ok(())
        });
        (rival, task)
    }

    /// Waits (up to 10 s) until the rival runs its statement on row 1 (and
    /// 50 ms more, for it to ask for the lock). Either way round the two
    /// requests make the deadlock; this makes the handler's the second.
    async fn waits_for_row_1(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let asking = format!(
            "SELECT COUNT(*) AS n FROM information_schema.processlist \
             WHERE ID = {} AND INFO LIKE 'UPDATE locks%'",
            self.session
        );
        while query_u64(&self.watch, &asking).await == 0 {
            assert!(Instant::now() < deadline, "the rival never asked for row 1");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The one unsigned number `sql` selects (as `n`).
async fn query_u64(db: &impl ConnectionTrait, sql: &str) -> u64 {
    let row = db
        .query_one_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            sql,
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get::<u64>("", "n")
        .or_else(|_| row.try_get::<i64>("", "n").map(|n| n as u64))
        .unwrap()
}

/// The handler of every message: its effect (counted in `effects`); the
/// victim's also updates rows 1 and 2 of `locks`, meeting `trouble` on its
/// first run, which it catches and goes on from, as a handler that retries
/// its statement does. `swallowed` counts the troubles caught.
#[derive(Clone)]
struct Handler {
    /// The aggregate whose message meets the trouble.
    victim: &'static str,
    trouble: Arc<Trouble>,
    armed: Arc<AtomicBool>,
    swallowed: Arc<AtomicUsize>,
    /// Report the trouble through `UnitOfWork::checked` (and swallow what
    /// it returns) instead of matching the driver's error.
    checked: bool,
}

impl Handler {
    fn new(victim: &'static str, trouble: Trouble) -> Self {
        Self {
            victim,
            trouble: Arc::new(trouble),
            armed: Arc::new(AtomicBool::new(true)),
            swallowed: Arc::default(),
            checked: false,
        }
    }

    async fn handle(&self, delivery: Delivery, uow: &mut UnitOfWork) -> Result<(), HandlerError> {
        let txn = uow.connection().await?;
        let upsert = match txn.get_database_backend() {
            sea_orm::DbBackend::MySql => "ON DUPLICATE KEY UPDATE applied = applied + 1",
            _ => "ON CONFLICT (message_id) DO UPDATE SET applied = effects.applied + 1",
        };
        txn.execute_unprepared(&format!(
            "INSERT INTO effects (message_id, applied, delivery) VALUES ('{}', 1, {}) {upsert}",
            delivery.message_id(),
            delivery.delivery_count(),
        ))
        .await?;
        if delivery.aggregate_id() != self.victim {
            return Ok(());
        }
        let armed = self.armed.swap(false, Ordering::SeqCst);
        let txn = uow.connection().await?;
        txn.execute_unprepared("UPDATE locks SET n = n + 1 WHERE id = 1")
            .await?;
        let second = "UPDATE locks SET n = n + 1 WHERE id = 2";
        let met = match (&*self.trouble, armed) {
            (Trouble::Deadlock(rival), true) => {
                rival.handler_holds_row_1.notify_one();
                rival.waits_for_row_1().await;
                txn.execute_unprepared(second).await.err()
            }
            (Trouble::FailedStatement, true) => txn.execute_unprepared("SELECT 1/0").await.err(),
            (_, false) => None,
        };
        let Some(error) = met else {
            txn.execute_unprepared(second).await?;
            return Ok(());
        };
        self.swallowed.fetch_add(1, Ordering::SeqCst);
        let error = if self.checked {
            uow.checked::<()>(Err(error)).unwrap_err()
        } else {
            OutboxError::from(error)
        };
        tracing::info!(%error, "the handler swallows it and retries its statement");
        // The retry runs whether or not the transaction is still there.
        let _ = uow.connection().await?.execute_unprepared(second).await;
        Ok(())
    }
}

fn outbox(test: &TestDb) -> Outbox {
    Outbox::new(test.db.clone(), OutboxConfig::default().without_notify())
}

/// A subscriber running `handler` through `inbox`, in groups (each waiting
/// up to 300 ms for more messages, so what is published before the start
/// goes into one group) or per message.
async fn spawn(
    fx: &SubscriberFixture,
    inbox: &Inbox,
    handler: &Handler,
    groups: bool,
) -> RunningSubscriber {
    let handler = handler.clone();
    let through = inbox.handler_boxed(
        move |_: StockMoved, delivery: Delivery, uow: &mut UnitOfWork| {
            let handler = handler.clone();
            Box::pin(async move { handler.handle(delivery, uow).await })
        },
    );
    let builder = fx
        .subscriber()
        .dead_letter(txoutbox_nats::subscriber::DeadLetterPolicy::terminate());
    let builder = if groups {
        builder.inbox_groups(
            InboxGroups::default()
                .max_messages(500)
                .max_wait(Duration::from_millis(300)),
        )
    } else {
        builder.inbox_per_message()
    };
    builder.on(through).build().await.unwrap().spawn()
}

/// Publishes one message of each of `aggregates` aggregates (`o-1`, ..).
async fn publish(fx: &SubscriberFixture, aggregates: u64) -> Vec<OutboxMessage> {
    let mut sent = Vec::new();
    for n in 1..=aggregates {
        let message = fx.message(&StockMoved { step: 1 }, &format!("o-{n}"), 1);
        fx.publish(&message).await;
        sent.push(message);
    }
    sent
}

/// Every message of `sent` applied once (its effect, its inbox row), the
/// victim's lock updates once (after the rival's), nothing dead-lettered;
/// with `no_redelivery`, each from its first delivery (a conflict is
/// applied again at once, spending no delivery).
async fn assert_each_applied_once(
    test: &TestDb,
    fx: &SubscriberFixture,
    inbox: &Inbox,
    sent: &[OutboxMessage],
    no_redelivery: bool,
) {
    for message in sent {
        let (applied, delivery) = test
            .rows(&format!(
                "SELECT applied, delivery FROM effects WHERE message_id = '{}'",
                message.id
            ))
            .await
            .first()
            .map_or((0, 0), |row| {
                (
                    row.try_get::<i64>("", "applied").unwrap(),
                    row.try_get::<i64>("", "delivery").unwrap(),
                )
            });
        assert_eq!(
            applied, 1,
            "{} acknowledged with its effect applied {applied} times, want 1",
            message.aggregate_id
        );
        if no_redelivery {
            assert_eq!(
                delivery, 1,
                "{} applied again without a redelivery (a conflict spends no delivery)",
                message.aggregate_id
            );
        }
        assert!(inbox.contains(message.id).await.unwrap());
    }
    let locks: Vec<i64> = test
        .rows("SELECT n FROM locks ORDER BY id")
        .await
        .iter()
        .map(|row| row.try_get("", "n").unwrap())
        .collect();
    let rival = i64::from(test.count("ballast", "1=1").await > 0);
    assert_eq!(
        locks,
        [rival + 1, rival + 1],
        "the victim's lock updates applied once (and the rival's, if any)"
    );
    let dead = fx.dead_letter_count().await;
    assert_eq!(dead, 0, "nothing dead-lettered");
}

/// MariaDB: the victim's handler meets a real deadlock (its transaction
/// rolled back whole), swallows it and retries its statement; in a group
/// of five (`groups`) or alone. Today's code commits the statements after
/// the rollback on their own and acks every message with the rest of the
/// effects lost.
async fn a_swallowed_deadlock_commits_nothing_and_everything_is_applied_once(groups: bool) {
    let test = TestDb::with_schema(Backend::MySql).await;
    create_tables(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let sent = publish(&fx, 5).await;
    let (rival, rival_done) = Rival::start(&test).await;
    let handler = Handler::new(VICTIM, Trouble::Deadlock(rival));
    let running = spawn(&fx, &inbox, &handler, groups).await;
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    rival_done
        .await
        .unwrap()
        .expect("the rival commits: the handler's transaction was the deadlock's victim");
    assert_eq!(
        handler.swallowed.load(Ordering::SeqCst),
        1,
        "the handler met the deadlock once"
    );
    assert_each_applied_once(&test, &fx, &inbox, &sent, true).await;
    fx.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_a_swallowed_deadlock_in_a_group_commits_nothing_and_each_message_applies_once() {
    a_swallowed_deadlock_commits_nothing_and_everything_is_applied_once(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_a_swallowed_deadlock_alone_commits_nothing_and_the_message_applies_once() {
    a_swallowed_deadlock_commits_nothing_and_everything_is_applied_once(false).await;
}

/// MariaDB, without a subscriber: a handler that passes the deadlock
/// through `UnitOfWork::checked` and swallows what it returns fails its
/// message with `RetryableFailureSwallowed` (retryable); nothing of it is
/// committed, and the next attempt applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_a_unit_that_saw_a_deadlock_fails_its_message_though_the_handler_returned_ok() {
    let test = TestDb::with_schema(Backend::MySql).await;
    create_tables(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let message = fx.message(&StockMoved { step: 1 }, VICTIM, 1);
    let (rival, rival_done) = Rival::start(&test).await;
    let mut handler = Handler::new(VICTIM, Trouble::Deadlock(rival));
    handler.checked = true;
    let process = |delivery: Delivery| {
        let handler = handler.clone();
        let inbox = inbox.clone();
        async move {
            inbox
                .process(StockMoved { step: 1 }, delivery, move |_, delivery, uow| {
                    Box::pin(async move { handler.handle(delivery, uow).await })
                })
                .await
        }
    };
    let failed = process(Delivery::new(message.clone())).await.unwrap_err();
    rival_done.await.unwrap().unwrap();
    let cause = failed
        .get_ref()
        .downcast_ref::<OutboxError>()
        .expect("an OutboxError");
    assert!(
        matches!(cause, OutboxError::RetryableFailureSwallowed) && cause.is_retryable(),
        "{cause}"
    );
    assert_eq!(test.count("effects", "1=1").await, 0, "nothing committed");
    assert!(!inbox.contains(message.id).await.unwrap());

    process(Delivery::new(message.clone())).await.unwrap();
    assert_each_applied_once(&test, &fx, &inbox, &[message], false).await;
    fx.delete().await;
}

/// MariaDB: an inbox transaction that ends without its commit or rollback
/// (its handler panicked; its future was dropped mid-handler) hands its
/// connection back with `autocommit` on again and nothing of it committed:
/// on a pool of one connection, the next statement outside a transaction
/// commits on its own, as it did before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_an_inbox_transaction_dropped_mid_handler_leaves_autocommit_on() {
    let test = TestDb::with_schema(Backend::MySql).await;
    create_tables(&test).await;
    let one = test.connect_with(1).await;
    let outbox = Outbox::new(one.clone(), OutboxConfig::default().without_notify());
    let inbox = Inbox::new(&outbox, "dropped-mid-handler").unwrap();
    let fx = SubscriberFixture::shared().await;
    let (panicking, cancelled) = (
        fx.message(&StockMoved { step: 1 }, "p-1", 1),
        fx.message(&StockMoved { step: 1 }, "c-1", 1),
    );
    let run = |message: OutboxMessage, panics: bool| {
        let inbox = inbox.clone();
        tokio::spawn(async move {
            inbox
                .process(StockMoved { step: 1 }, Delivery::new(message), move |_, delivery, uow| {
                    Box::pin(async move {
                        uow.connection()
                            .await?
                            .execute_unprepared(&format!(
                                "INSERT INTO effects (message_id, applied, delivery) VALUES ('{}', 1, 1)",
                                delivery.message_id()
                            ))
                            .await?;
                        assert!(!panics, "the handler panics");
                        std::future::pending::<()>().await;
                        Ok(())
                    })
                })
                .await
        })
    };
    assert!(run(panicking.clone(), true).await.unwrap_err().is_panic());
    let stuck = run(cancelled.clone(), false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stuck.abort();
    assert!(stuck.await.unwrap_err().is_cancelled());

    let autocommit = one
        .query_one_raw(sea_orm::Statement::from_string(
            one.get_database_backend(),
            "SELECT @@autocommit AS n",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap();
    assert_eq!(
        autocommit, 1,
        "the pooled connection has autocommit on again"
    );
    one.execute_unprepared("UPDATE locks SET n = 7 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(
        test.count("locks", "n = 7").await,
        1,
        "a statement outside a transaction commits on its own"
    );
    assert_eq!(
        test.count("effects", "1=1").await,
        0,
        "nothing of either committed"
    );
    assert!(!inbox.contains(panicking.id).await.unwrap());
    assert!(!inbox.contains(cancelled.id).await.unwrap());
    fx.delete().await;
}

/// PostgreSQL: the victim's handler swallows a failed statement, which
/// aborted the transaction; in a group of five or alone, nothing is acked
/// without its effect and each message is applied once (the failure is
/// the handler's: the messages come back as redeliveries).
async fn postgres_a_swallowed_failure_commits_nothing(groups: bool) {
    let test = TestDb::with_schema(Backend::Postgres).await;
    create_tables(&test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    let sent = publish(&fx, 5).await;
    // The last of the group: a later handler's statement would fail in the
    // aborted transaction on its own; the check before the commit is what
    // finds it.
    let handler = Handler::new("o-5", Trouble::FailedStatement);
    let running = spawn(&fx, &inbox, &handler, groups).await;
    fx.settled(Duration::from_secs(20)).await;
    running.shutdown().await.unwrap();

    assert_eq!(handler.swallowed.load(Ordering::SeqCst), 1);
    assert_each_applied_once(&test, &fx, &inbox, &sent, false).await;
    fx.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_swallowed_failure_in_a_group_commits_nothing() {
    postgres_a_swallowed_failure_commits_nothing(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_swallowed_failure_alone_commits_nothing() {
    postgres_a_swallowed_failure_commits_nothing(false).await;
}
