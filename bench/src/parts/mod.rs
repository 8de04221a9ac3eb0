//! One file (or folder) per part the command line takes, named after it
//! (`drain-skew` is `drain_skew`).

pub(crate) mod crash;
pub(crate) mod drain;
pub(crate) mod drain_1m;
pub(crate) mod drain_cluster;
pub(crate) mod drain_skew;
pub(crate) mod drain_tune;
pub(crate) mod endurance;
pub(crate) mod history;
pub(crate) mod ingest;
pub(crate) mod jetstream;
pub(crate) mod latency;
pub(crate) mod naive;
pub(crate) mod outage;
pub(crate) mod relay_candidates;
pub(crate) mod save_cost;
pub(crate) mod soak;
pub(crate) mod writers;
