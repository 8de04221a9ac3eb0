//! Benchmarks of the outbox on this machine's real PostgreSQL.
//!
//! ```sh
//! cargo run --release -p outbox-bench              # everything
//! cargo run --release -p outbox-bench -- save-cost # one part
//! cargo run --release -p outbox-bench -- writers
//! ```
//!
//! Each part runs in a fresh schema that is dropped afterwards. Figures go to
//! standard output; `BENCHMARKS.md` records them with the machine.

mod save_cost;
mod stats;
mod writers;

use std::error::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let parts: Vec<String> = std::env::args().skip(1).collect();
    let wants = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);
    let known = ["save-cost", "writers"];
    if let Some(unknown) = parts.iter().find(|p| !known.contains(&p.as_str())) {
        return Err(format!("unknown part `{unknown}`; parts: {}", known.join(", ")).into());
    }
    if wants("save-cost") {
        save_cost::run().await?;
    }
    if wants("writers") {
        writers::run().await?;
    }
    Ok(())
}
