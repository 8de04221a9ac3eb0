//! The wire contract: how an [`OutboxMessage`] travels as a NATS message.
//!
//! Messages are [CloudEvents 1.0](https://github.com/cloudevents/spec) in
//! binary content mode: the body is the event's JSON, the attributes are
//! headers. This module is the one place that names them; the publisher and
//! the subscriber use [`encode`] and [`decode`], and a consumer written in
//! another language can rebuild the envelope from this table alone.
//!
//! | header | value | envelope field |
//! |---|---|---|
//! | `Nats-Msg-Id` | the message id (JetStream deduplication) | `id` |
//! | `ce-specversion` | `1.0` | |
//! | `ce-id` | the message id, a UUIDv7 | `id` |
//! | `ce-type` | the event name, e.g. `order.placed` | `event_name` |
//! | `ce-source` | the producing service, set by the publisher | |
//! | `ce-subject` | the aggregate id | `aggregate_id` |
//! | `ce-time` | RFC 3339 UTC time the event was recorded | `occurred_at` |
//! | `content-type` | `application/json` | |
//! | `ce-eventversion` | the event version, a decimal integer ≥ 1 | `event_version` |
//! | `ce-aggregatetype` | the aggregate type | `aggregate_type` |
//! | `ce-sequence` | the per-aggregate sequence, decimal | `sequence` |
//! | `ce-correlationid` | the correlation id | `correlation_id` |
//! | `ce-causationid` | the causation id (absent for a root message) | `causation_id` |
//! | `ce-tenant` | the tenant (absent when none) | `tenant` |
//! | `traceparent` | W3C trace context (absent when none) | `traceparent` |
//! | `tracestate` | W3C vendor trace state (absent when none) | `tracestate` |
//! | any other | application headers, as they are | `headers` |
//!
//! Every value travels as it is: [`encode`] refuses a message with a value
//! that NATS would not carry unchanged (a line break, on which the client
//! panics, or whitespace at either end, which it trims off) or a time
//! outside RFC 3339's years, and [`decode`] accepts nothing [`encode`]
//! would refuse ([`WireError::NotCarried`]).
//!
//! The NATS subject of the message is the envelope's `subject`. Names are
//! matched without regard to case when decoding; a message that gives one
//! of the headers above more than once with different values (`ce-type` and
//! `CE-Type`, say) is refused ([`WireError::Ambiguous`]): a client keeps
//! differently spelled names in no fixed order, so which value a reader
//! took would be chance.

pub(crate) mod names;

use std::borrow::Cow;

use chrono::{DateTime, Datelike, SecondsFormat, Utc};

use crate::headers::Headers;
use crate::message::OutboxMessage;
use crate::payload::Payload;

pub use names::*;

/// One header as published: a reserved name or an application header's name.
pub type WireHeader = (Cow<'static, str>, String);

/// The headers to publish `message` with; `source` becomes `ce-source`.
/// Refused when a value would not arrive as it is (see [`check`]), or
/// `source` would not.
///
/// ```
/// use txoutbox_core::wire;
/// # fn message() -> txoutbox_core::OutboxMessage { serde_json::from_str(r#"{"id":"0190f5a2-7b3c-7d4e-8f00-112233445566","event_name":"order.placed","event_version":1,"subject":"events.order.placed","aggregate_type":"order","aggregate_id":"7","sequence":1,"occurred_at":"2026-11-23T10:00:00Z","correlation_id":"c","causation_id":null,"tenant":null,"traceparent":null,"headers":{},"payload":{"order_id":7}}"#).unwrap() }
/// let message = message();
/// let headers = wire::encode(&message, "/orders")?;
/// let find = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
/// assert_eq!(find(wire::NATS_MSG_ID), Some("0190f5a2-7b3c-7d4e-8f00-112233445566"));
/// assert_eq!(find(wire::TYPE), Some("order.placed"));
///
/// let back = wire::decode(&message.subject, headers.iter().map(|(k, v)| (k.as_ref(), v.as_str())), message.payload.as_bytes())?;
/// assert_eq!(back, message);
/// # Ok::<(), wire::WireError>(())
/// ```
pub fn encode(message: &OutboxMessage, source: &str) -> Result<Vec<WireHeader>, WireError> {
    check(message)?;
    carried(SOURCE, source)?;
    Ok(headers(message, source))
}

/// Whether `message` can travel as a NATS message and arrive as it is:
/// no value its headers carry (its names and ids, the trace state; the
/// application headers are checked as they are added, see [`Headers`])
/// contains a line break or begins or ends with whitespace, and its time is
/// one RFC 3339 can write (years 0000 to 9999), which `ce-time` must be. The store checks
/// it when a message is written, [`encode`] when it is published.
///
/// ```
/// use txoutbox_core::wire::{self, WireError};
/// # fn message() -> txoutbox_core::OutboxMessage { serde_json::from_str(r#"{"id":"0190f5a2-7b3c-7d4e-8f00-112233445566","event_name":"order.placed","event_version":1,"subject":"events.order.placed","aggregate_type":"order","aggregate_id":"7","sequence":1,"occurred_at":"2026-11-23T10:00:00Z","correlation_id":"c","causation_id":null,"tenant":null,"traceparent":null,"headers":{},"payload":{"order_id":7}}"#).unwrap() }
/// let mut message = message();
/// assert!(wire::check(&message).is_ok());
/// message.tenant = Some("acme\r\n".to_owned());
/// assert!(matches!(wire::check(&message), Err(WireError::NotCarried { header: "ce-tenant", .. })));
/// ```
pub fn check(message: &OutboxMessage) -> Result<(), WireError> {
    let texts = [
        (TYPE, Some(&message.event_name)),
        (SUBJECT, Some(&message.aggregate_id)),
        (AGGREGATE_TYPE, Some(&message.aggregate_type)),
        (CORRELATION_ID, Some(&message.correlation_id)),
        (CAUSATION_ID, message.causation_id.as_ref()),
        (TENANT, message.tenant.as_ref()),
        (TRACESTATE, message.tracestate.as_ref()),
    ];
    for (header, value) in texts {
        if let Some(value) = value {
            carried(header, value)?;
        }
    }
    // Application headers were checked when they were added (`Headers`).
    let year = message.occurred_at.year();
    if !(0..=9999).contains(&year) {
        return Err(WireError::NotCarried {
            header: TIME,
            value: time(message.occurred_at),
            reason: "is outside the years RFC 3339 can write (0000 to 9999)",
        });
    }
    Ok(())
}

/// `ce-time`'s value.
fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn carried(header: &'static str, value: &str) -> Result<(), WireError> {
    match names::not_carried(value) {
        None => Ok(()),
        Some(reason) => Err(WireError::NotCarried {
            header,
            value: value.to_owned(),
            reason,
        }),
    }
}

/// The headers of `message`, values unchecked.
fn headers(message: &OutboxMessage, source: &str) -> Vec<WireHeader> {
    let id = message.id.to_string();
    let mut headers: Vec<WireHeader> = vec![
        (NATS_MSG_ID.into(), id.clone()),
        (SPEC_VERSION.into(), SPEC_VERSION_1_0.to_owned()),
        (ID.into(), id),
        (TYPE.into(), message.event_name.clone()),
        (SOURCE.into(), source.to_owned()),
        (SUBJECT.into(), message.aggregate_id.clone()),
        (TIME.into(), time(message.occurred_at)),
        (CONTENT_TYPE.into(), CONTENT_TYPE_JSON.to_owned()),
        (EVENT_VERSION.into(), message.event_version.to_string()),
        (AGGREGATE_TYPE.into(), message.aggregate_type.clone()),
        (SEQUENCE.into(), message.sequence.to_string()),
        (CORRELATION_ID.into(), message.correlation_id.clone()),
    ];
    let optional = [
        (CAUSATION_ID, message.causation_id.clone()),
        (TENANT, message.tenant.clone()),
        (
            TRACEPARENT,
            message.traceparent.as_ref().map(ToString::to_string),
        ),
        (TRACESTATE, message.tracestate.clone()),
    ];
    headers.extend(
        optional
            .into_iter()
            .filter_map(|(name, value)| Some((name.into(), value?))),
    );
    headers.extend(
        message
            .headers
            .iter()
            .map(|(name, value)| (Cow::Owned(name.to_owned()), value.to_owned())),
    );
    headers
}

/// A NATS message that does not carry a valid envelope.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// A required header is absent.
    #[error("header `{0}` is missing")]
    Missing(&'static str),
    /// A header's value cannot be read.
    #[error("header `{header}` has invalid value `{value}`: {reason}")]
    Invalid {
        /// The header.
        header: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value would not arrive as it was sent: it contains a line break,
    /// or begins or ends with whitespace.
    #[error("header `{header}` cannot carry {value:?} as it is: it {reason}")]
    NotCarried {
        /// The header.
        header: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A header of the envelope is given more than once (in any case of
    /// its name) with different values.
    #[error("header `{0}` is given more than once with different values")]
    Ambiguous(&'static str),
    /// The body is not one JSON value.
    #[error("payload is not valid JSON")]
    Payload(#[source] serde_json::Error),
}

/// Rebuilds the envelope of a message received on `subject`.
pub fn decode<'a>(
    subject: &str,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    payload: &[u8],
) -> Result<OutboxMessage, WireError> {
    let headers: Vec<(&str, &str)> = headers.into_iter().collect();
    // The value of `name` (in any case), refused when two differ.
    let find = |name: &'static str| -> Result<Option<&str>, WireError> {
        let mut values = headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v);
        let first = values.next();
        match first {
            Some(first) if values.any(|other| other != first) => Err(WireError::Ambiguous(name)),
            _ => Ok(first),
        }
    };
    let required = |name: &'static str| find(name)?.ok_or(WireError::Missing(name));
    let invalid = |header: &'static str, value: &str, reason: String| WireError::Invalid {
        header,
        value: value.to_owned(),
        reason,
    };
    let parse = |name: &'static str| -> Result<u64, WireError> {
        let value = required(name)?;
        value
            .parse()
            .map_err(|e| invalid(name, value, format!("{e}")))
    };

    let spec = required(SPEC_VERSION)?;
    if spec != SPEC_VERSION_1_0 {
        return Err(invalid(SPEC_VERSION, spec, "only 1.0 is supported".into()));
    }
    let id_text = required(ID)?;
    let id = id_text
        .parse()
        .map_err(|e| invalid(ID, id_text, format!("{e}")))?;
    let time = required(TIME)?;
    let occurred_at = DateTime::parse_from_rfc3339(time)
        .map_err(|e| invalid(TIME, time, e.to_string()))?
        .with_timezone(&Utc);
    let event_version = u32::try_from(parse(EVENT_VERSION)?)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| {
            invalid(
                EVENT_VERSION,
                required(EVENT_VERSION).unwrap_or(""),
                "must be 1..=u32::MAX".into(),
            )
        })?;
    let traceparent = find(TRACEPARENT)?
        .map(|tp| {
            tp.parse()
                .map_err(|e: crate::InvalidTraceParent| invalid(TRACEPARENT, tp, e.reason.into()))
        })
        .transpose()?;
    let mut user_headers = Headers::new();
    for (name, value) in headers.iter().filter(|(k, _)| !is_reserved(k)) {
        user_headers
            .insert(*name, *value)
            .map_err(|e| WireError::Invalid {
                header: "application header",
                value: (*name).to_owned(),
                reason: e.to_string(),
            })?;
    }
    let body = String::from_utf8(payload.to_vec())
        .map_err(|e| WireError::Payload(serde::de::Error::custom(format!("not UTF-8: {e}"))))?;

    let message = OutboxMessage {
        id,
        event_name: required(TYPE)?.to_owned(),
        event_version,
        subject: subject.to_owned(),
        aggregate_type: required(AGGREGATE_TYPE)?.to_owned(),
        aggregate_id: required(SUBJECT)?.to_owned(),
        sequence: parse(SEQUENCE)?,
        occurred_at,
        correlation_id: required(CORRELATION_ID)?.to_owned(),
        causation_id: find(CAUSATION_ID)?.map(str::to_owned),
        tenant: find(TENANT)?.map(str::to_owned),
        traceparent,
        tracestate: find(TRACESTATE)?.map(str::to_owned),
        headers: user_headers,
        payload: Payload::from_json(body).map_err(WireError::Payload)?,
        deliver_at: None,
    };
    check(&message)?;
    Ok(message)
}
