//! One outbox message as the values of its row: what the store writes and
//! what it makes of the values it reads back, without a database (the
//! statements around them are in `row`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::DbErr;
use txoutbox_core::{Headers, MessageId, OutboxMessage, Payload, wire};
use uuid::Uuid;

use crate::error::OutboxError;

/// The values of the message columns of one outbox row, as the store binds
/// them when it writes the message and as it reads them back (the payload
/// and the headers as JSON text). Not a public API: the fuzz targets check
/// the conversions both ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRow {
    /// `id`.
    pub id: Uuid,
    /// `aggregate_type`, at most 128 bytes.
    pub aggregate_type: String,
    /// `aggregate_id`, at most 255 bytes.
    pub aggregate_id: String,
    /// `sequence`, a `BIGINT`.
    pub sequence: i64,
    /// `event_name`, at most 128 bytes.
    pub event_name: String,
    /// `event_version`, an `INTEGER`.
    pub event_version: i32,
    /// `subject`, at most 255 bytes.
    pub subject: String,
    /// `payload`: the event's JSON.
    pub payload: String,
    /// `headers`: the application headers and the `tracestate` as one JSON
    /// object; `NULL` when there is neither.
    pub headers: Option<String>,
    /// `correlation_id`, at most 255 bytes.
    pub correlation_id: String,
    /// `causation_id`, at most 255 bytes.
    pub causation_id: Option<String>,
    /// `tenant`, at most 255 bytes.
    pub tenant: Option<String>,
    /// `traceparent`.
    pub traceparent: Option<String>,
    /// `occurred_at`.
    pub occurred_at: DateTime<Utc>,
}

impl StoredRow {
    /// The values `message` is written as; a message whose values no
    /// column can hold, or that could not be published as it is
    /// ([`wire::check`]), is refused.
    pub fn of(message: &OutboxMessage) -> Result<Self, OutboxError> {
        let invalid = |reason: String| OutboxError::InvalidMessage {
            id: message.id,
            reason,
        };
        let sequence = i64::try_from(message.sequence).map_err(|_| {
            invalid(format!(
                "sequence {} does not fit a BIGINT",
                message.sequence
            ))
        })?;
        let event_version = i32::try_from(message.event_version).map_err(|_| {
            invalid(format!(
                "event version {} does not fit an INTEGER",
                message.event_version
            ))
        })?;
        let texts = [
            ("event name", Some(&message.event_name), 128),
            ("subject", Some(&message.subject), 255),
            ("aggregate type", Some(&message.aggregate_type), 128),
            ("aggregate id", Some(&message.aggregate_id), 255),
            ("correlation id", Some(&message.correlation_id), 255),
            ("causation id", message.causation_id.as_ref(), 255),
            ("tenant", message.tenant.as_ref(), 255),
        ];
        for (what, value, max) in texts {
            if let Some(value) = value.filter(|value| value.len() > max) {
                return Err(invalid(format!(
                    "{what} is {} bytes, longer than {max}",
                    value.len()
                )));
            }
        }
        wire::check(message).map_err(|e| invalid(e.to_string()))?;
        let headers = headers_json(message).map_err(|e| invalid(format!("headers: {e}")))?;
        Ok(Self {
            id: *message.id.as_uuid(),
            aggregate_type: message.aggregate_type.clone(),
            aggregate_id: message.aggregate_id.clone(),
            sequence,
            event_name: message.event_name.clone(),
            event_version,
            subject: message.subject.clone(),
            payload: message.payload.as_str().to_owned(),
            headers,
            correlation_id: message.correlation_id.clone(),
            causation_id: message.causation_id.clone(),
            tenant: message.tenant.clone(),
            traceparent: message.traceparent.as_ref().map(|t| t.as_str().to_owned()),
            occurred_at: message.occurred_at,
        })
    }

    /// The message the values stand for; a value that cannot be read as
    /// its field is an error naming its column.
    pub fn into_message(self) -> Result<OutboxMessage, DbErr> {
        let bad = |column: &str, e: &dyn std::fmt::Display| {
            DbErr::Type(format!("outbox column `{column}`: {e}"))
        };
        let (headers, tracestate) = match self.headers {
            None => (Headers::new(), None),
            Some(text) => {
                let mut map: BTreeMap<String, String> =
                    serde_json::from_str(&text).map_err(|e| bad("headers", &e))?;
                let tracestate = map.remove(wire::TRACESTATE);
                let headers = Headers::try_from(map).map_err(|e| bad("headers", &e))?;
                (headers, tracestate)
            }
        };
        Ok(OutboxMessage {
            id: MessageId::from_uuid(self.id),
            event_name: self.event_name,
            event_version: u32::try_from(self.event_version)
                .map_err(|e| bad("event_version", &e))?,
            subject: self.subject,
            aggregate_type: self.aggregate_type,
            aggregate_id: self.aggregate_id,
            sequence: u64::try_from(self.sequence).map_err(|e| bad("sequence", &e))?,
            occurred_at: self.occurred_at,
            correlation_id: self.correlation_id,
            causation_id: self.causation_id,
            tenant: self.tenant,
            traceparent: self
                .traceparent
                .map(|t| t.parse().map_err(|e| bad("traceparent", &e)))
                .transpose()?,
            tracestate,
            headers,
            payload: Payload::from_json(self.payload).map_err(|e| bad("payload", &e))?,
            deliver_at: None,
        })
    }
}

/// The `headers` column: the application headers as a JSON object, with
/// the `tracestate` under its reserved name (no application header can take
/// it, so reading it back is unambiguous, and the table needs no column of
/// its own for it); NULL when there is neither.
fn headers_json(message: &OutboxMessage) -> Result<Option<String>, serde_json::Error> {
    if message.tracestate.is_none() && message.headers.is_empty() {
        return Ok(None);
    }
    let mut map: BTreeMap<&str, &str> = message.headers.iter().collect();
    if let Some(tracestate) = &message.tracestate {
        map.insert(wire::TRACESTATE, tracestate);
    }
    serde_json::to_string(&map).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> OutboxMessage {
        serde_json::from_str(
            r#"{"id":"0190f5a2-7b3c-7d4e-8f00-112233445566","event_name":"order.placed",
            "event_version":2,"subject":"events.order.placed","aggregate_type":"order",
            "aggregate_id":"7","sequence":3,"occurred_at":"2026-11-23T10:00:00Z",
            "correlation_id":"c","causation_id":null,"tenant":"acme","traceparent":null,
            "tracestate":"congo=t61rcWkgMzE","headers":{"x-region":"eu"},
            "payload":{"order_id":7}}"#,
        )
        .unwrap()
    }

    #[test]
    fn a_message_reads_back_from_its_row() {
        let row = StoredRow::of(&message()).unwrap();
        assert_eq!(
            row.headers.as_deref(),
            Some(r#"{"tracestate":"congo=t61rcWkgMzE","x-region":"eu"}"#)
        );
        assert_eq!(row.into_message().unwrap(), message());
    }

    #[test]
    fn values_no_column_holds_are_refused() {
        let mut message = message();
        message.event_version = u32::MAX;
        let err = StoredRow::of(&message).unwrap_err().to_string();
        assert!(err.contains("does not fit an INTEGER"), "{err}");
        let mut row = StoredRow::of(&self::message()).unwrap();
        row.sequence = -1;
        let err = row.into_message().unwrap_err().to_string();
        assert!(err.contains("outbox column `sequence`"), "{err}");
    }
}
