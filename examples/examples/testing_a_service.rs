//! Testing a service that uses the outbox, the way its team would: the
//! domain, then the service's own use cases (`txoutbox_examples::checkout`,
//! the functions `metrics_endpoint` serves) on the production path: a real
//! `Outbox` (repository, unit of work, `transaction`) on SQLite in memory,
//! its events drained by the real processor into an in-memory broker, read
//! back typed; and the consumer side: the read model's own subscriber
//! (`txoutbox_examples::read_model::subscriber`, the builder the service
//! runs) driven in process by the kit's `TestSubscriber` with what the
//! outbox published: its handlers applied once, in order, through the
//! inbox; a failing handler retried, then dead-lettered and its order held
//! until an operator releases it. No database server, no broker.
//!
//! ```text
//! cargo test -p txoutbox-examples --example testing_a_service   # the suite, under a second
//! cargo run  -p txoutbox-examples --example testing_a_service   # the same story, printed
//! ```

use std::error::Error;

use txoutbox::Inbox;
use txoutbox::testing::{SqliteOutbox, TestSubscriber};
use txoutbox_examples::checkout::{pay_order, place_order};
use txoutbox_examples::orders::OrderPaid;
use txoutbox_examples::{orders_table, read_model};

/// The service's database, in memory: the outbox's tables and the
/// service's own.
async fn service_db() -> Result<SqliteOutbox, Box<dyn Error>> {
    let kit = SqliteOutbox::new().await?;
    orders_table::create_table(kit.db()).await?;
    Ok(kit)
}

/// The read model's subscriber, exactly as the service builds it, run in
/// this process over the same database (its inbox and `order_summaries`).
async fn read_model_subscriber(
    kit: &SqliteOutbox,
) -> Result<(TestSubscriber, Inbox), Box<dyn Error>> {
    read_model::create_table(kit.db()).await?;
    let inbox = Inbox::new(kit.outbox(), read_model::CONSUMER)?;
    let nats = TestSubscriber::jetstream().await?; // never connects
    let builder = read_model::subscriber(nats, &inbox, "ORDERS", "events.order.>");
    Ok((TestSubscriber::new(builder).await?, inbox))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    txoutbox_examples::support::exit_on_help(include_str!("testing_a_service.rs"));
    let kit = service_db().await?;
    for (id, cents) in [("o-1", 1250), ("o-2", 990)] {
        place_order(kit.outbox(), id, "ada", cents).await?;
        pay_order(kit.outbox(), id).await?;
    }
    for message in kit.drain().await? {
        println!(
            "published {} #{} of {} {}",
            message.event_name, message.sequence, message.aggregate_type, message.aggregate_id
        );
    }
    kit.publisher().assert_in_order();
    let (read_model, _) = read_model_subscriber(&kit).await?;
    for settled in read_model.deliver_all(&kit.publisher().messages()).await? {
        println!(
            "read model: {} of {} {}: {}",
            settled.event_name,
            settled.aggregate_type,
            settled.aggregate_id,
            settled.outcome.name()
        );
    }
    println!(
        "{} orders placed and paid, in order; run `cargo test -p txoutbox-examples --example testing_a_service` for the suite",
        kit.publisher().events::<OrderPaid>().len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, EntityTrait};
    use txoutbox::consumer::Release;
    use txoutbox::nats::subscriber::DeadLetterKind;
    use txoutbox::testing::{DeliveryOutcome, recorded};
    use txoutbox_examples::checkout::CheckoutError;
    use txoutbox_examples::orders::{Order, OrderError, OrderPlaced};
    use txoutbox_examples::read_model::{self, entity};

    use super::*;

    type TestResult = Result<(), Box<dyn Error>>;

    #[test]
    fn placing_an_order_records_order_placed_with_its_total() -> TestResult {
        let order = Order::place("o-1", "ada", 1250)?;
        let placed = recorded::<OrderPlaced>(&order);
        assert_eq!(placed.len(), 1);
        assert_eq!(
            (placed[0].total_cents, placed[0].currency.as_str()),
            (1250, "EUR")
        );
        Ok(())
    }

    #[tokio::test]
    async fn an_order_is_published_placed_then_paid() -> TestResult {
        let kit = service_db().await?;
        place_order(kit.outbox(), "o-1", "ada", 1250).await?;
        pay_order(kit.outbox(), "o-1").await?;
        let published = kit.drain().await?;
        let names: Vec<&str> = published.iter().map(|m| m.event_name.as_str()).collect();
        assert_eq!(names, ["order.placed", "order.paid"]);
        let paid = kit.publisher().published::<OrderPaid>();
        assert_eq!(paid[0].event.order_id, "o-1");
        assert_eq!(
            (
                paid[0].message.aggregate_id.as_str(),
                paid[0].message.sequence
            ),
            ("o-1", 2)
        );
        // The order row says so too: the same transaction wrote both.
        let order = kit
            .outbox()
            .repository::<Order>()
            .load("o-1".to_owned())
            .await?;
        assert!(order.is_some_and(|o| o.total_cents() == 1250));
        Ok(())
    }

    #[tokio::test]
    async fn paying_an_unknown_order_fails_and_publishes_nothing() -> TestResult {
        let kit = service_db().await?;
        let err = pay_order(kit.outbox(), "nope").await.unwrap_err();
        assert!(
            matches!(err, CheckoutError::NotFound(ref id) if id == "nope"),
            "{err}"
        );
        assert!(kit.drain().await?.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn paying_twice_is_refused_and_publishes_one_payment() -> TestResult {
        let kit = service_db().await?;
        place_order(kit.outbox(), "o-1", "ada", 1250).await?;
        pay_order(kit.outbox(), "o-1").await?;
        let again = pay_order(kit.outbox(), "o-1").await.unwrap_err();
        assert!(
            matches!(
                again,
                CheckoutError::Order(OrderError::InvalidTransition { .. })
            ),
            "{again}"
        );
        kit.drain().await?;
        assert_eq!(kit.publisher().events::<OrderPaid>().len(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn the_read_model_applies_a_redelivered_message_once() -> TestResult {
        let kit = service_db().await?;
        read_model::create_table(kit.db()).await?;
        let inbox = Inbox::new(kit.outbox(), read_model::CONSUMER)?;
        inbox.check_table().await?;

        place_order(kit.outbox(), "o-1", "ada", 1250).await?;
        let placed = kit.drain_events::<OrderPlaced>().await?.remove(0);
        // The handler as the subscriber runs it: through the inbox.
        let handler = inbox.handler(read_model::on_placed);
        handler
            .apply(placed.event.clone(), placed.delivery())
            .await?;
        handler
            .apply(placed.event.clone(), placed.redelivery()) // no second insert
            .await?;
        assert!(inbox.contains(placed.message.id).await?);
        assert_eq!(entity::Entity::find().all(kit.db()).await?.len(), 1);
        Ok(())
    }

    /// The status of each order summary, by order id.
    async fn summaries(kit: &SqliteOutbox) -> Result<Vec<(String, String)>, Box<dyn Error>> {
        let mut rows: Vec<(String, String)> = entity::Entity::find()
            .all(kit.db())
            .await?
            .into_iter()
            .map(|row| (row.order_id, row.status))
            .collect();
        rows.sort();
        Ok(rows)
    }

    fn pairs(rows: &[(&str, &str)]) -> Vec<(String, String)> {
        rows.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn the_read_model_subscriber_applies_what_was_published_once_in_order() -> TestResult {
        let kit = service_db().await?;
        place_order(kit.outbox(), "o-1", "ada", 1250).await?;
        pay_order(kit.outbox(), "o-1").await?;
        place_order(kit.outbox(), "o-2", "grace", 990).await?;
        let published = kit.drain().await?;
        let (read_model, _) = read_model_subscriber(&kit).await?;

        let settled = read_model.deliver_all(&published).await?;
        assert!(
            settled
                .iter()
                .all(|s| s.outcome == DeliveryOutcome::Handled),
            "{settled:?}"
        );
        assert_eq!(
            summaries(&kit).await?,
            pairs(&[("o-1", "paid"), ("o-2", "placed")])
        );
        // A redelivery (the ack was lost): the inbox knows it, nothing runs twice.
        let again = read_model.deliver_once(&published[0]).await?;
        assert_eq!(again.outcome, DeliveryOutcome::Duplicate);
        assert_eq!(entity::Entity::find().all(kit.db()).await?.len(), 2);
        Ok(())
    }

    #[tokio::test]
    async fn a_broken_read_model_holds_the_order_until_it_is_released() -> TestResult {
        let kit = service_db().await?;
        place_order(kit.outbox(), "o-1", "ada", 1250).await?;
        pay_order(kit.outbox(), "o-1").await?;
        place_order(kit.outbox(), "o-2", "grace", 990).await?;
        let published = kit.drain().await?;
        let (read_model, inbox) = read_model_subscriber(&kit).await?;

        // A botched migration dropped the table: `o-1`'s placement fails on
        // each of its 5 deliveries, is dead-lettered `exhausted` and holds
        // `o-1`; its payment is parked behind it.
        kit.db()
            .execute_unprepared("DROP TABLE order_summaries")
            .await?;
        let settled = read_model.deliver_all(&published[..2]).await?;
        let names: Vec<&str> = settled.iter().map(|s| s.outcome.name()).collect();
        assert_eq!(
            names,
            [
                "retried",
                "retried",
                "retried",
                "retried",
                "dead_lettered",
                "held"
            ]
        );
        let dead = read_model.dead_letters();
        assert_eq!(
            (dead[0].kind, dead[0].subject.as_deref()),
            (DeadLetterKind::Exhausted, Some("dlq.order-summaries"))
        );
        assert_eq!(inbox.holds().await?[0].waiting, 1);

        // Fixed: other orders go on while `o-1` stays held; released by
        // the operator, `o-1` is placed, then paid, in order.
        read_model::create_table(kit.db()).await?;
        let o2 = read_model.deliver(&published[2]).await?;
        assert_eq!(o2[0].outcome, DeliveryOutcome::Handled);
        assert_eq!(summaries(&kit).await?, pairs(&[("o-2", "placed")]));
        assert!(inbox.release("order", "o-1", Release::Retry).await?);
        let released = read_model.apply_releases().await?;
        let names: Vec<&str> = released.iter().map(|s| s.event_name.as_str()).collect();
        assert_eq!(names, ["order.placed", "order.paid"]);
        assert_eq!(
            summaries(&kit).await?,
            pairs(&[("o-1", "paid"), ("o-2", "placed")])
        );
        Ok(())
    }
}
