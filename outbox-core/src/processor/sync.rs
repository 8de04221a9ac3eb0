//! Locking the processor's shared state whatever panics.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, also after a panic elsewhere poisoned it: the processor's
/// holders only push, take or replace under the lock, so what it guards is
/// consistent at any panic point.
pub(super) fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
