//! The timed part of one scenario, run by the driver thread while the
//! guest runs: wait for the workload, one untimed warm-up pass over the
//! pool, then interleaved rounds in which every batch size moves its
//! share of random pool frames, each round opened by one timed plain
//! copy (the best copy's configuration) under the same guest load.

use std::time::Duration;

use indicatif::ProgressBar;
use thiserror::Error;

use guest_memory::Move;

use super::batch::{BatchError, Picker, flip, run_batch};
use super::runner::Driving;
use super::settings::MigrateSettings;
use crate::copy::{CopySuiteError, RepeatedCopy};

/// Longest wait for the guest's workload to start (memcheck first writes
/// every page of its buffer, GiBs in the full run).
const WORKLOAD_START: Duration = Duration::from_secs(300);

/// Why a measurement stopped.
#[derive(Debug, Error)]
pub enum MeasureError {
    /// The workload did not report progress in time.
    #[error("the guest workload did not start within {0:?}")]
    NotStarted(Duration),
    /// The guest ended while frames were still to move.
    #[error("the guest ended before the measurement finished")]
    GuestEnded,
    /// A batch did not move every frame.
    #[error("{frames_per_batch}-frame batches")]
    Batch {
        /// The batch size.
        frames_per_batch: usize,
        /// What went wrong.
        #[source]
        source: BatchError,
    },
    /// The plain copy timed under the guest's load failed.
    #[error("plain copy under the guest's load")]
    Copy(#[source] CopySuiteError),
    /// A soak batch did not move every frame.
    #[error("soak batch {number}")]
    SoakBatch {
        /// Which batch of the leg (from 1).
        number: u64,
        /// What went wrong.
        #[source]
        source: BatchError,
    },
}

/// Everything measured for one batch size.
#[derive(Debug, Clone, Default)]
pub struct SizeTotals {
    /// Frames per batch.
    pub frames_per_batch: usize,
    /// Batches run (timed).
    pub batches: usize,
    /// Frames moved.
    pub frames: usize,
    /// Per round, the summed wall time of its `migrate()` calls.
    pub round_times: Vec<Duration>,
    /// Sum of the wall times of all calls.
    pub wall: Duration,
    /// Sum of the migrator's own totals.
    pub total: Duration,
    /// Time write-protecting.
    pub protect: Duration,
    /// Time copying.
    pub copy: Duration,
    /// Time remapping, re-registering and waking.
    pub remap: Duration,
    /// Pre-copy: time resetting and reading the dirty log.
    pub dirty: Duration,
    /// Time committing to the placement map and freeing source slots.
    pub commit: Duration,
    /// Time the stages ran at once (pipelined batches).
    pub overlap: Duration,
    /// Bytes the engine copied, re-copies included.
    pub bytes_copied: u64,
    /// Pre-copy: 4 KiB pages copied again.
    pub recopied_pages: u64,
    /// Every write stall observed.
    pub stalls: Vec<Duration>,
}

/// Everything measured in one scenario.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// One entry per batch size.
    pub sizes: Vec<SizeTotals>,
    /// The plain copy's time at the start of each round, under the same
    /// guest load as the migrations.
    pub loaded_copy: Vec<Duration>,
}

/// Runs the measurement over `pool` with `settings`, one bar step per
/// round of one batch size, timing `copy` once per round; `label` names
/// the scenario in the bar. With `hold_first`, the first timed batch of
/// each size stays protected until a guest write waits on it (the
/// `--hold-until-write-waits` test hook).
pub fn measure(
    driving: &Driving<'_>,
    pool: &[usize],
    settings: &MigrateSettings,
    hold_first: bool,
    copy: &mut RepeatedCopy,
    bar: &ProgressBar,
    label: &str,
) -> Result<Measured, MeasureError> {
    bar.set_message(format!("{label}: waiting for the guest workload"));
    if !driving.wait_for_workload(WORKLOAD_START) {
        return Err(if driving.guest_running() {
            MeasureError::NotStarted(WORKLOAD_START)
        } else {
            MeasureError::GuestEnded
        });
    }
    let largest = settings.batch_sizes.last().copied().unwrap_or(1);
    bar.set_message(format!("{label}: warm-up, every frame there and back"));
    warm_up(driving, pool, largest)?;
    bar.inc(1);

    let mut picker = Picker::new(pool.to_vec(), settings.seed);
    let mut totals: Vec<SizeTotals> = settings
        .batch_sizes
        .iter()
        .map(|&frames_per_batch| SizeTotals {
            frames_per_batch,
            ..SizeTotals::default()
        })
        .collect();
    let mut loaded_copy = Vec::with_capacity(settings.rounds);
    for round in 1..=settings.rounds {
        bar.set_message(format!(
            "{label}: round {round}/{}, plain copy under the guest's load",
            settings.rounds
        ));
        loaded_copy.push(copy.time().map_err(MeasureError::Copy)?);
        for size in &mut totals {
            bar.set_message(format!(
                "{label}: round {round}/{}, {} frames/batch",
                settings.rounds, size.frames_per_batch
            ));
            let mut round_time = Duration::ZERO;
            if hold_first
                && round == 1
                && let Some(faults) = driving.migrator.faults()
            {
                faults.hold_until_write_waits(1);
                // Pre-copy only: its first pass waits for a dirty page.
                faults.hold_precopy_until_dirty(1);
            }
            for _ in 0..settings.batches_per_round(size.frames_per_batch) {
                if !driving.guest_running() {
                    return Err(MeasureError::GuestEnded);
                }
                let batch_error = |source| MeasureError::Batch {
                    frames_per_batch: size.frames_per_batch,
                    source,
                };
                let moves = picker
                    .pick(size.frames_per_batch)
                    .into_iter()
                    .map(|f| flip(driving.memory, f))
                    .collect::<Result<Vec<Move>, _>>()
                    .map_err(batch_error)?;
                let timed = run_batch(driving.migrator, &moves).map_err(batch_error)?;
                let r = &timed.report;
                round_time += timed.wall;
                size.batches += 1;
                size.frames += r.moved;
                size.wall += timed.wall;
                size.total += r.total;
                size.protect += r.protect;
                size.copy += r.copy;
                size.remap += r.remap;
                size.dirty += r.dirty;
                size.commit += r.commit;
                size.overlap += r.overlap;
                size.bytes_copied += r.bytes;
                size.recopied_pages += r.recopied_pages;
                size.stalls.extend_from_slice(&r.stalls);
            }
            size.round_times.push(round_time);
            bar.inc(1);
        }
    }
    Ok(Measured {
        sizes: totals,
        loaded_copy,
    })
}

/// Sends every pool frame to the other tier and back, `batch` at a time
/// (untimed): pages get allocated on both tiers, the guest's mappings and
/// the copy engine's threads are warm.
fn warm_up(driving: &Driving<'_>, pool: &[usize], batch: usize) -> Result<(), MeasureError> {
    for _ in 0..2 {
        for chunk in pool.chunks(batch.max(1)) {
            if !driving.guest_running() {
                return Err(MeasureError::GuestEnded);
            }
            let batch_error = |source| MeasureError::Batch {
                frames_per_batch: chunk.len(),
                source,
            };
            let moves = chunk
                .iter()
                .map(|&f| flip(driving.memory, f))
                .collect::<Result<Vec<Move>, _>>()
                .map_err(batch_error)?;
            run_batch(driving.migrator, &moves).map_err(batch_error)?;
        }
    }
    Ok(())
}
