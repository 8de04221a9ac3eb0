//! The checks. Each takes a fresh, empty store and panics, saying what
//! broke, when the store does not keep the contract.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use txoutbox_core::store::{ClaimedBatch, DeadSelector, Failure, FailureKind, Published, SkipNote};
use txoutbox_core::{MessageId, OutboxStore, RetryPolicy};

use super::{ContractStore, ContractWriter};

/// A lease no check outlives.
const LONG: Duration = Duration::from_secs(60);
/// A lease a check waits out.
const SHORT: Duration = Duration::from_millis(300);
/// Longer than [`SHORT`], with room for a busy machine.
const PAST_SHORT: Duration = Duration::from_millis(600);

async fn claim<S: OutboxStore>(store: &S, limit: u32, lease: Duration) -> ClaimedBatch {
    store
        .claim(limit, lease)
        .await
        .unwrap_or_else(|err| panic!("claim: {err}"))
}

fn ids(batch: &ClaimedBatch) -> Vec<MessageId> {
    batch.messages.iter().map(|m| m.message.id).collect()
}

fn published(ids: &[MessageId]) -> Vec<Published> {
    ids.iter()
        .map(|&id| Published {
            id,
            stream_sequence: None,
        })
        .collect()
}

async fn complete<S: OutboxStore>(store: &S, batch: &ClaimedBatch, which: &[MessageId]) -> u64 {
    store
        .complete(batch.lease.token, &published(which))
        .await
        .unwrap_or_else(|err| panic!("complete: {err}"))
        .applied
}

async fn fail<S: OutboxStore>(
    store: &S,
    batch: &ClaimedBatch,
    id: MessageId,
    kind: FailureKind,
    policy: &RetryPolicy,
) -> u64 {
    let failure = Failure {
        id,
        error: "refused by the contract".to_owned(),
        kind,
    };
    store
        .fail(batch.lease.token, &[failure], policy)
        .await
        .unwrap_or_else(|err| panic!("fail: {err}"))
        .applied
}

async fn release<S: OutboxStore>(store: &S, batch: &ClaimedBatch, which: &[MessageId]) {
    store
        .release(batch.lease.token, which)
        .await
        .unwrap_or_else(|err| panic!("release: {err}"));
}

/// Up to `max_attempts` attempts, each backoff `backoff_ms`.
fn policy(max_attempts: u32, backoff_ms: u64) -> RetryPolicy {
    let backoff = Duration::from_millis(backoff_ms);
    RetryPolicy::new(max_attempts, backoff, backoff)
}

/// Aggregates `a` (`events` messages) and `b` (one), all claimed; then
/// a#1 fails as `kind` under `policy` and the rest is released. Returns
/// the ids of `a` and `b`.
async fn a_head_fails<S: ContractStore, W: ContractWriter>(
    (store, writer): (&S, &W),
    events: usize,
    kind: FailureKind,
    policy: &RetryPolicy,
) -> (Vec<MessageId>, Vec<MessageId>) {
    let a = writer.append("a", events).await;
    let b = writer.append("b", 1).await;
    let batch = claim(store, 10, LONG).await;
    assert_eq!(
        fail(store, &batch, a[0], kind, policy).await,
        1,
        "a#1 failed"
    );
    release(store, &batch, &a[1..]).await;
    release(store, &batch, &b).await;
    (a, b)
}

/// A claim returns each aggregate's messages in sequence order, and a
/// message under a live lease is not claimed again.
pub async fn claims_each_aggregate_in_sequence_order<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 3).await;
    let b = writer.append("b", 2).await;
    let batch = claim(&store, 100, LONG).await;
    let claimed = ids(&batch);
    assert_eq!(
        claimed.len(),
        5,
        "every message is publishable: {claimed:?}"
    );
    for expected in [&a, &b] {
        let order: Vec<MessageId> = claimed
            .iter()
            .copied()
            .filter(|id| expected.contains(id))
            .collect();
        assert_eq!(
            &order, expected,
            "an aggregate's messages in sequence order"
        );
    }
    assert!(
        claim(&store, 100, LONG).await.messages.is_empty(),
        "leased messages are not claimed again"
    );
}

/// A claim that stopped at its limit says more may be waiting
/// ([`ClaimedBatch::more`]); one that took everything publishable says not,
/// and so does a claim by ids.
pub async fn a_claim_says_whether_more_may_be_waiting<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let mut written = Vec::new();
    for aggregate in ["a", "b", "c", "d"] {
        written.push(writer.append(aggregate, 2).await);
    }
    let first = claim(&store, 3, LONG).await;
    assert_eq!(ids(&first), [&written[0][..], &written[1][..1]].concat());
    assert!(first.more, "stopped at its limit: more may be waiting");
    // b#2 waits behind the leased b#1.
    let rest = claim(&store, 100, LONG).await;
    let mut taken = ids(&rest);
    taken.sort();
    let mut expected = [&written[2][..], &written[3][..]].concat();
    expected.sort();
    assert_eq!(taken, expected, "the rest, c and d");
    assert!(!rest.more, "took everything publishable: nothing more");
    let none = claim(&store, 100, LONG).await;
    assert!(none.messages.is_empty() && !none.more, "an empty claim");

    let later = writer.append("e", 1).await;
    let by_ids = store
        .claim_ids(&later, LONG)
        .await
        .unwrap_or_else(|err| panic!("claim_ids: {err}"));
    assert_eq!(ids(&by_ids), later);
    assert!(!by_ids.more, "a claim by ids never says more");
}

/// A message is never handed out while an earlier message of its aggregate
/// is unpublished (here: leased elsewhere).
pub async fn never_hands_out_a_message_behind_an_unpublished_one<
    S: ContractStore,
    W: ContractWriter,
>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 3).await;
    let first = claim(&store, 1, LONG).await;
    assert_eq!(ids(&first), a[..1], "a limit of 1 takes the head");
    assert!(
        claim(&store, 100, LONG).await.messages.is_empty(),
        "a#2 and a#3 wait behind the leased a#1"
    );
    assert_eq!(complete(&store, &first, &a[..1]).await, 1);
    let rest = claim(&store, 100, LONG).await;
    assert_eq!(
        ids(&rest),
        a[1..],
        "once a#1 is published, the rest in order"
    );
}

/// The claim by ids leaves out a message behind an unpublished one that
/// is not named too, and one leased elsewhere.
pub async fn claim_ids_takes_only_what_a_claim_could<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 2).await;
    let batch = store
        .claim_ids(&a[1..], LONG)
        .await
        .unwrap_or_else(|err| panic!("claim_ids: {err}"));
    assert!(batch.messages.is_empty(), "a#2 alone waits behind a#1");
    let batch = store
        .claim_ids(&a, LONG)
        .await
        .unwrap_or_else(|err| panic!("claim_ids: {err}"));
    assert_eq!(ids(&batch), a, "named together, both in order");
    let again = store
        .claim_ids(&a, LONG)
        .await
        .unwrap_or_else(|err| panic!("claim_ids: {err}"));
    assert!(
        again.messages.is_empty(),
        "leased messages are not claimed again"
    );
}

/// Concurrent claimers never receive the same message while its lease is
/// live, and each aggregate is completed in sequence order.
pub async fn a_live_lease_is_exclusive_among_claimers<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let mut all = HashSet::new();
    let mut sequences: HashMap<MessageId, (usize, usize)> = HashMap::new();
    for k in 0..12 {
        let ids = writer.append(&format!("agg-{k:02}"), 3).await;
        for (position, id) in ids.iter().enumerate() {
            sequences.insert(*id, (k, position));
        }
        all.extend(ids);
    }
    let mut claimers = Vec::new();
    for _ in 0..4 {
        let store = store.clone();
        claimers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for _ in 0..40 {
                let batch = claim(&store, 4, LONG).await;
                let claimed = ids(&batch);
                complete(&store, &batch, &claimed).await;
                mine.extend(claimed);
                tokio::task::yield_now().await;
            }
            mine
        }));
    }
    let mut seen = HashSet::new();
    let mut completed = Vec::new();
    for claimer in claimers {
        let mine = claimer
            .await
            .unwrap_or_else(|err| panic!("a claimer panicked: {err}"));
        for id in &mine {
            assert!(seen.insert(*id), "{id} was handed to two claimers");
        }
        completed.push(mine);
    }
    assert_eq!(seen, all, "every message was claimed once");
    for mine in completed {
        let mut last: HashMap<usize, usize> = HashMap::new();
        for id in mine {
            let (aggregate, position) = sequences[&id];
            if let Some(&before) = last.get(&aggregate) {
                assert!(
                    position > before,
                    "agg-{aggregate:02} out of order within a claimer"
                );
            }
            last.insert(aggregate, position);
        }
    }
}

/// A lease that ran out may be claimed again; the new claim counts it as
/// abandoned.
pub async fn an_expired_lease_is_taken_over_and_counted_as_abandoned<
    S: ContractStore,
    W: ContractWriter,
>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 1).await;
    let first = claim(&store, 10, SHORT).await;
    assert_eq!(ids(&first), a);
    assert_eq!(first.messages[0].abandoned, 0);
    tokio::time::sleep(PAST_SHORT).await;
    let second = claim(&store, 10, LONG).await;
    assert_eq!(ids(&second), a, "taken over once the lease ran out");
    assert_eq!(second.messages[0].abandoned, 1, "the takeover counts");
    assert_ne!(first.lease.token, second.lease.token);
}

/// Complete, fail and release change nothing for a holder whose lease was
/// taken over: they report the messages stale.
pub async fn settlements_are_fenced_by_the_lease_token<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 2).await;
    let old = claim(&store, 10, SHORT).await;
    tokio::time::sleep(PAST_SHORT).await;
    let new = claim(&store, 10, LONG).await;
    assert_eq!(ids(&new), a);
    let stale = store
        .complete(old.lease.token, &published(&a))
        .await
        .unwrap_or_else(|err| panic!("complete: {err}"));
    assert_eq!(
        (stale.applied, stale.stale),
        (0, 2),
        "the old holder completes nothing"
    );
    let policy = RetryPolicy::default();
    assert_eq!(
        fail(&store, &old, a[0], FailureKind::Permanent, &policy).await,
        0
    );
    release(&store, &old, &a).await;
    assert_eq!(
        complete(&store, &new, &a).await,
        2,
        "the new holder still holds both"
    );
}

/// Renewing extends the lease of the named messages still held, and
/// reports the others stale.
pub async fn renew_extends_exactly_the_named_messages<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 1).await;
    let b = writer.append("b", 1).await;
    let batch = claim(&store, 10, SHORT).await;
    let renewed = store
        .renew(batch.lease.token, &a, LONG)
        .await
        .unwrap_or_else(|err| panic!("renew: {err}"));
    assert_eq!((renewed.applied, renewed.stale), (1, 0));
    tokio::time::sleep(PAST_SHORT).await;
    let taken = claim(&store, 10, LONG).await;
    assert_eq!(ids(&taken), b, "b's lease ran out, a's was renewed");
    let lost = store
        .renew(batch.lease.token, &[a[0], b[0]], LONG)
        .await
        .unwrap_or_else(|err| panic!("renew: {err}"));
    assert_eq!(
        (lost.applied, lost.stale),
        (1, 1),
        "b is now someone else's"
    );
}

/// A released message is claimable at once with no attempt spent and no
/// abandoned claim counted.
pub async fn release_spends_no_attempt<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 2).await;
    let batch = claim(&store, 10, LONG).await;
    release(&store, &batch, &a).await;
    let again = claim(&store, 10, LONG).await;
    assert_eq!(ids(&again), a);
    for message in &again.messages {
        assert_eq!((message.attempts, message.abandoned), (0, 0));
    }
}

/// A retryable failure spends an attempt and waits out its backoff, and
/// the aggregate's later messages wait behind it; other aggregates go on.
pub async fn a_retryable_failure_backs_off_and_holds_its_aggregate<
    S: ContractStore,
    W: ContractWriter,
>(
    (store, writer): (S, W),
) {
    let (a, b) = a_head_fails(
        (&store, &writer),
        2,
        FailureKind::Retryable,
        &policy(5, 400),
    )
    .await;
    let meanwhile = claim(&store, 10, LONG).await;
    assert_eq!(
        ids(&meanwhile),
        b,
        "a#1 backs off, a#2 waits behind it, b goes on"
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    let retried = claim(&store, 10, LONG).await;
    assert_eq!(ids(&retried), a, "after the backoff, a#1 then a#2");
    assert_eq!(retried.messages[0].attempts, 1, "one attempt spent");
    assert_eq!(retried.messages[1].attempts, 0);
}

/// Out of attempts (or permanent), a message is dead: not claimed, its
/// aggregate held behind it; requeued, it is claimed again with no
/// attempts spent.
pub async fn a_dead_message_holds_its_aggregate_until_requeued<
    S: ContractStore,
    W: ContractWriter,
>(
    (store, writer): (S, W),
) {
    let (a, b) = a_head_fails((&store, &writer), 2, FailureKind::Retryable, &policy(1, 1)).await;
    let batch = claim(&store, 10, LONG).await;
    assert_eq!(ids(&batch), b, "a#1 is out of attempts: dead, holding a#2");
    let permanent = FailureKind::Permanent;
    assert_eq!(
        fail(&store, &batch, b[0], permanent, &RetryPolicy::default()).await,
        1
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        claim(&store, 10, LONG).await.messages.is_empty(),
        "a#1 is dead (out of attempts) and holds a#2; b#1 is dead (permanent)"
    );
    let requeued = store
        .requeue_dead(DeadSelector::Ids(vec![a[0]]))
        .await
        .unwrap_or_else(|err| panic!("requeue_dead: {err}"));
    assert_eq!(requeued, 1, "only the one named");
    let again = claim(&store, 10, LONG).await;
    assert_eq!(ids(&again), a, "a#1 then a#2; b#1 stays dead");
    assert_eq!(again.messages[0].attempts, 0, "attempts reset");
}

/// Skipping a dead message settles it unpublished: its aggregate's later
/// messages are claimed, in order; a message that is not dead is not
/// skipped; a skipped message is purged like a published one.
pub async fn a_skipped_dead_message_releases_its_aggregate<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let permanent = (FailureKind::Permanent, RetryPolicy::default());
    let (a, b) = a_head_fails((&store, &writer), 3, permanent.0, &permanent.1).await;
    let note = SkipNote::by("contract@test").because("a payload no broker takes");
    let skip = |id| {
        let store = store.clone();
        let note = note.clone();
        async move {
            store
                .skip_dead(id, &note)
                .await
                .unwrap_or_else(|err| panic!("skip_dead: {err}"))
        }
    };
    assert!(!skip(a[1]).await, "a pending message is not skipped");
    assert!(skip(a[0]).await, "the dead head is");
    assert!(!skip(a[0]).await, "once");
    let after = claim(&store, 10, LONG).await;
    let claimed = ids(&after);
    let of_a: Vec<MessageId> = claimed
        .iter()
        .copied()
        .filter(|id| a.contains(id))
        .collect();
    assert_eq!(of_a, a[1..], "a#2 and a#3, in order, past the skipped a#1");
    assert!(claimed.contains(&b[0]), "b untouched");
    let stats = store
        .stats()
        .await
        .unwrap_or_else(|err| panic!("stats: {}", txoutbox_core::ErrorChain(&err)));
    assert_eq!((stats.dead, stats.pending), (0, 3), "{stats:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let purged = store
        .purge_published(Duration::from_secs(1), 100)
        .await
        .unwrap_or_else(|err| panic!("purge_published: {err}"));
    assert_eq!(
        purged, 1,
        "the skipped message is purged with published ones"
    );
}

/// A message sent dead after its claims were abandoned (the processor's
/// killer-message rule) is published again once requeued: requeue forgets
/// the abandoned claims.
pub async fn requeue_forgets_abandoned_claims<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 1).await;
    claim(&store, 10, SHORT).await;
    tokio::time::sleep(PAST_SHORT).await;
    let taken = claim(&store, 10, LONG).await;
    assert_eq!(taken.messages[0].abandoned, 1);
    fail(
        &store,
        &taken,
        a[0],
        FailureKind::Permanent,
        &RetryPolicy::default(),
    )
    .await;
    let requeued = store
        .requeue_dead(DeadSelector::All)
        .await
        .unwrap_or_else(|err| panic!("requeue_dead: {err}"));
    assert_eq!(requeued, 1);
    let again = claim(&store, 10, LONG).await;
    assert_eq!(ids(&again), a);
    assert_eq!(
        (again.messages[0].attempts, again.messages[0].abandoned),
        (0, 0)
    );
}

/// Stats count pending (leased or not), leased and dead messages, per
/// event name too, and the oldest pending message's age.
pub async fn stats_count_pending_leased_and_dead<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 2).await;
    writer.append("b", 1).await;
    let batch = claim(&store, 1, LONG).await;
    assert_eq!(ids(&batch), a[..1]);
    fail(
        &store,
        &batch,
        a[0],
        FailureKind::Permanent,
        &RetryPolicy::default(),
    )
    .await;
    let c = writer.append("c", 1).await;
    let leased = claim(&store, 10, LONG).await;
    assert!(leased.messages.iter().any(|m| m.message.id == c[0]));
    let stats = store
        .stats()
        .await
        .unwrap_or_else(|err| panic!("stats: {}", txoutbox_core::ErrorChain(&err)));
    assert_eq!(stats.pending, 3, "a#2, b#1, c#1: {stats:?}");
    assert_eq!(stats.leased, leased.messages.len() as u64, "{stats:?}");
    assert_eq!(stats.dead, 1, "{stats:?}");
    assert!(stats.oldest_pending_age.is_some(), "{stats:?}");
    let pending: u64 = stats.by_event.iter().map(|e| e.pending).sum();
    let dead: u64 = stats.by_event.iter().map(|e| e.dead).sum();
    assert_eq!((pending, dead), (3, 1), "{stats:?}");
}

/// A delayed message and the messages waiting behind a dead one are
/// counted apart (`delayed`, `blocked_aggregates`) and do not age the
/// backlog; a due message that nothing holds back does.
pub async fn stats_count_delayed_and_blocked_apart_from_the_age<
    S: ContractStore,
    W: ContractWriter,
>(
    (store, writer): (S, W),
) {
    let stats = |store: S| async move {
        store
            .stats()
            .await
            .unwrap_or_else(|err| panic!("stats: {}", txoutbox_core::ErrorChain(&err)))
    };
    // a#1 dead, a#2 behind it; d#1 due in an hour.
    let a = writer.append("a", 2).await;
    let batch = claim(&store, 1, LONG).await;
    assert_eq!(ids(&batch), a[..1]);
    fail(
        &store,
        &batch,
        a[0],
        FailureKind::Permanent,
        &RetryPolicy::default(),
    )
    .await;
    writer.append_delayed("d", Duration::from_secs(3600)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = stats(store.clone()).await;
    assert_eq!(
        (
            held.pending,
            held.dead,
            held.delayed,
            held.blocked_aggregates
        ),
        (2, 1, 1, 1),
        "a#2 pending behind dead a#1, d#1 delayed: {held:?}"
    );
    assert_eq!(
        held.oldest_pending_age, None,
        "nothing due and free waits: {held:?}"
    );

    // A due message that nothing holds back ages the backlog.
    writer.append("b", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = stats(store.clone()).await;
    let age = waiting
        .oldest_pending_age
        .unwrap_or_else(|| panic!("b#1 waits: {waiting:?}"));
    assert!(
        age >= Duration::from_millis(250) && age < Duration::from_secs(60),
        "b#1 was recorded 300 ms ago, a#2 long before it: {age:?}"
    );
    assert_eq!((waiting.delayed, waiting.blocked_aggregates), (1, 1));

    // Requeued, a#1 is due again and nothing is blocked.
    let requeued = store
        .requeue_dead(DeadSelector::All)
        .await
        .unwrap_or_else(|err| panic!("requeue_dead: {err}"));
    assert_eq!(requeued, 1);
    let free = stats(store.clone()).await;
    assert_eq!((free.dead, free.blocked_aggregates), (0, 0), "{free:?}");
    assert!(
        free.oldest_pending_age
            .is_some_and(|age| age < Duration::from_secs(60)),
        "{free:?}"
    );
}

/// Purging removes published messages older than the threshold and never
/// a pending one.
pub async fn purge_removes_only_old_published_messages<S: ContractStore, W: ContractWriter>(
    (store, writer): (S, W),
) {
    let a = writer.append("a", 2).await;
    let batch = claim(&store, 1, LONG).await;
    assert_eq!(complete(&store, &batch, &a[..1]).await, 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let purged = store
        .purge_published(Duration::from_secs(1), 100)
        .await
        .unwrap_or_else(|err| panic!("purge_published: {err}"));
    let expected = u64::from(writer.keeps_published());
    assert_eq!(
        purged, expected,
        "the one published message, if the store kept it"
    );
    let young = store
        .purge_published(Duration::from_secs(3600), 100)
        .await
        .unwrap_or_else(|err| panic!("purge_published: {err}"));
    assert_eq!(young, 0);
    let stats = store
        .stats()
        .await
        .unwrap_or_else(|err| panic!("stats: {}", txoutbox_core::ErrorChain(&err)));
    assert_eq!(stats.pending, 1, "a#2 is still there");
    assert_eq!(ids(&claim(&store, 10, LONG).await), a[1..]);
}
