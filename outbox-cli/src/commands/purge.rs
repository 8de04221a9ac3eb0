//! `outbox purge --published-before AGE` and `outbox purge inbox --consumer
//! NAME --before AGE`: bounded batches, a progress bar on a terminal, plain
//! lines otherwise.

use std::io::IsTerminal;
use std::time::Duration;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use txoutbox_sea_orm::{Inbox, Outbox};

use crate::confirm::confirm;
use crate::error::CliError;

/// `outbox purge`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct PurgeArgs {
    /// Delete published (and skipped) messages settled longer ago than
    /// this (`7d`, `12h`, `90min`).
    #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration, required = true)]
    published_before: Option<Duration>,
    #[command(flatten)]
    run: PurgeRun,
    #[command(subcommand)]
    inbox: Option<PurgeInbox>,
}

/// How a purge runs.
#[derive(Debug, Args)]
pub(crate) struct PurgeRun {
    /// Rows per DELETE statement.
    #[arg(long, default_value_t = 1000)]
    batch_size: u32,
    /// Do it without asking.
    #[arg(long, short)]
    yes: bool,
}

/// `outbox purge inbox`.
#[derive(Debug, Subcommand)]
pub(crate) enum PurgeInbox {
    /// Delete a consumer's inbox records (the "already processed" marks)
    /// older than AGE; a redelivery older than that is applied again.
    Inbox {
        /// The consumer.
        #[arg(long)]
        consumer: String,
        /// Processed longer ago than this (`7d`, `12h`).
        #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
        before: Duration,
        #[command(flatten)]
        run: PurgeRun,
    },
}

pub(super) async fn run(outbox: &Outbox, args: PurgeArgs) -> Result<(), CliError> {
    match (args.inbox, args.published_before) {
        (
            Some(PurgeInbox::Inbox {
                consumer,
                before,
                run,
            }),
            _,
        ) => {
            let inbox = Inbox::new(outbox, consumer.clone())?;
            let total = inbox.count_processed_before(before).await?;
            let what = format!(
                "delete {total} inbox record(s) of consumer {consumer} processed more than {} ago",
                humantime::format_duration(before)
            );
            if total == 0 {
                println!("nothing to purge: no inbox record of {consumer} is that old");
                return Ok(());
            }
            confirm(&what, run.yes)?;
            let progress = Progress::new(total, "inbox records");
            let purged = inbox
                .purge_reporting(before, run.batch_size, |done| progress.update(done))
                .await?;
            progress.finish(purged);
        }
        (None, Some(before)) => {
            let store = outbox.store();
            let total = store.count_published(before).await?;
            if total == 0 {
                println!(
                    "nothing to purge: no published message was settled more than {} ago",
                    humantime::format_duration(before)
                );
                return Ok(());
            }
            confirm(
                &format!(
                    "delete {total} published or skipped message(s) settled more than {} ago",
                    humantime::format_duration(before)
                ),
                args.run.yes,
            )?;
            let progress = Progress::new(total, "messages");
            let purged = store
                .purge_published_reporting(before, args.run.batch_size, |done| {
                    progress.update(done)
                })
                .await?;
            progress.finish(purged);
        }
        (None, None) => {
            return Err(CliError::Usage(
                "say what to purge: --published-before AGE, or inbox --consumer NAME --before AGE"
                    .to_owned(),
            ));
        }
    }
    Ok(())
}

/// A bar on a terminal (stderr), a line per batch otherwise (stdout).
struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    what: &'static str,
}

impl Progress {
    fn new(total: u64, what: &'static str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            if let Ok(style) =
                ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} ({per_sec}, {eta} left)")
            {
                bar.set_style(style);
            }
            bar.set_message(what);
            bar
        });
        Self { bar, total, what }
    }

    fn update(&self, done: u64) {
        match &self.bar {
            Some(bar) => bar.set_position(done),
            // The last batch is reported by `finish`.
            None if done < self.total => {
                println!("removed {done} of {} {} so far", self.total, self.what);
            }
            None => {}
        }
    }

    fn finish(self, purged: u64) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        println!("removed {purged} {}", self.what);
    }
}
