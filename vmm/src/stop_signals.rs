//! The operator's stop signals (SIGINT, SIGTERM) for the `tiervisor`
//! binary: the first asks for a graceful stop, which the caller carries
//! out (finish the migration batch in flight, stop the engine, ask the
//! guest to stop, wait a grace period, stop the vCPUs, write the report);
//! a second one ends the process at once, with the shell's status for
//! that signal (128 + its number), removing the files registered with
//! [`StopSignals::remove_on_exit`] (the API socket) first.
//!
//! The signals are blocked in every thread and taken by one thread of
//! ours with `sigwait`, so nothing runs in a signal handler and no vCPU or
//! engine thread is interrupted by them.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// A stop signal the operator sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, service managers).
    Terminate,
}

impl StopSignal {
    fn from_raw(signo: i32) -> Option<Self> {
        match signo {
            libc::SIGINT => Some(StopSignal::Interrupt),
            libc::SIGTERM => Some(StopSignal::Terminate),
            _ => None,
        }
    }

    /// The signal's number.
    pub fn number(self) -> i32 {
        match self {
            StopSignal::Interrupt => libc::SIGINT,
            StopSignal::Terminate => libc::SIGTERM,
        }
    }

    /// Its name, `SIGINT` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// The exit status of a process this signal ended at once (the
    /// shell's convention).
    pub fn immediate_exit_status(self) -> i32 {
        128 + self.number()
    }
}

#[derive(Debug, Default)]
struct Received {
    first: Option<StopSignal>,
    remove: Vec<PathBuf>,
}

/// What the signal thread shares with the rest of the process.
#[derive(Debug, Default)]
struct Shared {
    received: Mutex<Received>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Received> {
        self.received.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The process's stop signals, taken by a thread of their own.
#[derive(Clone, Debug)]
pub struct StopSignals {
    shared: Arc<Shared>,
}

/// The signal set of SIGINT and SIGTERM.
fn stop_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initializes the zeroed set it is given; sigaddset
    // adds valid signal numbers to it. Neither can fail with these inputs.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}

impl StopSignals {
    /// Blocks SIGINT and SIGTERM in the calling thread, and so in every
    /// thread it starts from now on, and starts the thread that takes
    /// them. Call it first thing in `main`, before any other thread
    /// exists: a thread started earlier would still die of the signal.
    pub fn install() -> io::Result<Self> {
        let set = stop_set();
        // SAFETY: `set` is a valid signal set; the old mask is not wanted.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        let shared = Arc::new(Shared::default());
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("stop-signals".into())
            .spawn(move || take_signals(&thread_shared, set))?;
        Ok(StopSignals { shared })
    }

    /// The first stop signal received, if any.
    pub fn received(&self) -> Option<StopSignal> {
        self.shared.lock().first
    }

    /// Waits up to `limit` for a first stop signal; the one received, if
    /// any.
    pub fn wait(&self, limit: Duration) -> Option<StopSignal> {
        let received = self.shared.lock();
        let (received, _) = self
            .shared
            .changed
            .wait_timeout_while(received, limit, |r| r.first.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        received.first
    }

    /// Removes `path` if a second signal ends the process at once (an API
    /// socket nobody will answer on any more).
    pub fn remove_on_exit(&self, path: PathBuf) {
        self.shared.lock().remove.push(path);
    }
}

/// The signal thread: records the first stop signal; on the second, ends
/// the process.
fn take_signals(shared: &Shared, set: libc::sigset_t) {
    loop {
        let mut signo = 0;
        // SAFETY: `set` is a valid set of signals blocked in every thread
        // of the process; `signo` is a live out-parameter.
        let rc = unsafe { libc::sigwait(&set, &mut signo) };
        let Some(signal) = (rc == 0).then(|| StopSignal::from_raw(signo)).flatten() else {
            continue;
        };
        let mut received = shared.lock();
        if received.first.is_none() {
            received.first = Some(signal);
            drop(received);
            eprintln!(
                "tiervisor: {}: stopping gracefully (send another signal to stop at once)",
                signal.name()
            );
            shared.changed.notify_all();
            continue;
        }
        for path in &received.remove {
            let _ = std::fs::remove_file(path);
        }
        eprintln!("tiervisor: {}: stopping at once", signal.name());
        std::process::exit(signal.immediate_exit_status());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_statuses_follow_the_shell() {
        assert_eq!(
            StopSignal::from_raw(libc::SIGINT),
            Some(StopSignal::Interrupt)
        );
        assert_eq!(
            StopSignal::from_raw(libc::SIGTERM),
            Some(StopSignal::Terminate)
        );
        assert_eq!(StopSignal::from_raw(libc::SIGUSR1), None);
        assert_eq!(StopSignal::Interrupt.immediate_exit_status(), 130);
        assert_eq!(StopSignal::Terminate.immediate_exit_status(), 143);
        assert_eq!(StopSignal::Terminate.name(), "SIGTERM");
    }
}
