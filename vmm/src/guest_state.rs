//! What a running payload has told the VMM: phase reports, live progress,
//! the ground-truth access distribution, log counters and exit codes.
//! Written by vCPU threads (hypercalls), read by the runner and reports.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use serde::Serialize;

use guest_abi::AccessRange;

/// One vCPU's report of a finished phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseReport {
    /// vCPU index.
    pub vcpu: u32,
    /// Phase index.
    pub phase: u64,
    /// Operations done.
    pub ops: u64,
    /// Bytes touched.
    pub bytes: u64,
    /// Guest-measured duration in nanoseconds.
    pub nanos: u64,
}

impl PhaseReport {
    /// Operations per second (0 if no time was measured).
    pub fn ops_per_sec(&self) -> f64 {
        if self.nanos == 0 {
            0.0
        } else {
            self.ops as f64 * 1e9 / self.nanos as f64
        }
    }
}

/// Ground truth the payload declared for one phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroundTruth {
    /// Phase index.
    pub phase: u64,
    /// Access ranges (weights as given; not normalized).
    pub ranges: Vec<GroundTruthRange>,
}

/// Serializable form of [`AccessRange`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GroundTruthRange {
    /// First guest-physical address.
    pub gpa: u64,
    /// Length in bytes.
    pub len: u64,
    /// Relative weight.
    pub weight: f64,
    /// Share of writes.
    pub write_fraction: f64,
}

impl From<AccessRange> for GroundTruthRange {
    fn from(r: AccessRange) -> Self {
        GroundTruthRange {
            gpa: r.gpa,
            len: r.len,
            weight: r.weight,
            write_fraction: r.write_fraction,
        }
    }
}

/// Live counters of one vCPU, updated lock-free by `Progress` hypercalls.
#[derive(Debug, Default)]
pub struct VcpuProgress {
    /// Current phase.
    pub phase: AtomicU64,
    /// Operations done in the current phase.
    pub ops: AtomicU64,
    /// Total hypercalls handled.
    pub hypercalls: AtomicU64,
}

/// Most reports kept; more ends the VM (a payload reports once per phase).
pub const MAX_REPORTS: usize = 1 << 16;
/// Most phases with ground truth kept.
pub const MAX_GROUND_TRUTH_PHASES: usize = 1 << 10;

/// Shared state of one payload guest.
#[derive(Debug)]
pub struct GuestState {
    /// Per-vCPU live counters.
    pub vcpus: Vec<VcpuProgress>,
    /// When the VM started.
    pub started: Instant,
    reports: Mutex<Vec<PhaseReport>>,
    phase_starts: Mutex<BTreeMap<u64, f64>>,
    ground_truth: Mutex<BTreeMap<u64, Vec<AccessRange>>>,
    /// Log lines printed.
    pub log_printed: AtomicU64,
    /// Log lines dropped after the limit.
    pub log_suppressed: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks cannot leave the data inconsistent
    // (single pushes/inserts), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl GuestState {
    /// State for a guest with `vcpus` vCPUs.
    pub fn new(vcpus: u32) -> Self {
        GuestState {
            vcpus: (0..vcpus).map(|_| VcpuProgress::default()).collect(),
            started: Instant::now(),
            reports: Mutex::default(),
            phase_starts: Mutex::default(),
            ground_truth: Mutex::default(),
            log_printed: AtomicU64::new(0),
            log_suppressed: AtomicU64::new(0),
        }
    }

    /// Adds a report; false if the report limit is reached.
    pub fn add_report(&self, report: PhaseReport) -> bool {
        let mut reports = lock(&self.reports);
        if reports.len() >= MAX_REPORTS {
            return false;
        }
        reports.push(report);
        true
    }

    /// Records that `vcpu` entered `phase`; false if too many phases.
    pub fn start_phase(&self, vcpu: u32, phase: u64) -> bool {
        if let Some(p) = self.vcpus.get(vcpu as usize) {
            p.phase.store(phase, Ordering::Relaxed);
            p.ops.store(0, Ordering::Relaxed);
        }
        let mut starts = lock(&self.phase_starts);
        if starts.len() >= MAX_REPORTS && !starts.contains_key(&phase) {
            return false;
        }
        let now = self.started.elapsed().as_secs_f64();
        starts.entry(phase).or_insert(now);
        true
    }

    /// Stores the ground truth of `phase`; false if too many phases.
    pub fn set_ground_truth(&self, phase: u64, ranges: Vec<AccessRange>) -> bool {
        let mut gt = lock(&self.ground_truth);
        if gt.len() >= MAX_GROUND_TRUTH_PHASES && !gt.contains_key(&phase) {
            return false;
        }
        gt.insert(phase, ranges);
        true
    }

    /// All reports so far, in arrival order.
    pub fn reports(&self) -> Vec<PhaseReport> {
        lock(&self.reports).clone()
    }

    /// Seconds after start at which each phase began (first vCPU to enter).
    pub fn phase_starts(&self) -> BTreeMap<u64, f64> {
        lock(&self.phase_starts).clone()
    }

    /// Ground truth per phase.
    pub fn ground_truth(&self) -> Vec<GroundTruth> {
        lock(&self.ground_truth)
            .iter()
            .map(|(&phase, ranges)| GroundTruth {
                phase,
                ranges: ranges.iter().copied().map(Into::into).collect(),
            })
            .collect()
    }
}
