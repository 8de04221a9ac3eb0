//! `outbox status [--watch [SECS]]`: the store's overview, once or redrawn.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use crate::context::Context;
use crate::error::CliError;
use crate::render;

/// Prints the overview once, or every `watch` seconds until Ctrl-C: on a
/// terminal the screen is cleared and redrawn in place, otherwise each
/// snapshot follows the previous one.
pub(super) async fn run(
    context: &Context,
    watch: Option<u64>,
    blocked: u32,
) -> Result<(), CliError> {
    let outbox = context.outbox().await?;
    let json = context.json();
    let store = outbox.store();
    let Some(every) = watch else {
        print!(
            "{}",
            render::status::overview(&store.overview(blocked).await?, json)
        );
        return Ok(());
    };
    let every = Duration::from_secs(every.max(1));
    let terminal = std::io::stdout().is_terminal() && !json;
    // The first read fails the command (a wrong URL or table); later ones
    // are shown in place and retried.
    let mut frame = render::status::overview(&store.overview(blocked).await?, json);
    loop {
        let mut stdout = std::io::stdout().lock();
        write!(
            stdout,
            "{}",
            render::status::watch_frame(every, &frame, terminal, json)
        )?;
        stdout.flush()?;
        drop(stdout);
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        frame = match store.overview(blocked).await {
            Ok(overview) => render::status::overview(&overview, json),
            Err(err) => render::status::watch_failure(&CliError::from(err)),
        };
    }
}
