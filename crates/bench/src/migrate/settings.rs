//! What the migrate suite and its soak mode measure, from `--quick`, the
//! hidden `--bytes` override (guest RAM) and `--soak`.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use vmm::migration::MigrationConfig;

use crate::copy::{CopySettings, SettingsError as CopySettingsError};
use crate::guest_size::{GuestSizeError, check_guest_size};
use crate::size::format_size;

/// Frame size of the benchmark VMs: the VMM's default, huge-page frames.
pub const FRAME_SIZE: u64 = 2 << 20;
/// Guest RAM in the full run.
pub const FULL_GUEST: u64 = 1536 << 20;
/// Guest RAM in `--quick` mode.
pub const QUICK_GUEST: u64 = 256 << 20;
/// Guest RAM the payload may use below its first free byte (image, page
/// tables, stacks: a few MiB today), kept out of the pool of moved frames.
pub const PAYLOAD_RESERVE: u64 = 16 << 20;
/// Frames per batch, as issue 3 asks.
pub const BATCH_SIZES: [usize; 4] = [1, 16, 64, 512];
/// vCPUs of every benchmark guest.
pub const VCPUS: u32 = 2;
/// Interleaved rounds per batch size in the full run.
pub const FULL_ROUNDS: usize = 5;
/// Interleaved rounds per batch size in `--quick` mode.
pub const QUICK_ROUNDS: usize = 3;
/// Fewest batches of one size per round.
pub const MIN_BATCHES_PER_ROUND: usize = 2;
/// Seed of the frame choices and the idle guest's fill pattern.
pub const SEED: u64 = 0x6d69_6772;
/// Longest a benchmark guest may run before the VMM stops it (a hung
/// migration thread cannot keep a run alive forever).
pub const GUEST_TIMEOUT_SECS: u64 = 4 * 3600;

/// Frame size of the soak VMs: small frames make a million migrations a
/// matter of minutes.
pub const SOAK_FRAME_SIZE: u64 = 64 << 10;
/// Guest RAM of the soak VMs.
pub const SOAK_GUEST: u64 = 64 << 20;
/// Migrations of a soak run without a count.
pub const SOAK_DEFAULT_MIGRATIONS: u64 = 1_000_000;
/// Most moves in one plain soak batch (each batch takes 1..=this).
pub const SOAK_MAX_BATCH: usize = 16;
/// Most swapping pairs in one exchange soak batch.
pub const SOAK_MAX_PAIRS: usize = 8;

/// Why the settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingsError {
    /// The guest size was refused.
    #[error(transparent)]
    GuestSize(#[from] GuestSizeError),
    /// The copy reference could not be set up.
    #[error("copy reference")]
    Copy(#[from] CopySettingsError),
    /// A soak needs at least one migration per leg.
    #[error("a soak needs at least {min} migrations (one per leg), not {got}")]
    TooFewMigrations {
        /// Migrations asked for.
        got: u64,
        /// Fewest accepted.
        min: u64,
    },
}

/// What the migrate suite measures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrateSettings {
    /// Guest RAM in bytes.
    pub guest_bytes: u64,
    /// Bytes per frame.
    pub frame_size: u64,
    /// vCPUs of the guest.
    pub vcpus: u32,
    /// Frames the batches are drawn from (the write-busy guest's memcheck
    /// buffer, or as many untouched frames at the top of idle RAM).
    pub pool_frames: usize,
    /// Frames per batch, one measurement each.
    pub batch_sizes: Vec<usize>,
    /// Interleaved rounds (one per bandwidth sample).
    pub rounds: usize,
    /// Frames each batch size moves per round (at least).
    pub frames_per_round: usize,
    /// Fewest batches of one size per round.
    pub min_batches_per_round: usize,
    /// The VMM's copy engine for the remap migrators.
    pub copy_engine: String,
    /// Bytes of the best-copy reference measurement.
    pub copy_reference_bytes: u64,
    /// Timed runs of each reference configuration.
    pub copy_reference_repetitions: usize,
    /// Largest thread count of the reference.
    pub max_threads: usize,
    /// Seed of frame choices and fill patterns.
    pub seed: u64,
    /// Tiers on preallocated 2 MiB hugetlb pages instead of shmem.
    #[serde(default)]
    pub hugetlb: bool,
    /// Test hook: the first timed batch of each size under the write-busy
    /// guest waits until a vCPU write waits on it (`--hold-until-write-waits`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold_until_write_waits: bool,
}

impl MigrateSettings {
    /// Settings for a full or `quick` run on `max_threads` CPUs, guest RAM
    /// overridden by `guest_bytes` when given.
    pub fn new(
        quick: bool,
        guest_bytes: Option<u64>,
        max_threads: usize,
    ) -> Result<Self, SettingsError> {
        let guest = guest_bytes.unwrap_or(if quick { QUICK_GUEST } else { FULL_GUEST });
        check_guest(guest, FRAME_SIZE, PAYLOAD_RESERVE + 2 * FRAME_SIZE)?;
        let copy = CopySettings::new(quick, None, max_threads)?;
        let pool = pool_frames(guest, FRAME_SIZE);
        Ok(Self {
            guest_bytes: guest,
            frame_size: FRAME_SIZE,
            vcpus: VCPUS,
            pool_frames: pool,
            batch_sizes: batch_sizes(pool),
            rounds: if quick { QUICK_ROUNDS } else { FULL_ROUNDS },
            frames_per_round: pool,
            min_batches_per_round: MIN_BATCHES_PER_ROUND,
            copy_engine: MigrationConfig::default().copy_engine.to_string(),
            copy_reference_bytes: copy.batch_bytes.min(guest),
            copy_reference_repetitions: copy.repetitions,
            max_threads: copy.max_threads,
            seed: SEED,
            hugetlb: false,
            hold_until_write_waits: false,
        })
    }

    /// The same settings with hugetlb tiers (`on`) or shmem tiers.
    pub fn with_hugetlb(mut self, on: bool) -> Self {
        self.hugetlb = on;
        self
    }

    /// The same settings with the write-wait test hook `on` or off.
    pub fn with_write_wait_hold(mut self, on: bool) -> Self {
        self.hold_until_write_waits = on;
        self
    }

    /// Batches of `size` frames in each round: enough to move
    /// `frames_per_round` frames, and at least `min_batches_per_round`.
    pub fn batches_per_round(&self, size: usize) -> usize {
        self.frames_per_round
            .div_ceil(size.max(1))
            .max(self.min_batches_per_round)
    }

    /// One line describing the method, for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} guest on {} vCPUs, {} frames, two memfd tiers of {} each on {}, preallocated \
             (prealloc=on: migrations copy into memory that exists; room for all of RAM on \
             either, so every move has a free slot); each batch moves random frames of a pool of \
             {} frames to the other tier; {} interleaved rounds, each batch size moving at least \
             {} frames ({} batches) per round; copy engine {} (the VMM's default); bandwidth = \
             frames moved × frame size / time in migrate()",
            format_size(self.guest_bytes),
            self.vcpus,
            format_size(self.frame_size),
            format_size(self.guest_bytes),
            if self.hugetlb {
                "2 MiB hugetlb pages (--hugetlb)"
            } else {
                "4 KiB shmem pages"
            },
            self.pool_frames,
            self.rounds,
            self.frames_per_round,
            self.min_batches_per_round,
            self.copy_engine,
        )
    }
}

/// What the soak mode runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoakSettings {
    /// Migrations (frames moved) to reach in total over all legs.
    pub migrations: u64,
    /// Guest RAM in bytes.
    pub guest_bytes: u64,
    /// Bytes per frame.
    pub frame_size: u64,
    /// vCPUs of the guest.
    pub vcpus: u32,
    /// Bytes of the memcheck buffer.
    pub buffer_bytes: u64,
    /// Most moves per plain batch.
    pub max_batch: usize,
    /// Most pairs per exchange batch.
    pub max_pairs: usize,
    /// The VMM's copy engine.
    pub copy_engine: String,
    /// Seed of the random choices.
    pub seed: u64,
}

impl SoakSettings {
    /// A soak of `migrations` migrations, guest RAM overridden by
    /// `guest_bytes` when given.
    pub fn new(migrations: u64, guest_bytes: Option<u64>) -> Result<Self, SettingsError> {
        let guest = guest_bytes.unwrap_or(SOAK_GUEST);
        let min = PAYLOAD_RESERVE * 2;
        check_guest(guest, SOAK_FRAME_SIZE, min)?;
        let legs = LEGS as u64;
        if migrations < legs {
            return Err(SettingsError::TooFewMigrations {
                got: migrations,
                min: legs,
            });
        }
        let buffer = ((guest - PAYLOAD_RESERVE) / 2) / SOAK_FRAME_SIZE * SOAK_FRAME_SIZE;
        Ok(Self {
            migrations,
            guest_bytes: guest,
            frame_size: SOAK_FRAME_SIZE,
            vcpus: VCPUS,
            buffer_bytes: buffer,
            max_batch: SOAK_MAX_BATCH,
            max_pairs: SOAK_MAX_PAIRS,
            copy_engine: MigrationConfig::default().copy_engine.to_string(),
            seed: SEED,
        })
    }

    /// Migrations of each leg: an equal share, the first taking the rest.
    pub fn leg_targets(&self) -> [u64; LEGS] {
        let share = self.migrations / LEGS as u64;
        let mut targets = [share; LEGS];
        targets[0] += self.migrations % LEGS as u64;
        targets
    }

    /// One line describing the method, for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} random migrations in three legs (remap between preallocated tiers, \
             remap-precopy, exchange between full tiers), each a fresh {} guest on {} vCPUs with {} frames (small frames, so a \
             million migrations take minutes, not hours) running memcheck over {}; each batch \
             moves 1..={} random frames of all guest RAM (buffer, page tables, code, stacks) to \
             the other tier, or swaps 1..={} random pairs across full tiers; copy engine {}",
            self.migrations,
            format_size(self.guest_bytes),
            self.vcpus,
            format_size(self.frame_size),
            format_size(self.buffer_bytes),
            self.max_batch,
            self.max_pairs,
            self.copy_engine,
        )
    }
}

/// Legs of a soak run.
pub const LEGS: usize = 3;

fn check_guest(bytes: u64, frame: u64, min: u64) -> Result<(), SettingsError> {
    Ok(check_guest_size(bytes, frame, min)?)
}

/// The pool: the largest power of two of frames that fits above the
/// payload's reserve, at most the largest batch.
fn pool_frames(guest: u64, frame: u64) -> usize {
    let above = usize::try_from(guest.saturating_sub(PAYLOAD_RESERVE) / frame).unwrap_or(0);
    let largest = BATCH_SIZES[BATCH_SIZES.len() - 1];
    let power = if above == 0 {
        0
    } else {
        1usize << above.ilog2()
    };
    power.min(largest)
}

/// The batch sizes that fit in a pool of `pool` frames; a size larger
/// than the pool is capped to the whole pool.
fn batch_sizes(pool: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = BATCH_SIZES.iter().map(|&s| s.min(pool)).collect();
    sizes.dedup();
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_run_moves_every_batch_size_of_issue_3() {
        let s = MigrateSettings::new(false, None, 2).unwrap();
        assert_eq!(s.guest_bytes, 1536 << 20);
        assert_eq!(s.pool_frames, 512);
        assert_eq!(s.batch_sizes, [1, 16, 64, 512]);
        assert_eq!(s.rounds, FULL_ROUNDS);
        assert_eq!(s.copy_reference_bytes, 256 << 20);
        assert_eq!(s.batches_per_round(1), 512);
        assert_eq!(s.batches_per_round(64), 8);
        assert_eq!(s.batches_per_round(512), 2, "at least two per round");
        assert!(s.copy_engine.starts_with("threads:"));
    }

    #[test]
    fn quick_and_small_guests_cap_the_batch_sizes() {
        let quick = MigrateSettings::new(true, None, 2).unwrap();
        assert_eq!(quick.guest_bytes, 256 << 20);
        assert_eq!(quick.pool_frames, 64);
        assert_eq!(quick.batch_sizes, [1, 16, 64]);
        assert!(quick.rounds < FULL_ROUNDS);
        let tiny = MigrateSettings::new(true, Some(64 << 20), 2).unwrap();
        assert_eq!(tiny.pool_frames, 16);
        assert_eq!(tiny.batch_sizes, [1, 16]);
        assert_eq!(tiny.copy_reference_bytes, 64 << 20);
        let odd = MigrateSettings::new(true, Some(42 << 20), 2).unwrap();
        assert_eq!(odd.pool_frames, 8);
        assert_eq!(odd.batch_sizes, [1, 8]);
    }

    #[test]
    fn bad_guest_sizes_are_refused() {
        assert!(matches!(
            MigrateSettings::new(true, Some((64 << 20) + 4096), 2),
            Err(SettingsError::GuestSize(
                GuestSizeError::NotWholeFrames { .. }
            ))
        ));
        assert!(matches!(
            MigrateSettings::new(true, Some(0), 2),
            Err(SettingsError::GuestSize(
                GuestSizeError::NotWholeFrames { .. }
            ))
        ));
        assert!(matches!(
            MigrateSettings::new(true, Some(16 << 20), 2),
            Err(SettingsError::GuestSize(GuestSizeError::TooSmall { .. }))
        ));
        assert!(matches!(
            MigrateSettings::new(true, None, 0),
            Err(SettingsError::Copy(_))
        ));
    }

    #[test]
    fn soak_splits_its_migrations_over_three_legs() {
        let s = SoakSettings::new(1_000_001, None).unwrap();
        assert_eq!(s.frame_size, 64 << 10);
        assert_eq!(s.leg_targets(), [333_335, 333_333, 333_333]);
        assert_eq!(s.leg_targets().iter().sum::<u64>(), 1_000_001);
        assert_eq!(s.buffer_bytes, 24 << 20);
        let small = SoakSettings::new(20_000, Some(32 << 20)).unwrap();
        assert_eq!(small.buffer_bytes, 8 << 20);
        assert!(matches!(
            SoakSettings::new(2, None),
            Err(SettingsError::TooFewMigrations { got: 2, min: 3 })
        ));
        assert!(matches!(
            SoakSettings::new(100, Some(16 << 20)),
            Err(SettingsError::GuestSize(GuestSizeError::TooSmall { .. }))
        ));
    }

    #[test]
    fn descriptions_name_sizes_and_method() {
        let text = MigrateSettings::new(false, None, 2).unwrap().describe();
        for part in [
            "1.5 GiB guest",
            "2 vCPUs",
            "2 MiB frames",
            "512 frames",
            "5 interleaved",
        ] {
            assert!(text.contains(part), "{part} missing from {text}");
        }
        let soak = SoakSettings::new(1_000_000, None).unwrap().describe();
        for part in ["1000000 random migrations", "64 KiB frames", "exchange"] {
            assert!(soak.contains(part), "{part} missing from {soak}");
        }
    }
}
