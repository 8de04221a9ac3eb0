//! `drain-tune`: the `drain` part's 200,000-row backlog drained with
//! several batch sizes, batches in flight, retentions and processor counts.

use std::time::Duration;

use crate::children::drain::Settings;
use crate::harness::error::BoxError;
use crate::harness::report::thousands;
use crate::parts::drain::{ROWS, drain};

/// `drain-tune`: several settings on fresh 200,000-row backlogs.
pub(crate) async fn run() -> Result<(), BoxError> {
    println!(
        "== drain-tune: {} pending rows per setting ==",
        thousands(ROWS as f64)
    );
    let settings = [
        // (batch, batches in flight, max_in_flight, Retention::Delete, processors)
        (500, 1, 2048, false, 1),
        (500, 2, 2048, false, 1),
        (500, 3, 2048, false, 1),
        (500, 4, 2048, false, 1),
        (1000, 2, 2048, false, 1),
        (1000, 3, 2048, false, 1),
        (1000, 3, 4096, false, 1),
        (1000, 4, 4096, false, 1),
        (2000, 2, 4096, false, 1),
        (500, 3, 2048, true, 1),
        (1000, 3, 4096, true, 1),
        (500, 3, 2048, false, 2),
    ];
    for (batch_size, batches_in_flight, max_in_flight, delete_published, processors) in settings {
        let drained = drain(
            Settings {
                batch_size,
                batches_in_flight,
                max_in_flight,
                delete_published,
                processors,
                instant_acks: false,
            },
            ROWS,
            ROWS,
            Duration::from_millis(100),
        )
        .await?;
        drained.print();
        println!("   {}", drained.cpu);
    }
    Ok(())
}
