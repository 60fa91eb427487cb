//! The signal that `vmm.shutdown` has been answered.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Set once, waited on by the VMM's main thread.
#[derive(Debug, Default)]
pub(crate) struct ShutdownSignal {
    requested: Mutex<bool>,
    changed: Condvar,
}

impl ShutdownSignal {
    /// Sets the signal and wakes every waiter.
    pub fn notify(&self) {
        *self
            .requested
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.changed.notify_all();
    }

    /// Whether it is set.
    pub fn is_set(&self) -> bool {
        *self
            .requested
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until it is set, at most `timeout` (`None`: forever);
    /// whether it is set.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut set = self
            .requested
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while !*set {
            set = match deadline {
                None => self
                    .changed
                    .wait(set)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    self.changed
                        .wait_timeout(set, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        true
    }
}
