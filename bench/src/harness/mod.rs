//! What the parts and the children measure with: the fixtures (schemas,
//! streams, the bench's aggregate), the machine (load, CPU times), memory
//! (RSS, and what the C allocator holds),
//! statistics, PostgreSQL's counters, the printed reports, the recording
//! decorators and the stop signal. Nothing here imports a part or a child.

pub(crate) mod error;
pub(crate) mod fixture;
pub(crate) mod log_histogram;
pub(crate) mod machine;
pub(crate) mod malloc_stats;
pub(crate) mod memory;
pub(crate) mod offered;
pub(crate) mod pgstats;
pub(crate) mod private_pg;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod stats;
pub(crate) mod stop_signal;
