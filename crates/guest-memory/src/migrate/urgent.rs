//! Scheduling priority for the write-protected part of a migration.
//!
//! While frames are write-protected, a vCPU that writes them waits for the
//! migrator thread. If that thread is preempted (by the guest's other
//! vCPUs, or anything else on a busy host) the wait grows by a scheduler
//! slice, milliseconds. [`Urgent`] lowers the calling thread's nice value
//! for the protected window and puts it back afterwards. Lowering nice
//! needs `CAP_SYS_NICE`; without it the guard does nothing.
//!
//! A low nice value only shortens the wait: the fair scheduler still gives
//! a nice-0 thread (a copy worker, a vCPU) a whole slice now and then, and
//! a migrator thread runnable meanwhile waits for it, a 4 ms tick on the
//! development machines. [`Urgent::realtime`] is for windows that are
//! short by construction (a pre-copy final group: a few pages to copy and
//! a remap): the thread runs `SCHED_FIFO` at the lowest real-time
//! priority, so it runs as soon as it is runnable; where the host refuses
//! real-time scheduling it falls back to the nice value.

/// Nice value of a migrator thread inside a protected window.
pub const URGENT_NICE: i32 = -10;

/// Real-time priority of a thread held by [`Urgent::realtime`]: the
/// lowest `SCHED_FIFO` priority, above every fair-scheduled thread and
/// below any real-time thread the host runs.
pub const URGENT_RT_PRIORITY: i32 = 1;

/// Holds the calling thread at [`URGENT_NICE`] (or its own, if lower), or
/// at [`URGENT_RT_PRIORITY`], until dropped.
#[derive(Debug)]
pub struct Urgent {
    tid: libc::id_t,
    restore: Option<i32>,
    /// Whether the thread was made real-time (from `SCHED_OTHER`, which
    /// the drop puts back).
    realtime: bool,
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
        Urgent {
            tid,
            restore,
            realtime: false,
        }
    }

    /// Makes the calling thread real-time (`SCHED_FIFO` at
    /// [`URGENT_RT_PRIORITY`]) if it is fair-scheduled and the host allows
    /// it, and lowers its nice value ([`new`](Self::new)) otherwise.
    pub fn realtime() -> Self {
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::gettid() };
        // SAFETY: a plain syscall on our own thread id.
        let policy = unsafe { libc::sched_getscheduler(tid) };
        if policy == libc::SCHED_OTHER {
            let param = libc::sched_param {
                sched_priority: URGENT_RT_PRIORITY,
            };
            // SAFETY: a plain syscall on our own thread id, `param` lives
            // across the call.
            if unsafe { libc::sched_setscheduler(tid, libc::SCHED_FIFO, &param) } == 0 {
                return Urgent {
                    tid: tid as libc::id_t,
                    restore: None,
                    realtime: true,
                };
            }
        }
        Self::new()
    }

    /// Whether the priority was raised (and will be restored).
    #[cfg(test)]
    pub fn raised(&self) -> bool {
        self.restore.is_some() || self.realtime
    }
}

impl Default for Urgent {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Urgent {
    fn drop(&mut self) {
        if self.realtime {
            let param = libc::sched_param { sched_priority: 0 };
            // Leaving real-time scheduling is always permitted; the nice
            // value was kept meanwhile.
            // SAFETY: a plain syscall on our own thread id, `param` lives
            // across the call.
            unsafe { libc::sched_setscheduler(self.tid as libc::pid_t, libc::SCHED_OTHER, &param) };
        }
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

    fn policy() -> libc::c_int {
        // SAFETY: a plain syscall on our own thread id.
        unsafe { libc::sched_getscheduler(libc::gettid()) }
    }

    #[test]
    fn realtime_while_held_and_fair_again_after() {
        std::thread::spawn(|| {
            let before = nice();
            assert_eq!(policy(), libc::SCHED_OTHER);
            {
                let u = Urgent::realtime();
                if policy() == libc::SCHED_FIFO {
                    assert!(u.raised());
                } else {
                    // Real-time refused: at most the nice value.
                    assert!(nice() <= before);
                }
            }
            assert_eq!(policy(), libc::SCHED_OTHER);
            assert_eq!(nice(), before);
        })
        .join()
        .unwrap();
    }
}
