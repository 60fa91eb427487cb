//! What one `CopyEngine::copy` call did: bytes, time, work split.

use std::time::Duration;

/// Result of one copy call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CopyStats {
    /// Bytes copied (sum of all range lengths).
    pub bytes: u64,
    /// Wall time of the call, validation included.
    pub elapsed: Duration,
    /// Units of work the batch was split into (chunks for the threaded
    /// engine, non-empty ranges for the single-thread engine).
    pub chunks: usize,
    /// Chunks done by each participant; index 0 is the calling thread,
    /// 1.. the pool threads. Sums to `chunks`.
    pub per_worker_chunks: Vec<usize>,
}

impl CopyStats {
    /// Throughput of the call in bytes per second (0 when no time passed).
    pub fn bytes_per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.bytes as f64 / secs
        } else {
            0.0
        }
    }

    /// Number of participants that copied at least one chunk.
    pub fn participants(&self) -> usize {
        self.per_worker_chunks.iter().filter(|&&n| n > 0).count()
    }
}
