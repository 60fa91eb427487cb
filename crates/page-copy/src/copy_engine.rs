//! The `CopyEngine` trait every engine implements.

use std::fmt;

use crate::error::CopyError;
use crate::range::CopyRange;
use crate::stats::CopyStats;

/// Copies batches of byte ranges (guest frames) from one mapping to another.
pub trait CopyEngine: Send + Sync + fmt::Debug {
    /// Short name for logs and metrics, e.g. `cpu/memcpy` or `threads:4:pin/nt`.
    fn name(&self) -> &str;

    /// Copies every range of the batch and returns when all bytes are in
    /// place (or the copy failed).
    ///
    /// The engines of this crate reject null pointers, lengths above
    /// `isize::MAX`, address wrap-around and overlaps between a destination
    /// and any other range before anything is copied; zero-length ranges
    /// are skipped.
    ///
    /// # Safety
    ///
    /// For the whole call, every range's `src` is readable and `dst`
    /// writable for `len` bytes; no two ranges' destinations overlap and no
    /// source overlaps a destination; no other thread writes the sources or
    /// accesses the destinations (the migrator write-protects them).
    unsafe fn copy(&self, ranges: &[CopyRange]) -> Result<CopyStats, CopyError>;
}
