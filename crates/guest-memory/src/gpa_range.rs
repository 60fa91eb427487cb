//! A range of guest-physical addresses: the one shape for RAM regions,
//! dirty-log spans, frames and the policy's view of guest RAM.

use serde::{Deserialize, Serialize};

/// A contiguous range of guest-physical addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpaRange {
    /// Guest-physical start address.
    pub gpa: u64,
    /// Length in bytes.
    pub len: u64,
}

impl GpaRange {
    /// `[gpa, gpa + len)`.
    pub const fn new(gpa: u64, len: u64) -> Self {
        GpaRange { gpa, len }
    }

    /// One past the last guest-physical address of the range.
    pub fn end(&self) -> u64 {
        self.gpa.saturating_add(self.len)
    }

    /// Whether `addr` lies in the range.
    pub fn contains(&self, addr: u64) -> bool {
        self.gpa <= addr && addr < self.end()
    }
}
