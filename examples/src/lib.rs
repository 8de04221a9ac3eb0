//! Runnable examples of the transactional outbox.
//!
//! The binaries in `src/bin/` and the examples in `examples/` share the
//! orders domain in [`orders`]: an `Order` aggregate that records
//! `OrderPlaced`, `OrderPaid`, `OrderShipped` and `OrderCancelled`, stored
//! through [`orders_table`] and read back by consumers into
//! [`read_model`]. [`support`] finds (or starts) the database and NATS.
//! [`ops_http`] serves a service's `/metrics` and `/health`;
//! [`order_service`] is the `axum_service` example's app. [`checkout`]
//! holds the service's use cases on the real `Outbox`, which
//! `metrics_endpoint` runs and `testing_a_service` tests.

pub mod checkout;
pub mod ops_http;
pub mod order_service;
pub mod orders;
pub mod orders_table;
pub mod read_model;
pub mod support;
