//! How a `ThreadedCopy` pool is built: `ThreadedConfig`, its chunk-size
//! limits and the default worker count.

use std::num::NonZeroUsize;
use std::thread;

use crate::mode::CopyMode;

/// Default chunk size: 256 KiB, eight chunks per 2 MiB frame.
pub const DEFAULT_CHUNK_SIZE: usize = 256 * 1024;

/// Smallest accepted chunk size (one base page).
pub const MIN_CHUNK_SIZE: usize = 4096;

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
