//! Assembling a subscriber from its checked builder: its handlers, their
//! inbox (and its tables), the event registry, what its tasks share, and
//! what it sets up on the server. Asks nothing of JetStream.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use txoutbox_core::EventRegistry;
use txoutbox_core::consumer::{AppliedMessages, ConsumerInbox, HeldMessages};

use super::server::Setup;
use super::shared::Shared;
use crate::subscriber::SubscriberBuilder;
use crate::subscriber::config::SubscriberBuildError;
use crate::subscriber::handlers::Handlers;
use crate::subscriber::health::Pause;
use crate::subscriber::holds::Holds;

impl SubscriberBuilder {
    /// What [`build`](Self::build) and [`into_in_process`](Self::into_in_process)
    /// share: the settings checked; the handlers, their inbox (and its
    /// tables) and the registry; what the subscriber shares between its
    /// tasks. Asks nothing of JetStream.
    pub(crate) async fn checked(self) -> Result<Checked, SubscriberBuildError> {
        let stream_name = self.check()?;
        let pulls = self.pulls();
        let max_ack_pending = i64::try_from(self.window()).unwrap_or(i64::MAX);
        let handlers = Handlers::new(self.handlers)?;
        let theirs = handlers.inbox()?;
        if let (Some(given), Some(theirs)) = (&self.inbox, &theirs)
            && given.consumer() != theirs.consumer()
        {
            return Err(SubscriberBuildError::InvalidConfig(format!(
                "keep_order was given the inbox of consumer `{}`, but the handlers apply \
                 through the inbox of `{}`: one subscriber, one inbox",
                given.consumer(),
                theirs.consumer()
            )));
        }
        let idle = self.idle_transaction_limit.unwrap_or(self.ack_wait);
        if !idle.is_zero() {
            // The handlers' inbox and a `keep_order` one (which may be
            // another value of the same consumer's inbox).
            for inbox in self.inbox.iter().chain(theirs.iter()) {
                inbox.limit_idle_transactions(idle);
            }
        }
        let inbox = self.inbox.or(theirs);
        let inbox = match (inbox, self.unordered) {
            (None, false) => {
                return Err(SubscriberBuildError::NoInbox {
                    consumer: self.durable,
                });
            }
            (inbox, _) => inbox,
        };
        if let Some(inbox) = &inbox {
            inbox
                .check_schema()
                .await
                .map_err(|source| SubscriberBuildError::InboxSchema {
                    consumer: inbox.consumer().to_owned(),
                    source,
                })?;
        }
        let keeps_order = inbox.is_some() && !self.unordered;
        let registry = match self.registry {
            Some(registry) => {
                for registration in handlers.registrations() {
                    let present = registry
                        .get(registration.name(), registration.version())
                        .is_some_and(|found| found.type_id() == registration.type_id());
                    if !present {
                        return Err(SubscriberBuildError::Unregistered {
                            name: registration.name(),
                            version: registration.version(),
                            rust_type: registration.rust_type(),
                        });
                    }
                }
                registry
            }
            None => Arc::new(
                handlers
                    .registrations()
                    .fold(EventRegistry::builder().with_inventory(), |b, r| {
                        b.register_registration(r)
                    })
                    .build()?,
            ),
        };
        let durable: Arc<str> = self.durable.into();
        let shared = Shared {
            consumer: Arc::clone(&durable),
            stream: stream_name.clone().into(),
            client: self.context.client(),
            context: self.context,
            registry,
            handlers,
            max_deliver: self.max_deliver,
            ack_wait: self.ack_wait,
            max_in_flight: self.max_in_flight,
            permits: Arc::new(Semaphore::new(self.max_in_flight)),
            held: Arc::default(),
            backoff: self.backoff,
            dead_letter: self.dead_letter,
            dead_letter_unhandled: self.dead_letter_unhandled,
            unhandled_seen: Mutex::default(),
            shutdown_timeout: self.shutdown_timeout,
            failover: self.failover,
            pin: Mutex::default(),
            applied: keeps_order
                .then(|| inbox.clone().map(|inbox| inbox as Arc<dyn AppliedMessages>))
                .flatten(),
            holds: keeps_order
                .then(|| {
                    inbox
                        .clone()
                        .map(|inbox| Arc::new(Holds::new(inbox as Arc<dyn HeldMessages>)))
                })
                .flatten(),
            cleanup: inbox.clone().zip(self.cleanup),
            inbox_groups: inbox
                .clone()
                .filter(|inbox| inbox.begin_group().is_some())
                .zip(self.inbox_groups),
            pause: Pause::new(durable),
            setup: super::status::SetupStatus::default(),
            inbox: inbox.clone(),
            // Set by `build` (a subscriber run in process reads alone).
            lease: None,
            gate: crate::subscriber::takeover::lease::Gate::new(false),
        };
        Ok(Checked {
            shared,
            reader_lease: self.reader_lease,
            inbox,
            setup: Setup {
                stream_name,
                keeps_order,
                pulls,
                max_ack_pending,
                filter_subject: self.filter_subject,
                partitioned: self.partitions.is_some(),
                deliver_policy: self.deliver_policy,
                dead_letter_stream: self.dead_letter_stream,
            },
        })
    }
}

impl Checked {
    /// What the subscriber shares between its tasks (with its reader lease,
    /// if it keeps order on an inbox that keeps leases), and what it sets
    /// up on the server.
    pub(crate) fn prepared(self) -> (Shared, Setup) {
        let Checked {
            mut shared,
            reader_lease,
            inbox,
            setup,
        } = self;
        if setup.keeps_order
            && let Some(inbox) = inbox
            && crate::subscriber::takeover::keeps_leases(&*inbox)
        {
            shared.lease = Some(crate::subscriber::takeover::lease::Lease::of(
                inbox,
                reader_lease,
            ));
            shared.gate = crate::subscriber::takeover::lease::Gate::new(true);
        }
        (shared, setup)
    }
}

/// A builder checked, before JetStream is asked anything (see
/// [`SubscriberBuilder::checked`]).
pub(crate) struct Checked {
    pub(crate) shared: Shared,
    /// How long the reader lease is held per take or renewal.
    pub(crate) reader_lease: Duration,
    /// The inbox the handlers apply through (or `keep_order`'s).
    pub(crate) inbox: Option<Arc<dyn ConsumerInbox>>,
    /// What the subscriber sets up on the server.
    pub(crate) setup: Setup,
}
