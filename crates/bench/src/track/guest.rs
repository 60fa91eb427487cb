//! One measured guest run: a fresh VM running one workload, with or
//! without a tracker whose `collect()` a host thread calls every interval
//! (feeding the heat model, as the tiering engine would), timed in thread
//! CPU time and wall time. The guest's throughput comes from its own phase
//! reports.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use thiserror::Error;

use access_track::{
    AccessTracker, FaultSampleConfig, SamplingSettings, TrackerError, TrackerKind, thread_cpu_time,
};
use guest_memory::{BackendSpec, MemoryConfig, Placement, TierSpec};
use tiering::{HeatError, HeatModel, HeatSettings};
use vmm::guest_state::{GuestState, PhaseReport};
use vmm::migration::MigrationConfig;
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd, VmError};
use vmm::vm_tiering::trackers::VmTrackers;

use super::settings::TrackSettings;
use super::trackers::TrackerSpec;

/// How often the VM runner wakes while the guest runs.
const TICK: Duration = Duration::from_millis(100);
/// Longest the collector sleeps before looking at the stop flag.
pub(super) const NAP: Duration = Duration::from_millis(20);
/// Seconds a run may take beyond its phases (boot, warm-up writes).
const SLACK_SECS: f64 = 120.0;

/// Why one guest run failed.
#[derive(Debug, Error)]
pub enum RunError {
    /// The VMM refused the configuration or could not create the VM.
    #[error("create VM")]
    Create(#[source] VmError),
    /// The tracker could not be attached.
    #[error("attach tracker")]
    Attach(#[source] VmError),
    /// The collector thread could not start.
    #[error("start the collector thread")]
    Spawn(#[source] io::Error),
    /// The vCPU threads could not run.
    #[error("run the VM")]
    Run(#[source] VmError),
    /// The guest did not end successfully.
    #[error("guest: {0}")]
    Guest(String),
    /// A `collect()` call failed.
    #[error("collect a sample")]
    Collect(#[from] TrackerError),
    /// The heat model refused a sample.
    #[error("heat model update")]
    Heat(#[from] HeatError),
    /// The thread CPU clock could not be read.
    #[error("read the thread CPU clock")]
    Clock(#[source] io::Error),
    /// The collector thread panicked.
    #[error("the collector thread panicked")]
    CollectorPanicked,
    /// The guest did not report every counted phase of every vCPU.
    #[error("vCPU {vcpu} reported {got} of {expected} counted phases")]
    MissingReports {
        /// The vCPU.
        vcpu: u32,
        /// Reports of counted phases.
        got: usize,
        /// Counted phases.
        expected: usize,
    },
    /// The guest measured no time (no TSC frequency).
    #[error("vCPU {vcpu} measured no time for its phases")]
    NoGuestTime {
        /// The vCPU.
        vcpu: u32,
    },
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMeasurement {
    /// Guest throughput over the counted phases, million operations per
    /// second (all vCPUs together).
    pub mops: f64,
    /// The tracker's `collect()` calls; `None` without a tracker.
    pub collects: Option<Collects>,
}

/// Every `collect()` call of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collects {
    /// Thread CPU time of each call.
    pub cpu: Vec<Duration>,
    /// Wall time of each call.
    pub wall: Vec<Duration>,
    /// Pages reported dirty, summed over the calls.
    pub dirty_pages: u64,
    /// Pages reported accessed (a write counts), summed over the calls.
    pub accessed_pages: u64,
}

/// The VM configuration of a run of `args`, a workload of `phases`
/// phases (the tracker adds what it needs when the VM is created).
pub fn vm_config(settings: &TrackSettings, args: &str, phases: u32) -> VmConfig {
    let seconds = f64::from(phases) * settings.phase_seconds + SLACK_SECS;
    VmConfig {
        vcpus: settings.vcpus,
        memory: MemoryConfig {
            size: settings.guest_bytes,
            frame_size: settings.frame_size,
            tiers: vec![TierSpec {
                name: "fast".to_owned(),
                backend: BackendSpec::Memfd {
                    numa_node: None,
                    hugetlb: false,
                    prealloc: false,
                },
                size: Some(settings.guest_bytes),
                profile: None,
            }],
            placement: Placement::FastFirst,
            ..MemoryConfig::default()
        },
        payload: PayloadSource::Embedded,
        args: args.to_owned(),
        timeout: Some(Duration::from_secs_f64(seconds)),
        migration: MigrationConfig::default(),
        dirty_log_tracking: false,
        tiering: None,
    }
}

/// Runs `args` in a fresh VM with `tracker`, collecting every `interval`.
pub fn run_once(
    settings: &TrackSettings,
    args: &str,
    tracker: &TrackerSpec,
    interval: Duration,
) -> Result<RunMeasurement, RunError> {
    let (reports, collects) = run_vm(settings, args, settings.phases, tracker, |c, _, done| {
        collect_loop(c, interval, done)
    })?;
    let mops = throughput(
        &reports,
        settings.vcpus,
        settings.warmup_phases,
        settings.phases,
    )?;
    Ok(RunMeasurement { mops, collects })
}

/// Runs `args` (a workload of `phases` phases) in a fresh VM with
/// `tracker`, whose collector `collect` drives from a host thread until
/// told the guest is `done`. Returns the guest's phase reports and what
/// the collector returned (`None` without a tracker).
pub(super) fn run_vm<T: Send>(
    settings: &TrackSettings,
    args: &str,
    phases: u32,
    tracker: &TrackerSpec,
    collect: impl FnOnce(Collector, &GuestState, &AtomicBool) -> Result<T, RunError> + Send,
) -> Result<(Vec<PhaseReport>, Option<T>), RunError> {
    let config = vm_config(settings, args, phases);
    let kinds: Vec<TrackerKind> = tracker.kind.into_iter().collect();
    let mut vm =
        Vm::with_trackers(&config, Arc::new(|_, _| {}), &kinds).map_err(RunError::Create)?;
    let attached = tracker
        .kind
        .map(|kind| {
            Collector::new(TrackerFactory {
                kind,
                trackers: vm.trackers().clone(),
            })
        })
        .transpose()?;
    let state = Arc::clone(vm.state());
    let done = AtomicBool::new(false);
    let done = &done;
    let (end, collected) = thread::scope(|scope| {
        let state = &state;
        let collector = attached
            .map(|t| {
                thread::Builder::new()
                    .name("tierbench-track".to_owned())
                    .spawn_scoped(scope, move || collect(t, state, done))
                    .map_err(RunError::Spawn)
            })
            .transpose()?;
        let end = vm.run(TICK, &mut |_, _| {});
        done.store(true, Ordering::Release);
        let collected = collector
            .map(|h| h.join().map_err(|_| RunError::CollectorPanicked)?)
            .transpose()?;
        Ok::<_, RunError>((end.map_err(RunError::Run)?, collected))
    })?;
    if end != VmEnd::Success {
        return Err(RunError::Guest(end.describe()));
    }
    Ok((state.reports(), collected))
}

/// Calls `collect()` every `interval` (fixed rate) until `done`.
fn collect_loop(
    mut collector: Collector,
    interval: Duration,
    done: &AtomicBool,
) -> Result<Collects, RunError> {
    let mut next = Instant::now() + interval;
    loop {
        while !done.load(Ordering::Acquire) {
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            thread::sleep(left.min(NAP));
        }
        if done.load(Ordering::Acquire) {
            return Ok(collector.finish());
        }
        next += interval;
        collector.collect()?;
    }
}

/// Builds a run's tracker, as `Vm::tracker` does, without borrowing the
/// VM (it runs meanwhile).
pub(super) struct TrackerFactory {
    kind: TrackerKind,
    trackers: VmTrackers,
}

impl TrackerFactory {
    fn build(&self) -> Result<Box<dyn AccessTracker>, RunError> {
        self.trackers
            .tracker(
                self.kind,
                FaultSampleConfig::default(),
                SamplingSettings::default(),
            )
            .map_err(|e| RunError::Attach(VmError::Tracker(e)))
    }
}

/// A tracker whose `collect()` calls are timed and fed to a heat model,
/// as the tiering engine would feed it. The tracker can be stopped
/// (dropped: the fault sampler's round thread ends and its pages are
/// mapped back) and is built again at the next call, so that a paired
/// run's untracked phases run none of it.
pub(super) struct Collector {
    factory: TrackerFactory,
    tracker: Option<Box<dyn AccessTracker>>,
    model: Option<HeatModel>,
    collects: Collects,
}

impl Collector {
    /// Builds the tracker, running from now on.
    fn new(factory: TrackerFactory) -> Result<Self, RunError> {
        let tracker = Some(factory.build()?);
        Ok(Self {
            factory,
            tracker,
            model: None,
            collects: Collects::default(),
        })
    }

    /// Drops the tracker until the next `collect()`.
    pub(super) fn stop(&mut self) {
        self.tracker = None;
    }

    /// One timed `collect()`, its sample counted and fed to the model;
    /// builds the tracker first if it was stopped (not timed).
    pub(super) fn collect(&mut self) -> Result<(), RunError> {
        let tracker = match &mut self.tracker {
            Some(t) => t,
            None => self.tracker.insert(self.factory.build()?),
        };
        let cpu_start = thread_cpu_time().map_err(RunError::Clock)?;
        let wall_start = Instant::now();
        let sample = tracker.collect()?;
        let wall = wall_start.elapsed();
        let cpu = thread_cpu_time().map_err(RunError::Clock)? - cpu_start;
        let collects = &mut self.collects;
        collects.cpu.push(cpu);
        collects.wall.push(wall);
        collects.dirty_pages += sample.dirty.iter().map(|&d| u64::from(d)).sum::<u64>();
        collects.accessed_pages += sample
            .accessed
            .iter()
            .zip(&sample.dirty)
            .map(|(&a, &d)| u64::from(a.max(d)))
            .sum::<u64>();
        let model = match &mut self.model {
            Some(m) => m,
            None => self.model.insert(HeatModel::new(
                sample.frames(),
                sample.pages_per_frame,
                HeatSettings::default(),
            )?),
        };
        model.update(&sample)?;
        Ok(())
    }

    /// Every call made.
    pub(super) fn finish(self) -> Collects {
        self.collects
    }
}

/// Guest throughput over phases `warmup..phases`, Mops/s: per vCPU its
/// operations over its own measured time, summed over vCPUs.
pub fn throughput(
    reports: &[PhaseReport],
    vcpus: u32,
    warmup: u32,
    phases: u32,
) -> Result<f64, RunError> {
    let counted = u64::from(warmup)..u64::from(phases);
    let mut total = 0.0;
    for vcpu in 0..vcpus {
        let mine: Vec<&PhaseReport> = reports
            .iter()
            .filter(|r| r.vcpu == vcpu && counted.contains(&r.phase))
            .collect();
        let expected = counted.clone().count();
        if mine.len() != expected {
            return Err(RunError::MissingReports {
                vcpu,
                got: mine.len(),
                expected,
            });
        }
        let ops: u64 = mine.iter().map(|r| r.ops).sum();
        let nanos: u64 = mine.iter().map(|r| r.nanos).sum();
        if nanos == 0 {
            return Err(RunError::NoGuestTime { vcpu });
        }
        total += ops as f64 * 1e3 / nanos as f64;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(vcpu: u32, phase: u64, ops: u64, nanos: u64) -> PhaseReport {
        PhaseReport {
            vcpu,
            phase,
            ops,
            bytes: ops * 8,
            nanos,
        }
    }

    #[test]
    fn throughput_sums_vcpus_and_skips_warmup() {
        let reports = [
            report(0, 0, 999_999, 1),
            report(1, 0, 999_999, 1),
            report(0, 1, 2_000_000, 1_000_000_000),
            report(1, 1, 1_000_000, 1_000_000_000),
            report(0, 2, 4_000_000, 1_000_000_000),
            report(1, 2, 1_000_000, 1_000_000_000),
        ];
        let mops = throughput(&reports, 2, 1, 3).unwrap();
        assert!((mops - 4.0).abs() < 1e-12, "{mops}");
    }

    #[test]
    fn missing_reports_and_zero_time_are_errors() {
        let reports = [report(0, 1, 10, 10), report(1, 1, 10, 0)];
        assert!(matches!(
            throughput(&reports, 2, 1, 3),
            Err(RunError::MissingReports {
                vcpu: 0,
                got: 1,
                expected: 2
            })
        ));
        assert!(matches!(
            throughput(&reports, 2, 1, 2),
            Err(RunError::NoGuestTime { vcpu: 1 })
        ));
    }

    #[test]
    fn vm_config_runs_the_workload_without_migration() {
        let settings = TrackSettings::new(true, None).unwrap();
        let config = vm_config(&settings, "hotset", settings.phases);
        assert_eq!(config.memory.tiers.len(), 1);
        assert_eq!(config.memory.size, settings.guest_bytes);
        assert!(!config.dirty_log_tracking);
        assert!(config.timeout.unwrap() > Duration::from_secs(100));
    }
}
