//! The text the wire targets' inputs are written in: one NATS message as a
//! subscriber's client receives it.
//!
//! ```text
//! events.shop.order.placed\r\n     the subject
//! NATS/1.0\r\n                     the header block, as on the wire
//! ce-type: shop.order.placed\r\n
//! ...
//! \r\n
//! {"order_id":7,...}               the payload, to the end
//! ```
//!
//! The header block is read the way async-nats 0.51 reads an `HMSG`'s
//! (lines, `name: value`, folded continuation lines, values trimmed), into
//! its `HeaderMap`; what the client would refuse is refused here.

use std::str::FromStr;

use txoutbox_nats::async_nats::{HeaderMap, HeaderName, HeaderValue};

/// A NATS message as a subscriber receives it.
#[derive(Debug)]
pub struct NatsMessage {
    /// The subject it was published on.
    pub subject: String,
    /// Its headers, as the client holds them.
    pub headers: HeaderMap,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// `bytes` read as a message (see the module docs); `None` where the client
/// would refuse it (no header block, a status line, a malformed header).
pub fn parse(bytes: &[u8]) -> Option<NatsMessage> {
    let subject_end = find(bytes, b"\r\n")?;
    let subject = std::str::from_utf8(&bytes[..subject_end]).ok()?;
    if subject.is_empty() || subject.contains(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let rest = &bytes[subject_end + 2..];
    let block_end = find(rest, b"\r\n\r\n")? + 4;
    let headers = header_block(std::str::from_utf8(&rest[..block_end]).ok()?)?;
    Some(NatsMessage {
        subject: subject.to_owned(),
        headers,
        payload: rest[block_end..].to_vec(),
    })
}

/// A message written as [`parse`] reads it.
pub fn render<'a>(
    subject: &str,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    payload: &[u8],
) -> Vec<u8> {
    let mut text = format!("{subject}\r\nNATS/1.0\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(payload);
    bytes
}

/// Every header as `(name, value)` pairs, in the map's order: what the
/// subscriber hands the envelope decoder (`dispatch::header_pairs_of`).
pub fn pairs(headers: &HeaderMap) -> Vec<(&str, &str)> {
    headers
        .iter()
        .flat_map(|(name, values)| {
            let name: &str = name.as_ref();
            values.iter().map(move |value| (name, value.as_str()))
        })
        .collect()
}

/// The header block read as async-nats reads it; `None` where it errs. A
/// value with a bare CR is refused too: the client would panic on it
/// (`HeaderValue: From<String>` asserts), so no subscriber ever sees one.
fn header_block(block: &str) -> Option<HeaderMap> {
    let mut lines = block.lines().peekable();
    let status = lines.next()?.strip_prefix("NATS/1.0")?.trim();
    if !status.is_empty() {
        return None;
    }
    let mut headers = HeaderMap::new();
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let (name, value) = line.split_once(':')?;
        let name = HeaderName::from_str(name).ok()?;
        let mut value = value.trim_start().to_owned();
        while let Some(more) = lines.next_if(|s| s.starts_with(char::is_whitespace)) {
            value.push_str(more);
        }
        value.truncate(value.trim_end().len());
        headers.append(name, HeaderValue::from_str(&value).ok()?);
    }
    Some(headers)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
