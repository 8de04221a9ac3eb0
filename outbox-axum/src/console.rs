//! The web console beside the runtime (feature `console`): the runtime's
//! health as the console's [`HealthSource`], and [`Runtime::console`].

use txoutbox_console::{ConsoleBuilder, HealthFuture, HealthSource};

use crate::health::RuntimeHealth;
use crate::runtime::Runtime;

impl HealthSource for RuntimeHealth {
    fn report(&self) -> HealthFuture {
        let health = self.clone();
        // The page shows what `/health/outbox` answers.
        Box::pin(async move { health.outbox().await })
    }
}

impl Runtime {
    /// `builder` showing this runtime's parts too: the health page reads
    /// the processor's and subscribers' [health](Self::health), and every
    /// subscriber is a consumer of the consumers page (its lag on its
    /// stream, its held aggregates). The console still needs NATS for the
    /// lag ([`ConsoleBuilder::nats`]) and an authoriser for changes.
    ///
    /// ```no_run
    /// # async fn run(runtime: txoutbox_axum::Runtime, builder: txoutbox_axum::txoutbox_console::ConsoleBuilder, app: axum::Router) {
    /// // `builder`: `Console::builder(outbox)`, with `.nats(..)` and `.authorize(..)`.
    /// let console = runtime.console(builder).build();
    /// let app = app.merge(runtime.router()).nest("/outbox", console.router());
    /// # let _ = app; }
    /// ```
    pub fn console(&self, builder: ConsoleBuilder) -> ConsoleBuilder {
        let health = self.health();
        let builder = health
            .subscriber_names()
            .into_iter()
            .fold(builder, |builder, (stream, durable)| {
                builder.consumer_on(stream, durable)
            });
        builder.health(health)
    }
}
