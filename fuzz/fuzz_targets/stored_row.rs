//! An outbox row as the store reads it back (`StoredRow`, the values of
//! its message columns, written here as a JSON object), whatever another
//! program, a schema drift or a hand-made `UPDATE` left in it.
//!
//! Properties: a row is read as a message exactly when each column holds
//! what its field takes (a negative sequence or version, headers that are
//! not an object of valid application headers, a bad `traceparent`, a
//! payload that is not JSON: each refused); a message read from a row is
//! written as a row that reads back as the same message, and writing is
//! stable from then on; what the store writes, the publisher can send.

#![no_main]

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use txoutbox_core::wire;
use txoutbox_fuzz::rules;
use txoutbox_sea_orm::__fuzz::StoredRow;
use uuid::Uuid;

/// A row's values, as the seeds write them.
#[derive(Deserialize)]
struct Row {
    id: Uuid,
    aggregate_type: String,
    aggregate_id: String,
    sequence: i64,
    event_name: String,
    event_version: i32,
    subject: String,
    payload: String,
    headers: Option<String>,
    correlation_id: String,
    causation_id: Option<String>,
    tenant: Option<String>,
    traceparent: Option<String>,
    occurred_at: DateTime<Utc>,
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(row) = serde_json::from_slice::<Row>(bytes) else {
        return;
    };
    let readable = readable(&row);
    let stored = StoredRow {
        id: row.id,
        aggregate_type: row.aggregate_type,
        aggregate_id: row.aggregate_id,
        sequence: row.sequence,
        event_name: row.event_name,
        event_version: row.event_version,
        subject: row.subject,
        payload: row.payload,
        headers: row.headers,
        correlation_id: row.correlation_id,
        causation_id: row.causation_id,
        tenant: row.tenant,
        traceparent: row.traceparent,
        occurred_at: row.occurred_at,
    };
    let message = stored.clone().into_message();
    assert_eq!(message.is_ok(), readable, "{stored:?}: {message:?}");
    let Ok(message) = message else {
        return;
    };
    let Ok(written) = StoredRow::of(&message) else {
        return;
    };
    assert_eq!(written.id, stored.id);
    assert_eq!(written.sequence, stored.sequence);
    assert_eq!(written.event_version, stored.event_version);
    assert_eq!(written.traceparent, stored.traceparent);
    assert_eq!(written.occurred_at, stored.occurred_at);
    let again = written
        .clone()
        .into_message()
        .expect("a written row reads back");
    assert_eq!(again, message);
    assert_eq!(StoredRow::of(&again).ok(), Some(written));
    for (name, value) in wire::encode(&message, "/fuzz") {
        assert!(
            rules::nats_can_carry(&name, &value),
            "a stored message carries {name}: {value:?}"
        );
    }
});

/// Whether each column holds what its field takes, as the columns are
/// documented (`StoredRow`).
fn readable(row: &Row) -> bool {
    let headers = match &row.headers {
        None => true,
        Some(text) => match serde_json::from_str::<BTreeMap<String, String>>(text) {
            Ok(map) => map
                .iter()
                .filter(|(name, _)| name.as_str() != wire::TRACESTATE)
                .all(|(name, value)| rules::is_application_header(name, value)),
            Err(_) => false,
        },
    };
    row.sequence >= 0
        && row.event_version >= 0
        && headers
        && row.traceparent.as_deref().is_none_or(rules::is_traceparent)
        && serde_json::from_str::<&serde_json::value::RawValue>(&row.payload).is_ok()
}
