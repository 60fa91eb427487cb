//! From one run's trace to its result: the oracle of each phase (built
//! from the payload's ground truth after the run, with room for the run's
//! fast frames), the DRAM-hit ratio of every placement sample, guest
//! throughput and demand per phase, bytes migrated, the engine's counters
//! and the modeled cost on DRAM+CXL and DRAM+Optane. Boot and warm-up
//! (before phase 0) are left out.

use super::result::{HitPoint, ModeledCost, PhaseResult, RunResult};
use super::settings::{RunCase, WorkloadsSettings};
use super::tier_map::TierMap;
use crate::model::{Demand, MODELS, Pattern};
use crate::policy::TARGET_AFTER_SHIFT;
use crate::stats::{mean, ratio};
use crate::suite_common::{
    Analysis, GuestRun, PhaseRow, RunRow, ScoredRun, ScoredSample, Trace, convergence_secs,
    engine_summary, longest_convergence, migration_rates, phase_mops,
};

impl Analysis for WorkloadsSettings {
    type Case = RunCase;
    type Point = HitPoint;
    type Run = RunResult;

    fn guest_run(&self) -> &GuestRun {
        &self.run
    }

    fn room(&self, case: &RunCase) -> usize {
        self.fast_frames(case)
    }

    fn point(s: ScoredSample<'_>) -> HitPoint {
        HitPoint {
            secs: s.secs,
            phase: s.phase,
            dram_hit: s.hit,
            oracle_hit: s.oracle.best,
        }
    }

    fn result(&self, run: ScoredRun<'_, Self>) -> RunResult {
        workloads_result(self, run)
    }
}

/// The result of a run scored against its oracles: per phase with its
/// modeled cost, then over the run.
fn workloads_result(
    settings: &WorkloadsSettings,
    run: ScoredRun<'_, WorkloadsSettings>,
) -> RunResult {
    let (case, workload, trace, origin) = (run.case, run.workload, run.trace, run.clock.origin);
    let (room, oracles, timeline) = (run.room, run.oracles, run.timeline);
    let phases: Vec<PhaseResult> = oracles
        .iter()
        .filter(|(phase, _)| trace.phase_starts.contains_key(phase))
        .map(|(&phase, o)| {
            let points: Vec<&HitPoint> = timeline.iter().filter(|p| p.phase == phase).collect();
            let demand = phase_demand(trace, phase);
            let dram_hit = mean(points.iter().map(|p| p.dram_hit));
            let start_secs = trace.phase_starts.get(&phase).map_or(0.0, |s| s - origin);
            PhaseResult {
                row: PhaseRow {
                    phase,
                    start_secs,
                    samples: points.len(),
                    mops: phase_mops(&trace.reports, phase, settings.run.vcpus),
                    oracle_hit: o.best,
                    convergence_secs: convergence_secs(
                        points
                            .iter()
                            .map(|p| (p.secs - start_secs, ratio(p.dram_hit, p.oracle_hit))),
                        TARGET_AFTER_SHIFT,
                    ),
                },
                dram_hit,
                demand,
                modeled: dram_hit.map_or_else(Vec::new, |hit| {
                    modeled(hit, &demand, settings.pattern(workload))
                }),
            }
        })
        .collect();

    let span_secs = timeline.last().map_or(0.0, |p| p.secs.max(0.0));
    let in_phases: Vec<_> = trace
        .stats
        .recent
        .iter()
        .filter(|r| r.at_ms as f64 / 1e3 >= origin)
        .collect();
    let moved_bytes: u64 = in_phases.iter().map(|r| r.bytes).sum();
    let frames_bytes = |frames: usize| frames as u64 * settings.run.frame_size;
    let engine = case.config.tracker().map(|_| engine_summary(&trace.stats));
    let bound = case.config.is_bound();
    let engine_runs = engine.is_some();
    RunResult {
        row: RunRow {
            workload: workload.to_owned(),
            args: settings.run.workload_args(workload),
            mops: mean(phases.iter().filter_map(|p| p.row.mops)),
            convergence_secs: if bound {
                None
            } else {
                longest_convergence(
                    phases
                        .iter()
                        .filter(|p| p.row.phase > 0)
                        .map(|p| p.row.convergence_secs),
                )
            },
            rates: if engine_runs {
                migration_rates(&trace.stats.recent, origin)
            } else {
                Vec::new()
            },
        },
        config: case.config,
        share: case.share,
        mix: None,
        fast_frames: room,
        dram_hit: mean(timeline.iter().map(|p| p.dram_hit)),
        oracle_hit: mean(timeline.iter().map(|p| p.oracle_hit)),
        moved_bytes,
        promoted_bytes: in_phases.iter().map(|r| frames_bytes(r.promoted)).sum(),
        demoted_bytes: in_phases.iter().map(|r| frames_bytes(r.demoted)).sum(),
        migrate_mbps: (span_secs > 0.0).then(|| moved_bytes as f64 / 1e6 / span_secs),
        modeled: total_modeled(&phases),
        phases,
        engine,
        timeline,
        tier_map: if bound {
            None
        } else {
            TierMap::from_samples(&trace.samples, origin, settings.run.sample_ms as f64 / 1e3)
        },
    }
}

/// Every vCPU's report of `phase`, summed.
fn phase_demand(trace: &Trace, phase: u64) -> Demand {
    trace
        .reports
        .iter()
        .filter(|r| r.phase == phase)
        .fold(Demand::default(), |d, r| Demand {
            ops: d.ops + r.ops,
            bytes: d.bytes + r.bytes,
            nanos: d.nanos + r.nanos,
        })
}

fn modeled(fast_share: f64, demand: &Demand, pattern: Pattern) -> Vec<ModeledCost> {
    MODELS
        .iter()
        .map(|model| {
            let m = model.model(fast_share, demand, pattern);
            ModeledCost {
                model: model.name.to_owned(),
                stall_secs: m.stall_secs,
                extra_secs: (m.stall_secs - m.all_fast_stall_secs).max(0.0),
                measured_secs: demand.nanos as f64 / 1e9,
                ops: demand.ops,
                relative_throughput: m.relative_throughput,
            }
        })
        .collect()
}

/// The run's modeled cost per model: the phases' stalls and measured
/// times summed, relative throughput over their sum.
fn total_modeled(phases: &[PhaseResult]) -> Vec<ModeledCost> {
    MODELS
        .iter()
        .map(|model| {
            let costs: Vec<&ModeledCost> = phases
                .iter()
                .flat_map(|p| p.modeled.iter())
                .filter(|c| c.model == model.name)
                .collect();
            let measured: f64 = costs.iter().map(|c| c.measured_secs).sum();
            let extra: f64 = costs.iter().map(|c| c.extra_secs).sum();
            ModeledCost {
                model: model.name.to_owned(),
                stall_secs: costs.iter().map(|c| c.stall_secs).sum(),
                extra_secs: extra,
                measured_secs: measured,
                ops: costs.iter().map(|c| c.ops).sum(),
                relative_throughput: (measured > 0.0).then(|| measured / (measured + extra)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use guest_abi::GpaRange;
    use vmm::guest_state::PhaseReport;

    use super::*;
    use crate::suite_common::Sample;
    use crate::suite_common::{AnalysisError, analyze};
    use crate::testing::{hot_frame, sample_workloads_trace};
    use crate::workloads::settings::Config;

    const MIB: u64 = 1 << 20;

    /// A 64 MiB guest (32 frames) whose phase 0 makes frame 1 hot and
    /// phase 1 frame 20; the placement keeps frames 0..8 fast.
    fn trace() -> Trace {
        let hot = |frame: u64| hot_frame(frame, 0.0);
        let tiers: Vec<u8> = (0..32).map(|f| u8::from(f >= 8)).collect();
        let samples = (0..10)
            .map(|i| Sample {
                at_secs: 10.0 + f64::from(i) * 0.2,
                phase: Some(u64::from(i >= 5)),
                tiers: tiers.clone(),
            })
            .collect();
        let report = |phase| PhaseReport {
            vcpu: 0,
            phase,
            ops: 1_000_000,
            bytes: 8_000_000,
            nanos: 100_000_000,
        };
        Trace {
            samples,
            phase_starts: [(0, 10.0), (1, 11.0)].into(),
            truths: [(0, hot(1)), (1, hot(20))].into(),
            reports: vec![report(0), report(1)],
            ram: vec![GpaRange {
                start: 0,
                len: 64 * MIB,
            }],
            stats: tiering::EngineStats::default(),
        }
    }

    #[test]
    fn first_touch_hits_only_while_the_hot_frame_is_low() {
        let mut s = WorkloadsSettings::new(true, Some(64 << 20)).unwrap();
        s.run.vcpus = 1;
        let case = RunCase {
            config: Config::FirstTouch,
            share: Some(0.25),
        };
        let r = analyze(&s, &case, "hotset", &trace()).unwrap();
        assert_eq!(r.fast_frames, 8);
        assert_eq!(r.timeline.len(), 10);
        let [p0, p1] = r.phases.as_slice() else {
            panic!("{:?}", r.phases)
        };
        assert_eq!((p0.dram_hit, p1.dram_hit), (Some(1.0), Some(0.0)));
        assert_eq!((p0.row.oracle_hit, p1.row.oracle_hit), (1.0, 1.0));
        assert_eq!(r.dram_hit, Some(0.5));
        assert_eq!(p0.row.mops, Some(10.0));
        assert!(r.engine.is_none());
        // Phase 0 runs at DRAM speed, phase 1 all on the slow tier: on
        // Optane 10^6 × (305 − 81) ns = 0.224 s extra over 0.2 s measured.
        let optane = r.modeled.iter().find(|c| c.model == "DRAM+Optane").unwrap();
        assert!((optane.extra_secs - 0.224).abs() < 1e-9, "{optane:?}");
        assert!((optane.relative_throughput.unwrap() - 0.2 / 0.424).abs() < 1e-9);
        assert_eq!(optane.ops, 2_000_000);
        assert_eq!(p0.modeled[1].relative_throughput, Some(1.0));
    }

    #[test]
    fn the_bounds_have_all_or_no_room() {
        let mut s = WorkloadsSettings::new(true, Some(64 << 20)).unwrap();
        s.run.vcpus = 1;
        let slow = RunCase {
            config: Config::AllSlow,
            share: None,
        };
        let mut t = trace();
        for sample in &mut t.samples {
            sample.tiers = vec![1; 32];
        }
        let r = analyze(&s, &slow, "hotset", &t).unwrap();
        assert_eq!((r.dram_hit, r.oracle_hit), (Some(0.0), Some(0.0)));
        let fast = RunCase {
            config: Config::AllFast,
            share: None,
        };
        for sample in &mut t.samples {
            sample.tiers = vec![0; 32];
        }
        let r = analyze(&s, &fast, "hotset", &t).unwrap();
        assert_eq!((r.dram_hit, r.oracle_hit), (Some(1.0), Some(1.0)));
        assert!(r.modeled.iter().all(|c| c.relative_throughput == Some(1.0)));
    }

    #[test]
    fn the_engine_run_converges_after_the_shift_and_keeps_its_moves() {
        let mut s = WorkloadsSettings::new(true, Some(64 << 20)).unwrap();
        s.run.workloads = vec!["hotset".to_owned()];
        let case = RunCase {
            config: Config::TieringDirtyLog,
            share: Some(0.25),
        };
        let r = analyze(&s, &case, "hotset", &sample_workloads_trace(true)).unwrap();
        let [p0, p1] = r.phases.as_slice() else {
            panic!("{:?}", r.phases)
        };
        assert_eq!((p0.row.start_secs, p1.row.start_secs), (0.0, 1.0));
        // Frame 1 is fast from the start; frame 20 from 11.5 s on.
        assert_eq!(p0.row.convergence_secs, Some(0.0));
        assert!(
            (p1.row.convergence_secs.unwrap() - 0.5).abs() < 1e-9,
            "{p1:?}"
        );
        assert_eq!(r.row.convergence_secs, p1.row.convergence_secs);
        // Boot's promotion is left out; the swap at 11.4 s is counted.
        assert_eq!((r.promoted_bytes, r.demoted_bytes), (2 * MIB, 2 * MIB));
        assert_eq!(r.moved_bytes, 4 * MIB);
        assert_eq!(r.row.rates.len(), 2);
        let map = r.tier_map.as_ref().unwrap();
        assert_eq!((map.frames, map.columns()), (32, 20));
        assert_eq!(map.rows[20], [[15, 0], [5, crate::workloads::LEVELS]]);

        // Without an engine nothing moves and phase 1 never converges.
        let touch = RunCase {
            config: Config::FirstTouch,
            share: Some(0.25),
        };
        let r = analyze(&s, &touch, "hotset", &sample_workloads_trace(false)).unwrap();
        assert_eq!(r.phases[1].row.convergence_secs, None);
        assert_eq!(r.row.convergence_secs, None);
        assert!(r.row.rates.is_empty() && r.promoted_bytes == 0);
        assert!(r.tier_map.is_some());
        let bound = RunCase {
            config: Config::AllFast,
            share: None,
        };
        let r = analyze(&s, &bound, "hotset", &sample_workloads_trace(false)).unwrap();
        assert!(r.tier_map.is_none() && r.row.convergence_secs.is_none());
    }

    #[test]
    fn no_phase_is_an_error() {
        let s = WorkloadsSettings::new(true, None).unwrap();
        let mut t = trace();
        t.phase_starts.clear();
        let case = RunCase {
            config: Config::AllFast,
            share: None,
        };
        assert!(matches!(
            analyze(&s, &case, "hotset", &t),
            Err(AnalysisError::NoPhases)
        ));
    }
}
