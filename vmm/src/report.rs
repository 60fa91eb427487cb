//! The final report of a run: what ran, where its memory lived, per-phase
//! throughput, and how it ended; printed for people and saved as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use guest_memory::{BatchReport, TierSpeed, TierUsage, TieredMemory};
use tiering::EngineStats;

use crate::guest_state::{GroundTruth, GuestState, PhaseReport};
use crate::placement_check::PlacementCheck;
use crate::vm::VmEnd;

/// Tier occupancy at the end of the run.
#[derive(Clone, Debug, Serialize)]
pub struct TierReport {
    /// Tier name.
    pub name: String,
    /// Frames the tier can hold.
    pub capacity_frames: u64,
    /// Frames placed on it.
    pub used_frames: u64,
    /// How fast its memory is.
    pub speed: TierSpeed,
}

impl From<&TierUsage> for TierReport {
    fn from(u: &TierUsage) -> Self {
        TierReport {
            name: u.name.clone(),
            capacity_frames: u.capacity_frames as u64,
            used_frames: u.used_frames as u64,
            speed: u.speed.clone(),
        }
    }
}

/// A stop signal that ended the run (see [`crate::stop_signals`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SignalStop {
    /// `SIGINT` or `SIGTERM`.
    pub signal: String,
    /// Whether the grace period ran out and the vCPUs were stopped hard
    /// (the guest did not finish on its own).
    pub hard_stop: bool,
}

/// Everything `--report-json` writes.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// The payload's argument string.
    pub workload: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Guest RAM in bytes.
    pub memory_bytes: u64,
    /// Frame size in bytes.
    pub frame_size: u64,
    /// Tiers at the end.
    pub tiers: Vec<TierReport>,
    /// Per-vCPU, per-phase reports.
    pub phases: Vec<PhaseReport>,
    /// Seconds after start at which each phase began.
    pub phase_starts: Vec<(u64, f64)>,
    /// Ground-truth access distribution per phase (harness-only data).
    pub ground_truth: Vec<GroundTruth>,
    /// Guest log lines printed and suppressed.
    pub log_lines: u64,
    /// Guest log lines dropped after the limit.
    pub log_suppressed: u64,
    /// Wall-clock seconds the guest ran.
    pub elapsed_s: f64,
    /// Frames moved during the run (`--shuffle`), if any mover ran.
    pub migrations: Option<BatchReport>,
    /// The tiering engine's counters at the end, if it ran.
    pub tiering: Option<EngineStats>,
    /// Whether the placement map agreed with the backing at the end.
    pub placement_check: Option<PlacementCheck>,
    /// How the VM ended.
    pub end: VmEnd,
    /// The operator's stop signal, when one ended the run.
    pub stopped_by_signal: Option<SignalStop>,
}

impl RunReport {
    /// Collects the report of a finished run.
    pub fn collect(
        workload: &str,
        vcpus: u32,
        memory_bytes: u64,
        frame_size: u64,
        state: &GuestState,
        tiers: &[TierUsage],
        end: VmEnd,
    ) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        RunReport {
            workload: workload.into(),
            vcpus,
            memory_bytes,
            frame_size,
            tiers: tiers.iter().map(Into::into).collect(),
            phases: state.reports(),
            phase_starts: state.phase_starts().into_iter().collect(),
            ground_truth: state.ground_truth(),
            log_lines: state.log_printed.load(Relaxed),
            log_suppressed: state.log_suppressed.load(Relaxed),
            elapsed_s: state.started.elapsed().as_secs_f64(),
            migrations: None,
            tiering: None,
            placement_check: None,
            end,
            stopped_by_signal: None,
        }
    }

    /// The report of a run whose frames no longer move (engine and movers
    /// stopped): collected, with the engine's last counters and the
    /// placement check of `memory` (a check during a migration would see
    /// a frame mid-move).
    pub fn of_stopped_run(
        workload: &str,
        vcpus: u32,
        memory: &TieredMemory,
        state: &GuestState,
        end: VmEnd,
        tiering: Option<EngineStats>,
    ) -> Self {
        let mut report = Self::collect(
            workload,
            vcpus,
            memory.frame_count() as u64 * memory.frame_size(),
            memory.frame_size(),
            state,
            &memory.tier_usage(),
            end,
        );
        report.tiering = tiering;
        report.placement_check = Some(PlacementCheck::run(memory));
        report
    }

    /// The report as a table for people.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "workload: {} on {} vCPU(s), {} guest RAM, {} frames",
            self.workload,
            self.vcpus,
            guest_memory::format_size(self.memory_bytes),
            guest_memory::format_size(self.frame_size)
        );
        for t in &self.tiers {
            let _ = writeln!(
                out,
                "tier {:<8} {:>7} / {:<7} frames used, read {}",
                t.name,
                t.used_frames,
                t.capacity_frames,
                t.speed.describe()
            );
        }
        if !self.phases.is_empty() {
            let _ = writeln!(
                out,
                "{:>5} {:>5} {:>14} {:>10} {:>12}",
                "phase", "vcpu", "ops", "seconds", "Mops/s"
            );
            let mut phases = self.phases.clone();
            phases.sort_by_key(|p| (p.phase, p.vcpu));
            for p in &phases {
                let _ = writeln!(
                    out,
                    "{:>5} {:>5} {:>14} {:>10.3} {:>12.2}",
                    p.phase,
                    p.vcpu,
                    p.ops,
                    p.nanos as f64 / 1e9,
                    p.ops_per_sec() / 1e6
                );
            }
        }
        if let Some(m) = &self.migrations {
            let _ = writeln!(
                out,
                "migrations: {} frames moved ({} exchanged, {} aborted), {}, copy {:.3} s, max write stall {:.3} ms",
                m.moved,
                m.exchanged,
                m.aborted,
                guest_memory::format_size(m.bytes),
                m.copy.as_secs_f64(),
                m.stall_max.as_secs_f64() * 1e3
            );
        }
        if let Some(t) = &self.tiering {
            let _ = writeln!(
                out,
                "tiering: {} promoted, {} demoted ({} exchanged, {} aborted) over {} intervals, \
                 threshold {}, hot set ~{}",
                guest_memory::format_size(t.promotions.bytes),
                guest_memory::format_size(t.demotions.bytes),
                t.exchanges,
                t.aborted,
                t.intervals,
                t.describe_threshold(self.frame_size),
                guest_memory::format_size(t.hot_set_bytes)
            );
            let _ = writeln!(out, "engine cost: {}", t.cost.describe());
            for w in &t.warnings {
                let _ = writeln!(out, "warning: {}", w.describe());
            }
        }
        if let Some(c) = &self.placement_check {
            let _ = writeln!(out, "placement check: {}", c.describe());
        }
        if self.log_suppressed > 0 {
            let _ = writeln!(
                out,
                "guest log: {} lines suppressed after {}",
                self.log_suppressed, self.log_lines
            );
        }
        if let Some(stop) = &self.stopped_by_signal {
            let how = if stop.hard_stop {
                "the vCPUs were stopped after the grace period"
            } else {
                "the guest finished on its stop request"
            };
            let _ = writeln!(out, "stopped by {}: {how}", stop.signal);
        }
        let _ = writeln!(
            out,
            "result: {} after {:.1} s",
            self.end.describe(),
            self.elapsed_s
        );
        out
    }
}
