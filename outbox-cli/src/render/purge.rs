//! `outbox purge`: what there is to purge, and its progress: a bar on a
//! terminal (stderr), a line per batch otherwise (stdout).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// No published message old enough.
pub(crate) fn no_published(before: Duration) -> String {
    format!(
        "nothing to purge: no published message was settled more than {} ago\n",
        humantime::format_duration(before)
    )
}

/// No inbox record of `consumer` old enough.
pub(crate) fn no_inbox_records(consumer: &str) -> String {
    format!("nothing to purge: no inbox record of {consumer} is that old\n")
}

/// A purge's progress, shown as it goes.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    what: &'static str,
}

impl Progress {
    /// Removing `total` of `what` ("messages", "inbox records").
    pub(crate) fn new(total: u64, what: &'static str) -> Self {
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

    /// `done` removed so far.
    pub(crate) fn update(&self, done: u64) {
        match &self.bar {
            Some(bar) => bar.set_position(done),
            // The last batch is reported by `finish`.
            None if done < self.total => {
                println!("removed {done} of {} {} so far", self.total, self.what);
            }
            None => {}
        }
    }

    /// `purged` removed in all.
    pub(crate) fn finish(self, purged: u64) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        println!("removed {purged} {}", self.what);
    }
}
