//! Locking shared state that stays consistent whatever panics.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, also after a panic elsewhere poisoned it: every holder in
/// this crate only pushes, takes or replaces under the lock, so what it
/// guards is consistent at any panic point.
pub(crate) fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
