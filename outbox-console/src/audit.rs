//! The console's record of changes: every change is a `tracing` event
//! (target `txoutbox_console::audit`) and one line of the recent actions
//! the console shows.

use std::collections::VecDeque;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::operator::Operator;

/// How many recent actions the console keeps in memory.
const KEPT: usize = 100;

/// One change made through the console.
#[derive(Debug, Clone)]
pub(crate) struct Action {
    pub(crate) at: DateTime<Utc>,
    pub(crate) by: String,
    pub(crate) what: String,
    pub(crate) outcome: String,
}

/// The recent actions, newest first.
#[derive(Debug, Default)]
pub(crate) struct AuditLog {
    actions: Mutex<VecDeque<Action>>,
}

impl AuditLog {
    /// Records that `by` did `what`, with `outcome`.
    pub(crate) fn record(&self, by: &Operator, what: &str, outcome: &str) {
        tracing::info!(
            target: "txoutbox_console::audit",
            operator = %by,
            action = what,
            outcome,
            "outbox console change"
        );
        let action = Action {
            at: Utc::now(),
            by: by.name().to_owned(),
            what: what.to_owned(),
            outcome: outcome.to_owned(),
        };
        let mut actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        actions.push_front(action);
        actions.truncate(KEPT);
    }

    /// The recent actions, newest first.
    pub(crate) fn recent(&self) -> Vec<Action> {
        self.actions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}
