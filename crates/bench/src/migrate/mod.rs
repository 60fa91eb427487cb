//! The `migrate` suite (issue 3): end-to-end live migration in a real KVM
//! VM. For each protocol (plain remap, pre-copy) and guest load (idle,
//! write-busy) a fresh VM runs its workload while a driver thread moves
//! random frames between two memfd tiers in batches of 1 / 16 / 64 / 512
//! frames. Reported per batch size: migration bandwidth against the best
//! copy measured in the same run and against the same copy timed under
//! the scenario's guest load (what the busy machine leaves a copy: the
//! share lost to the protocol, not to the guest's CPU use), where the
//! migrator's time goes
//! (protect / copy / remap / dirty / commit / other), and the guest write stalls
//! (p50 / p99 / max, measured host-side).
//!
//! Every VM ends with the guest's own final check, the VMM's check of the
//! guest image (memcheck's buffer, or the fill pattern of the idle
//! guest's frames), the mappings against the placement map and a check
//! for leaked slots; a failure is an error, never a number.
//!
//! `--soak N` runs [`run_soak`] instead: N random migrations of random
//! frames of all guest RAM under memcheck, in three legs.

mod batch;
mod charts;
mod guest;
mod image;
mod measure;
mod result;
mod runner;
mod scenario;
mod scenario_result;
mod settings;
mod soak;
mod soak_leg;
mod soak_result;
mod stalls;
mod targets;
mod verify;

use indicatif::ProgressBar;
use thiserror::Error;

use guest_memory::Placement;

use crate::bandwidth::Bandwidth;
use crate::copy::{CopySuiteError, RepeatedCopy, measure_best_parallel};
use crate::progress;

pub use charts::write_svgs;
pub use result::MigrateResult;
pub use scenario::{GuestLoad, Protocol, Scenario, scenarios};
pub use scenario_result::{BatchSizeResult, PhaseTimes, ScenarioResult};
pub use settings::{MigrateSettings, SOAK_DEFAULT_MIGRATIONS, SettingsError, SoakSettings};
pub use soak::run_soak;
pub use soak_leg::Leg;
pub use soak_result::{SoakLeg, SoakResult};
pub use stalls::{StallSummary, format_micros};
pub use targets::{
    TARGET_MIN_BATCH, TARGET_PLAIN, TARGET_PRECOPY, TARGET_PRECOPY_P99_US, Targets, judged_share,
};
pub use verify::Verification;

use guest::{GuestShape, PoolError};
use image::PatternError;
use measure::{MeasureError, measure};
use runner::{GuestError, GuestVm};
use verify::{ImageKind, VerifyError};

/// Why the migrate suite failed.
#[derive(Debug, Error)]
pub enum MigrateSuiteError {
    /// Bad settings (e.g. a `--bytes` override).
    #[error("migrate suite settings")]
    Settings(#[from] SettingsError),
    /// The best-copy reference failed.
    #[error("best copy reference")]
    Reference(#[from] CopySuiteError),
    /// One scenario (or soak leg) failed.
    #[error("{scenario}")]
    Scenario {
        /// Which.
        scenario: String,
        /// What went wrong (boxed: VM errors are large).
        #[source]
        source: Box<ScenarioError>,
    },
}

/// Why one scenario or soak leg failed.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The VM could not be created or run.
    #[error("guest VM")]
    Guest(#[from] GuestError),
    /// The frames to move could not be chosen.
    #[error("frames to move")]
    Pool(#[from] PoolError),
    /// The idle guest's frames could not be filled.
    #[error("fill the idle guest's frames")]
    Fill(#[from] PatternError),
    /// Migrating failed.
    #[error("migration")]
    Measure(#[from] MeasureError),
    /// An end check failed: data was lost or the VMM's state is wrong.
    #[error("verification")]
    Verify(#[from] VerifyError),
    /// A batch size has no timed rounds.
    #[error("no timed rounds of {0}-frame batches")]
    NoSamples(usize),
}

/// Runs the suite with `settings`, showing progress on stderr.
pub fn run(settings: MigrateSettings) -> Result<MigrateResult, MigrateSuiteError> {
    let setup = progress::bar("migrate", 1);
    setup.set_message("best copy reference (parallel copy, every thread count and mode)");
    let reference = measure_best_parallel(
        settings.copy_reference_bytes,
        settings.max_threads,
        settings.copy_reference_repetitions,
        settings.seed,
    )?;
    let mut copy = RepeatedCopy::new(
        settings.copy_reference_bytes,
        &reference.best,
        settings.seed,
    )?;
    setup.finish_and_clear();

    let all = scenarios();
    let steps = all.len() * (1 + settings.rounds * settings.batch_sizes.len());
    let bar = progress::bar("migrate", steps as u64);
    let mut results = Vec::with_capacity(all.len());
    for scenario in all {
        let result = run_scenario(
            scenario,
            &settings,
            reference.best.median_gbps,
            &mut copy,
            &bar,
        )
        .map_err(|source| MigrateSuiteError::Scenario {
            scenario: scenario.label(),
            source: Box::new(source),
        })?;
        results.push(result);
    }
    bar.finish_and_clear();
    Ok(MigrateResult::new(settings, reference, results))
}

/// One VM: boot, pick the pool, run the workload and the measurement side
/// by side (with `copy` timed under the same load), check everything.
fn run_scenario(
    scenario: Scenario,
    settings: &MigrateSettings,
    best_gbps: f64,
    copy: &mut RepeatedCopy,
    bar: &ProgressBar,
) -> Result<ScenarioResult, ScenarioError> {
    let shape = GuestShape {
        guest_bytes: settings.guest_bytes,
        frame_size: settings.frame_size,
        vcpus: settings.vcpus,
        tier_bytes: settings.guest_bytes,
        placement: Placement::FastFirst,
        migrator: scenario.protocol.migrator(),
        prealloc: true,
        hugetlb: settings.hugetlb,
    };
    let args = guest::workload(scenario.guest, settings.pool_frames, settings.frame_size);
    let mut vm = GuestVm::boot(&shape.vm_config(&args))?;
    let pool = guest::pool(
        scenario.guest,
        &args,
        vm.memory(),
        vm.free(),
        settings.pool_frames,
    )?;
    if scenario.guest == GuestLoad::Idle {
        image::fill_pattern(vm.memory(), &pool, settings.seed)?;
    }
    let label = scenario.label();
    let hold = settings.hold_until_write_waits && scenario.guest == GuestLoad::WriteBusy;
    let (end, measured) =
        vm.run(|driving| measure(driving, &pool, settings, hold, copy, bar, &label))?;
    verify::check_end(&vm, &end)?;
    let measured = measured?;
    let image = match scenario.guest {
        GuestLoad::Idle => ImageKind::Pattern {
            frames: &pool,
            seed: settings.seed,
        },
        GuestLoad::WriteBusy => ImageKind::Memcheck,
    };
    let verification = verify::verify(&vm, &end, image)?;
    let loaded_copy = Bandwidth::from_runs(copy.bytes(), &measured.loaded_copy);
    let loaded_gbps = loaded_copy.as_ref().map(|b| b.median_gbps);
    let batch_sizes = measured
        .sizes
        .iter()
        .map(|t| {
            BatchSizeResult::build(t, settings.frame_size, best_gbps, loaded_gbps)
                .ok_or(ScenarioError::NoSamples(t.frames_per_batch))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ScenarioResult {
        protocol: scenario.protocol,
        guest: scenario.guest,
        workload: args,
        pool_frames: pool.len(),
        pool_range: (
            pool.first().copied().unwrap_or(0),
            pool.last().copied().unwrap_or(0),
        ),
        loaded_copy,
        batch_sizes,
        verification,
    })
}
