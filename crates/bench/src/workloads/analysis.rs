//! From one run's trace to its result: the oracle of each phase (built
//! from the payload's ground truth after the run, with room for the run's
//! fast frames), the DRAM-hit ratio of every placement sample, guest
//! throughput and demand per phase, bytes migrated, the engine's counters
//! and the modeled cost on DRAM+CXL and DRAM+Optane. Boot and warm-up
//! (before phase 0) are left out.

use std::collections::BTreeMap;

use thiserror::Error;

use oracle::{Oracle, OracleError};

use super::result::{HitPoint, ModeledCost, PhaseResult, RunResult};
use super::settings::{RunCase, WorkloadsSettings};
use crate::model::{Demand, MODELS, Pattern};
use crate::policy::{Trace, dram_hit, engine_summary, oracle_hit, phase_mops};
use crate::stats::mean;

/// Why a trace could not be analysed.
#[derive(Debug, Error)]
pub enum AnalysisError {
    /// The payload announced no phase.
    #[error("the guest began no phase")]
    NoPhases,
    /// A phase's ground truth does not fit guest RAM.
    #[error("ground truth of phase {phase}")]
    Oracle {
        /// The phase.
        phase: u64,
        /// What the oracle refused.
        #[source]
        source: OracleError,
    },
}

/// Builds the result of `workload` under `case` from its trace.
pub fn analyze(
    settings: &WorkloadsSettings,
    case: &RunCase,
    workload: &str,
    trace: &Trace,
) -> Result<RunResult, AnalysisError> {
    let room = settings.fast_frames(case);
    let origin = *trace.phase_starts.get(&0).ok_or(AnalysisError::NoPhases)?;
    let mut oracles = BTreeMap::new();
    for (&phase, ranges) in &trace.truths {
        let oracle = Oracle::new(&trace.ram, settings.frame_size, ranges)
            .map_err(|source| AnalysisError::Oracle { phase, source })?;
        let access = oracle.access_probabilities().to_vec();
        let best = oracle_hit(&access, room);
        oracles.insert(phase, (access, best));
    }
    let timeline: Vec<HitPoint> = trace
        .samples
        .iter()
        .filter_map(|s| {
            let phase = s.phase?;
            let (access, best) = oracles.get(&phase)?;
            Some(HitPoint {
                secs: s.at_secs - origin,
                phase,
                dram_hit: dram_hit(access, &s.tiers),
                oracle_hit: *best,
            })
        })
        .collect();

    let phases: Vec<PhaseResult> = oracles
        .iter()
        .filter(|(phase, _)| trace.phase_starts.contains_key(phase))
        .map(|(&phase, (_, best))| {
            let points: Vec<&HitPoint> = timeline.iter().filter(|p| p.phase == phase).collect();
            let demand = phase_demand(trace, phase);
            let dram_hit = mean(points.iter().map(|p| p.dram_hit));
            PhaseResult {
                phase,
                samples: points.len(),
                mops: phase_mops(&trace.reports, phase, settings.vcpus),
                dram_hit,
                oracle_hit: *best,
                demand,
                modeled: dram_hit.map_or_else(Vec::new, |hit| {
                    modeled(hit, &demand, settings.pattern(workload))
                }),
            }
        })
        .collect();

    let span_secs = timeline.last().map_or(0.0, |p| p.secs.max(0.0));
    let moved_bytes: u64 = trace
        .stats
        .recent
        .iter()
        .filter(|r| r.at_ms as f64 / 1e3 >= origin)
        .map(|r| r.bytes)
        .sum();
    let engine = case.config.tracker().map(|_| engine_summary(&trace.stats));
    Ok(RunResult {
        workload: workload.to_owned(),
        args: settings.workload_args(workload),
        config: case.config,
        share: case.share,
        mix: None,
        fast_frames: room,
        dram_hit: mean(timeline.iter().map(|p| p.dram_hit)),
        oracle_hit: mean(timeline.iter().map(|p| p.oracle_hit)),
        mops: mean(phases.iter().filter_map(|p| p.mops)),
        moved_bytes,
        migrate_mbps: (span_secs > 0.0).then(|| moved_bytes as f64 / 1e6 / span_secs),
        modeled: total_modeled(&phases),
        phases,
        engine,
        timeline,
    })
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
    use guest_abi::{AccessRange, GpaRange};
    use vmm::guest_state::PhaseReport;

    use super::*;
    use crate::policy::Sample;
    use crate::workloads::settings::Config;

    const MIB: u64 = 1 << 20;

    /// A 64 MiB guest (32 frames) whose phase 0 makes frame 1 hot and
    /// phase 1 frame 20; the placement keeps frames 0..8 fast.
    fn trace() -> Trace {
        let hot = |frame: u64| {
            vec![AccessRange {
                gpa: frame * 2 * MIB,
                len: 2 * MIB,
                weight: 1.0,
                write_fraction: 0.0,
            }]
        };
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
        s.vcpus = 1;
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
        assert_eq!((p0.oracle_hit, p1.oracle_hit), (1.0, 1.0));
        assert_eq!(r.dram_hit, Some(0.5));
        assert_eq!(p0.mops, Some(10.0));
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
        s.vcpus = 1;
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
