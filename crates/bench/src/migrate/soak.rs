//! The soak mode (`tierbench migrate --soak N`): random live migrations of
//! random frames of all guest RAM under a verifying memcheck guest until N
//! migrations in total, in three legs (plain remap between preallocated
//! tiers, pre-copy, exchange between full tiers), each a fresh VM that
//! ends with every check.

use std::time::{Duration, Instant};

use guest_memory::{Move, Placement, TierId};
use indicatif::ProgressBar;

use super::batch::{BatchError, Picker, flip, run_batch};
use super::guest::{self, GuestShape};
use super::measure::MeasureError;
use super::runner::{Driving, GuestVm};
use super::settings::{LEGS, SoakSettings};
use super::soak_leg::{Leg, LegTotals};
use super::soak_result::{SoakLeg, SoakResult};
use super::verify::{self, ImageKind};
use super::{MigrateSuiteError, ScenarioError};
use crate::progress;

/// Longest wait for the soak guest's workload to start.
const WORKLOAD_START: Duration = Duration::from_secs(120);

/// Runs the soak of `settings`, showing progress and migrations/s on
/// stderr.
pub fn run_soak(settings: SoakSettings) -> Result<SoakResult, MigrateSuiteError> {
    let bar = progress::rate_bar("soak", settings.migrations);
    let started = Instant::now();
    let mut legs = Vec::with_capacity(LEGS);
    for (index, (leg, target)) in Leg::ALL.into_iter().zip(settings.leg_targets()).enumerate() {
        let done = run_leg(leg, index, target, &settings, &bar).map_err(|source| {
            MigrateSuiteError::Scenario {
                scenario: format!("soak leg {}", leg.name()),
                source: Box::new(source),
            }
        })?;
        legs.push(done);
    }
    bar.finish_and_clear();
    Ok(SoakResult::new(settings, legs, started.elapsed()))
}

fn run_leg(
    leg: Leg,
    index: usize,
    target: u64,
    settings: &SoakSettings,
    bar: &ProgressBar,
) -> Result<SoakLeg, ScenarioError> {
    let guest_bytes = settings.guest_bytes;
    let shape = GuestShape {
        guest_bytes,
        frame_size: settings.frame_size,
        vcpus: settings.vcpus,
        tier_bytes: if leg.full_tiers() {
            guest_bytes / 2
        } else {
            guest_bytes
        },
        placement: Placement::Interleave,
        migrator: leg.protocol().migrator(),
        prealloc: leg.preallocated(),
        hugetlb: false,
    };
    let args = guest::memcheck(settings.buffer_bytes);
    let mut vm = GuestVm::boot(&shape.vm_config(&args))?;
    let frames = vm.memory().frame_count();
    let seed = settings.seed ^ (index as u64 + 1).rotate_left(32);
    let (end, driven) =
        vm.run(|driving| drive_leg(driving, leg, target, frames, seed, settings, bar))?;
    verify::check_end(&vm, &end)?;
    let totals = driven?;
    let verification = verify::verify(&vm, &end, ImageKind::Memcheck)?;
    Ok(SoakLeg::new(leg, target, &totals, verification))
}

/// Migrates random frames of all `frames` frames until `target` moved.
fn drive_leg(
    driving: &Driving<'_>,
    leg: Leg,
    target: u64,
    frames: usize,
    seed: u64,
    settings: &SoakSettings,
    bar: &ProgressBar,
) -> Result<LegTotals, MeasureError> {
    bar.set_message(format!("{}: waiting for the guest workload", leg.name()));
    if !driving.wait_for_workload(WORKLOAD_START) {
        return Err(if driving.guest_running() {
            MeasureError::NotStarted(WORKLOAD_START)
        } else {
            MeasureError::GuestEnded
        });
    }
    bar.set_message(format!("{} (memcheck guest)", leg.name()));
    let mut picker = Picker::new((0..frames).collect(), seed);
    let mut totals = LegTotals::default();
    let started = Instant::now();
    while totals.moved < target {
        if !driving.guest_running() {
            return Err(MeasureError::GuestEnded);
        }
        let moves = match leg {
            Leg::Exchange => swaps(driving, &mut picker, settings.max_pairs),
            Leg::Remap | Leg::RemapPrecopy => {
                let count = picker.between_one_and(settings.max_batch);
                picker
                    .pick(count)
                    .into_iter()
                    .map(|f| flip(driving.memory, f))
                    .collect()
            }
        };
        let batch_error = |source| MeasureError::SoakBatch {
            number: totals.batches + 1,
            source,
        };
        let moves = moves.map_err(batch_error)?;
        let timed = run_batch(driving.migrator, &moves).map_err(batch_error)?;
        let r = &timed.report;
        totals.batches += 1;
        totals.moved += r.moved as u64;
        totals.exchanged += r.exchanged as u64;
        totals.aborted += r.aborted as u64;
        totals.recopied_pages += r.recopied_pages;
        totals.stalls.extend_from_slice(&r.stalls);
        bar.inc(r.moved as u64);
    }
    totals.elapsed = started.elapsed();
    Ok(totals)
}

/// 1..=`max_pairs` pairs of random frames on different tiers, each frame
/// sent to the other's tier (with both tiers full, each pair must swap).
fn swaps(
    driving: &Driving<'_>,
    picker: &mut Picker,
    max_pairs: usize,
) -> Result<Vec<Move>, BatchError> {
    let want = picker.between_one_and(max_pairs);
    loop {
        let mut fast = Vec::new();
        let mut slow = Vec::new();
        for frame in picker.pick(4 * want) {
            let m = flip(driving.memory, frame)?;
            if m.to_tier == TierId(1) {
                fast.push(m);
            } else {
                slow.push(m);
            }
        }
        let pairs = want.min(fast.len()).min(slow.len());
        if pairs > 0 {
            return Ok(fast
                .into_iter()
                .zip(slow)
                .take(pairs)
                .flat_map(|(a, b)| [a, b])
                .collect());
        }
    }
}
