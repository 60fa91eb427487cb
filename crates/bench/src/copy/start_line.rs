//! `StartLine`: lines up the threads of the parallel copy baseline so the
//! clock covers only copying: helpers announce they are running and spin
//! until the timer says go; the timer spins until every helper is done.
//! Spinning (not sleeping) keeps wake-up latency out of the measurement.

use std::hint;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::thread;

/// Spins before each wait starts yielding the CPU, so a helper that is
/// not running yet (being spawned, or preempted) gets a core.
const SPINS_BEFORE_YIELD: u32 = 1 << 10;

const WAIT: u8 = 0;
const GO: u8 = 1;
const ABORT: u8 = 2;

/// Shared by the timing thread and its helpers.
#[derive(Debug, Default)]
pub struct StartLine {
    ready: AtomicUsize,
    done: AtomicUsize,
    state: AtomicU8,
}

impl StartLine {
    /// Helper side: announces it is running, then waits for the decision;
    /// true means copy, false means quit.
    pub fn arrive_and_wait(&self) -> bool {
        self.ready.fetch_add(1, Ordering::AcqRel);
        let mut state = WAIT;
        spin_until(|| {
            state = self.state.load(Ordering::Acquire);
            state != WAIT
        });
        state == GO
    }

    /// Helper side: its copy is over (called from a drop guard, so a
    /// panicking helper still counts).
    pub fn finished(&self) {
        self.done.fetch_add(1, Ordering::AcqRel);
    }

    /// Timer side: waits until `helpers` helpers have arrived.
    pub fn wait_ready(&self, helpers: usize) {
        spin_until(|| self.ready.load(Ordering::Acquire) >= helpers);
    }

    /// Timer side: lets the helpers copy.
    pub fn go(&self) {
        self.state.store(GO, Ordering::Release);
    }

    /// Timer side: sends the helpers home without copying.
    pub fn abort(&self) {
        self.state.store(ABORT, Ordering::Release);
    }

    /// Timer side: waits until `helpers` helpers have finished.
    pub fn wait_done(&self, helpers: usize) {
        spin_until(|| self.done.load(Ordering::Acquire) >= helpers);
    }
}

/// Calls `finished` when dropped, on return or unwind.
#[derive(Debug)]
pub struct FinishGuard<'a>(pub &'a StartLine);

impl Drop for FinishGuard<'_> {
    fn drop(&mut self) {
        self.0.finished();
    }
}

/// Spins until `done()` is true, yielding after a while.
fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        if spins < SPINS_BEFORE_YIELD {
            spins += 1;
            hint::spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_start_on_go_and_are_counted_when_done() {
        let line = StartLine::default();
        let copied = AtomicUsize::new(0);
        thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    let _guard = FinishGuard(&line);
                    if line.arrive_and_wait() {
                        copied.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            line.wait_ready(3);
            assert_eq!(copied.load(Ordering::Relaxed), 0, "nobody starts early");
            line.go();
            line.wait_done(3);
            assert_eq!(copied.load(Ordering::Relaxed), 3);
        });
    }

    #[test]
    fn abort_sends_helpers_home() {
        let line = StartLine::default();
        thread::scope(|s| {
            let helper = s.spawn(|| line.arrive_and_wait());
            line.wait_ready(1);
            line.abort();
            assert!(!helper.join().unwrap());
        });
    }

    #[test]
    fn a_panicking_helper_still_finishes() {
        let line = StartLine::default();
        let result = thread::scope(|s| {
            s.spawn(|| {
                let _guard = FinishGuard(&line);
                panic!("helper failed");
            })
            .join()
        });
        assert!(result.is_err());
        line.wait_done(1);
    }
}
