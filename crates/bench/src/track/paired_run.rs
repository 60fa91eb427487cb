//! One paired run: a fresh VM running one workload whose phases are
//! tracked or not as a [`PhaseSchedule`] says, so tracked and untracked
//! throughput come from the same guest on the same host memory. A host
//! thread watches the guest's phase starts and calls the tracker's
//! `collect()` every interval inside tracked phases only, and drops the
//! tracker outside them: a tracker's work between calls (the fault
//! sampler's round thread) would otherwise run in untracked phases too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use vmm::guest_state::GuestState;

use super::guest::{Collector, Collects, RunError, run_vm, throughput};
use super::host_cpu::{CpuSnapshot, PhaseCpu};
use super::phase_schedule::PhaseSchedule;
use super::settings::TrackSettings;
use super::trackers::TrackerSpec;

/// How often the collector looks for a new phase: short against a phase
/// (half a second or more), so a tracked phase is armed from its start.
const POLL: Duration = Duration::from_millis(5);

/// Guest throughput of one counted phase.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseMops {
    /// The phase (warm-up phases come first).
    pub phase: u64,
    /// Whether the tracker ran in it.
    pub tracked: bool,
    /// Million operations per second, all vCPUs together.
    pub mops: f64,
    /// Host CPU use over the phase; `None` for the last phase (the vCPU
    /// threads end with it) or where it could not be read.
    #[serde(default)]
    pub cpu: Option<PhaseCpu>,
}

/// What one paired run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedMeasurement {
    /// Every counted phase, in order.
    pub phases: Vec<PhaseMops>,
    /// The tracker's `collect()` calls (tracked phases only).
    pub collects: Collects,
}

/// Runs `args` (a workload of `schedule.phases()` phases) in a fresh VM
/// with `tracker`, collecting every `interval` in the phases `schedule`
/// tracks.
pub fn run_paired(
    settings: &TrackSettings,
    args: &str,
    tracker: &TrackerSpec,
    interval: Duration,
    schedule: PhaseSchedule,
) -> Result<PairedMeasurement, RunError> {
    let phase_length = Duration::from_secs_f64(settings.phase_seconds);
    let (reports, collected) = run_vm(
        settings,
        args,
        schedule.phases(),
        tracker,
        |t, state, done| paired_loop(t, interval, schedule, phase_length, state, done),
    )?;
    let (collects, cpu) = collected.unwrap_or_default();
    let counted = u64::from(schedule.warmup)..u64::from(schedule.phases());
    let phases = counted
        .map(|phase| {
            let p = u32::try_from(phase).unwrap_or(u32::MAX);
            Ok(PhaseMops {
                phase,
                tracked: schedule.tracked(phase),
                mops: throughput(&reports, settings.vcpus, p, p.saturating_add(1))?,
                cpu: cpu.iter().find(|c| c.0 == phase).map(|c| c.1),
            })
        })
        .collect::<Result<Vec<_>, RunError>>()?;
    Ok(PairedMeasurement { phases, collects })
}

/// Collects every `interval` while the guest's current phase is tracked,
/// until `done`. A tracked phase is armed as soon as it starts. Before an
/// untracked phase, the last collect is the one with at least half an
/// interval of the phase left: the faults a collect arms land in the
/// interval after it, so this balances the few armed faults that spill
/// into the untracked phase against the unarmed end of the tracked one.
/// Then the tracker is dropped, and built again when a tracked phase
/// starts; pages the dirty log armed stay write-protected until the
/// guest's next write to each, which KVM offers no way to undo.
///
/// Also returns the host CPU use of every phase whose end it saw while
/// the guest ran (from one phase start to the next).
fn paired_loop(
    mut collector: Collector,
    interval: Duration,
    schedule: PhaseSchedule,
    phase_length: Duration,
    state: &GuestState,
    done: &AtomicBool,
) -> Result<(Collects, Vec<(u64, PhaseCpu)>), RunError> {
    let mut current: Option<u64> = None;
    let mut next: Option<Instant> = None;
    let mut cpu = Vec::new();
    let mut phase_start: Option<CpuSnapshot> = None;
    while !done.load(Ordering::Acquire) {
        if let Some((&phase, &started)) = state.phase_starts().last_key_value() {
            if current != Some(phase) {
                // Unreadable counters leave the phase without figures.
                let now = CpuSnapshot::now().ok();
                if let (Some(previous), Some(start), Some(end)) = (current, phase_start, now)
                    && let Some(used) = end.since(&start)
                {
                    cpu.push((previous, used));
                }
                phase_start = now;
                current = Some(phase);
                next = schedule.tracked(phase).then(Instant::now);
                if next.is_none() {
                    collector.stop();
                }
            }
            if let Some(when) = next
                && Instant::now() >= when
            {
                let end = state.started + Duration::from_secs_f64(started) + phase_length;
                if schedule.tracked(phase + 1) || when + interval / 2 <= end {
                    collector.collect()?;
                    next = Some(when + interval);
                } else {
                    next = None;
                    collector.stop();
                }
            }
        }
        thread::sleep(POLL);
    }
    Ok((collector.finish(), cpu))
}
