//! The payload of the outbox's PostgreSQL `NOTIFY`: which process sent it
//! and, when they fit, the ids of the messages it committed since its
//! previous notification.
//!
//! `<origin>` alone means "messages were committed: claim"; `<origin>
//! <id>,<id>,…` (ids as 32 hex digits) lets a processor in another process
//! lease exactly those messages by primary key, as the in-process fast path
//! does, instead of searching the table with an ordinary claim. A payload
//! this module cannot read is taken as the plain form, so processors of
//! other versions still wake each other.

use txoutbox_core::MessageId;
use uuid::Uuid;

/// Most ids one notification carries (PostgreSQL caps a payload at 8,000
/// bytes; 200 ids take 6,600). Past that, the plain form: one ordinary
/// claim finds a burst that large more cheaply anyway.
pub(crate) const MAX_IDS: usize = 200;

/// What one notification says (read by the `LISTEN` side, feature `postgres`).
#[cfg(any(feature = "postgres", test))]
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Notice<'a> {
    /// The sending [`Outbox`](crate::Outbox)'s origin.
    pub(crate) origin: &'a str,
    /// The messages it committed, or `None`: claim.
    pub(crate) ids: Option<Vec<MessageId>>,
}

/// The payload for `ids` (the plain form when there are none or too many).
pub(crate) fn encode(origin: &str, ids: &[MessageId]) -> String {
    if ids.is_empty() || ids.len() > MAX_IDS {
        return origin.to_owned();
    }
    let mut payload = String::with_capacity(origin.len() + 1 + ids.len() * 33);
    payload.push_str(origin);
    for (i, id) in ids.iter().enumerate() {
        payload.push(if i == 0 { ' ' } else { ',' });
        payload.push_str(
            Uuid::from(*id)
                .simple()
                .encode_lower(&mut Uuid::encode_buffer()),
        );
    }
    payload
}

/// Reads a payload; anything but a well-formed id list means "claim".
#[cfg(any(feature = "postgres", test))]
pub(crate) fn decode(payload: &str) -> Notice<'_> {
    let Some((origin, ids)) = payload.split_once(' ') else {
        return Notice {
            origin: payload,
            ids: None,
        };
    };
    let ids = ids
        .split(',')
        .map(|id| Uuid::try_parse(id).ok().map(MessageId::from))
        .collect::<Option<Vec<_>>>()
        .filter(|ids| ids.len() <= MAX_IDS);
    Notice { origin, ids }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: &str = "0192f3a0-6b1e-7cc4-9a57-2c4fd2f1b0aa";

    #[test]
    fn ids_round_trip_within_the_payload_limit() {
        let ids: Vec<MessageId> = (0..MAX_IDS).map(|_| MessageId::new()).collect();
        let payload = encode(ORIGIN, &ids);
        assert!(payload.len() < 8000, "{} bytes", payload.len());
        assert_eq!(
            decode(&payload),
            Notice {
                origin: ORIGIN,
                ids: Some(ids)
            }
        );
    }

    #[test]
    fn none_or_too_many_ids_send_the_plain_form() {
        assert_eq!(encode(ORIGIN, &[]), ORIGIN);
        let ids: Vec<MessageId> = (0..=MAX_IDS).map(|_| MessageId::new()).collect();
        assert_eq!(encode(ORIGIN, &ids), ORIGIN);
        assert_eq!(
            decode(ORIGIN),
            Notice {
                origin: ORIGIN,
                ids: None
            }
        );
    }

    #[test]
    fn an_unreadable_id_list_means_claim() {
        for payload in [
            format!("{ORIGIN} "),
            format!("{ORIGIN} not-an-id"),
            format!("{ORIGIN} {},", Uuid::now_v7().simple()),
        ] {
            assert_eq!(
                decode(&payload),
                Notice {
                    origin: ORIGIN,
                    ids: None
                },
                "{payload:?}"
            );
        }
    }
}
