//! True access and write probabilities per frame, from one phase's
//! ground-truth ranges, and what a placement of frames would earn.

use guest_abi::{AccessRange, GpaRange};
use serde::Serialize;
use thiserror::Error;

use crate::frame_map::{FrameMap, FrameMapError};
use crate::ranking;

/// Errors of the oracle.
#[derive(Debug, Error, PartialEq)]
pub enum OracleError {
    /// The RAM layout is invalid.
    #[error("invalid RAM layout")]
    Layout(#[from] FrameMapError),
    /// A range is empty or partly outside RAM.
    #[error("range {index} ({gpa:#x}+{len:#x}) is empty or not inside RAM")]
    OutsideRam {
        /// Position in the descriptor.
        index: usize,
        /// Range start.
        gpa: u64,
        /// Range length.
        len: u64,
    },
    /// A weight is negative or not finite.
    #[error("range {index}: weight {weight} is not a finite non-negative number")]
    Weight {
        /// Position in the descriptor.
        index: usize,
        /// The weight.
        weight: f64,
    },
    /// A write fraction is outside `[0, 1]`.
    #[error("range {index}: write fraction {fraction} not in [0, 1]")]
    WriteFraction {
        /// Position in the descriptor.
        index: usize,
        /// The fraction.
        fraction: f64,
    },
    /// A placement has the wrong number of frames.
    #[error("placement has {placement} frames, the oracle {frames}")]
    PlacementLength {
        /// Entries in the placement.
        placement: usize,
        /// Frames in the oracle.
        frames: usize,
    },
}

/// What the workload declared, per frame.
///
/// `access[f]` is the probability that an access lands in frame `f`: each
/// range receives `weight / sum(weights)` of the accesses, spread uniformly
/// over its bytes, so a frame gets each range's share in proportion to the
/// bytes they overlap; overlapping ranges add. `write[f]` is the
/// probability that an access is a write to `f` (each range's share times
/// its write fraction), so `write[f] / access[f]` is the frame's write
/// share. Ranges whose weights sum to zero (or none) describe no accesses:
/// every probability is 0.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Oracle {
    access: Vec<f64>,
    write: Vec<f64>,
}

impl Oracle {
    /// The oracle of `ranges` over `ram` (sorted, disjoint RAM regions)
    /// cut into frames of `frame_size` bytes, numbered across regions.
    pub fn new(
        ram: &[GpaRange],
        frame_size: u64,
        ranges: &[AccessRange],
    ) -> Result<Self, OracleError> {
        let map = FrameMap::new(ram, frame_size)?;
        let mut total = 0.0;
        for (index, r) in ranges.iter().enumerate() {
            if !r.weight.is_finite() || r.weight < 0.0 {
                return Err(OracleError::Weight {
                    index,
                    weight: r.weight,
                });
            }
            if !(0.0..=1.0).contains(&r.write_fraction) {
                return Err(OracleError::WriteFraction {
                    index,
                    fraction: r.write_fraction,
                });
            }
            let inside =
                r.gpa.checked_add(r.len).is_some() && map.bytes_in_ram(r.gpa, r.len) == r.len;
            if r.len == 0 || !inside {
                return Err(OracleError::OutsideRam {
                    index,
                    gpa: r.gpa,
                    len: r.len,
                });
            }
            total += r.weight;
        }
        let mut access = vec![0.0; map.frames()];
        let mut write = vec![0.0; map.frames()];
        if total > 0.0 {
            for r in ranges.iter().filter(|r| r.weight > 0.0) {
                let share = r.weight / total;
                map.for_each_overlap(r.gpa, r.len, |frame, bytes| {
                    let p = share * (bytes as f64 / r.len as f64);
                    access[frame] += p;
                    write[frame] += p * r.write_fraction;
                });
            }
        }
        Ok(Oracle { access, write })
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.access.len()
    }

    /// Probability that an access lands in `frame`.
    pub fn access_probability(&self, frame: usize) -> Option<f64> {
        self.access.get(frame).copied()
    }

    /// Probability that an access is a write to `frame`.
    pub fn write_probability(&self, frame: usize) -> Option<f64> {
        self.write.get(frame).copied()
    }

    /// Access probability of every frame, by frame index.
    pub fn access_probabilities(&self) -> &[f64] {
        &self.access
    }

    /// Write probability of every frame, by frame index.
    pub fn write_probabilities(&self) -> &[f64] {
        &self.write
    }

    /// The `k` most accessed frames (all if fewer), most accessed first;
    /// equal probability ranks the lower index first.
    pub fn top_k(&self, k: usize) -> Vec<usize> {
        ranking::hottest(&self.access, k)
    }

    /// The best placement with room for `k` frames on the fast tier: the
    /// [`top_k`](Self::top_k) frames.
    pub fn placement(&self, k: usize) -> Vec<bool> {
        let mut fast = vec![false; self.frames()];
        for frame in self.top_k(k) {
            fast[frame] = true;
        }
        fast
    }

    /// Share of accesses that a placement serves from the fast tier:
    /// the access probability of the frames marked fast.
    pub fn dram_hit_ratio(&self, placement_fast: &[bool]) -> Result<f64, OracleError> {
        if placement_fast.len() != self.frames() {
            return Err(OracleError::PlacementLength {
                placement: placement_fast.len(),
                frames: self.frames(),
            });
        }
        Ok(self
            .access
            .iter()
            .zip(placement_fast)
            .filter(|(_, fast)| **fast)
            .map(|(p, _)| p)
            .sum())
    }
}
