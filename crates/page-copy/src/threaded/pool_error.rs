//! Why a `ThreadedCopy` worker pool could not be built: `PoolError`.

use std::io;

use thiserror::Error;

use super::config::MIN_CHUNK_SIZE;

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
