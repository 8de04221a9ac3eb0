//! The user guide, one chapter per module. Each chapter is a Markdown file
//! of the repository (`outbox/guide/*.md`, readable on GitHub too), and
//! every Rust block in it compiles as a doctest of this crate: blocks that
//! need a database or a broker are `no_run` (compiled, not run), the others
//! run. `cargo test -p txoutbox --doc` builds them all.
//!
//! | chapter | what it covers |
//! |---|---|
//! | [`concepts`] | the problem, the pieces, events and aggregates, installation, the examples |
//! | [`writing`] | the unit of work, the repository, joining your transaction, retries, delayed messages |
//! | [`publishing`] | the processor: wake-ups, claims, the stream, settings, the database pool |
//! | [`consuming`] | typed handlers, the inbox, dead letters, consumers on more than one process |
//! | [`guarantees`] | ordering and delivery guarantees, failure by failure |
//! | [`running_in_axum`] | the axum runtime: processor and subscribers started, health, metrics, graceful shutdown |
//! | [`operating`] | the `outbox` command, verification, metrics and health, tracing, versions |
//! | [`testing_a_service`] | the testing kit: the service's real `Outbox` on SQLite in memory, its subscriber in process, faults, a real nats-server |
//! | [`performance`] | what it costs and how fast it goes |
//! | [`versioning`] | evolving events: upcasts and the schema lock |

pub mod concepts {
    #![doc = include_str!("../guide/concepts.md")]
}

pub mod writing {
    #![doc = include_str!("../guide/writing.md")]
}

pub mod publishing {
    #![doc = include_str!("../guide/publishing.md")]
}

pub mod consuming {
    #![doc = include_str!("../guide/consuming.md")]
}

pub mod guarantees {
    #![doc = include_str!("../guide/guarantees.md")]
}

pub mod running_in_axum {
    #![doc = include_str!("../guide/running_in_axum.md")]
}

pub mod operating {
    #![doc = include_str!("../guide/operating.md")]
}

pub mod testing_a_service {
    #![doc = include_str!("../guide/testing_a_service.md")]
}

pub mod performance {
    #![doc = include_str!("../guide/performance.md")]
}

pub mod versioning {
    #![doc = include_str!("../guide/versioning.md")]
}
