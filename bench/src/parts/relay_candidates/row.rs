//! An outbox row as text columns (what `pgoutput` sends and what the
//! row-lock relay selects with `::text` casts) into the message the
//! publisher takes, as the store reads it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use txoutbox_core::{Headers, MessageId, OutboxMessage, Payload};

use crate::harness::error::BoxError;

/// The columns the relays read, in the table's order.
pub(super) const COLUMNS: [&str; 14] = [
    "id",
    "aggregate_type",
    "aggregate_id",
    "sequence",
    "event_name",
    "event_version",
    "subject",
    "payload",
    "headers",
    "correlation_id",
    "causation_id",
    "tenant",
    "traceparent",
    "occurred_at",
];

/// `alias.column::text AS column` for every column of [`COLUMNS`].
pub(super) fn select_list(alias: &str) -> String {
    COLUMNS
        .iter()
        .map(|c| format!("{alias}.{c}::text AS {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The message of a row, `get` giving each column's text (`None` for SQL
/// `NULL` or a column not sent).
pub(super) fn message<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
) -> Result<OutboxMessage, BoxError> {
    let need = |column: &str| get(column).ok_or_else(|| format!("outbox row without `{column}`"));
    let (headers, tracestate) = match get("headers") {
        None => (Headers::new(), None),
        Some(text) => {
            let mut map: BTreeMap<String, String> = serde_json::from_str(text)?;
            let tracestate = map.remove(txoutbox_core::wire::TRACESTATE);
            (Headers::try_from(map)?, tracestate)
        }
    };
    Ok(OutboxMessage {
        id: MessageId::from_uuid(need("id")?.parse()?),
        event_name: need("event_name")?.to_owned(),
        event_version: need("event_version")?.parse()?,
        subject: need("subject")?.to_owned(),
        aggregate_type: need("aggregate_type")?.to_owned(),
        aggregate_id: need("aggregate_id")?.to_owned(),
        sequence: need("sequence")?.parse()?,
        occurred_at: timestamp(need("occurred_at")?)?,
        correlation_id: need("correlation_id")?.to_owned(),
        causation_id: get("causation_id").map(str::to_owned),
        tenant: get("tenant").map(str::to_owned),
        traceparent: get("traceparent").map(str::parse).transpose()?,
        tracestate,
        headers,
        payload: Payload::from_json(need("payload")?.to_owned())?,
        deliver_at: None,
    })
}

/// A `timestamptz` as PostgreSQL writes it (`2026-11-26 10:31:30.123456+00`).
fn timestamp(text: &str) -> Result<DateTime<Utc>, BoxError> {
    Ok(DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%#z")?.with_timezone(&Utc))
}
