//! `ThreadedCopy`: a persistent pool of copy threads. Each batch is cut into
//! chunks that the calling thread and the pool threads claim dynamically,
//! so even a single 2 MiB frame is copied by all of them.

mod affinity;
mod config;
mod job;
mod pool_error;
mod worker;

#[cfg(test)]
mod tests;

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::copy_engine::{CopyEngine, copy_beside_on_thread};
use crate::error::CopyError;
use crate::plan::Plan;
use crate::range::{CopyRange, validate};
use crate::stats::CopyStats;

pub use config::{DEFAULT_CHUNK_SIZE, MIN_CHUNK_SIZE, ThreadedConfig, default_workers};
pub use pool_error::PoolError;

use job::{Job, lock};
use worker::{Shared, Worker};

/// Longest a caller held by [`ThreadedCopy::hold_caller_for_workers`]
/// waits for the pool: far beyond any wake-up, short enough that a pool
/// that never joins fails its test instead of hanging it.
const HOLD_LIMIT: Duration = Duration::from_secs(60);

/// Multi-threaded copy engine over a persistent thread pool.
///
/// Concurrent `copy` calls on one engine are supported by serializing
/// them: the pool works on one batch at a time (a second caller would only
/// compete for the same cores). Single-chunk batches and one-worker pools
/// are copied inline and never wait for the pool.
pub struct ThreadedCopy {
    name: String,
    config: ThreadedConfig,
    shared: Arc<Shared>,
    threads: Vec<Worker>,
    /// Held while the pool works on a batch.
    serial: Mutex<()>,
    /// Test hook: pool threads the caller waits for (see
    /// [`hold_caller_for_workers`](Self::hold_caller_for_workers)).
    hold_for_workers: AtomicUsize,
    /// Test hook copied into every job: participant that panics.
    #[cfg(test)]
    panic_in_worker: Mutex<Option<usize>>,
}

impl ThreadedCopy {
    /// Starts the pool described by `config`.
    pub fn new(config: ThreadedConfig) -> Result<Self, PoolError> {
        if config.workers == 0 {
            return Err(PoolError::ZeroWorkers);
        }
        if config.chunk_size < MIN_CHUNK_SIZE {
            return Err(PoolError::ChunkTooSmall(config.chunk_size));
        }
        let cpus = if config.pin {
            affinity::current_cpus().map_err(|source| PoolError::Affinity { source })?
        } else {
            Vec::new()
        };
        let name = format!(
            "threads:{}{}/{}",
            config.workers,
            if config.pin { ":pin" } else { "" },
            config.mode
        );
        // Built first so that a failure below shuts down (in `Drop`) the
        // threads already started.
        let mut engine = Self {
            name,
            config,
            shared: Arc::new(Shared::default()),
            threads: Vec::with_capacity(config.workers - 1),
            serial: Mutex::new(()),
            hold_for_workers: AtomicUsize::new(0),
            #[cfg(test)]
            panic_in_worker: Mutex::new(None),
        };
        for index in 1..config.workers {
            let cpu = (!cpus.is_empty()).then(|| cpus[index % cpus.len()]);
            engine
                .threads
                .push(worker::spawn(&engine.shared, index, cpu)?);
        }
        Ok(engine)
    }

    /// The configuration the pool was built with.
    pub fn config(&self) -> &ThreadedConfig {
        &self.config
    }

    /// For each pool thread (participants 1..), the CPUs it may run on, as
    /// the thread itself read them after pinning.
    pub fn worker_cpus(&self) -> Vec<Vec<usize>> {
        self.threads.iter().map(|w| w.cpus.clone()).collect()
    }

    /// Test hook: in every later batch the pool works on, the caller
    /// claims the first chunk, then copies nothing until `workers` pool
    /// threads have each copied a chunk (or every chunk is claimed), at
    /// most a minute (`HOLD_LIMIT`); 0 turns it off. Both the caller and the pool
    /// then copy part of every batch, whatever the scheduler does, so tests
    /// of the split do not count on it; no engine the VMM builds sets it.
    pub fn hold_caller_for_workers(&self, workers: usize) {
        self.hold_for_workers.store(workers, Ordering::Relaxed);
    }

    /// Makes participant `worker` panic on every chunk it claims (tests).
    #[cfg(test)]
    pub(crate) fn inject_panic_in_worker(&self, worker: Option<usize>) {
        *lock(&self.panic_in_worker) = worker;
    }
}

impl CopyEngine for ThreadedCopy {
    fn name(&self) -> &str {
        &self.name
    }

    unsafe fn copy(&self, ranges: &[CopyRange]) -> Result<CopyStats, CopyError> {
        // SAFETY: the caller upholds `copy`'s contract for this call.
        unsafe { self.run_batch(ranges, None) }
    }

    /// The caller runs `beside` as soon as the pool has the batch, and
    /// joins the copy after it: the work never waits for a CPU the pool's
    /// copy holds, and the copy never waits for the work. Without pool
    /// threads, `beside` gets a thread of its own.
    unsafe fn copy_beside(
        &self,
        ranges: &[CopyRange],
        beside: &(dyn Fn() + Sync),
    ) -> Result<CopyStats, CopyError> {
        if self.threads.is_empty() {
            // SAFETY: the caller upholds `copy`'s contract for this call.
            return unsafe { copy_beside_on_thread(self, ranges, beside) };
        }
        // SAFETY: the caller upholds `copy`'s contract for this call.
        unsafe { self.run_batch(ranges, Some(beside)) }
    }
}

impl ThreadedCopy {
    /// Copies the batch with the pool; with `beside`, the caller runs it
    /// once the pool has the batch (or before copying a batch of one
    /// chunk) and then copies its share.
    ///
    /// # Safety
    ///
    /// As for [`CopyEngine::copy`].
    unsafe fn run_batch(
        &self,
        ranges: &[CopyRange],
        beside: Option<&(dyn Fn() + Sync)>,
    ) -> Result<CopyStats, CopyError> {
        let start = Instant::now();
        let bytes = match validate(ranges) {
            Ok(bytes) => bytes,
            Err(e) => {
                // The work runs once whatever the copy does.
                beside.iter().for_each(|beside| beside());
                return Err(e.into());
            }
        };
        let plan = Plan::new(ranges, self.config.chunk_size);
        // SAFETY: the batch is validated and valid per this function's
        // contract until we return, and `job.wait()` runs before that.
        let job = unsafe { Job::new(plan, self.config.mode, self.config.workers) };
        #[cfg(test)]
        let job = job.with_panic_in_worker(*lock(&self.panic_in_worker));
        let job = Arc::new(job);
        let chunks = job.chunks();
        if self.threads.is_empty() || chunks <= 1 {
            if let Some(beside) = beside {
                beside();
            }
            job.run(0);
            job.wait();
        } else {
            let _serial = lock(&self.serial);
            let hold = self.hold_for_workers.load(Ordering::Relaxed);
            // The test hook's chunk for the caller, claimed before the pool
            // can take them all.
            let first = (hold > 0).then(|| job.claim()).flatten();
            self.shared.publish(Arc::clone(&job));
            // The pool copies meanwhile; the caller must still finish its
            // share and wait before a panic may unwind past the batch.
            let side = beside.map(|beside| panic::catch_unwind(AssertUnwindSafe(beside)));
            if let Some(index) = first {
                job.wait_for_workers(hold.min(self.threads.len()), HOLD_LIMIT);
                job.finish(0, index);
            }
            job.run(0);
            job.wait();
            self.shared.retract();
            if let Some(Err(payload)) = side {
                panic::resume_unwind(payload);
            }
        }
        let per_worker_chunks = job.outcome()?;
        Ok(CopyStats {
            bytes,
            elapsed: start.elapsed(),
            chunks,
            per_worker_chunks,
        })
    }
}

impl fmt::Debug for ThreadedCopy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadedCopy")
            .field("config", &self.config)
            .field("worker_cpus", &self.worker_cpus())
            .finish_non_exhaustive()
    }
}

impl Drop for ThreadedCopy {
    /// Stops and joins every pool thread. No batch can be in flight: `copy`
    /// borrows the engine and returns only after its batch is finished.
    fn drop(&mut self) {
        self.shared.shutdown();
        for worker in self.threads.drain(..) {
            // A thread that died by a panic outside a chunk has nothing
            // left to report; joining is all that matters here.
            let _ = worker.handle.join();
        }
    }
}
