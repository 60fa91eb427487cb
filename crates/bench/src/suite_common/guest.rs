//! One measured guest run of the policy and workloads suites: a fresh VM
//! on two memfd tiers running one phased workload (with the tiering
//! engine on, when the run's spec says so), the placement of every
//! frame sampled from the VM runner's tick, and afterwards the payload's
//! ground truth (read here, never handed to the engine), its phase reports
//! and the engine's counters.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use guest_abi::{AccessRange, GpaRange};
use guest_memory::{BackendSpec, MemoryConfig, Placement, TierSpec, TieredMemory};
use tiering::{EngineStats, TieringPolicy};
use vmm::guest_state::{GuestState, PhaseReport};
use vmm::migration::{MigrationConfig, MigratorKind};
use vmm::vm::{PayloadSource, Vm, VmConfig, VmEnd, VmError};

/// Seconds a run may take beyond its phases (boot, warm-up writes).
const SLACK_SECS: f64 = 120.0;

/// Why one guest run failed.
#[derive(Debug, Error)]
pub enum RunError {
    /// The VMM refused the configuration or could not create the VM (or
    /// start its engine).
    #[error("create VM")]
    Create(#[source] VmError),
    /// The VM was created without an engine.
    #[error("the VM runs no tiering engine")]
    NoEngine,
    /// The vCPU threads could not run.
    #[error("run the VM")]
    Run(#[source] VmError),
    /// The guest did not end successfully.
    #[error("guest: {0}")]
    Guest(String),
}

/// The placement at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since the guest state was created (the clock of the
    /// payload's phase starts).
    pub at_secs: f64,
    /// The phase running, when one is: its start was announced and no
    /// vCPU has reported it finished.
    pub phase: Option<u64>,
    /// Tier of every frame.
    pub tiers: Vec<u8>,
}

/// Everything a run recorded.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Placement samples, in time order.
    pub samples: Vec<Sample>,
    /// Seconds (same clock as the samples) at which each phase began.
    pub phase_starts: BTreeMap<u64, f64>,
    /// Ground truth per phase.
    pub truths: BTreeMap<u64, Vec<AccessRange>>,
    /// Every vCPU's phase reports.
    pub reports: Vec<PhaseReport>,
    /// Guest RAM, for the oracle's frame numbering.
    pub ram: Vec<GpaRange>,
    /// The engine's counters after the run.
    pub stats: EngineStats,
}

/// How one guest run is set up: guest shape, how long, where frames
/// start (the fast tier's size and the initial placement) and whether the
/// tiering engine runs. The policy suite's runs are one kind
/// ([`PolicySettings::run_spec`]); the workloads suite describes its
/// bounds and static placements with it too.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    /// Guest RAM, bytes.
    pub guest_bytes: u64,
    /// Bytes per frame.
    pub frame_size: u64,
    /// vCPUs.
    pub vcpus: u32,
    /// Phases the payload runs (for the timeout).
    pub phases: u32,
    /// Seconds per phase (for the timeout).
    pub phase_seconds: f64,
    /// Milliseconds between placement samples.
    pub sample_ms: u64,
    /// Size of the fast tier (tier 0), bytes; the slow tier holds all of
    /// guest RAM.
    pub fast_bytes: u64,
    /// Where frames start.
    pub placement: Placement,
    /// The engine's policy, when it runs.
    pub tiering: Option<TieringPolicy>,
    /// Host NUMA nodes of the fast and the slow tier, when bound (a host
    /// with real tiers); `None` leaves both to the kernel.
    pub tier_nodes: Option<[u32; 2]>,
}

/// The VM configuration of a run of `args` as `spec` describes: two memfd
/// tiers (fast = `spec.fast_bytes`, slow = all of RAM, each on its node
/// of `spec.tier_nodes` when given), the remap-precopy migrator, the
/// engine when `spec.tiering` names a policy.
pub fn spec_config(spec: &RunSpec, args: &str) -> VmConfig {
    let seconds = f64::from(spec.phases) * spec.phase_seconds + SLACK_SECS;
    let tier = |name: &str, size: u64, index: usize| TierSpec {
        name: name.to_owned(),
        backend: BackendSpec::Memfd {
            numa_node: spec.tier_nodes.map(|nodes| nodes[index]),
            hugetlb: false,
            prealloc: false,
        },
        size: Some(size),
        profile: None,
    };
    VmConfig {
        vcpus: spec.vcpus,
        memory: MemoryConfig {
            size: spec.guest_bytes,
            frame_size: spec.frame_size,
            tiers: vec![
                tier("fast", spec.fast_bytes, 0),
                tier("slow", spec.guest_bytes, 1),
            ],
            placement: spec.placement,
            ..MemoryConfig::default()
        },
        payload: PayloadSource::Embedded,
        args: args.to_owned(),
        timeout: Some(Duration::from_secs_f64(seconds)),
        migration: MigrationConfig {
            migrator: MigratorKind::RemapPrecopy,
            ..MigrationConfig::default()
        },
        dirty_log_tracking: false,
        tiering: spec.tiering.clone(),
    }
}

/// Runs `args` in a fresh VM as `spec` describes, sampling the placement
/// every `spec.sample_ms`. Without an engine the counters are all zero.
pub fn run_spec(spec: &RunSpec, args: &str) -> Result<Trace, RunError> {
    let config = spec_config(spec, args);
    let mut vm = Vm::with_trackers(&config, Arc::new(|_, _| {}), &[]).map_err(RunError::Create)?;
    let engine = vm.engine().cloned();
    if spec.tiering.is_some() && engine.is_none() {
        return Err(RunError::NoEngine);
    }
    let memory = vm.memory().clone();
    let ram = memory
        .regions()
        .iter()
        .map(|r| GpaRange {
            start: r.gpa,
            len: r.len,
        })
        .collect();
    let mut samples = Vec::new();
    let tick = Duration::from_millis(spec.sample_ms);
    let end = vm
        .run(tick, &mut |state, _| {
            samples.push(sample(state, &memory));
        })
        .map_err(RunError::Run)?;
    if end != VmEnd::Success {
        return Err(RunError::Guest(end.describe()));
    }
    let state = vm.state();
    Ok(Trace {
        samples,
        phase_starts: state.phase_starts(),
        truths: state
            .ground_truth()
            .into_iter()
            .map(|t| {
                let ranges = t
                    .ranges
                    .iter()
                    .map(|r| AccessRange {
                        gpa: r.gpa,
                        len: r.len,
                        weight: r.weight,
                        write_fraction: r.write_fraction,
                    })
                    .collect();
                (t.phase, ranges)
            })
            .collect(),
        reports: state.reports(),
        ram,
        stats: engine.map_or_else(EngineStats::default, |e| (*e.stats()).clone()),
    })
}

fn sample(state: &GuestState, memory: &TieredMemory) -> Sample {
    let at_secs = state.started.elapsed().as_secs_f64();
    let phase = state.phase_starts().keys().next_back().copied();
    let phase = phase.filter(|&p| !state.reports().iter().any(|r| r.phase == p));
    let tiers = memory.with_placement(|m| {
        m.iter()
            .map(|(_, loc)| u8::try_from(loc.tier.index()).unwrap_or(u8::MAX))
            .collect()
    });
    Sample {
        at_secs,
        phase,
        tiers,
    }
}
