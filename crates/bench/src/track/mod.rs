//! The `track` suite (issue 4): what guest access tracking costs.
//!
//! * Guest throughput of `hotset` and `zipf` with each tracker (at its
//!   default settings, `collect()` every interval from a host thread that
//!   feeds the heat model) against no tracking at all, in interleaved
//!   repetitions of fresh VMs; slowdown = 1 − tracked / untracked.
//! * The same in paired runs: the tracker on in half the phases of one VM
//!   (fresh VMs differ by more than the effect measured); their slowdown,
//!   with a confidence interval, is judged against the issue's ≤ 3 %
//!   target (reported, never asserted).
//! * The trackers' host cost: thread CPU time and wall time of each
//!   `collect()`, per interval and per GiB of guest RAM.
//! * Heat-model update and ranking time for 1 GiB, 64 GiB and 1 TiB of
//!   2 MiB frames (synthetic samples, in-process; the criterion bench
//!   `cargo bench -p tiering --bench heat` measures the same).
//!
//! Trackers are picked from one table, [`TRACKERS`]; a new tracker is one
//! entry there.

mod charts;
mod collect_cost;
mod format;
mod guest;
mod heat;
mod host_cpu;
mod paired_result;
mod paired_run;
mod phase_schedule;
mod result;
mod settings;
mod trackers;

use std::time::Duration;

use thiserror::Error;

use tiering::HeatError;

use crate::progress;

pub use access_track::thread_cpu_time;
pub use charts::{heat_chart, throughput_chart, write_svgs};
pub use collect_cost::CollectCost;
pub use format::{format_guest, format_interval, format_percent, format_us};
pub use guest::{Collects, RunError, RunMeasurement, run_once, throughput, vm_config};
pub use heat::{HeatSizeResult, measure as measure_heat};
pub use host_cpu::{CpuSnapshot, PhaseCpu};
pub use paired_result::{
    CpuShares, PairedResult, PairedRun, format_slowdown, paired_cpu_table, paired_table,
};
pub use paired_run::{PairedMeasurement, PhaseMops, run_paired};
pub use phase_schedule::{BLOCK_PHASES, PhaseSchedule};
pub use result::{
    IntervalVerdict, JudgedSlowdown, SlowdownTarget, Throughput, TrackResult, TrackerResult,
    WorkloadResult,
};
pub use settings::{SettingsError, TARGET_MAX_SLOWDOWN, TrackSettings, Variant};
pub use trackers::{NONE, TRACKER_NAMES, TRACKERS, TrackerSpec, tracker};

/// Why the track suite failed.
#[derive(Debug, Error)]
pub enum TrackSuiteError {
    /// Bad settings (e.g. a `--bytes` override).
    #[error("track suite settings")]
    Settings(#[from] SettingsError),
    /// A tracker named in the settings is not in [`TRACKERS`].
    #[error("unknown tracker {0:?}")]
    UnknownTracker(String),
    /// One guest run failed.
    #[error("{workload} with {variant}, repetition {repetition}")]
    Run {
        /// The workload.
        workload: String,
        /// The tracker and interval.
        variant: String,
        /// The repetition (from 1).
        repetition: usize,
        /// What went wrong (boxed: VM errors are large).
        #[source]
        source: Box<RunError>,
    },
    /// A workload has no measured run of some tracker.
    #[error("{0}: a tracker has no measured run")]
    NoRuns(String),
    /// A paired run lacks a phase of its schedule.
    #[error("{workload} with {tracker}: a paired run lacks a phase")]
    NoPairedPhases {
        /// The workload.
        workload: String,
        /// The tracker.
        tracker: String,
    },
    /// The heat-model measurement failed.
    #[error("heat model measurement")]
    Heat(#[from] HeatError),
}

/// Runs the suite with `settings`, showing progress on stderr.
pub fn run(settings: TrackSettings) -> Result<TrackResult, TrackSuiteError> {
    let variants = settings.variants();
    let specs = variants
        .iter()
        .map(|v| {
            tracker(&v.tracker).ok_or_else(|| TrackSuiteError::UnknownTracker(v.tracker.clone()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let workloads = &settings.workloads;
    let runs = settings.repetitions * workloads.len() * specs.len();
    let tracked: Vec<usize> = (0..variants.len())
        .filter(|&v| variants[v].interval_ms.is_some())
        .collect();
    let paired_runs = settings.paired_repetitions * workloads.len() * tracked.len();
    let bar = progress::bar(
        "track",
        (runs + paired_runs + settings.heat_frames.len()) as u64,
    );

    // measured[w][v][r]: workload w, variant v, repetition r.
    let mut measured = vec![vec![Vec::new(); specs.len()]; workloads.len()];
    for repetition in 0..settings.repetitions {
        // Alternate the order so no tracker always runs first (on a cold
        // page cache) or last (on a machine warmed up by the others).
        let mut order: Vec<usize> = (0..specs.len()).collect();
        if repetition % 2 == 1 {
            order.reverse();
        }
        for (w, workload) in workloads.iter().enumerate() {
            let args = settings.workload_args(workload);
            for &v in &order {
                let variant = &variants[v];
                bar.set_message(format!(
                    "{workload}, {} ({}/{})",
                    variant.label(),
                    repetition + 1,
                    settings.repetitions
                ));
                // The baseline runs no collector: any interval will do.
                let interval = Duration::from_millis(variant.interval_ms.unwrap_or(0));
                let run = run_once(&settings, &args, specs[v], interval).map_err(|source| {
                    TrackSuiteError::Run {
                        workload: workload.clone(),
                        variant: variant.label(),
                        repetition: repetition + 1,
                        source: Box::new(source),
                    }
                })?;
                measured[w][v].push(run);
                bar.inc(1);
            }
        }
    }
    // Without repetitions (`--paired-only`) there is nothing to build.
    let results = workloads
        .iter()
        .zip(&measured)
        .filter(|_| settings.repetitions > 0)
        .map(|(workload, runs)| {
            WorkloadResult::build(&settings, workload, &variants, runs)
                .ok_or_else(|| TrackSuiteError::NoRuns(workload.clone()))
        })
        .collect::<Result<Vec<_>, _>>()?;

    let schedule = settings.paired_schedule();
    let mut paired = Vec::with_capacity(workloads.len() * tracked.len());
    for workload in workloads {
        let args = settings.workload_args_of(workload, schedule.phases());
        for &v in &tracked {
            let variant = &variants[v];
            let interval_ms = variant.interval_ms.unwrap_or_default();
            let mut measured = Vec::with_capacity(settings.paired_repetitions);
            for repetition in 0..settings.paired_repetitions {
                bar.set_message(format!(
                    "{workload}, {} in half the phases ({}/{})",
                    variant.label(),
                    repetition + 1,
                    settings.paired_repetitions
                ));
                let interval = Duration::from_millis(interval_ms);
                let run = run_paired(&settings, &args, specs[v], interval, schedule).map_err(
                    |source| TrackSuiteError::Run {
                        workload: workload.clone(),
                        variant: format!("{} in half the phases", variant.label()),
                        repetition: repetition + 1,
                        source: Box::new(source),
                    },
                )?;
                measured.push(run);
                bar.inc(1);
            }
            let result = PairedResult::build(
                &settings,
                workload,
                &variant.tracker,
                interval_ms,
                schedule,
                &measured,
            )
            .ok_or_else(|| TrackSuiteError::NoPairedPhases {
                workload: workload.clone(),
                tracker: variant.tracker.clone(),
            })?;
            paired.push(result);
        }
    }

    let mut heat = Vec::with_capacity(settings.heat_frames.len());
    for &frames in &settings.heat_frames {
        bar.set_message(format!(
            "heat model, {}",
            format_guest(frames as u64 * (2 << 20))
        ));
        heat.push(measure_heat(frames, settings.heat_repetitions)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(TrackResult::new(settings, results, paired, heat))
}
