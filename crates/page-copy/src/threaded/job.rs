//! `Job`: one batch being copied by the pool — chunk claiming, completion
//! counting, panic capture.

use std::any::Any;
use std::hint;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::error::CopyError;
use crate::mode::CopyMode;
use crate::plan::Plan;

/// Polls of the completion counter before the caller sleeps: the last
/// chunks in flight on other threads usually finish within microseconds,
/// far sooner than a futex sleep/wake round trip.
const WAIT_SPINS: usize = 4096;

/// A batch shared by the caller and the pool threads. Participants claim
/// chunk indexes from one atomic counter (dynamic balancing: a descheduled
/// thread does not hold up the rest) and count finished chunks in another;
/// the caller returns only once every chunk is finished, which is what
/// keeps the batch's memory valid for everyone who copies.
#[derive(Debug)]
pub(super) struct Job {
    plan: Plan,
    mode: CopyMode,
    /// Next chunk index to hand out.
    next: AtomicUsize,
    /// Chunks finished (copied, skipped after a failure, or panicked).
    completed: AtomicUsize,
    /// Set on the first panic: the remaining chunks are skipped.
    failed: AtomicBool,
    /// The first panic: participant index and message.
    failure: Mutex<Option<(usize, String)>>,
    /// Chunks copied by each participant (0 = caller).
    per_worker: Box<[AtomicUsize]>,
    done: Mutex<()>,
    done_cv: Condvar,
    /// Test hook: participant that panics on every chunk it claims.
    #[cfg(test)]
    panic_in_worker: Option<usize>,
}

impl Job {
    /// A job for `participants` threads over `plan`.
    ///
    /// # Safety
    ///
    /// The batch `plan` was built from is validated and stays valid per the
    /// `CopyEngine::copy` contract until `wait` has returned.
    pub(super) unsafe fn new(plan: Plan, mode: CopyMode, participants: usize) -> Self {
        Self {
            plan,
            mode,
            next: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            per_worker: (0..participants).map(|_| AtomicUsize::new(0)).collect(),
            done: Mutex::new(()),
            done_cv: Condvar::new(),
            #[cfg(test)]
            panic_in_worker: None,
        }
    }

    /// Test hook: participant `worker` panics on every chunk it claims.
    #[cfg(test)]
    pub(super) fn with_panic_in_worker(mut self, worker: Option<usize>) -> Self {
        self.panic_in_worker = worker;
        self
    }

    /// Number of chunks in the job.
    pub(super) fn chunks(&self) -> usize {
        self.plan.len()
    }

    /// Claims and copies chunks as participant `worker` until none are
    /// left. Never unwinds: a panic while copying is recorded instead.
    pub(super) fn run(&self, worker: usize) {
        while let Some(index) = self.claim() {
            self.finish(worker, index);
        }
    }

    /// Hands out the next chunk index, if any is left.
    pub(super) fn claim(&self) -> Option<usize> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        (index < self.plan.len()).then_some(index)
    }

    /// Copies claimed chunk `index` as participant `worker` (skipped once
    /// the job failed) and counts it finished.
    pub(super) fn finish(&self, worker: usize, index: usize) {
        if !self.failed.load(Ordering::Relaxed) {
            let copied = panic::catch_unwind(AssertUnwindSafe(|| {
                #[cfg(test)]
                if self.panic_in_worker == Some(worker) {
                    panic!("injected panic in participant {worker}");
                }
                // SAFETY: `index` was handed out once, to this thread, and
                // is not yet counted completed, so the creator is still
                // waiting and the batch is valid (`Job::new`).
                unsafe { self.plan.copy_chunk(index, self.mode) };
            }));
            match copied {
                Ok(()) => {
                    self.per_worker[worker].fetch_add(1, Ordering::Relaxed);
                }
                Err(payload) => self.record_panic(worker, payload.as_ref()),
            }
        }
        // Release: publishes this chunk's bytes to the caller's acquire.
        if self.completed.fetch_add(1, Ordering::AcqRel) + 1 == self.plan.len() {
            let _guard = lock(&self.done);
            self.done_cv.notify_all();
        }
    }

    /// Test hook of [`ThreadedCopy::hold_caller_for_workers`]: waits until
    /// `workers` pool threads have each copied a chunk, or no chunk is left
    /// to claim, or the job failed, at most `limit`.
    ///
    /// [`ThreadedCopy::hold_caller_for_workers`]: super::ThreadedCopy::hold_caller_for_workers
    pub(super) fn wait_for_workers(&self, workers: usize, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        let total = self.plan.len();
        while std::time::Instant::now() < deadline {
            let joined = self.per_worker[1..]
                .iter()
                .filter(|c| c.load(Ordering::Relaxed) > 0)
                .count();
            if joined >= workers
                || self.next.load(Ordering::Relaxed) >= total
                || self.failed.load(Ordering::Relaxed)
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Blocks until every chunk is finished; afterwards no participant
    /// touches the batch's memory again.
    pub(super) fn wait(&self) {
        let total = self.plan.len();
        for _ in 0..WAIT_SPINS {
            if self.completed.load(Ordering::Acquire) >= total {
                return;
            }
            hint::spin_loop();
        }
        let mut guard = lock(&self.done);
        while self.completed.load(Ordering::Acquire) < total {
            guard = self
                .done_cv
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// After `wait`: chunks copied per participant, or the first panic.
    pub(super) fn outcome(&self) -> Result<Vec<usize>, CopyError> {
        if let Some((worker, message)) = lock(&self.failure).take() {
            return Err(CopyError::WorkerPanicked { worker, message });
        }
        Ok(self
            .per_worker
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect())
    }

    fn record_panic(&self, worker: usize, payload: &(dyn Any + Send)) {
        self.failed.store(true, Ordering::Relaxed);
        let mut failure = lock(&self.failure);
        if failure.is_none() {
            *failure = Some((worker, panic_message(payload)));
        }
    }
}

/// The text of a panic payload (`panic!` gives `&str` or `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Locks `mutex`, ignoring poisoning: every critical section here leaves
/// its data consistent, and copying never panics while holding a lock.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
