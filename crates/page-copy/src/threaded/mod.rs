//! `ThreadedCopy`: a persistent pool of copy threads. Each batch is cut into
//! chunks that the calling thread and the pool threads claim dynamically,
//! so even a single 2 MiB frame is copied by all of them.

mod affinity;
mod job;
mod worker;

#[cfg(test)]
mod tests;

use std::fmt;
use std::io;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::copy_engine::CopyEngine;
use crate::error::CopyError;
use crate::mode::CopyMode;
use crate::plan::Plan;
use crate::range::{CopyRange, validate};
use crate::stats::CopyStats;

use job::{Job, lock};
use worker::{Shared, Worker};

/// Default chunk size: 256 KiB, eight chunks per 2 MiB frame.
pub const DEFAULT_CHUNK_SIZE: usize = 256 * 1024;

/// Smallest accepted chunk size (one base page).
pub const MIN_CHUNK_SIZE: usize = 4096;

/// Longest a caller held by [`ThreadedCopy::hold_caller_for_workers`]
/// waits for the pool: far beyond any wake-up, short enough that a pool
/// that never joins fails its test instead of hanging it.
pub const HOLD_LIMIT: Duration = Duration::from_secs(60);

/// Why a worker pool could not be built.
#[derive(Debug, Error)]
pub enum PoolError {
    /// `workers` was 0.
    #[error("worker count must be at least 1")]
    ZeroWorkers,
    /// The chunk size is below `MIN_CHUNK_SIZE`.
    #[error("chunk size {0} is below the {MIN_CHUNK_SIZE}-byte minimum")]
    ChunkTooSmall(usize),
    /// The OS refused a new thread.
    #[error("spawn copy worker {index}")]
    Spawn {
        /// Participant index of the thread.
        index: usize,
        /// The error from `std::thread::Builder::spawn`.
        #[source]
        source: io::Error,
    },
    /// `sched_setaffinity` failed.
    #[error("pin copy worker {index} to cpu {cpu}")]
    Pin {
        /// Participant index of the thread.
        index: usize,
        /// The CPU it was to run on.
        cpu: usize,
        /// The error from `sched_setaffinity`.
        #[source]
        source: io::Error,
    },
    /// `sched_getaffinity` failed.
    #[error("read cpu affinity")]
    Affinity {
        /// The error from `sched_getaffinity`.
        #[source]
        source: io::Error,
    },
    /// A thread exited before reporting that it started.
    #[error("copy worker {index} exited during startup")]
    StartupLost {
        /// Participant index of the thread.
        index: usize,
    },
}

/// How a `ThreadedCopy` is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadedConfig {
    /// Threads that copy, the calling thread included: the pool starts
    /// `workers - 1` threads. 1 means the caller copies alone.
    pub workers: usize,
    /// Pin pool thread `i` (1-based) to the `i % n`-th CPU this process
    /// may use (`sched_setaffinity`); the caller is left alone.
    pub pin: bool,
    /// Bytes per chunk (>= `MIN_CHUNK_SIZE`).
    pub chunk_size: usize,
    /// How each chunk is copied.
    pub mode: CopyMode,
}

impl ThreadedConfig {
    /// The default configuration with `workers` threads.
    pub fn with_workers(workers: usize) -> Self {
        Self {
            workers,
            ..Self::default()
        }
    }
}

impl Default for ThreadedConfig {
    /// `default_workers()` threads, unpinned, 256 KiB chunks, default mode.
    fn default() -> Self {
        Self {
            workers: default_workers(),
            pin: false,
            chunk_size: DEFAULT_CHUNK_SIZE,
            mode: CopyMode::default(),
        }
    }
}

/// `std::thread::available_parallelism`, or 1 when it cannot be read.
pub fn default_workers() -> usize {
    thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

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
    /// most [`HOLD_LIMIT`]; 0 turns it off. Both the caller and the pool
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
        let start = Instant::now();
        let bytes = validate(ranges)?;
        let plan = Plan::new(ranges, self.config.chunk_size);
        // SAFETY: the batch is validated and valid per this function's
        // contract until we return, and `job.wait()` runs before that.
        let job = unsafe { Job::new(plan, self.config.mode, self.config.workers) };
        #[cfg(test)]
        let job = job.with_panic_in_worker(*lock(&self.panic_in_worker));
        let job = Arc::new(job);
        let chunks = job.chunks();
        if self.threads.is_empty() || chunks <= 1 {
            job.run(0);
            job.wait();
        } else {
            let _serial = lock(&self.serial);
            let hold = self.hold_for_workers.load(Ordering::Relaxed);
            // The test hook's chunk for the caller, claimed before the pool
            // can take them all.
            let first = (hold > 0).then(|| job.claim()).flatten();
            self.shared.publish(Arc::clone(&job));
            if let Some(index) = first {
                job.wait_for_workers(hold.min(self.threads.len()), HOLD_LIMIT);
                job.finish(0, index);
            }
            job.run(0);
            job.wait();
            self.shared.retract();
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
