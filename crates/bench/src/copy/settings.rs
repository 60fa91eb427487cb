//! `CopySettings`: what the copy suite measures, from `--quick` and the
//! hidden `--bytes` override, and the thread counts it scales to.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use page_copy::DEFAULT_CHUNK_SIZE;

use crate::size::format_size;

/// Range ("chunk") sizes a migration batch is made of: base pages, a
/// mid-size frame, huge-page frames.
pub const RANGE_SIZES: [u64; 3] = [4 << 10, 64 << 10, 2 << 20];
/// Bytes per batch in the full run.
pub const FULL_BATCH: u64 = 256 << 20;
/// Bytes per batch in `--quick` mode.
pub const QUICK_BATCH: u64 = 64 << 20;
/// Timed repetitions of each measurement in the full run: on a shared
/// 2-core machine single runs vary by 10–40%, and the median of 9 settles
/// where the median of 5 still moves.
pub const FULL_REPETITIONS: usize = 9;
/// Timed repetitions in `--quick` mode.
pub const QUICK_REPETITIONS: usize = 3;
/// Seed of the source data and of the range order ("tier" in ASCII).
pub const SEED: u64 = 0x7469_6572;

/// Why the settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingsError {
    /// The batch cannot be cut into whole ranges of every size.
    #[error("batch size {batch} bytes is not a positive multiple of {largest} bytes")]
    BatchNotMultiple {
        /// The batch size asked for.
        batch: u64,
        /// The largest range size.
        largest: u64,
    },
    /// The batch does not fit in this process's address space.
    #[error("batch size {0} bytes does not fit in memory")]
    TooLarge(u64),
    /// No thread count.
    #[error("thread count must be at least 1")]
    ZeroThreads,
}

/// What the copy suite measures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopySettings {
    /// Bytes copied by every timed run (one batch).
    pub batch_bytes: u64,
    /// Range sizes the batch is cut into, one measurement set each.
    pub range_sizes: Vec<u64>,
    /// Timed repetitions per measurement (after one verified warm-up).
    pub repetitions: usize,
    /// Largest thread count (`available_parallelism`); engines and the
    /// parallel baseline run with every count from 1 up to it.
    pub max_threads: usize,
    /// Chunk size of the threaded engines (their default).
    pub engine_chunk_size: u64,
    /// Seed of the source bytes and the range order.
    pub seed: u64,
}

impl CopySettings {
    /// Settings for a full or `quick` run on `max_threads` CPUs, with the
    /// batch size overridden by `batch_bytes` when given.
    pub fn new(
        quick: bool,
        batch_bytes: Option<u64>,
        max_threads: usize,
    ) -> Result<Self, SettingsError> {
        let largest = RANGE_SIZES[RANGE_SIZES.len() - 1];
        let batch = batch_bytes.unwrap_or(if quick { QUICK_BATCH } else { FULL_BATCH });
        if batch == 0 || batch % largest != 0 {
            return Err(SettingsError::BatchNotMultiple { batch, largest });
        }
        if usize::try_from(batch).map_or(true, |b| b > isize::MAX as usize / 2) {
            return Err(SettingsError::TooLarge(batch));
        }
        if max_threads == 0 {
            return Err(SettingsError::ZeroThreads);
        }
        Ok(Self {
            batch_bytes: batch,
            range_sizes: RANGE_SIZES.to_vec(),
            repetitions: if quick {
                QUICK_REPETITIONS
            } else {
                FULL_REPETITIONS
            },
            max_threads,
            engine_chunk_size: DEFAULT_CHUNK_SIZE as u64,
            seed: SEED,
        })
    }

    /// The batch size in bytes as a `usize` (checked in `new`).
    pub fn batch_len(&self) -> usize {
        usize::try_from(self.batch_bytes).unwrap_or(usize::MAX)
    }

    /// One line describing the method, for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} batches between two pre-faulted memfd MAP_SHARED mappings, cut into \
             {} ranges copied in shuffled order (seed {:#x}); median of {} timed runs \
             after one warm-up run whose result is checked byte for byte; threaded \
             engines cut work into {} chunks",
            format_size(self.batch_bytes),
            self.range_sizes
                .iter()
                .map(|&s| format_size(s))
                .collect::<Vec<_>>()
                .join(" / "),
            self.seed,
            self.repetitions,
            format_size(self.engine_chunk_size),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_is_smaller_than_full() {
        let full = CopySettings::new(false, None, 4).unwrap();
        let quick = CopySettings::new(true, None, 4).unwrap();
        assert_eq!(full.batch_bytes, FULL_BATCH);
        assert_eq!(quick.batch_bytes, QUICK_BATCH);
        assert!(quick.repetitions < full.repetitions);
        assert_eq!(full.max_threads, 4);
        assert_eq!(full.range_sizes, vec![4096, 65536, 2 << 20]);
    }

    #[test]
    fn batch_override_must_hold_whole_huge_ranges() {
        let small = CopySettings::new(true, Some(4 << 20), 2).unwrap();
        assert_eq!(small.batch_bytes, 4 << 20);
        assert_eq!(small.batch_len(), 4 << 20);
        for bad in [0, 4096, (2 << 20) + 4096] {
            assert!(matches!(
                CopySettings::new(true, Some(bad), 2),
                Err(SettingsError::BatchNotMultiple { .. })
            ));
        }
        assert!(matches!(
            CopySettings::new(true, Some(u64::MAX - (u64::MAX % (2 << 20))), 2),
            Err(SettingsError::TooLarge(_))
        ));
    }

    #[test]
    fn zero_threads_refused() {
        assert_eq!(
            CopySettings::new(true, None, 0),
            Err(SettingsError::ZeroThreads)
        );
    }

    #[test]
    fn description_names_sizes_and_repetitions() {
        let text = CopySettings::new(true, None, 2).unwrap().describe();
        for part in [
            "64 MiB",
            "4 KiB / 64 KiB / 2 MiB",
            "median of 3",
            "256 KiB chunks",
        ] {
            assert!(text.contains(part), "{part} missing from {text}");
        }
    }
}
