//! The one locking rule of the mount: a poisoned lock is taken anyway.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`. Every update under the mount's locks is a single insert or
/// remove, so a poisoned lock still holds consistent data.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
