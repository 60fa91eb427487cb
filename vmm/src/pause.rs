//! The pause gate: a gate every vCPU thread passes before it enters the
//! guest. Pausing closes it and waits until every live vCPU has parked at
//! it (a vCPU that has ended counts as parked); resuming opens it. Two
//! parties close it independently: the operator (pause / resume, not
//! nested) and the migrator's write stop (hold / release, nested); the
//! gate opens when neither holds it, so a migration never resumes a VM
//! the operator paused. The gate also keeps the time spent closed, so a
//! VM's timeout can leave it out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use thiserror::Error;

/// How often a pause re-kicks vCPUs that have not parked yet: a kick that
/// lands just before a vCPU enters KVM_RUN is lost, the next one is not.
const REKICK_EVERY: Duration = Duration::from_millis(10);

/// Why a pause did not take.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PauseError {
    /// Some vCPUs did not park in time; the gate was opened again.
    #[error("{parked} of {live} vCPUs parked within {waited:?}; the VM was left running")]
    NotParked {
        /// vCPUs parked when the wait ended.
        parked: usize,
        /// vCPUs alive.
        live: usize,
        /// How long the pause waited.
        waited: Duration,
    },
}

#[derive(Debug, Default)]
struct GateState {
    /// Paused by the operator.
    paused: bool,
    /// Write-stop holds not yet released.
    holds: usize,
    /// vCPU threads waiting at the gate.
    parked: usize,
    /// vCPU threads started and not yet ended.
    live: usize,
    paused_since: Option<Instant>,
    paused_total: Duration,
}

/// The gate shared by a VM's vCPU threads and whoever pauses them.
#[derive(Debug, Default)]
pub struct PauseGate {
    /// Mirrors `GateState::paused` so a vCPU's check before each KVM_RUN
    /// takes no lock.
    closed: AtomicBool,
    state: Mutex<GateState>,
    changed: Condvar,
}

impl GateState {
    fn closed(&self) -> bool {
        self.paused || self.holds > 0
    }
}

impl PauseGate {
    /// An open gate with no vCPUs.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // Every critical section leaves the counters consistent, so a
        // panic in one (there is nothing that can panic) poisons nothing.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a vCPU thread as live until the returned guard drops (drop
    /// it when the thread ends, or with the closure if the thread never
    /// starts).
    pub fn vcpu_started(self: &Arc<Self>) -> LiveVcpu {
        self.lock().live += 1;
        LiveVcpu { gate: self.clone() }
    }

    /// Called by a vCPU thread before it enters the guest: parks while the
    /// gate is closed and `stop` is not raised.
    pub fn park_if_closed(&self, stop: &AtomicBool) {
        if !self.closed.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.lock();
        if !state.closed() || stop.load(Ordering::Acquire) {
            return;
        }
        state.parked += 1;
        self.changed.notify_all();
        // `stop` is read under the lock, and whoever raises it takes the
        // lock before notifying (`wake`): the wake-up cannot be missed.
        while state.closed() && !stop.load(Ordering::Acquire) {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.parked -= 1;
    }

    /// Closes the gate and waits until every live vCPU is parked, calling
    /// `kick` (which interrupts KVM_RUN) now and every few milliseconds.
    /// After `limit` without all parked, opens the gate again and fails:
    /// the VM is then exactly as before.
    pub fn pause(&self, kick: &dyn Fn(), limit: Duration) -> Result<(), PauseError> {
        let started = self.close(|s| s.paused = true);
        self.wait_parked(started, kick, limit)
            .inspect_err(|_| self.resume())
    }

    /// Like [`pause`](Self::pause), for the migrator's write stop: holds
    /// nest, and each is ended by one [`release`](Self::release). On
    /// failure the hold is released.
    pub fn hold(&self, kick: &dyn Fn(), limit: Duration) -> Result<(), PauseError> {
        let started = self.close(|s| s.holds += 1);
        self.wait_parked(started, kick, limit)
            .inspect_err(|_| self.release())
    }

    /// Ends one [`hold`](Self::hold); the gate opens unless another hold
    /// or an operator pause keeps it closed.
    pub fn release(&self) {
        let mut state = self.lock();
        state.holds = state.holds.saturating_sub(1);
        self.open_if_free(&mut state);
    }

    /// Applies `closer` and closes the gate; returns when.
    fn close(&self, closer: impl FnOnce(&mut GateState)) -> Instant {
        let started = Instant::now();
        let mut state = self.lock();
        closer(&mut state);
        if state.paused_since.is_none() {
            state.paused_since = Some(started);
        }
        self.closed.store(true, Ordering::Release);
        started
    }

    /// Opens the gate if nothing holds it closed.
    fn open_if_free(&self, state: &mut GateState) {
        if state.closed() {
            return;
        }
        if let Some(since) = state.paused_since.take() {
            state.paused_total += since.elapsed();
        }
        self.closed.store(false, Ordering::Release);
        self.changed.notify_all();
    }

    /// Waits until every live vCPU is parked, kicking every few
    /// milliseconds; fails after `limit` (the caller reopens).
    fn wait_parked(
        &self,
        started: Instant,
        kick: &dyn Fn(),
        limit: Duration,
    ) -> Result<(), PauseError> {
        loop {
            kick();
            let state = self.lock();
            let (state, _) = self
                .changed
                .wait_timeout_while(state, REKICK_EVERY, |s| s.parked < s.live)
                .unwrap_or_else(PoisonError::into_inner);
            if state.parked >= state.live {
                return Ok(());
            }
            let waited = started.elapsed();
            if waited >= limit {
                let (parked, live) = (state.parked, state.live);
                return Err(PauseError::NotParked {
                    parked,
                    live,
                    waited,
                });
            }
        }
    }

    /// Ends the operator's pause: parked vCPUs run again unless a write
    /// stop still holds them.
    pub fn resume(&self) {
        let mut state = self.lock();
        state.paused = false;
        self.open_if_free(&mut state);
    }

    /// Wakes parked vCPUs so they see a stop flag raised before this call.
    pub fn wake(&self) {
        let _state = self.lock();
        self.changed.notify_all();
    }

    /// Whether the operator paused the VM (a write stop's hold does not
    /// count).
    pub fn is_paused(&self) -> bool {
        self.lock().paused
    }

    /// vCPUs parked and vCPUs live, now.
    pub fn counts(&self) -> (usize, usize) {
        let state = self.lock();
        (state.parked, state.live)
    }

    /// Time spent with the gate closed so far, the current closing
    /// included.
    pub fn paused_time(&self) -> Duration {
        let state = self.lock();
        state.paused_total + state.paused_since.map_or(Duration::ZERO, |s| s.elapsed())
    }
}

/// A live vCPU thread as the gate counts it; dropping it counts the thread
/// as ended (which a pause treats as parked).
#[derive(Debug)]
pub struct LiveVcpu {
    gate: Arc<PauseGate>,
}

impl Drop for LiveVcpu {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.live -= 1;
        self.gate.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    /// Waits until `count` passes `before` (a released thread runs again),
    /// at most a minute; whether it did.
    fn runs_again(count: &AtomicU64, before: u64) -> bool {
        let start = std::time::Instant::now();
        while count.load(Ordering::Relaxed) <= before {
            if start.elapsed() > Duration::from_secs(60) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// A stand-in vCPU thread: counts loop iterations, passing the gate
    /// each time, until `stop`.
    fn spin(
        gate: &Arc<PauseGate>,
        stop: &Arc<AtomicBool>,
        count: &Arc<AtomicU64>,
    ) -> std::thread::JoinHandle<()> {
        let live = gate.vcpu_started();
        let (gate, stop, count) = (gate.clone(), stop.clone(), count.clone());
        std::thread::spawn(move || {
            let _live = live;
            while !stop.load(Ordering::Acquire) {
                gate.park_if_closed(&stop);
                count.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    }

    #[test]
    fn pause_parks_every_thread_and_resume_releases_them() {
        let gate = Arc::new(PauseGate::new());
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..3).map(|_| spin(&gate, &stop, &count)).collect();
        gate.pause(&|| {}, Duration::from_secs(5)).unwrap();
        assert_eq!(gate.counts(), (3, 3));
        let before = count.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(count.load(Ordering::Relaxed), before, "parked threads ran");
        gate.resume();
        assert!(runs_again(&count, before), "resumed threads run");
        assert!(gate.paused_time() >= Duration::from_millis(50));
        stop.store(true, Ordering::Release);
        gate.wake();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(gate.counts(), (0, 0));
    }

    #[test]
    fn write_stop_holds_nest_and_never_end_an_operator_pause() {
        let gate = Arc::new(PauseGate::new());
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..2).map(|_| spin(&gate, &stop, &count)).collect();
        // Whether a parked thread ran in 30 ms: a wrong "yes" can only
        // come from a real bug, and the "yes" expected is waited for.
        let ran = |c: &AtomicU64| {
            let before = c.load(Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(30));
            c.load(Ordering::Relaxed) > before
        };
        gate.pause(&|| {}, Duration::from_secs(5)).unwrap();
        gate.hold(&|| {}, Duration::from_secs(5)).unwrap();
        gate.hold(&|| {}, Duration::from_secs(5)).unwrap();
        gate.release();
        assert!(gate.is_paused());
        gate.release();
        assert!(!ran(&count), "the operator's pause outlives the holds");
        gate.hold(&|| {}, Duration::from_secs(5)).unwrap();
        gate.resume();
        assert!(!gate.is_paused());
        assert!(!ran(&count), "a hold outlives the operator's pause");
        let before = count.load(Ordering::Relaxed);
        gate.release();
        assert!(runs_again(&count, before), "open once neither holds it");
        stop.store(true, Ordering::Release);
        gate.wake();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn stop_releases_parked_threads_and_ended_threads_count_as_parked() {
        let gate = Arc::new(PauseGate::new());
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..2).map(|_| spin(&gate, &stop, &count)).collect();
        gate.pause(&|| {}, Duration::from_secs(5)).unwrap();
        stop.store(true, Ordering::Release);
        gate.wake();
        for t in threads {
            t.join().unwrap();
        }
        // Nothing is live: a pause is immediate.
        gate.pause(&|| {}, Duration::from_millis(1)).unwrap();
    }

    #[test]
    fn a_thread_that_never_parks_fails_the_pause_and_reopens_the_gate() {
        let gate = Arc::new(PauseGate::new());
        let _stuck = gate.vcpu_started();
        let kicks = AtomicU64::new(0);
        let e = gate
            .pause(
                &|| {
                    kicks.fetch_add(1, Ordering::Relaxed);
                },
                // A hundred re-kick periods: a test thread descheduled for
                // most of the limit still sees the second kick.
                REKICK_EVERY * 100,
            )
            .unwrap_err();
        assert!(
            matches!(
                e,
                PauseError::NotParked {
                    parked: 0,
                    live: 1,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            kicks.load(Ordering::Relaxed) >= 2,
            "re-kicked while waiting"
        );
        assert!(!gate.is_paused());
    }
}
