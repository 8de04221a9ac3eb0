//! [`InboxGroups`]: how a subscriber groups the messages its inbox
//! handlers apply into shared transactions.

use std::time::Duration;

/// How a subscriber applies the messages of its inbox handlers
/// (`txoutbox_sea_orm::Inbox::handler`) in groups: the messages ready to
/// run (of several aggregates, each aggregate's in stream order) go into one
/// database transaction — one multi-row inbox insert, each handler's
/// effects, one commit — and are acknowledged after that commit. Set with
/// [`SubscriberBuilder::inbox_groups`](crate::subscriber::SubscriberBuilder::inbox_groups).
///
/// The default of every subscriber; without it ([`inbox_per_message`](crate::subscriber::SubscriberBuilder::inbox_per_message))
/// each message has a transaction of its own. A process frozen in the
/// middle of a group (SIGSTOP, a paused VM) holds its rows until the
/// database ends its transaction: see
/// [`idle_transaction_limit`](crate::subscriber::SubscriberBuilder::idle_transaction_limit).
///
/// | setting | default | what it bounds |
/// |---|---|---|
/// | [`max_messages`](Self::max_messages) | 256 | messages in one group |
/// | [`max_wait`](Self::max_wait) | 0 | how long a group waits for more messages once none is ready |
/// | [`transactions`](Self::transactions) | 2 | groups applied at once (each on a connection of its own, disjoint aggregates) |
///
/// A group closes when it is full, or when no more messages are ready
/// (after waiting up to `max_wait` for more). With the default `max_wait`
/// of zero a lone message at a low rate is applied at once, as it would be
/// on its own; under load the groups fill by themselves while the previous
/// ones commit.
///
/// What a failure costs: when a handler fails, the group's transaction is
/// rolled back and applied again without the failing message and the
/// messages after it of its aggregate, so the other aggregates' effects
/// still commit once; the failing message follows the usual rules (a
/// retry after its backoff, the dead letters, a hold) and the rest of its
/// aggregate waits for it. When the group cannot begin, record or commit
/// (the database is unreachable, the connection dropped), the first message
/// of each of its aggregates is delivered again after its backoff, and the
/// rest wait for it in their lanes. A message delivered again (a retry, a
/// redelivery after a crash) is applied in a transaction of its own, so a
/// message whose effects fail only at commit fails alone the second time;
/// so are the messages of handlers that asked for it
/// (`ThroughInbox::own_transaction`), and those of a held aggregate.
///
/// ```no_run
/// use std::time::Duration;
/// use txoutbox_nats::subscriber::{InboxGroups, Subscriber};
///
/// # async fn build(nats: async_nats::Client) {
/// let builder = Subscriber::builder(nats, "billing").inbox_groups(
///     InboxGroups::default()
///         .max_messages(500)
///         .max_wait(Duration::from_millis(2))
///         .transactions(4),
/// );
/// # let _ = builder; }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxGroups {
    max_messages: usize,
    max_wait: Duration,
    transactions: usize,
}

impl InboxGroups {
    /// The most messages in one group, by default.
    pub const DEFAULT_MAX_MESSAGES: usize = 256;
    /// Groups applied at once, by default.
    pub const DEFAULT_TRANSACTIONS: usize = 2;

    /// The most messages in one group (at least 1; default 256).
    pub fn max_messages(mut self, max: usize) -> Self {
        self.max_messages = max.max(1);
        self
    }

    /// How long a group that is not full waits for more messages once none
    /// is ready (default zero: it closes at once).
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// How many groups are applied at once, each in a transaction (and on
    /// a database connection) of its own, never two with the same
    /// aggregate (at least 1; default 2).
    pub fn transactions(mut self, transactions: usize) -> Self {
        self.transactions = transactions.max(1);
        self
    }

    /// The most messages in one group.
    pub fn max_messages_per_group(&self) -> usize {
        self.max_messages
    }

    /// How long a group that is not full waits for more.
    pub fn wait(&self) -> Duration {
        self.max_wait
    }

    /// How many groups are applied at once.
    pub fn concurrent_transactions(&self) -> usize {
        self.transactions
    }
}

impl Default for InboxGroups {
    fn default() -> Self {
        Self {
            max_messages: Self::DEFAULT_MAX_MESSAGES,
            max_wait: Duration::ZERO,
            transactions: Self::DEFAULT_TRANSACTIONS,
        }
    }
}

/// The former name of [`InboxGroups`]: what it configures are the inbox's
/// groups (a "batch" is a batch handler's).
#[deprecated(since = "0.1.0", note = "renamed to `InboxGroups`")]
pub type InboxBatches = InboxGroups;
