//! [`IntoJetStream`]: what the subscriber (and anything else that needs a
//! JetStream context) accepts, so a service builds its publisher and its
//! subscribers from the same connection.

use async_nats::{Client, jetstream};

/// A NATS connection or a JetStream context: both
/// [`JetStreamPublisher::new`](crate::JetStreamPublisher::new) and
/// [`Subscriber::builder`](crate::Subscriber::builder) take the
/// [`Client`] a service already has.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use txoutbox_nats::{JetStreamPublisher, NatsConnect, Subscriber};
///
/// let nats = NatsConnect::new("nats://127.0.0.1:4222").connect().await?;
/// let publisher = JetStreamPublisher::new(nats.clone(), "/orders-service");
/// let subscriber = Subscriber::builder(nats, "billing"); // or a jetstream::Context
/// # let _ = (publisher, subscriber); Ok(()) }
/// ```
pub trait IntoJetStream {
    /// The JetStream context.
    fn into_jetstream(self) -> jetstream::Context;
}

impl IntoJetStream for Client {
    fn into_jetstream(self) -> jetstream::Context {
        jetstream::new(self)
    }
}

impl IntoJetStream for jetstream::Context {
    fn into_jetstream(self) -> jetstream::Context {
        self
    }
}
