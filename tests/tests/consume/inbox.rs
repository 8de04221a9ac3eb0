//! The inbox on PostgreSQL, MariaDB and SQLite: a message's effects are
//! applied once per consumer, together with the events the handler records;
//! duplicates (a second publish, a lost ack, a crash mid-handler with a
//! broker restart) are acknowledged without running the handler again; old
//! rows are purged; the migration adds the table to existing databases.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_nats::jetstream::stream::StorageType;
use sea_orm::ConnectionTrait;
use sea_orm_migration::MigratorTrait;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use txoutbox_core::consumer::{Handler, HandlerFuture};
use txoutbox_core::{
    AggregateRef, Delivery, HandlerError, IntegrationEvent, MessageContext, MessageId,
    OutboxMessage, PendingMessage, SubjectPrefix, wire,
};
use txoutbox_nats::subscriber::RunningSubscriber;
use txoutbox_sea_orm::inbox::Processed;
use txoutbox_sea_orm::migration::OutboxMigrator;
use txoutbox_sea_orm::{Inbox, Outbox, OutboxConfig, UnitOfWork};
use txoutbox_suite::nats::NatsServer;
use txoutbox_suite::orders::Order;
use txoutbox_suite::subscriber::{SubscriberFixture, eventually};
use txoutbox_suite::{Backend, TestDb};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "inbox.payment.received")]
struct PaymentReceived {
    order_id: String,
    cents: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntegrationEvent)]
#[event(name = "inbox.invoice.requested")]
struct InvoiceRequested {
    order_id: String,
}

fn payment(order_id: &str) -> PaymentReceived {
    PaymentReceived {
        order_id: order_id.to_owned(),
        cents: 100,
    }
}

/// `event` as message `sequence` of `payment/<aggregate_id>`, correlation `corr-1`.
fn message<E: IntegrationEvent>(event: &E, aggregate_id: &str, sequence: u64) -> OutboxMessage {
    OutboxMessage::seal(
        PendingMessage::new(event).unwrap(),
        AggregateRef {
            aggregate_type: "payment".into(),
            aggregate_id: aggregate_id.into(),
            sequence,
        },
        &MessageContext::new().with_correlation_id("corr-1"),
        &SubjectPrefix::default(),
    )
}

/// The handler's effect: one row in `effects` per run that committed.
async fn create_effects(test: &TestDb) {
    test.db
        .execute_unprepared(
            "CREATE TABLE effects (message_id VARCHAR(64) NOT NULL, \
             order_id VARCHAR(64) NOT NULL, delivery BIGINT NOT NULL)",
        )
        .await
        .unwrap();
}

async fn apply_effect(
    uow: &mut UnitOfWork,
    event: &PaymentReceived,
    delivery: &Delivery,
) -> Result<(), HandlerError> {
    uow.connection()
        .await?
        .execute_unprepared(&format!(
            "INSERT INTO effects (message_id, order_id, delivery) VALUES ('{}', '{}', {})",
            delivery.message_id(),
            event.order_id,
            delivery.delivery_count()
        ))
        .await?;
    Ok(())
}

async fn effects_of(test: &TestDb, message: &OutboxMessage) -> i64 {
    test.count("effects", &format!("message_id = '{}'", message.id))
        .await
}

fn outbox(test: &TestDb) -> Outbox {
    Outbox::new(test.db.clone(), OutboxConfig::default().without_notify())
}

// ------------------------------------------------------------ the inbox

/// A message is applied once per consumer; a repeat does not run the handler.
async fn applies_a_message_once_per_consumer(test: TestDb) {
    create_effects(&test).await;
    let outbox = outbox(&test);
    let (billing, shipping) = (
        Inbox::new(&outbox, "billing").unwrap(),
        Inbox::new(&outbox, "shipping").unwrap(),
    );
    let m = message(&payment("o-1"), "p-1", 1);
    let runs = Arc::new(AtomicUsize::new(0));
    let process = |inbox: &Inbox| {
        let (inbox, runs, m) = (inbox.clone(), Arc::clone(&runs), m.clone());
        async move {
            inbox
                .process(payment("o-1"), Delivery::new(m), |event, delivery, uow| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Box::pin(async move { apply_effect(uow, &event, &delivery).await })
                })
                .await
                .unwrap()
        }
    };
    assert_eq!(process(&billing).await, Processed::Applied);
    assert_eq!(process(&billing).await, Processed::Duplicate);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(effects_of(&test, &m).await, 1);
    assert!(billing.contains(m.id).await.unwrap());
    assert!(!shipping.contains(m.id).await.unwrap());

    assert_eq!(process(&shipping).await, Processed::Applied, "per consumer");
    assert_eq!(effects_of(&test, &m).await, 2);
    assert_eq!(test.count("outbox_inbox", "1=1").await, 2);
}

/// A failing handler commits nothing (effects, events, inbox row); the
/// retry applies it.
async fn a_failed_handler_commits_nothing(test: TestDb) {
    create_effects(&test).await;
    let inbox = Inbox::new(&outbox(&test), "billing").unwrap();
    let m = message(&payment("o-1"), "p-1", 1);
    let failed = inbox
        .process(
            payment("o-1"),
            Delivery::new(m.clone()),
            |event, delivery, uow| {
                Box::pin(async move {
                    apply_effect(uow, &event, &delivery).await?;
                    uow.enqueue(&InvoiceRequested {
                        order_id: event.order_id,
                    })?;
                    Err(HandlerError::retry("the ledger is down"))
                })
            },
        )
        .await
        .unwrap_err();
    assert_eq!(failed.to_string(), "the ledger is down");
    assert_eq!(effects_of(&test, &m).await, 0);
    assert_eq!(test.count("outbox_messages", "1=1").await, 0);
    assert!(!inbox.contains(m.id).await.unwrap());

    let retried = inbox
        .process(
            payment("o-1"),
            Delivery::new(m.clone()).with_delivery_count(2),
            |event, delivery, uow| {
                Box::pin(async move { apply_effect(uow, &event, &delivery).await })
            },
        )
        .await
        .unwrap();
    assert_eq!(retried, Processed::Applied);
    assert_eq!(effects_of(&test, &m).await, 1);
}

/// A consumer that is also a producer: what its handler records is caused
/// by the handled message, keeps its correlation, and commits with the
/// inbox row — once.
async fn events_recorded_by_a_handler_continue_the_chain(test: TestDb) {
    let inbox = Inbox::new(&outbox(&test), "orders").unwrap();
    let m = message(&payment("o-9"), "p-9", 1);
    for _ in 0..2 {
        inbox
            .process(payment("o-9"), Delivery::new(m.clone()), |event, _, uow| {
                Box::pin(async move {
                    let mut order = Order::place(event.order_id.clone(), event.cents)?;
                    uow.save(&mut order).await?;
                    uow.enqueue(&InvoiceRequested {
                        order_id: event.order_id,
                    })?;
                    Ok(())
                })
            })
            .await
            .unwrap();
    }
    assert_eq!(test.count("orders", "id = 'o-9'").await, 1);
    assert_eq!(test.count("outbox_messages", "1=1").await, 2);
    let chained = format!("causation_id = '{}' AND correlation_id = 'corr-1'", m.id);
    assert_eq!(
        test.count("outbox_messages", &chained).await,
        2,
        "both new events are caused by the handled message, in its correlation"
    );
}

/// Two deliveries of one message handled at the same time: one applies it,
/// the other waits for that commit and is recognised as a duplicate.
async fn concurrent_duplicates_run_the_handler_once(test: TestDb) {
    create_effects(&test).await;
    let inbox = Inbox::new(&outbox(&test), "billing").unwrap();
    let m = message(&payment("o-1"), "p-1", 1);
    let runs = Arc::new(AtomicUsize::new(0));
    let process = || {
        let (inbox, runs, m) = (inbox.clone(), Arc::clone(&runs), m.clone());
        tokio::spawn(async move {
            inbox
                .process(payment("o-1"), Delivery::new(m), |event, delivery, uow| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Box::pin(async move {
                        apply_effect(uow, &event, &delivery).await?;
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        Ok(())
                    })
                })
                .await
        })
    };
    let (a, b) = (process(), process());
    let mut outcomes = [a.await.unwrap().unwrap(), b.await.unwrap().unwrap()];
    outcomes.sort_by_key(|p| *p == Processed::Duplicate);
    assert_eq!(outcomes, [Processed::Applied, Processed::Duplicate]);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(effects_of(&test, &m).await, 1);
}

/// Purge deletes this consumer's rows older than the retention, in batches.
async fn purge_deletes_old_rows_in_batches(test: TestDb) {
    let outbox = outbox(&test);
    let (billing, other) = (
        Inbox::new(&outbox, "billing").unwrap(),
        Inbox::new(&outbox, "other").unwrap(),
    );
    for (inbox, count) in [(&billing, 25), (&other, 3)] {
        for n in 0..count {
            let m = message(&payment("o"), &format!("p-{n}"), 1);
            inbox
                .process(payment("o"), Delivery::new(m), |_, _, _| {
                    Box::pin(async { Ok(()) })
                })
                .await
                .unwrap();
        }
    }
    assert_eq!(
        billing.purge(Duration::from_secs(3600), 10).await.unwrap(),
        0
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        billing.purge(Duration::from_millis(20), 10).await.unwrap(),
        25
    );
    assert_eq!(test.count("outbox_inbox", "consumer = 'billing'").await, 0);
    assert_eq!(
        test.count("outbox_inbox", "consumer = 'other'").await,
        3,
        "another consumer's rows stay"
    );
    assert_eq!(other.purge(Duration::from_millis(20), 2).await.unwrap(), 3);
}

/// A database migrated before the inbox existed gets it from the migrator.
async fn the_migrator_adds_the_inbox_to_an_existing_outbox(backend: Backend) {
    let test = TestDb::new(backend).await;
    OutboxMigrator::up(&test.db, Some(1)).await.unwrap();
    let inbox = Inbox::new(&outbox(&test), "billing").unwrap();
    let m = message(&payment("o-1"), "p-1", 1);
    let process = || {
        inbox.process(payment("o-1"), Delivery::new(m.clone()), |_, _, _| {
            Box::pin(async { Ok(()) })
        })
    };
    assert!(process().await.is_err(), "no inbox table yet");
    assert_eq!(
        OutboxMigrator::get_pending_migrations(&test.db)
            .await
            .unwrap()
            .len(),
        7,
        "the inbox table, the queue indexes (claim walk, dead count), the abandoned claims, \
         the held messages, the skipped messages, the reader leases, the storage settings"
    );
    OutboxMigrator::up(&test.db, None).await.unwrap();
    assert_eq!(process().await.unwrap(), Processed::Applied);
    assert_eq!(process().await.unwrap(), Processed::Duplicate);
}

/// The reader lease (`ConsumerInbox::take_lease`): one holder at a time,
/// renewed by its holder with the same token, taken by another once given
/// up or expired by the database's clock, with a token that grows each
/// time the holder changes; each JetStream consumer's lease its own.
async fn the_reader_lease_has_one_holder_at_a_time(test: TestDb) {
    use txoutbox_core::consumer::{ConsumerInbox, ReaderLease};
    let inbox = Inbox::new(&outbox(&test), "billing").unwrap();
    let take = |name: &str, holder: &str, lease: Duration| {
        inbox
            .take_lease(name, holder, lease)
            .expect("the inbox keeps leases")
    };
    let long = Duration::from_secs(60);
    let ours = |token| ReaderLease::Ours { token };
    let theirs = |holder: &str| ReaderLease::Theirs {
        holder: holder.to_owned(),
    };
    assert_eq!(take("billing", "a", long).await.unwrap(), ours(1));
    assert_eq!(take("billing", "b", long).await.unwrap(), theirs("a"));
    assert_eq!(
        take("billing", "a", long).await.unwrap(),
        ours(1),
        "renewed"
    );
    assert_eq!(
        take("billing-p1", "b", long).await.unwrap(),
        ours(1),
        "another consumer's"
    );
    inbox.end_lease("billing", "b").await.unwrap(); // not b's: nothing happens
    assert_eq!(take("billing", "b", long).await.unwrap(), theirs("a"));
    inbox.end_lease("billing", "a").await.unwrap();
    assert_eq!(
        take("billing", "b", long).await.unwrap(),
        ours(2),
        "given up: taken"
    );
    // Renewed for a short while only: it runs out by the database's clock.
    let short = Duration::from_millis(300);
    assert_eq!(take("billing", "b", short).await.unwrap(), ours(2));
    assert_eq!(take("billing", "a", long).await.unwrap(), theirs("b"));
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(
        take("billing", "a", long).await.unwrap(),
        ours(3),
        "expired: taken"
    );
    assert_eq!(take("billing", "b", long).await.unwrap(), theirs("a"));
}

/// An inbox whose subscriber took the reader lease commits only while the
/// lease is still its own: once another process took it (this one froze
/// past it), a transaction about to commit rolls back, in a transaction of
/// its own and in a group alike.
/// Applies `m` through `inbox`, its effect a row of `effects`.
async fn apply_through(inbox: &Inbox, m: &OutboxMessage) -> Result<Processed, HandlerError> {
    inbox
        .process(
            payment("o-1"),
            Delivery::new(m.clone()),
            |event, delivery, uow| {
                Box::pin(async move { apply_effect(uow, &event, &delivery).await })
            },
        )
        .await
}

async fn an_inbox_transaction_commits_only_while_its_reader_lease_holds(test: TestDb) {
    use txoutbox_core::consumer::{ConsumerInbox, ReaderLease};
    create_effects(&test).await;
    // Two processes' inboxes.
    let (a, b) = (
        Inbox::new(&outbox(&test), "billing").unwrap(),
        Inbox::new(&outbox(&test), "billing").unwrap(),
    );
    let take = |inbox: &Inbox, holder: &str, lease: Duration| {
        inbox
            .take_lease("billing", holder, lease)
            .expect("the inbox keeps leases")
    };
    let (first, second) = (
        message(&payment("o-1"), "p-1", 1),
        message(&payment("o-1"), "p-1", 2),
    );
    let short = Duration::from_millis(300);
    assert_eq!(
        take(&a, "a", short).await.unwrap(),
        ReaderLease::Ours { token: 1 }
    );
    assert_eq!(apply_through(&a, &first).await.unwrap(), Processed::Applied);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let long = Duration::from_secs(60);
    assert_eq!(
        take(&b, "b", long).await.unwrap(),
        ReaderLease::Ours { token: 2 }
    );
    let refused = apply_through(&a, &second).await.unwrap_err();
    assert!(refused.to_string().contains("reader lease"), "{refused}");
    assert_eq!(effects_of(&test, &second).await, 0, "nothing committed");
    // Asking again finds it another's: still nothing commits.
    assert_eq!(
        take(&a, "a", long).await.unwrap(),
        ReaderLease::Theirs {
            holder: "b".to_owned()
        }
    );
    assert!(apply_through(&a, &second).await.is_err());
    if let Some(begin) = ConsumerInbox::begin_group(&a) {
        let group = begin.await.unwrap();
        assert!(
            group.commit().await.is_err(),
            "a group does not commit either"
        );
    }
    assert_eq!(
        apply_through(&b, &second).await.unwrap(),
        Processed::Applied
    );
    assert_eq!(effects_of(&test, &second).await, 1);
}

// ------------------------------------------------- through the subscriber

/// Counts the subscriber's calls, and applies the effect through the inbox.
struct Probe {
    calls: Arc<AtomicUsize>,
    runs: Arc<AtomicUsize>,
    /// (message id, delivery count) of every call.
    deliveries: Arc<std::sync::Mutex<Vec<(MessageId, u64)>>>,
}

impl Probe {
    fn new() -> Self {
        Self {
            calls: Arc::default(),
            runs: Arc::default(),
            deliveries: Arc::default(),
        }
    }

    /// A subscriber handler: counts, then processes through `inbox`.
    fn handler(
        &self,
        inbox: &Inbox,
    ) -> impl Fn(PaymentReceived, Delivery) -> HandlerFuture + Send + Sync + 'static {
        let runs = Arc::clone(&self.runs);
        let applied = inbox.handler_boxed(move |event: PaymentReceived, delivery, uow| {
            runs.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { apply_effect(uow, &event, &delivery).await })
        });
        let (calls, deliveries) = (Arc::clone(&self.calls), Arc::clone(&self.deliveries));
        move |event, delivery| {
            calls.fetch_add(1, Ordering::SeqCst);
            deliveries
                .lock()
                .unwrap()
                .push((delivery.message_id(), delivery.delivery_count()));
            applied.call(event, delivery)
        }
    }
    /// A subscriber on `fx` with this probe's [`handler`](Self::handler)
    /// (wrapped, so the subscriber does not see the inbox: unordered).
    async fn spawn(&self, fx: &SubscriberFixture, inbox: &Inbox) -> RunningSubscriber {
        fx.subscriber()
            .unordered()
            .on(self.handler(inbox))
            .build()
            .await
            .unwrap()
            .spawn()
    }

    /// Runs a subscriber until the handler was called `calls` times (up to
    /// 10 s, the wait named `what`) and every message is acked, then stops it.
    async fn run_until_called(
        &self,
        fx: &SubscriberFixture,
        inbox: &Inbox,
        what: &str,
        calls: usize,
    ) {
        let running = self.spawn(fx, inbox).await;
        eventually(what, Duration::from_secs(10), || async {
            self.calls.load(Ordering::SeqCst) == calls
        })
        .await;
        fx.settle_and_shut_down(running).await;
    }
}

/// The `effects` table, a fixture on the shared server, the inbox of its
/// durable, and payment `p-1` (of order `o-1`) published: the message.
async fn payment_published(test: &TestDb) -> (SubscriberFixture, Inbox, OutboxMessage) {
    create_effects(test).await;
    let fx = SubscriberFixture::shared().await;
    let inbox = Inbox::new(&outbox(test), &fx.durable).unwrap();
    let m = fx.message(&payment("o-1"), "p-1", 1);
    fx.publish(&m).await;
    (fx, inbox, m)
}

/// The same message id published twice past JetStream's deduplication
/// (the second copy without `Nats-Msg-Id`): delivered twice, applied once.
async fn a_message_published_twice_is_applied_once(test: TestDb) {
    let (fx, inbox, m) = payment_published(&test).await;
    let bypass: Vec<(String, String)> = wire::encode(&m, "/tests")
        .expect("the message can be published")
        .into_iter()
        .filter(|(k, _)| k != wire::NATS_MSG_ID)
        .map(|(k, v)| (k.into_owned(), v))
        .collect();
    fx.publish_raw(&m.subject, bypass, m.payload.as_bytes())
        .await;
    let mut stream = fx.jetstream.get_stream(&fx.stream).await.unwrap();
    assert_eq!(
        stream.info().await.unwrap().state.messages,
        2,
        "stored twice"
    );

    let probe = Probe::new();
    probe.run_until_called(&fx, &inbox, "both copies", 2).await;
    assert_eq!(probe.runs.load(Ordering::SeqCst), 1, "the handler ran once");
    assert_eq!(test.count("effects", "1=1").await, 1);
    fx.delete().await;
}

/// The handler's transaction commits, then the subscriber dies before its
/// ack: JetStream redelivers, and the inbox acks without applying again.
async fn a_redelivery_after_a_lost_ack_is_applied_once(test: TestDb) {
    let (fx, inbox, m) = payment_published(&test).await;

    // First subscriber: commits through the inbox, then never returns, so
    // it never acks; it is then killed.
    let committed = Arc::new(Notify::new());
    let first = Probe::new();
    let commit_then_hang = {
        let (applied, committed) = (first.handler(&inbox), Arc::clone(&committed));
        move |event: PaymentReceived, delivery: Delivery| {
            let (applying, committed) = (applied(event, delivery), Arc::clone(&committed));
            async move {
                applying.await?;
                committed.notify_one();
                std::future::pending::<Result<(), HandlerError>>().await
            }
        }
    };
    let crashed = fx
        .subscriber()
        .unordered()
        .on(commit_then_hang)
        .build()
        .await
        .unwrap()
        .spawn();
    committed.notified().await;
    assert_eq!(effects_of(&test, &m).await, 1, "committed, not acked");
    crashed.abort();

    let second = Probe::new();
    second
        .run_until_called(&fx, &inbox, "the redelivery", 1)
        .await;
    let counts: Vec<u64> = second
        .deliveries
        .lock()
        .unwrap()
        .iter()
        .map(|(_, count)| *count)
        .collect();
    assert_eq!(counts, [2]);
    assert_eq!(
        second.runs.load(Ordering::SeqCst),
        0,
        "recognised as a duplicate"
    );
    assert_eq!(effects_of(&test, &m).await, 1);
    fx.delete().await;
}

/// A subscriber killed while a handler sleeps inside its transaction, the
/// broker killed with it and restarted, a new subscriber on the durable:
/// every message is applied, none twice.
async fn a_crash_mid_handler_loses_nothing_and_applies_nothing_twice(test: TestDb) {
    create_effects(&test).await;
    let mut server = NatsServer::start().await.expect("a private nats-server");
    let fx = SubscriberFixture::new(
        server
            .connect()
            .await
            .expect("a client of the private nats-server"),
        StorageType::File,
    )
    .await;
    let inbox = Inbox::new(&outbox(&test), &fx.durable).unwrap();
    const MESSAGES: u64 = 30;
    let mut slow = None;
    for n in 1..=MESSAGES {
        let aggregate = format!("p-{}", n % 3);
        let m = fx.message(&payment(&format!("o-{n}")), &aggregate, n);
        if n == 10 {
            slow = Some(m.clone());
        }
        fx.publish(&m).await;
    }
    let slow = slow.unwrap();

    // Sleeps inside its transaction on the first delivery of message 10.
    let stuck = Arc::new(Notify::new());
    let sleeper = {
        let stuck = Arc::clone(&stuck);
        let slow_id = slow.id;
        inbox.handler_boxed(move |event: PaymentReceived, delivery, uow| {
            let stuck = Arc::clone(&stuck);
            Box::pin(async move {
                apply_effect(uow, &event, &delivery).await?;
                if delivery.message_id() == slow_id && delivery.delivery_count() == 1 {
                    stuck.notify_one();
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Ok(())
            })
        })
    };
    let first = fx
        .subscriber()
        .unordered()
        .on(sleeper)
        .build()
        .await
        .unwrap()
        .spawn();
    stuck.notified().await;
    first.abort();
    server.kill();
    server.restart().await.expect("nats-server restarted");

    let probe = Probe::new();
    let second = probe.spawn(&fx, &inbox).await;
    eventually("every message applied", Duration::from_secs(20), || async {
        test.count("effects", "1=1").await >= MESSAGES as i64
    })
    .await;
    fx.settled(Duration::from_secs(10)).await;
    second.shutdown().await.unwrap();

    assert_eq!(
        test.count("effects", "1=1").await,
        MESSAGES as i64,
        "none twice"
    );
    let distinct = test
        .count("(SELECT DISTINCT message_id FROM effects) AS d", "1=1")
        .await;
    assert_eq!(distinct, MESSAGES as i64, "none lost");
    assert_eq!(effects_of(&test, &slow).await, 1);
    // Delivered again to the new subscriber. Not by its delivery count: the
    // broker was killed too, and a file consumer's state written
    // asynchronously may restart the count at 1.
    assert!(
        probe
            .deliveries
            .lock()
            .unwrap()
            .iter()
            .any(|(id, _)| *id == slow.id),
        "the interrupted message was delivered again"
    );
    fx.delete().await;
}

txoutbox_suite::each_backend!(
    applies_a_message_once_per_consumer,
    a_failed_handler_commits_nothing,
    events_recorded_by_a_handler_continue_the_chain,
    concurrent_duplicates_run_the_handler_once,
    purge_deletes_old_rows_in_batches,
    a_message_published_twice_is_applied_once,
    a_redelivery_after_a_lost_ack_is_applied_once,
    a_crash_mid_handler_loses_nothing_and_applies_nothing_twice,
    the_reader_lease_has_one_holder_at_a_time,
    an_inbox_transaction_commits_only_while_its_reader_lease_holds,
);

txoutbox_suite::each_backend!(empty: the_migrator_adds_the_inbox_to_an_existing_outbox);

/// On PostgreSQL an inbox transaction carries the idle limit a subscriber
/// gives its inbox (its ack wait by default): one left idle longer (its
/// process frozen) is ended by the server, so the transaction that waits
/// for its rows (the process its messages went to) goes on, and the
/// frozen one, woken, commits nothing. Both ways of applying: a message
/// alone (the limit set by the inbox row's own statement) and a group. The
/// setting lives in the transaction only: the pool's connections keep the
/// server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_transaction_idle_past_its_limit_is_ended_and_frees_its_rows() {
    use std::time::Instant;
    use txoutbox_core::consumer::{ConsumerInbox, GroupEntry};

    const LIMIT: Duration = Duration::from_millis(600);
    let test = TestDb::with_schema(Backend::Postgres).await;
    create_effects(&test).await;
    let inbox = Inbox::new(&outbox(&test), "billing").unwrap();
    inbox.limit_idle_transactions(LIMIT);

    // A message alone: its handler wrote, then its process froze.
    let alone = message(&payment("o-1"), "p-1", 1);
    let frozen = {
        let inbox = inbox.clone();
        let m = alone.clone();
        tokio::spawn(async move {
            inbox
                .process(payment("o-1"), Delivery::new(m), |event, delivery, uow| {
                    Box::pin(async move {
                        apply_effect(uow, &event, &delivery).await?;
                        tokio::time::sleep(3 * LIMIT).await; // frozen, its transaction open
                        Ok(())
                    })
                })
                .await
        })
    };
    tokio::time::sleep(LIMIT / 4).await;
    let waiting = Instant::now();
    let taken_over = inbox
        .process(
            payment("o-1"),
            Delivery::new(alone.clone()),
            |event, delivery, uow| {
                Box::pin(async move { apply_effect(uow, &event, &delivery).await })
            },
        )
        .await
        .unwrap();
    let waited = waiting.elapsed();
    assert_eq!(
        taken_over,
        Processed::Applied,
        "the frozen one's row was rolled back"
    );
    assert!(
        waited < 3 * LIMIT,
        "waited {waited:?} for the frozen transaction (limit {LIMIT:?})"
    );
    let woken = frozen.await.unwrap();
    assert!(
        woken.is_err(),
        "the frozen transaction cannot commit: {woken:?}"
    );
    assert_eq!(test.count("effects", "1=1").await, 1, "applied once");

    // A group: its rows recorded, then its process froze.
    let grouped = message(&payment("o-2"), "p-2", 1);
    let entry = || {
        vec![GroupEntry {
            message_id: grouped.id,
            event_name: grouped.event_name.clone(),
        }]
    };
    let mut group = inbox.begin_group().unwrap().await.unwrap();
    assert!(group.record(entry()).await.unwrap().contains(&grouped.id));
    tokio::time::sleep(LIMIT / 4).await;
    let waiting = Instant::now();
    let mut other = inbox.begin_group().unwrap().await.unwrap();
    let recorded = other.record(entry()).await.unwrap();
    let waited = waiting.elapsed();
    assert!(
        recorded.contains(&grouped.id),
        "the frozen group's row was rolled back"
    );
    assert!(waited < 3 * LIMIT, "waited {waited:?} for the frozen group");
    other.commit().await.unwrap();
    tokio::time::sleep(LIMIT).await;
    assert!(
        group.commit().await.is_err(),
        "the frozen group commits nothing"
    );

    let rows = test
        .rows("SELECT current_setting('idle_in_transaction_session_timeout') AS limit_setting")
        .await;
    let setting: String = rows[0].try_get("", "limit_setting").unwrap();
    assert_eq!(
        setting, "0",
        "the pool's connections keep the server's setting"
    );
}
