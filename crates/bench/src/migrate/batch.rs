//! One migration batch as the benchmarks run it: random frames picked
//! without repeats, each sent to the other of the two tiers, migrated and
//! timed; a batch that does not move every frame is an error.

use std::time::{Duration, Instant};

use thiserror::Error;

use guest_memory::{BatchReport, Migrator, Move, MoveError, TieredMemory};
use guest_memory::{FrameId, TierId};

use crate::rng::SplitMix64;

/// Why a batch failed.
#[derive(Debug, Clone, Error)]
pub enum BatchError {
    /// The placement map does not know a frame.
    #[error("frame {0} has no place in the placement map")]
    Unplaced(usize),
    /// The migrator did not move every frame of the batch.
    #[error("batch of {requested}: {moved} moved, {aborted} aborted, {skipped} skipped")]
    Incomplete {
        /// Moves asked for.
        requested: usize,
        /// Frames moved.
        moved: usize,
        /// Moves aborted (rolled back).
        aborted: usize,
        /// Moves skipped.
        skipped: usize,
        /// The migrator's first error.
        #[source]
        first: Option<MoveError>,
    },
}

/// A batch's report and the wall time of its `migrate()` call.
#[derive(Debug, Clone)]
pub struct Timed {
    /// The migrator's report.
    pub report: BatchReport,
    /// Wall time of the call.
    pub wall: Duration,
}

/// Migrates `moves` and checks that every frame moved.
pub fn run_batch(migrator: &dyn Migrator, moves: &[Move]) -> Result<Timed, BatchError> {
    let started = Instant::now();
    let outcome = migrator.migrate_moves(moves);
    let wall = started.elapsed();
    let report = outcome.report;
    if report.moved != moves.len() || report.aborted > 0 {
        return Err(BatchError::Incomplete {
            requested: moves.len(),
            moved: report.moved,
            aborted: report.aborted,
            skipped: report.skipped,
            first: outcome.failed.into_iter().next(),
        });
    }
    Ok(Timed { report, wall })
}

/// The move of `frame` to the other of two tiers.
pub fn flip(memory: &TieredMemory, frame: usize) -> Result<Move, BatchError> {
    let at = memory
        .location(FrameId(frame))
        .ok_or(BatchError::Unplaced(frame))?;
    Ok(Move {
        frame: FrameId(frame),
        to_tier: TierId(1 - at.tier.index().min(1)),
    })
}

/// Picks distinct frames of a pool at random.
#[derive(Debug, Clone)]
pub struct Picker {
    rng: SplitMix64,
    pool: Vec<usize>,
}

impl Picker {
    /// A picker over `pool`, seeded.
    pub fn new(pool: Vec<usize>, seed: u64) -> Self {
        Self {
            rng: SplitMix64::new(seed),
            pool,
        }
    }

    /// `count` distinct frames (the whole pool at most), in random order:
    /// the first steps of a Fisher–Yates shuffle.
    pub fn pick(&mut self, count: usize) -> Vec<usize> {
        let n = self.pool.len();
        let count = count.min(n);
        for i in 0..count {
            let j = i + self.rng.below((n - i) as u64) as usize;
            self.pool.swap(i, j);
        }
        self.pool[..count].to_vec()
    }

    /// A random number in `1..=max`.
    pub fn between_one_and(&mut self, max: usize) -> usize {
        1 + self.rng.below(max.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn picks_are_distinct_members_of_the_pool() {
        let pool: Vec<usize> = (100..164).collect();
        let mut picker = Picker::new(pool.clone(), 3);
        let mut seen = HashSet::new();
        for _ in 0..50 {
            let picked = picker.pick(16);
            assert_eq!(picked.len(), 16);
            let unique: HashSet<usize> = picked.iter().copied().collect();
            assert_eq!(unique.len(), 16);
            assert!(picked.iter().all(|f| pool.contains(f)));
            seen.extend(picked);
        }
        assert_eq!(seen.len(), 64, "every frame gets picked eventually");
        assert_eq!(picker.pick(1000).len(), 64);
    }

    /// Real memfd tiers and a real remap migrator, no VM: a batch moves
    /// or is reported incomplete.
    #[test]
    fn batches_move_every_frame_or_fail() {
        use std::sync::Arc;

        use guest_memory::migrate::{RemapMigrator, WriteGuard};
        use guest_memory::{BackendSpec, MemoryConfig, TierSpec};
        use page_copy::CpuCopy;

        let tier = |name: &str| TierSpec {
            name: name.into(),
            backend: BackendSpec::Memfd {
                numa_node: None,
                hugetlb: false,
                prealloc: false,
            },
            size: Some(4 << 20),
            profile: None,
        };
        let config = MemoryConfig {
            frame_size: 64 << 10,
            ..MemoryConfig::new(4 << 20, vec![tier("fast"), tier("slow")])
        };
        let memory = Arc::new(TieredMemory::new(&config).unwrap());
        let guard = Arc::new(WriteGuard::new(memory.regions()).unwrap());
        let migrator =
            RemapMigrator::new(memory.clone(), guard, Box::new(CpuCopy::default()), None).unwrap();
        let moves: Vec<Move> = [3, 9, 10]
            .iter()
            .map(|&f| flip(&memory, f).unwrap())
            .collect();
        assert!(
            moves.iter().all(|m| m.to_tier == TierId(1)),
            "fast-first placement"
        );
        let timed = run_batch(&migrator, &moves).unwrap();
        assert_eq!(timed.report.moved, 3);
        assert!(timed.wall >= timed.report.copy);
        assert_eq!(
            flip(&memory, 9).unwrap().to_tier,
            TierId(0),
            "now on the slow tier"
        );

        let bad = [Move {
            frame: FrameId(4),
            to_tier: TierId(7),
        }];
        let err = run_batch(&migrator, &bad).unwrap_err();
        assert!(
            matches!(
                err,
                BatchError::Incomplete {
                    requested: 1,
                    moved: 0,
                    aborted: 1,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            matches!(
                &err,
                BatchError::Incomplete { first: Some(e), .. }
                    if matches!(e.source, guest_memory::StepError::NoSuchTier(TierId(7)))
            ),
            "{err:?}"
        );
        assert!(matches!(
            flip(&memory, 1 << 20),
            Err(BatchError::Unplaced(f)) if f == 1 << 20
        ));
    }

    #[test]
    fn counts_stay_in_range() {
        let mut picker = Picker::new(vec![1], 9);
        for _ in 0..100 {
            let n = picker.between_one_and(16);
            assert!((1..=16).contains(&n));
        }
        assert_eq!(picker.between_one_and(0), 1);
    }
}
