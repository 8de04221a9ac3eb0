//! What the fuzz targets share: the event types they register, the NATS
//! message text their inputs are written in, models of the documented
//! rules the targets check the library against, and the real messages the
//! seed corpus is built from.
//!
//! The targets live in `fuzz_targets/`, one job each; `examples/seeds.rs`
//! writes the corpus (`cargo run --example seeds`).

pub mod events;
pub mod nats_text;
pub mod rules;
pub mod seeds;
