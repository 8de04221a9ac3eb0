//! A row that cannot be read back as a message (another program wrote it,
//! the schema drifted, a newer version of the library wrote a field this one
//! does not understand) does not stall the claim: it goes dead with the
//! reason, holding back only its own aggregate, and every other claimed
//! message is handed out.

use std::time::Duration;

use sea_orm::ConnectionTrait;
use txoutbox_core::{MessageId, OutboxStore};
use txoutbox_sea_orm::{Outbox, OutboxConfig};
use txoutbox_suite::TestDb;
use txoutbox_suite::orders::Order;
use uuid::Uuid;

const TABLE: &str = "outbox_messages";
const LEASE: Duration = Duration::from_secs(60);

async fn an_unreadable_row_goes_dead_and_the_rest_is_claimed(test: TestDb) {
    let outbox = Outbox::new(test.db.clone(), OutboxConfig::default());
    let orders = outbox.repository::<Order>();
    for id in ["good-1", "good-2", "good-3", "bad"] {
        let mut order = Order::place(id, 100).expect("record");
        order.amend(200).expect("record");
        orders.save(&mut order).await.expect("save");
    }
    // The first message of `bad` carries a trace context this library
    // cannot parse.
    test.db
        .execute_unprepared(&format!(
            "UPDATE {TABLE} SET traceparent = 'not-a-traceparent' \
             WHERE aggregate_id = 'bad' AND sequence = 1"
        ))
        .await
        .expect("spoil one row");

    let store = outbox.store();
    for claim in [true, false] {
        // Once by an ordinary claim, once by ids (the fast path).
        if !claim {
            test.db
                .execute_unprepared(&format!(
                    "UPDATE {TABLE} SET status = 0, attempts = 0, last_error = NULL, \
                     next_attempt_at = created_at, lease_token = NULL, lease_expires_at = NULL"
                ))
                .await
                .expect("start again");
        }
        let batch = if claim {
            store.claim(100, LEASE).await.expect("the claim succeeds")
        } else {
            let ids = all_ids(&test).await;
            store
                .claim_ids(&ids, LEASE)
                .await
                .expect("the claim by ids succeeds")
        };
        let got = txoutbox_suite::claimed_positions(&batch);
        assert_eq!(
            got,
            vec![
                ("good-1".to_owned(), 1),
                ("good-1".to_owned(), 2),
                ("good-2".to_owned(), 1),
                ("good-2".to_owned(), 2),
                ("good-3".to_owned(), 1),
                ("good-3".to_owned(), 2),
            ],
            "claim {claim}: every readable message, not the unreadable one nor what follows it"
        );
        assert_eq!(
            test.count(
                TABLE,
                "aggregate_id = 'bad' AND sequence = 1 AND status = 2 AND attempts = 1 \
                 AND last_error LIKE '%traceparent%' AND lease_token IS NULL"
            )
            .await,
            1,
            "the unreadable row is dead with its reason"
        );
        assert_eq!(
            test.count(
                TABLE,
                "aggregate_id = 'bad' AND sequence = 2 AND status = 0 AND lease_token IS NULL"
            )
            .await,
            1,
            "its aggregate's next message waits behind it"
        );
    }
}

/// Every message id in the table.
async fn all_ids(test: &TestDb) -> Vec<MessageId> {
    test.rows(&format!("SELECT id FROM {TABLE}"))
        .await
        .iter()
        .map(|row| MessageId::from_uuid(row.try_get::<Uuid>("", "id").expect("an id")))
        .collect()
}

txoutbox_suite::each_backend!(an_unreadable_row_goes_dead_and_the_rest_is_claimed);
