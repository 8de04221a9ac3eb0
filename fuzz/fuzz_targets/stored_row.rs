//! An outbox row as the store reads it back (`StoredRow`, the values of
//! its message columns, written here as a JSON object), whatever another
//! program, a schema drift or a hand-made `UPDATE` left in it.
//!
//! Properties: a row is read as a message exactly when each column holds
//! what its field takes (a negative sequence or version, headers that are
//! not an object of valid application headers, a bad `traceparent`, a
//! payload that is not JSON: each refused); a message read from a row is
//! written as a row that reads back as the same message, and writing is
//! stable from then on; the store writes a message exactly when its values
//! fit their columns and it can be sent (`wire::check`), and what it
//! writes, the publisher can send.

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
    let written = StoredRow::of(&message);
    assert_eq!(written.is_ok(), writable(&message), "{written:?}");
    let Ok(written) = written else {
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
    let encoded = wire::encode(&message, "/fuzz").expect("a message the store writes can be sent");
    for (name, value) in encoded {
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

/// Whether the store writes `message`: each text within its column's width,
/// every value one that arrives unchanged, a time RFC 3339 writes.
fn writable(message: &txoutbox_core::OutboxMessage) -> bool {
    let fits = |value: &Option<String>, max: usize| value.as_ref().is_none_or(|v| v.len() <= max);
    rules::is_rfc3339_time(message.occurred_at)
        && message.event_name.len() <= 128
        && message.subject.len() <= 255
        && message.aggregate_type.len() <= 128
        && message.aggregate_id.len() <= 255
        && message.correlation_id.len() <= 255
        && fits(&message.causation_id, 255)
        && fits(&message.tenant, 255)
        && [
            Some(&message.event_name),
            Some(&message.aggregate_type),
            Some(&message.aggregate_id),
            Some(&message.correlation_id),
            message.causation_id.as_ref(),
            message.tenant.as_ref(),
            message.tracestate.as_ref(),
        ]
        .into_iter()
        .flatten()
        .all(|value| rules::arrives_unchanged(value))
}
