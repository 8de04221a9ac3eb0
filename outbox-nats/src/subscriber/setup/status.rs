//! Where a subscriber's setup on the server stands, for its health (its own
//! file: the shared state holds it, the setup changes it).

use std::sync::{Mutex, PoisonError};

/// Where a subscriber's setup on the server stands, for its health.
#[derive(Debug, Default)]
pub(crate) struct SetupStatus(Mutex<SetupState>);

/// See [`SetupStatus`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum SetupState {
    /// Set up: its consumers are on the server.
    #[default]
    Done,
    /// Not yet: the broker has not answered since the start (or the
    /// stream is not there yet); the line says which.
    Waiting(String),
    /// The broker answered, and the setup failed (the subscriber stopped).
    Failed(String),
}

impl SetupStatus {
    pub(crate) fn get(&self) -> SetupState {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set(&self, state: SetupState) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }
}
