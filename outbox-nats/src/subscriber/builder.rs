//! [`SubscriberBuilder`]: handlers and settings of a [`Subscriber`].

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::DeliverPolicy};
use txoutbox_core::cleanup::Cleanup;
use txoutbox_core::consumer::{ConsumerInbox, Handler};
use txoutbox_core::{EventRegistry, IntegrationEvent, Partitions};

use super::Subscriber;
use super::config::Backoff;
use super::config::SubscriberBuildError;
use super::dead_letters::DeadLetterPolicy;
use super::groups::InboxGroups;
use super::handlers::{ErasedHandler, Typed};
use super::in_process::InProcess;
use super::setup::Owned;
use super::setup::SetupState;
use crate::StreamSpec;

/// Configures a [`Subscriber`]; [`build`](SubscriberBuilder::build) creates
/// or verifies its durable consumer.
///
/// | setting | default |
/// |---|---|
/// | [`stream`](Self::stream) | required |
/// | [`filter_subject`](Self::filter_subject) | every subject of the stream |
/// | [`partitions`](Self::partitions) | none: one consumer, `durable` |
/// | [`failover`](Self::failover) | off: one process per durable that keeps order; with it, any number, one receiving (pin timeout 4 s, [`failover_after`](Self::failover_after)) |
/// | [`deliver_policy`](Self::deliver_policy) | `All` (from the start of the stream) |
/// | [`max_in_flight`](Self::max_in_flight) | 64 |
/// | [`max_ack_pending`](Self::max_ack_pending) | the larger of 1,000 and 4 × `max_in_flight` |
/// | [`max_deliver`](Self::max_deliver) | 5 |
/// | [`ack_wait`](Self::ack_wait) | 30 s |
/// | [`idle_transaction_limit`](Self::idle_transaction_limit) | the ack wait: an inbox transaction idle longer is ended by PostgreSQL |
/// | [`backoff`](Self::backoff) | 1 s doubling to 5 min ([`Backoff`]), each nak delay jittered into `[d/2, d]` |
/// | [`dead_letter`](Self::dead_letter) | publish to `dlq.<durable>` |
/// | [`dead_letter_stream`](Self::dead_letter_stream) | none: a stream must already capture the dead-letter subject |
/// | the inbox | the one its handlers apply through ([`on`](Self::on)`(inbox.handler(..))`): effects once, order kept across restarts and behind dead messages |
/// | [`unordered`](Self::unordered) | off: a subscriber without an inbox is refused; with it, order holds within one process only |
/// | [`inbox_groups`](Self::inbox_groups) | on: inbox handlers' messages are applied in groups, one transaction per group ([`InboxGroups`]: up to 256 messages, 2 transactions at once, no waiting for more); [`inbox_per_message`](Self::inbox_per_message) gives each message a transaction of its own |
/// | [`dead_letter_unhandled`](Self::dead_letter_unhandled) | off: events no handler takes are acknowledged and counted (`outcome="ignored"`) |
/// | [`cleanup`](Self::cleanup) | inbox rows applied more than 7 days ago are deleted, hourly ([`Cleanup`]); [`without_cleanup`](Self::without_cleanup) keeps them |
/// | [`registry`](Self::registry) | the inventory plus every handler's type |
/// | [`shutdown_timeout`](Self::shutdown_timeout) | 30 s |
#[must_use = "a builder does nothing until `build` is awaited"]
pub struct SubscriberBuilder {
    pub(crate) context: jetstream::Context,
    pub(crate) durable: String,
    pub(crate) stream: Option<String>,
    pub(crate) filter_subject: String,
    pub(crate) partitions: Option<Owned>,
    /// The pin timeout, with failover.
    pub(crate) failover: Option<Duration>,
    /// How long the reader lease is held per take or renewal.
    pub(crate) reader_lease: Duration,
    pub(crate) deliver_policy: DeliverPolicy,
    pub(crate) max_in_flight: usize,
    pub(crate) max_ack_pending: Option<usize>,
    pub(crate) max_deliver: u64,
    pub(crate) ack_wait: Duration,
    /// `None`: the ack wait; zero: no bound.
    pub(crate) idle_transaction_limit: Option<Duration>,
    pub(crate) backoff: Backoff,
    pub(crate) dead_letter: DeadLetterPolicy,
    pub(crate) dead_letter_stream: Option<StreamSpec>,
    pub(crate) dead_letter_unhandled: bool,
    pub(crate) unordered: bool,
    /// `None`: one transaction per message.
    pub(crate) inbox_groups: Option<InboxGroups>,
    pub(crate) cleanup: Option<Cleanup>,
    pub(crate) inbox: Option<Arc<dyn ConsumerInbox>>,
    pub(crate) registry: Option<Arc<EventRegistry>>,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) handlers: Vec<Box<dyn ErasedHandler>>,
}

impl std::fmt::Debug for SubscriberBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriberBuilder")
            .field("durable", &self.durable)
            .field("stream", &self.stream)
            .field("filter_subject", &self.filter_subject)
            .field("partitions", &self.partitions)
            .field("failover", &self.failover)
            .field("max_in_flight", &self.max_in_flight)
            .field("max_ack_pending", &self.window())
            .field("max_deliver", &self.max_deliver)
            .field("ack_wait", &self.ack_wait)
            .field("handlers", &self.handlers.len())
            .finish_non_exhaustive()
    }
}

impl SubscriberBuilder {
    pub(super) fn new(context: jetstream::Context, durable: String) -> Self {
        Self {
            context,
            durable,
            stream: None,
            filter_subject: String::new(),
            partitions: None,
            failover: None,
            reader_lease: super::takeover::DEFAULT_LEASE,
            deliver_policy: DeliverPolicy::All,
            max_in_flight: 64,
            max_ack_pending: None,
            max_deliver: 5,
            ack_wait: Duration::from_secs(30),
            idle_transaction_limit: None,
            backoff: Backoff::default(),
            dead_letter: DeadLetterPolicy::default(),
            dead_letter_stream: None,
            dead_letter_unhandled: false,
            unordered: false,
            inbox_groups: Some(InboxGroups::default()),
            cleanup: Some(Cleanup::default()),
            inbox: None,
            registry: None,
            shutdown_timeout: Duration::from_secs(30),
            handlers: Vec::new(),
        }
    }

    /// The stream to consume (required).
    pub fn stream(mut self, stream: impl Into<String>) -> Self {
        self.stream = Some(stream.into());
        self
    }

    /// Only messages on subjects matching `subject` (wildcards allowed,
    /// e.g. `events.order.>`). One filter: several filter subjects on one
    /// consumer need nats-server 2.10.
    pub fn filter_subject(mut self, subject: impl Into<String>) -> Self {
        self.filter_subject = subject.into();
        self
    }

    /// Consumes only the partitions `owned` of a stream the writers split
    /// into `partitions` under the subject prefix `prefix`
    /// (`OutboxConfig::with_partitions` in `txoutbox_sea_orm`): one durable
    /// consumer per owned partition `k`, named `<durable>-p<k>` and
    /// filtering `<prefix>.p<k>.>`, all feeding the same handlers, under the
    /// same `max_in_flight`, in the same per-aggregate order.
    ///
    /// Each aggregate lives in one partition, so a process that owns a
    /// partition alone sees every message of its aggregates: per-aggregate
    /// order (with [`keep_order`](Self::keep_order), across restarts too)
    /// holds with several processes, each owning a disjoint set
    /// ([`Partitions::share`] splits them). The inbox, its holds and the
    /// dead-letter subject use `durable` itself, so effects apply once
    /// whichever partition a message came through.
    ///
    /// Ownership is static: a stopped process's partitions wait until it,
    /// or a replacement owning the same set, starts; no other process takes
    /// them over. `max_ack_pending` applies to each partition's consumer.
    /// Excludes [`filter_subject`](Self::filter_subject); `build` fails
    /// with [`SubscriberBuildError::InvalidConfig`] for both, an empty set, or a
    /// partition not below the count.
    ///
    /// ```no_run
    /// # async fn run(jetstream: txoutbox_nats::async_nats::jetstream::Context) -> Result<(), Box<dyn std::error::Error>> {
    /// use txoutbox_core::Partitions;
    /// use txoutbox_nats::Subscriber;
    /// let partitions = Partitions::new(12)?;
    /// // process 1 of 3: partitions 1, 4, 7, 10
    /// let builder = Subscriber::builder(jetstream, "billing")
    ///     .stream("EVENTS")
    ///     .partitions("events", partitions, partitions.share(1, 3));
    /// # let _ = builder; Ok(()) }
    /// ```
    pub fn partitions(
        mut self,
        prefix: impl Into<String>,
        partitions: Partitions,
        owned: impl IntoIterator<Item = u16>,
    ) -> Self {
        self.partitions = Some(Owned::new(
            prefix.into(),
            partitions,
            owned.into_iter().collect(),
        ));
        self
    }

    /// Lets any number of processes run this subscriber on its durable,
    /// one at a time: the one the server *pins* receives every message, the
    /// others stand by, and when the pinned one stops (crash, shutdown,
    /// network cut) one of them takes over. For a service run in several
    /// replicas that keeps order ([`keep_order`](Self::keep_order), which
    /// otherwise allows one process per durable). Needs nats-server 2.11 or
    /// later; the pin timeout is 4 s ([`failover_after`](Self::failover_after)
    /// sets another).
    ///
    /// **How.** The durable is created with a priority group (`failover`)
    /// whose policy pins one client (ADR-42). Every process pulls every
    /// fifth of the pin timeout; the server delivers to the pinned one only,
    /// and each of its pulls renews the pin. When the server has had no
    /// pull from it for the pin timeout, it unpins it, and pins the next
    /// process whose pull meets a message to deliver. Since a pinned process
    /// that died mid-burst may have left a full window pending (the server
    /// then delivers nothing new, so would pin nobody until their ack wait),
    /// every process checks each pull period whether no process is pinned
    /// while messages are pending, and if so hands them back (a nak): they
    /// are delivered at once, and a standby is pinned with them.
    ///
    /// **What holds.** The newly pinned process notices at its first
    /// message (a new `Nats-Pin-Id`) and, before handling it, runs the
    /// restart guard of [`keep_order`](Self::keep_order): what was
    /// delivered before and not applied is marked away in its aggregates'
    /// lanes, so per-aggregate order, holds and effects once hold across
    /// the takeover as across a restart. A process starting as a standby
    /// runs no guard at start (the pinned one is alive), and `build` does
    /// not refuse it ([`SubscriberBuildError::DurableInUse`] is for
    /// subscribers without failover).
    ///
    /// **Under the reader lease** (an inbox that keeps leases, see
    /// [`reader_lease`](Self::reader_lease)) only the lease's holder pulls:
    /// the standbys neither pull nor hand anything back, so a consumer
    /// leader change (which clears the pin) cannot get a standby pinned
    /// beside a holder that goes on; the holder is pinned again at its next
    /// pull, and a new pin id on its messages is no takeover. The next
    /// process takes over when the lease is given up (an orderly stop) or
    /// runs out (a crash), and runs the restart guard at once.
    ///
    /// **What it costs.** A SIGKILLed pinned process is replaced once its
    /// pin timed out and its lease ran out: on nats-server 2.14 with the
    /// defaults (pin timeout 4 s, lease 3 s), the next process's effects
    /// flowed 4.0-4.1 s after the kill (three processes, two kills,
    /// `tests/tests/consume/consumer_failover.rs`; see `BENCHMARKS.md`). A
    /// pinned process stopped in order releases its pin and its lease after
    /// handing back what it held: the next one's effects flowed 1.6-2.2 s
    /// after the stop began. The pin timeout trades what a crash
    /// costs against false takeovers: a pinned process that cannot pull for
    /// that long (frozen, cut off, starved of CPU) loses the pin though
    /// alive, and what it held is handed to the next one. Effects still
    /// apply once, and each process applies an aggregate's messages in
    /// order after the earlier ones are applied; but should the frozen one
    /// wake with a message away for a retry (nakked before the freeze,
    /// redelivered meanwhile to the new one) past its grace, it goes on
    /// without it, as in [Order and concurrency](super#order-and-concurrency).
    /// Every process asks for the consumer's state once per pull period.
    /// The health probe's [`pinned`](super::SubscriberHealth::pinned) says
    /// which process receives.
    ///
    /// **Refusals.** `build` fails with
    /// [`SubscriberBuildError::FailoverUnsupported`] on a server older than
    /// 2.11 (it would ignore the priority group and spread the messages over
    /// every process), and with [`SubscriberBuildError::ConsumerMismatch`]
    /// (`priority_policy`) on a durable created without failover (or with
    /// it, by a subscriber without): update its priority settings
    /// (`nats consumer edit`) or delete it. Excludes
    /// [`partitions`](Self::partitions).
    ///
    /// ```no_run
    /// # async fn run(jetstream: txoutbox_nats::async_nats::jetstream::Context) {
    /// use txoutbox_nats::Subscriber;
    /// // The same code in every replica of the service.
    /// let builder = Subscriber::builder(jetstream, "billing")
    ///     .stream("EVENTS")
    ///     .failover();
    /// # let _ = builder; }
    /// ```
    pub fn failover(mut self) -> Self {
        self.failover = Some(self.failover.unwrap_or(super::takeover::DEFAULT_PINNED_TTL));
        self
    }

    /// [`failover`](Self::failover) with the pin timeout `pinned_ttl`
    /// (at least 1 s; the consumer's `priority_timeout`): how long the
    /// server waits for a pull from the pinned process before it pins
    /// another. Only used when the consumer is created; an existing one must
    /// agree.
    pub fn failover_after(mut self, pinned_ttl: Duration) -> Self {
        self.failover = Some(pinned_ttl);
        self
    }

    /// How long the reader lease is held per take or renewal, by the
    /// database's clock (at least 1 s; 3 s by default, under the failover
    /// pin timeout).
    ///
    /// A subscriber that keeps order ([`keep_order`](Self::keep_order),
    /// or inbox handlers) must be its durable's one reader. Besides what
    /// the broker says ([`SubscriberBuildError::DurableInUse`] at build, the
    /// pin with [`failover`](Self::failover)), it holds a lease in its
    /// inbox's database (`<inbox>_lease`: a row per JetStream consumer with
    /// the holder, a fencing token and an expiry), taken before its first
    /// pull. A process that finds it held by another *stands by*: it pulls
    /// nothing, and its [health](super::SubscriberHealth::lease_held) says so
    /// (a standby is ready). Two processes started in the same second
    /// therefore never read side by side, and a process that lost the
    /// broker's pin (a leader change of the consumer) goes on alone, since
    /// the standbys do not pull.
    ///
    /// The holder renews the lease every third of `duration` and counts it
    /// held until nine tenths of `duration` after it sent the renewal (by
    /// its own clock: the database's expiry is later). While renewals fail
    /// (the database is away) it goes on with what it holds; once the lease
    /// ran out by that reckoning it starts no handler and pulls nothing,
    /// and it goes on when a renewal succeeds again, unless another process
    /// took the lease meanwhile: then it hands back what it holds (as at a
    /// shutdown) and stands by. At shutdown it gives the lease up, and a
    /// standby takes over within a fifth of `duration`; a crashed holder is replaced
    /// about `duration` after its last renewal.
    ///
    /// The inbox also checks, in each transaction before it commits, that
    /// the lease is still this process's with its fencing token, so a
    /// handler that was running when its process froze past the lease does
    /// not commit when it wakes.
    ///
    /// A subscriber without an inbox ([`unordered`](Self::unordered)) takes
    /// no lease. Only used with an inbox that keeps leases
    /// (`txoutbox_sea_orm::Inbox` does, in the table of migration
    /// `m20261128_000007_lease_<inbox>`).
    pub fn reader_lease(mut self, duration: Duration) -> Self {
        self.reader_lease = duration;
        self
    }

    /// Where a new consumer starts (`All` by default). Only used when the
    /// consumer is created; an existing one must agree.
    pub fn deliver_policy(mut self, policy: DeliverPolicy) -> Self {
        self.deliver_policy = policy;
        self
    }

    /// How many handlers run at once (at least 1). Messages waiting for a
    /// handler slot, or behind an earlier message of their aggregate, do
    /// not take one; what the subscriber holds in all is bounded by
    /// [`max_ack_pending`](Self::max_ack_pending).
    pub fn max_in_flight(mut self, max: usize) -> Self {
        self.max_in_flight = max;
        self
    }

    /// The consumer's `max_ack_pending`: how many messages may be delivered
    /// and not yet acknowledged, across every process bound to the durable.
    /// JetStream delivers no new message while that many are pending
    /// (messages coming back from a retry still are). It must be larger
    /// than `max_in_flight`; by default it is the larger of 1,000 (the
    /// server's own default, so consumers created by earlier versions
    /// verify) and 4 × `max_in_flight`.
    ///
    /// The subscriber reads every message the server sends at once and
    /// holds it until it is settled — running, waiting for a handler slot,
    /// or waiting behind an earlier message of its aggregate that failed and
    /// is away for a retry — kept alive with progress acks (`+WPI`). So this
    /// is the bound on what the subscriber holds in memory (count times
    /// message size). A failing aggregate's later messages wait in it
    /// without spending deliveries; if that aggregate has more messages in
    /// the stream than the window holds, the consumer receives nothing new
    /// until the failing message succeeds or is dead-lettered. Size it for
    /// the backlog one aggregate may build up during the longest failure
    /// the others should ride out unhindered.
    ///
    /// Only used when the consumer is created; an existing one must agree.
    pub fn max_ack_pending(mut self, max: usize) -> Self {
        self.max_ack_pending = Some(max);
        self
    }

    /// How many times JetStream delivers a message (at least 1). A message
    /// whose handler fails on the last delivery is dead-lettered, never
    /// silently dropped.
    pub fn max_deliver(mut self, max: u64) -> Self {
        self.max_deliver = max;
        self
    }

    /// How long JetStream waits for an ack before redelivering. Messages
    /// that run or wait longer are kept alive with progress acks every third
    /// of it, so it bounds how long a crashed subscriber's messages stay
    /// unavailable rather than how long a handler may run. An inbox
    /// handler may run longer too, as long as it does not leave its
    /// transaction idle (no statement running) longer than the
    /// [`idle_transaction_limit`](Self::idle_transaction_limit), by default
    /// this ack wait: time spent in statements, waiting on locks included,
    /// does not count.
    pub fn ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = ack_wait;
        self
    }

    /// How long a transaction of the subscriber's inbox may sit idle
    /// before PostgreSQL ends it (`idle_in_transaction_session_timeout`,
    /// set for each inbox transaction only); by default the
    /// [`ack_wait`](Self::ack_wait); [`Duration::ZERO`] sets no bound.
    ///
    /// It is what a frozen process costs: one stopped with a transaction
    /// open (SIGSTOP, a paused VM, a long pause of its host) holds that
    /// transaction's inbox rows and effects' rows, and the process its
    /// messages went to (after the ack wait, or at once with
    /// [`failover`](Self::failover)) waits on them, its database
    /// connections with it, until the transaction ends. Bounded, the frozen
    /// one's transaction is rolled back that long after its last statement
    /// and the other applies its messages; woken, the frozen one finds its
    /// connection closed and its messages applied.
    ///
    /// Only idle time counts: a handler may run as long as it needs while
    /// its statements run (waiting on a row lock included). A handler that
    /// keeps its transaction open while it waits on something else for
    /// longer (a call to a slow service) needs a longer limit, or better,
    /// that wait outside the transaction: past the limit PostgreSQL ends
    /// the session (SQLSTATE 25P03), the attempt fails as the database's —
    /// applied again after the pause, no delivery spent, whichever
    /// handler's statement met the closed connection — so a handler that
    /// idles past the limit on every attempt is tried again without end.
    ///
    /// MySQL/MariaDB and SQLite: no effect (MySQL/MariaDB have only
    /// session-wide settings, which would outlive the transaction on a
    /// pooled connection; there the server's `innodb_lock_wait_timeout`
    /// and `wait_timeout` bound the wait).
    pub fn idle_transaction_limit(mut self, limit: Duration) -> Self {
        self.idle_transaction_limit = Some(limit);
        self
    }

    /// The delays before a failed message's next delivery (sent as the
    /// delay of its nak, so JetStream holds it back; the consumer's own
    /// `backoff` list, which only applies to ack timeouts, is not used).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// What happens to messages that cannot be handled (see
    /// [`dead_lettering`](super::dead_lettering)).
    pub fn dead_letter(mut self, policy: DeadLetterPolicy) -> Self {
        self.dead_letter = policy;
        self
    }

    /// Creates (or verifies) this stream for the dead letters at
    /// [`build`](Self::build); it must capture the dead-letter subject
    /// (`dlq.<durable>` by default).
    ///
    /// Without it, `build` checks that some stream already captures the
    /// subject and fails with [`SubscriberBuildError::DeadLettersUncaptured`]
    /// otherwise: a dead letter nobody stores cannot be published, and the
    /// message would be nakked again and again instead. One stream for every
    /// consumer's dead letters is [`StreamSpec::dead_letters`] (`DLQ`,
    /// capturing `dlq.>`).
    ///
    /// ```no_run
    /// # async fn run(jetstream: txoutbox_nats::async_nats::jetstream::Context) {
    /// use txoutbox_nats::{StreamSpec, Subscriber};
    /// let builder = Subscriber::builder(jetstream, "billing")
    ///     .stream("EVENTS")
    ///     .dead_letter_stream(StreamSpec::dead_letters());
    /// # let _ = builder; }
    /// ```
    pub fn dead_letter_stream(mut self, spec: StreamSpec) -> Self {
        self.dead_letter_stream = Some(spec);
        self
    }

    /// Dead-letters, instead of acknowledging, well-formed messages whose
    /// event no handler takes (kind `no-handler`, or `unknown-event` when no
    /// type in the registry has the name): for a consumer whose filter
    /// subject should capture only the events it handles, where any other
    /// is a mistake to look at.
    ///
    /// By default such messages are acknowledged, counted
    /// (`outbox_consumer_messages_total{outcome="ignored"}`) and logged once
    /// per event name at `info`: a filter like `events.order.>` captures
    /// every order event, including those this consumer has no use for,
    /// and new event types appear on shared subjects. The message stays in
    /// the stream. Invalid envelopes and undecodable payloads of handled
    /// events are dead-lettered either way.
    pub fn dead_letter_unhandled(mut self) -> Self {
        self.dead_letter_unhandled = true;
        self
    }

    /// Runs without an inbox's order keeping: each aggregate's messages
    /// are handled in order within this process, and that is all.
    ///
    /// A subscriber's handlers normally apply through an inbox
    /// (`.on(inbox.handler(f))` with `txoutbox_sea_orm::Inbox`): effects
    /// happen once, and the subscriber keeps each aggregate's messages in
    /// order across its own crashes and restarts and behind a message it
    /// could not apply (see [`keep_order`](Self::keep_order)), which makes
    /// it one process per durable (several are refused at
    /// [`build`](Self::build)). A subscriber whose handlers have no inbox
    /// can keep none of that, so `build` refuses it unless this is called:
    /// its effects happen at least once, and after a crash a message may be
    /// handled again, or after a later message of its aggregate.
    ///
    /// With an inbox, `unordered` keeps effects once but drops the order
    /// keeping (no restart guard, no holds), and lets several processes
    /// share the durable: JetStream spreads the messages over them, so one
    /// aggregate's messages may run in parallel in two of them.
    pub fn unordered(mut self) -> Self {
        self.unordered = true;
        self
    }

    /// Applies the messages of inbox handlers in groups, one database
    /// transaction per group, as `groups` says (see [`InboxGroups`]: how
    /// groups form, what a failure costs). The default is
    /// `InboxGroups::default()`.
    ///
    /// ```no_run
    /// # async fn build(nats: async_nats::Client) {
    /// use txoutbox_nats::subscriber::{InboxGroups, Subscriber};
    /// let builder = Subscriber::builder(nats, "billing").inbox_groups(InboxGroups::default());
    /// # let _ = builder; }
    /// ```
    pub fn inbox_groups(mut self, groups: InboxGroups) -> Self {
        self.inbox_groups = Some(groups);
        self
    }

    /// The former name of [`inbox_groups`](Self::inbox_groups).
    #[deprecated(since = "0.1.0", note = "renamed to `inbox_groups`")]
    pub fn inbox_batches(self, groups: InboxGroups) -> Self {
        self.inbox_groups(groups)
    }

    /// Applies each message of an inbox handler in a transaction of its
    /// own (inbox row, effects, commit), as `Inbox::process` does: one
    /// commit per message, instead of one per group
    /// ([`inbox_groups`](Self::inbox_groups), the default): for a
    /// subscriber whose handlers are not safe to apply again after another
    /// message's failure rolled their group back (one handler can ask for
    /// this alone: `ThroughInbox::own_transaction`).
    pub fn inbox_per_message(mut self) -> Self {
        self.inbox_groups = None;
        self
    }

    /// Keeps each aggregate's messages in order with this consumer's inbox
    /// (`txoutbox_sea_orm::Inbox`). Handlers made by the inbox
    /// (`inbox.handler(f)`) bring it already: call this only for handlers
    /// that use the inbox some other way (`Inbox::process`).
    ///
    /// **Across restarts.** What a process that died had received and not
    /// acknowledged would come back only after `ack_wait`, while the
    /// process that takes over receives the later messages at once. A
    /// subscriber starting up reads the messages delivered before it and
    /// not yet acknowledged (between the consumer's ack floor and its last
    /// delivered sequence, as far as its filter subject captures them),
    /// leaves out those the inbox applied and those whose event no handler
    /// takes, and marks the rest as away in their aggregates' lanes: later
    /// messages of those aggregates wait for them (in memory, spending no
    /// delivery, other aggregates unaffected) until they come back. It then
    /// hands all of them back to JetStream (a `-NAK` each, on the
    /// consumer's ack subject), which redelivers them at once: a crash
    /// costs a restart, not the ack wait. A hand-back that does not arrive
    /// leaves its message to `ack_wait`, and its aggregate waits at most
    /// `ack_wait` plus 1 s.
    ///
    /// **Behind a dead message.** A message its handler rejected
    /// ([`HandlerError::permanent`](txoutbox_core::HandlerError::permanent)), failed on every delivery, or whose
    /// payload does not decode ([`DeadLetterKind::holds_aggregate`]) still
    /// goes to the dead letters, and also *holds* its aggregate: it is
    /// parked in the inbox's database with its reason, and every later
    /// message of the aggregate is parked behind it (and acknowledged)
    /// instead of being applied past it. Other aggregates go on. The hold
    /// is visible (`Inbox::holds`, the `outbox_consumer_held_aggregates`
    /// gauge, an error log) and lasts until an operator releases it
    /// (`Inbox::release`, retrying or skipping the dead message); within a
    /// second the subscriber applies what is parked, in order, through the
    /// same handlers.
    ///
    /// **One process per durable.** The restart guard reads what the
    /// durable delivered and did not get acknowledged; a process starting
    /// beside a live one would take that one's messages for a crashed
    /// one's and the two would apply one aggregate's messages side by
    /// side. So [`build`](Self::build) refuses to start while another
    /// process is reading the durable
    /// ([`SubscriberBuildError::DurableInUse`]), and a process that got
    /// past that check at the same instant as another stands by under the
    /// [reader lease](Self::reader_lease) until the reader stops. To run several processes,
    /// let one receive at a time and the others stand by
    /// ([`failover`](Self::failover), nats-server 2.11+), give each its own
    /// partitions ([`partitions`](Self::partitions)), or share the durable
    /// [`unordered`](Self::unordered).
    ///
    /// [`DeadLetterKind::holds_aggregate`]: super::DeadLetterKind::holds_aggregate
    pub fn keep_order<I: ConsumerInbox>(mut self, inbox: I) -> Self {
        self.inbox = Some(Arc::new(inbox));
        self
    }

    /// Deletes the inbox's rows of messages applied more than
    /// [`Cleanup::older_than`] ago, every [`Cleanup::every`] (by default
    /// 7 days, hourly). Rows must outlive every repeat of their message;
    /// see [`Cleanup`]. Without an inbox there is nothing to clean.
    pub fn cleanup(mut self, cleanup: Cleanup) -> Self {
        self.cleanup = Some(cleanup);
        self
    }

    /// The inbox cleanup the subscriber will run (with an inbox), if any.
    pub fn cleanup_schedule(&self) -> Option<Cleanup> {
        self.cleanup
    }

    /// Keeps every inbox row: something else deletes them
    /// (`outbox inbox purge`, `Inbox::purge`).
    pub fn without_cleanup(mut self) -> Self {
        self.cleanup = None;
        self
    }

    /// Decodes payloads with this registry. It must contain every type a
    /// handler takes. By default the subscriber builds one from the
    /// inventory plus every handler's type (and the versions it upcasts
    /// from), so the linker can never leave a handled type out.
    pub fn registry(mut self, registry: impl Into<Arc<EventRegistry>>) -> Self {
        self.registry = Some(registry.into());
        self
    }

    /// How long shutdown waits for running handlers before abandoning them
    /// (their messages are nakked and delivered again).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Handles events of type `E`, and of every older version of its event
    /// that upcasts to it. One handler per event name.
    ///
    /// The handler gets the decoded event and its [`Delivery`](txoutbox_core::Delivery). `Ok` acks
    /// the message; an error naks it for a later delivery
    /// ([`HandlerError::retry`](txoutbox_core::HandlerError::retry), or `?` on any error) or dead-letters it at
    /// once ([`HandlerError::permanent`](txoutbox_core::HandlerError::permanent)). A panic counts as a retryable
    /// error.
    ///
    /// A handler is a function `Fn(E, Delivery) -> impl Future` (effects at
    /// least once: see [`unordered`](Self::unordered)), or one an inbox made
    /// (`inbox.handler(f)` of `txoutbox_sea_orm::Inbox`): effects once, and
    /// the subscriber keeps order with that inbox
    /// ([`keep_order`](Self::keep_order)); every inbox handler of one
    /// subscriber must come from the same consumer's inbox. See
    /// [`Handler`].
    pub fn on<E, H>(mut self, handler: H) -> Self
    where
        E: IntegrationEvent,
        H: Handler<E>,
    {
        self.handlers.push(Box::new(Typed::<E, H>::new(handler)));
        self
    }

    /// Checks the settings, creates the durable pull consumer or verifies
    /// that the existing one has the same settings (explicit ack, ack wait,
    /// max deliver, max ack pending, filter subject, deliver policy), and returns the
    /// subscriber, ready to [`run`](Subscriber::run).
    ///
    /// While the client is not connected (a broker away at start, with
    /// `NatsConnect::connect`'s client that connects in the background),
    /// what needs the server waits: the subscriber is returned with its
    /// settings, handlers and inbox checked, and creates or verifies its
    /// consumer (and its dead-letter stream) when it runs, once the broker
    /// answers. Meanwhile its health says it is connecting; what then turns
    /// out wrong (a consumer with other settings, a permission denied)
    /// stops it with [`SubscriberError::Setup`](super::SubscriberError::Setup),
    /// logged and in its health's problems.
    pub async fn build(self) -> Result<Subscriber, SubscriberBuildError> {
        let (shared, setup) = self.checked().await?.prepared();
        if shared.client.connection_state() != async_nats::connection::State::Connected {
            tracing::info!(consumer = %shared.consumer, stream = %setup.stream_name, "NATS not connected: the subscriber sets up its consumers once it is");
            shared.setup.set(SetupState::Waiting(
                "connecting to NATS: its consumers are set up once it answers".to_owned(),
            ));
            return Ok(Subscriber {
                shared: Arc::new(shared),
                consumers: Vec::new(),
                deferred: Some(setup),
            });
        }
        let consumers = setup.on_the_server(&shared).await?;
        Ok(Subscriber {
            shared: Arc::new(shared),
            consumers,
            deferred: None,
        })
    }

    /// The subscriber's handlers, inbox, order keeping and dead-letter
    /// policy, checked as [`build`](Self::build) checks them, to run in this
    /// process without JetStream: the testing kit's `TestSubscriber`
    /// (`txoutbox_testing`, feature `nats`) feeds it messages. Nothing is
    /// created or verified on the server, and nothing is sent to it.
    ///
    /// Not part of the public API: outside semver, it may change in any
    /// release.
    #[doc(hidden)]
    pub async fn into_in_process(self) -> Result<InProcess, SubscriberBuildError> {
        let checked = self.checked().await?;
        Ok(InProcess::new(Arc::new(checked.shared), checked.inbox))
    }
}
