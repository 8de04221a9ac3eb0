//! Testing a service that uses the outbox, the way its team would: the
//! domain, the publishing, the failures and the consumer's idempotency,
//! with `outbox-testing` and no database server or broker (the consumer's
//! inbox runs on an SQLite file).
//!
//! ```text
//! cargo test -p txoutbox-examples --example testing_a_service   # the suite, under a second
//! cargo run  -p txoutbox-examples --example testing_a_service   # the same story, printed
//! ```

use std::error::Error;

use txoutbox::publisher::Publisher;
use txoutbox::testing::TestOutbox;
use txoutbox_examples::orders::{Order, OrderPaid};

/// The service's use case: place an order and take the payment.
fn place_and_pay<P: Publisher + Clone>(
    outbox: &TestOutbox<P>,
    id: &str,
    cents: u64,
) -> Result<(), Box<dyn Error>> {
    let mut order = Order::place(id, "ada", cents)?;
    order.pay()?;
    outbox.save(&mut order)?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let outbox = TestOutbox::new();
    place_and_pay(&outbox, "o-1", 1250)?;
    place_and_pay(&outbox, "o-2", 990)?;
    for message in outbox.drain().await? {
        println!(
            "published {} #{} of {} {}",
            message.event_name, message.sequence, message.aggregate_type, message.aggregate_id
        );
    }
    outbox.publisher().assert_in_order();
    println!(
        "{} orders placed and paid, in order; run `cargo test -p txoutbox-examples --example testing_a_service` for the suite",
        outbox.publisher().events::<OrderPaid>().len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sea_orm::EntityTrait;
    use txoutbox::publisher::PublishErrorKind;
    use txoutbox::store::RetryPolicy;
    use txoutbox::testing::faults::FaultyPublisher;
    use txoutbox::testing::{MemoryPublisher, recorded};
    use txoutbox::{Inbox, OutboxConfig};
    use txoutbox_examples::orders::OrderPlaced;
    use txoutbox_examples::read_model::{self, entity};
    use txoutbox_examples::support::open_outbox;

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
        let outbox = TestOutbox::new();
        place_and_pay(&outbox, "o-1", 1250)?;
        let published = outbox.drain().await?;
        let names: Vec<&str> = published.iter().map(|m| m.event_name.as_str()).collect();
        assert_eq!(names, ["order.placed", "order.paid"]);
        assert_eq!(outbox.publisher().events::<OrderPaid>()[0].order_id, "o-1");
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn the_service_survives_a_30_s_broker_outage() -> TestResult {
        let publisher = FaultyPublisher::new(MemoryPublisher::new());
        let outbox =
            TestOutbox::with_publisher(publisher.clone()).drain_timeout(Duration::from_secs(120));
        publisher.unavailable_for(Duration::from_secs(30));
        for k in 0..10 {
            place_and_pay(&outbox, &format!("o-{k}"), 100)?; // writes go on
        }
        let published = outbox.drain().await?; // (paused time: 30 s in no time)
        assert_eq!(published.len(), 20);
        publisher.inner().assert_in_order();
        assert!(outbox.store().messages().iter().all(|m| m.attempts == 0));
        Ok(())
    }

    #[tokio::test]
    async fn a_rejected_payment_event_is_retried_after_its_backoff() -> TestResult {
        let publisher = FaultyPublisher::new(MemoryPublisher::new());
        let outbox = TestOutbox::with_publisher(publisher.clone()).retry(RetryPolicy::new(
            3,
            Duration::from_secs(10),
            Duration::from_secs(10),
        ));
        publisher.reject(|m| m.event_name == "order.paid", PublishErrorKind::Rejected);
        place_and_pay(&outbox, "o-1", 1250)?;
        assert_eq!(outbox.drain().await?.len(), 1, "placed; paid backs off");
        publisher.heal();
        outbox.clock().advance(Duration::from_secs(11));
        assert_eq!(outbox.drain().await?[0].event_name, "order.paid");
        Ok(())
    }

    #[tokio::test]
    async fn the_read_model_applies_a_redelivered_message_once() -> TestResult {
        let dir = tempfile::tempdir()?;
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("inbox.db").display()
        );
        let db = open_outbox(&url, OutboxConfig::default().without_notify()).await?;
        read_model::create_table(db.db()).await?;
        let inbox = Inbox::new(&db, read_model::CONSUMER)?;

        let outbox = TestOutbox::new();
        place_and_pay(&outbox, "o-1", 1250)?;
        outbox.drain().await?;
        let placed = &outbox.publisher().published::<OrderPlaced>()[0];
        // The handler as the subscriber runs it: through the inbox.
        let handler = inbox.handler(read_model::on_placed);
        handler
            .apply(placed.event.clone(), placed.delivery())
            .await?;
        handler
            .apply(placed.event.clone(), placed.redelivery()) // no second insert
            .await?;
        assert!(inbox.contains(placed.message.id).await?);
        assert_eq!(entity::Entity::find().all(db.db()).await?.len(), 1);
        Ok(())
    }
}
