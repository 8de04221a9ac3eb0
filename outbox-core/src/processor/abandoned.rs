//! Messages whose claims ended without a settlement: the processor holding
//! them crashed, was killed or hung (a panic in a custom publisher, an
//! out-of-memory kill on a huge payload). Such a message may be what kills
//! its processor, and the next one that claims it, and the next: left
//! alone it would crash-loop the fleet.
//!
//! The store counts, per row, the claims that took it over from a lease
//! that ran out ([`ClaimedMessage::abandoned`]). One such claim is what any
//! crash leaves on every message its processor held, so the message is
//! published as usual (a crashed processor's backlog recovers at full
//! speed). From the second on, the message is a *suspect*: suspects are
//! published in isolation, settled as soon as their publishes end, one group
//! at a time per process, while the other suspects of the batch are
//! released untouched (a crash does not count against a message that was
//! not being published):
//!
//! | abandoned | what happens |
//! |---|---|
//! | 0, 1 | published as usual |
//! | 2 | in a group of up to 16 (all that were in flight at a second crash get here) |
//! | 3 | alone |
//! | [`ABANDONED_LIMIT`] (4) | `dead` with the reason, not published again; its aggregate waits behind it |
//!
//! So a message that kills every processor handling it goes dead after 4
//! crashes, and an innocent message caught in the crashes reaches a group
//! of one before it could be blamed again: only a message that was alone in
//! flight can reach the limit (or one whose processors crash for unrelated
//! reasons while it alone is published).

use crate::id::MessageId;
use crate::store::ClaimedMessage;

/// Claims ending without a settlement after which a message goes `dead`
/// ("claimed 4 times by processors that ended without settling it").
pub const ABANDONED_LIMIT: u32 = 4;

/// From how many abandoned claims a message is a suspect.
const SUSPECT_FROM: u32 = 2;

/// How many suspects with `abandoned` claims are published together.
fn group_size(abandoned: u32) -> usize {
    if abandoned <= SUSPECT_FROM { 16 } else { 1 }
}

/// Whether a message with `abandoned` claims is isolated.
pub(crate) fn is_suspect(abandoned: u32) -> bool {
    (SUSPECT_FROM..ABANDONED_LIMIT).contains(&abandoned)
}

/// A batch sorted by what becomes of each message.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Triage {
    /// Published as usual.
    pub(crate) normal: Vec<ClaimedMessage>,
    /// Suspects published in isolation, settled as soon as they end.
    pub(crate) isolated: Vec<ClaimedMessage>,
    /// Past [`ABANDONED_LIMIT`]: dead at once.
    pub(crate) dead: Vec<ClaimedMessage>,
    /// Given back at once, before anything is published: suspects not
    /// isolated this time, and what waits behind them or behind a dead one.
    pub(crate) released: Vec<MessageId>,
}

impl Triage {
    /// Sorts `messages` (in publishing order: per aggregate by sequence).
    /// `may_isolate`: no other isolated group is in flight in this process.
    pub(crate) fn of(messages: Vec<ClaimedMessage>, may_isolate: bool) -> Self {
        let mut triage = Triage::default();
        if messages.iter().all(|m| m.abandoned < SUSPECT_FROM) {
            triage.normal = messages;
            return triage;
        }
        let chains = chains(messages);
        // The most suspicious group first: the highest count at a chain's head.
        let level = chains
            .iter()
            .filter_map(|chain| chain.first())
            .map(|head| head.abandoned)
            .filter(|&n| is_suspect(n))
            .max();
        let mut room = level.map_or(0, group_size);
        for chain in chains {
            let first_suspect = chain.iter().position(|m| m.abandoned >= SUSPECT_FROM);
            match first_suspect {
                None => triage.normal.extend(chain),
                // Non-suspects first, as usual; the suspect and what follows
                // it come back as the aggregate's head.
                Some(k) if k > 0 => {
                    let mut chain = chain;
                    let rest = chain.split_off(k);
                    triage.normal.extend(chain);
                    triage.release(rest);
                }
                Some(_) if chain[0].abandoned >= ABANDONED_LIMIT => {
                    let mut chain = chain;
                    let rest = chain.split_off(1);
                    triage.dead.extend(chain);
                    triage.release(rest);
                }
                Some(_) if may_isolate && Some(chain[0].abandoned) == level && room > 0 => {
                    // The run of suspects at the head, as far as the group
                    // has room.
                    let take = chain
                        .iter()
                        .take_while(|m| is_suspect(m.abandoned))
                        .count()
                        .min(room);
                    room -= take;
                    let mut chain = chain;
                    let rest = chain.split_off(take);
                    triage.isolated.extend(chain);
                    triage.release(rest);
                }
                Some(_) => triage.release(chain),
            }
        }
        triage
    }

    fn release(&mut self, messages: Vec<ClaimedMessage>) {
        self.released
            .extend(messages.into_iter().map(|m| m.message.id));
    }
}

/// Consecutive messages of one aggregate, owned (the batch's
/// `by_aggregate` borrows them).
fn chains(messages: Vec<ClaimedMessage>) -> Vec<Vec<ClaimedMessage>> {
    let mut chains: Vec<Vec<ClaimedMessage>> = Vec::new();
    for message in messages {
        match chains.last_mut() {
            Some(chain)
                if chain
                    .last()
                    .is_some_and(|last| last.same_aggregate(&message)) =>
            {
                chain.push(message)
            }
            _ => chains.push(vec![message]),
        }
    }
    chains
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::OutboxMessage;

    fn claimed(aggregate: &str, sequence: u64, abandoned: u32) -> ClaimedMessage {
        let mut message: OutboxMessage = serde_json::from_str(
            r#"{"id":"0190f5a2-7b3c-7d4e-8f00-112233445566","event_name":"order.placed",
                "event_version":1,"subject":"events.order.placed","aggregate_type":"order",
                "aggregate_id":"7","sequence":1,"occurred_at":"2026-11-23T10:00:00Z",
                "correlation_id":"c","causation_id":null,"tenant":null,"traceparent":null,
                "headers":{},"payload":{"order_id":7}}"#,
        )
        .expect("a message");
        message.id = MessageId::new();
        message.aggregate_id = aggregate.to_owned();
        message.sequence = sequence;
        ClaimedMessage {
            message,
            attempts: 0,
            abandoned,
        }
    }

    fn positions(messages: &[ClaimedMessage]) -> Vec<(String, u64)> {
        messages
            .iter()
            .map(|m| (m.message.aggregate_id.clone(), m.message.sequence))
            .collect()
    }

    fn ids(messages: &[ClaimedMessage]) -> Vec<MessageId> {
        messages.iter().map(|m| m.message.id).collect()
    }

    #[test]
    fn a_batch_without_suspects_is_published_as_usual() {
        // One abandoned claim is what any crash leaves: not a suspect.
        let batch = vec![claimed("a", 1, 0), claimed("a", 2, 1), claimed("b", 1, 1)];
        let triage = Triage::of(batch.clone(), true);
        assert_eq!(triage.normal, batch);
        assert!(triage.isolated.is_empty() && triage.dead.is_empty());
        assert!(triage.released.is_empty());
    }

    #[test]
    fn the_most_suspicious_are_isolated_and_the_other_suspects_released() {
        let batch = vec![
            claimed("a", 1, 3), // the group's level: 3, alone
            claimed("a", 2, 3), // no room left: released
            claimed("b", 1, 2), // less suspicious: released this time
            claimed("c", 1, 0), // innocent: published
            claimed("c", 2, 2), // suspect behind an innocent one: released
            claimed("d", 1, 1), // one crash: published as usual
        ];
        let triage = Triage::of(batch.clone(), true);
        assert_eq!(
            positions(&triage.normal),
            [("c".into(), 1), ("d".into(), 1)]
        );
        assert_eq!(positions(&triage.isolated), [("a".into(), 1)]);
        assert_eq!(
            triage.released,
            ids(&[batch[1].clone(), batch[2].clone(), batch[4].clone()])
        );
        assert!(triage.dead.is_empty());
    }

    #[test]
    fn a_group_takes_runs_of_suspects_while_it_has_room() {
        let batch = vec![
            claimed("a", 1, 2),
            claimed("a", 2, 2),
            claimed("a", 3, 0), // behind the group: released
            claimed("b", 1, 2),
        ];
        let triage = Triage::of(batch.clone(), true);
        assert_eq!(
            positions(&triage.isolated),
            [("a".into(), 1), ("a".into(), 2), ("b".into(), 1)]
        );
        assert_eq!(triage.released, ids(&batch[2..3]));
    }

    #[test]
    fn groups_shrink_with_the_count() {
        let batch: Vec<ClaimedMessage> = (0..100)
            .map(|n| claimed(&format!("x{n:03}"), 1, 2))
            .collect();
        assert_eq!(Triage::of(batch.clone(), true).isolated.len(), 16);
        let batch: Vec<ClaimedMessage> = batch
            .into_iter()
            .map(|m| ClaimedMessage { abandoned: 3, ..m })
            .collect();
        let triage = Triage::of(batch, true);
        assert_eq!(triage.isolated.len(), 1);
        assert_eq!(triage.released.len(), 99);
    }

    #[test]
    fn past_the_limit_a_message_is_dead_and_its_aggregate_waits() {
        let batch = vec![
            claimed("a", 1, ABANDONED_LIMIT),
            claimed("a", 2, 0),
            claimed("b", 1, 0),
        ];
        let triage = Triage::of(batch.clone(), true);
        assert_eq!(positions(&triage.dead), [("a".into(), 1)]);
        assert_eq!(triage.released, ids(&batch[1..2]));
        assert_eq!(positions(&triage.normal), [("b".into(), 1)]);
    }

    #[test]
    fn with_a_group_in_flight_elsewhere_every_suspect_is_released() {
        let batch = vec![claimed("a", 1, 2), claimed("b", 1, 0)];
        let triage = Triage::of(batch.clone(), false);
        assert!(triage.isolated.is_empty());
        assert_eq!(triage.released, ids(&batch[..1]));
        assert_eq!(positions(&triage.normal), [("b".into(), 1)]);
    }
}
