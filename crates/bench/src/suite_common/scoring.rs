//! What both suites read from a finished run besides the oracle: guest
//! throughput per phase, convergence after a phase shift, the engine's
//! migration rate and its counters.

use serde::{Deserialize, Serialize};

use tiering::EngineStats;
use tiering::stats::IntervalRecord;
use vmm::guest_state::PhaseReport;

/// The engine's counters after a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSummary {
    /// Intervals completed.
    pub intervals: u64,
    /// Frames promoted.
    pub promoted_frames: u64,
    /// Bytes promoted.
    pub promoted_bytes: u64,
    /// Frames demoted.
    pub demoted_frames: u64,
    /// Bytes demoted.
    pub demoted_bytes: u64,
    /// Exchanges (a promotion paired with a demotion).
    pub exchanges: u64,
    /// Moves the migrator aborted.
    pub aborted: u64,
    /// Tracker failures.
    pub tracker_errors: u64,
    /// The engine's last error, if any.
    pub last_error: Option<String>,
    /// Mean µs per interval collecting the tracker's sample.
    pub collect_us: f64,
    /// Mean µs per interval updating the heat model.
    pub heat_us: f64,
    /// Mean µs per interval planning.
    pub plan_us: f64,
    /// Mean µs per interval migrating.
    pub migrate_us: f64,
}

/// Migration rate over one engine interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatePoint {
    /// The interval's end, seconds after phase 0 began.
    pub secs: f64,
    /// MB/s (10^6 bytes) moved both ways.
    pub mbps: f64,
}

/// Seconds from a phase's start until its engine/oracle ratio first
/// reached `target` (the policy issue's after-shift target,
/// `policy::TARGET_AFTER_SHIFT`, in both suites), from `(seconds since the
/// phase began, ratio)` per sample in time order; `None` when it never did.
pub fn convergence_secs(
    points: impl IntoIterator<Item = (f64, Option<f64>)>,
    target: f64,
) -> Option<f64> {
    points
        .into_iter()
        .find(|(_, ratio)| ratio.is_some_and(|r| r >= target))
        .map(|(since, _)| since.max(0.0))
}

/// The longest of the phases' convergence times; `None` when there is
/// none or one phase never converged.
pub fn longest_convergence(phases: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    phases
        .into_iter()
        .try_fold(None, |worst: Option<f64>, c| {
            c.map(|c| Some(worst.map_or(c, |w| w.max(c))))
        })
        .flatten()
}

/// Guest throughput of `phase`, Mops/s: per vCPU its operations over its
/// own measured time, summed; `None` unless every vCPU reported it.
pub fn phase_mops(reports: &[PhaseReport], phase: u64, vcpus: u32) -> Option<f64> {
    let mut total = 0.0;
    for vcpu in 0..vcpus {
        let r = reports
            .iter()
            .find(|r| r.vcpu == vcpu && r.phase == phase)?;
        if r.nanos == 0 {
            return None;
        }
        total += r.ops as f64 * 1e3 / r.nanos as f64;
    }
    Some(total)
}

/// Migration rate per engine interval from phase 0 on, MB/s (10^6
/// bytes), at each interval's end; `origin` is phase 0's start in seconds
/// (the engine's and the guest's clocks start together, at VM creation).
pub fn migration_rates(recent: &[IntervalRecord], origin: f64) -> Vec<RatePoint> {
    let mut points = Vec::new();
    // The first interval began when the engine did (its clock's zero):
    // its moves count too, which matters when the guest's phase 0 began
    // before the engine's first interval ended.
    let mut previous = 0;
    for r in recent {
        let at = r.at_ms as f64 / 1e3 - origin;
        let span_ms = r.at_ms.saturating_sub(previous);
        previous = r.at_ms;
        if at < 0.0 || span_ms == 0 {
            continue;
        }
        points.push(RatePoint {
            secs: at,
            mbps: r.bytes as f64 / 1e6 / (span_ms as f64 / 1e3),
        });
    }
    points
}

/// The engine's counters in a run's result: totals, and mean µs per
/// interval of each stage.
pub fn engine_summary(stats: &EngineStats) -> EngineSummary {
    let per_interval = |micros: u64| {
        if stats.intervals == 0 {
            0.0
        } else {
            micros as f64 / stats.intervals as f64
        }
    };
    let s = &stats.stage_micros;
    EngineSummary {
        intervals: stats.intervals,
        promoted_frames: stats.promotions.frames,
        promoted_bytes: stats.promotions.bytes,
        demoted_frames: stats.demotions.frames,
        demoted_bytes: stats.demotions.bytes,
        exchanges: stats.exchanges,
        aborted: stats.aborted,
        tracker_errors: stats.tracker_errors,
        last_error: stats.last_error.clone(),
        collect_us: per_interval(s.collect),
        heat_us: per_interval(s.heat),
        plan_us: per_interval(s.plan),
        migrate_us: per_interval(s.migrate),
    }
}
