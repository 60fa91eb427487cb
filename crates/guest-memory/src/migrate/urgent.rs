//! Scheduling priority for the write-protected part of a migration.
//!
//! While frames are write-protected, a vCPU that writes them waits for the
//! migrator thread. If that thread is preempted (by the guest's other
//! vCPUs, or anything else on a busy host) the wait grows by a scheduler
//! slice, milliseconds. [`Urgent`] lowers the calling thread's nice value
//! for the protected window and puts it back afterwards. Lowering nice
//! needs `CAP_SYS_NICE`; without it the guard does nothing.

/// Nice value of a migrator thread inside a protected window.
pub const URGENT_NICE: i32 = -10;

/// Holds the calling thread at [`URGENT_NICE`] (or its own, if lower)
/// until dropped.
#[derive(Debug)]
pub struct Urgent {
    tid: libc::id_t,
    restore: Option<i32>,
}

impl Urgent {
    /// Raises the calling thread's priority, if the process may.
    pub fn new() -> Self {
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::gettid() } as libc::id_t;
        // getpriority returns -1 both as a nice value and on error; a
        // failed read just leaves the priority alone.
        // SAFETY: a plain syscall on our own thread id.
        let old = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
        let mut restore = None;
        if old > URGENT_NICE {
            // SAFETY: a plain syscall on our own thread id.
            let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, URGENT_NICE) };
            if rc == 0 {
                restore = Some(old);
            }
        }
        Urgent { tid, restore }
    }

    /// Whether the priority was raised (and will be restored).
    #[cfg(test)]
    pub fn raised(&self) -> bool {
        self.restore.is_some()
    }
}

impl Default for Urgent {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Urgent {
    fn drop(&mut self) {
        if let Some(old) = self.restore {
            // Raising nice back is always permitted.
            // SAFETY: a plain syscall on our own thread id.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, self.tid, old) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nice() -> i32 {
        // SAFETY: a plain syscall on our own thread id.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[test]
    fn raises_while_held_and_restores() {
        // A fresh thread, so other tests' threads are not affected.
        std::thread::spawn(|| {
            let before = nice();
            {
                let u = Urgent::new();
                if u.raised() {
                    assert_eq!(nice(), URGENT_NICE);
                } else {
                    assert_eq!(nice(), before, "no privilege: unchanged");
                }
            }
            assert_eq!(nice(), before);
        })
        .join()
        .unwrap();
    }
}
