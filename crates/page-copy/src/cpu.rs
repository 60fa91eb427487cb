//! `CpuCopy`: the single-thread engine, the baseline every other engine is
//! measured against.

use std::time::Instant;

use crate::copy_engine::CopyEngine;
use crate::error::CopyError;
use crate::mode::CopyMode;
use crate::range::{CopyRange, validate};
use crate::stats::CopyStats;

/// Copies the batch range by range on the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuCopy {
    mode: CopyMode,
}

impl CpuCopy {
    /// A single-thread engine using `mode`.
    pub fn new(mode: CopyMode) -> Self {
        Self { mode }
    }

    /// The copy strategy in use.
    pub fn mode(&self) -> CopyMode {
        self.mode
    }
}

impl Default for CpuCopy {
    /// Uses the default (fastest measured) `CopyMode`.
    fn default() -> Self {
        Self::new(CopyMode::default())
    }
}

impl CopyEngine for CpuCopy {
    fn name(&self) -> &str {
        match self.mode {
            CopyMode::Memcpy => "cpu/memcpy",
            CopyMode::NonTemporal => "cpu/nt",
        }
    }

    unsafe fn copy(&self, ranges: &[CopyRange]) -> Result<CopyStats, CopyError> {
        let start = Instant::now();
        let bytes = validate(ranges)?;
        let mut chunks = 0;
        for range in ranges.iter().filter(|r| r.len > 0) {
            // SAFETY: validated non-null, non-wrapping and non-overlapping;
            // the caller guarantees the memory is valid for the call.
            unsafe { self.mode.copy(range.src, range.dst, range.len) };
            chunks += 1;
        }
        Ok(CopyStats {
            bytes,
            elapsed: start.elapsed(),
            chunks,
            per_worker_chunks: vec![chunks],
        })
    }
}
