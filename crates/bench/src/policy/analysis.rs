//! From one run's trace to its result: the oracle of each phase (built
//! here from the payload's ground truth, after the run), the DRAM-hit
//! ratio of every placement sample against it, steady state, the ratio
//! after a shift, convergence time, bytes migrated against the minimum,
//! guest throughput and the engine's counters. Boot and warm-up (before
//! phase 0) are left out of everything. Every time is read on the case's
//! emulated clock ([`RunClock`]): at speed s, the after-shift ratio is
//! read `shift_window_secs` × s real seconds into a phase, steady state
//! and convergence are judged over s× longer real spans, and all of them
//! are reported in emulated seconds, comparable across speeds. Guest
//! throughput stays what the real guest did (Mops per real second).

use tiering::stats::IntervalRecord;
use vmm::guest_state::PhaseReport;

use super::result::{PhaseResult, RunResult, TimePoint};
use super::settings::{Case, PolicySettings, TARGET_AFTER_SHIFT};
use crate::stats::{mean, ratio};
use crate::suite_common::{
    Analysis, GuestRun, PhaseOracle, PhaseRow, RunClock, RunRow, Sample, ScoredRun, ScoredSample,
    convergence_secs, engine_summary, longest_convergence, min_moves, phase_mops,
};

impl Analysis for PolicySettings {
    type Case = Case;
    type Point = TimePoint;
    type Run = RunResult;

    fn guest_run(&self) -> &GuestRun {
        &self.run
    }

    fn room(&self, case: &Case) -> usize {
        self.quota_frames(case)
    }

    fn speed(&self, case: &Case) -> u32 {
        case.speed
    }

    fn point(s: ScoredSample<'_>) -> TimePoint {
        TimePoint {
            secs: s.secs,
            phase: s.phase,
            engine_hit: s.hit,
            oracle_hit: s.oracle.best,
            ratio: ratio(s.hit, s.oracle.best),
            fast_frames: s.tiers.iter().filter(|&&t| t == 0).count(),
        }
    }

    fn result(&self, run: ScoredRun<'_, Self>) -> RunResult {
        policy_result(self, run)
    }
}

/// The result of a run scored against its oracles: per phase, then over
/// the phases after a shift.
fn policy_result(settings: &PolicySettings, run: ScoredRun<'_, PolicySettings>) -> RunResult {
    let (case, workload, trace, clock) = (run.case, run.workload, run.trace, run.clock);
    let (quota, oracles, timeline) = (run.room, run.oracles, run.timeline);
    let mut phases = Vec::new();
    for (&phase, o) in &oracles {
        let Some(&start) = trace.phase_starts.get(&phase) else {
            continue;
        };
        let points: Vec<&TimePoint> = timeline.iter().filter(|p| p.phase == phase).collect();
        let start_secs = clock.secs(start);
        let end = trace
            .phase_starts
            .get(&(phase + 1))
            .map(|&end| clock.secs(end))
            .or_else(|| points.last().map(|p| p.secs))
            .unwrap_or(start_secs);
        phases.push(phase_result(
            settings,
            quota,
            PhaseSpan {
                phase,
                start: start_secs,
                end,
            },
            o,
            &points,
            placement_at(&trace.samples, start),
            &trace.stats.recent,
            clock,
            &trace.reports,
        ));
    }

    let moved_bytes: u64 = phases.iter().map(|p| p.moved_bytes).sum();
    let min_bytes: u64 = phases.iter().map(|p| p.min_bytes).sum();
    let shifts: Vec<&PhaseResult> = phases.iter().filter(|p| p.row.phase > 0).collect();
    let steady: Vec<f64> = phases.iter().filter_map(|p| p.steady_ratio).collect();
    let mops: Vec<f64> = phases.iter().filter_map(|p| p.row.mops).collect();
    RunResult {
        row: RunRow {
            workload: workload.to_owned(),
            args: settings.workload_args(case, workload),
            mops: mean(mops.iter().copied()),
            convergence_secs: longest_convergence(shifts.iter().map(|p| p.row.convergence_secs)),
            rates: clock.rates(&trace.stats.recent),
        },
        tracker: case.tracker.clone(),
        quota_share: case.quota_share,
        speed: clock.speed,
        quota_bytes: settings.quota_bytes(case),
        quota_frames: quota,
        steady_ratio: mean(steady.iter().copied()),
        shift_ratio: shifts
            .iter()
            .map(|p| p.window_ratio)
            .try_fold(None, |worst: Option<f64>, r| {
                r.map(|r| Some(worst.map_or(r, |w| w.min(r))))
            })
            .flatten(),
        moved_bytes,
        min_bytes,
        bytes_ratio: ratio(moved_bytes as f64, min_bytes as f64),
        phases,
        engine: engine_summary(&trace.stats),
        timeline,
    }
}

/// Where a phase lies on the run's emulated clock (seconds since phase 0
/// began).
struct PhaseSpan {
    phase: u64,
    start: f64,
    end: f64,
}

#[allow(clippy::too_many_arguments)]
fn phase_result(
    settings: &PolicySettings,
    quota: usize,
    span: PhaseSpan,
    o: &PhaseOracle,
    points: &[&TimePoint],
    before: Option<&[u8]>,
    recent: &[IntervalRecord],
    clock: RunClock,
    reports: &[PhaseReport],
) -> PhaseResult {
    let since = |p: &TimePoint| p.secs - span.start;
    let length = span.end - span.start;
    let steady: Vec<f64> = points
        .iter()
        .filter(|p| since(p) >= length / 2.0)
        .filter_map(|p| p.ratio)
        .collect();
    let window_ratio = points
        .iter()
        .find(|p| since(p) >= settings.shift_window_secs - 1e-9)
        .and_then(|p| p.ratio);
    let convergence_secs = convergence_secs(
        points.iter().map(|p| (since(p), p.ratio)),
        TARGET_AFTER_SHIFT,
    );
    let needed = before.map(|tiers| min_moves(&o.access, tiers, quota));
    let min_bytes = needed.map_or(0, |m| m.frames() as u64 * settings.run.frame_size);
    let moved_bytes = recent
        .iter()
        .filter(|r| {
            let at = clock.ms_secs(r.at_ms);
            at >= span.start && at < span.end
        })
        .map(|r| r.bytes)
        .sum();
    PhaseResult {
        row: PhaseRow {
            phase: span.phase,
            start_secs: span.start,
            samples: points.len(),
            mops: phase_mops(reports, span.phase, settings.run.vcpus),
            oracle_hit: o.best,
            convergence_secs,
        },
        seconds: length,
        steady_ratio: mean(steady.iter().copied()),
        window_ratio,
        promotions_needed: needed.map_or(0, |m| m.promotions),
        demotions_needed: needed.map_or(0, |m| m.demotions),
        min_bytes,
        moved_bytes,
    }
}

/// The placement of the last sample at or before `at` (the placement the
/// phase starting then inherits); `None` when nothing was sampled yet.
fn placement_at(samples: &[Sample], at: f64) -> Option<&[u8]> {
    samples
        .iter()
        .rev()
        .find(|s| s.at_secs <= at)
        .or_else(|| samples.first())
        .map(|s| s.tiers.as_slice())
}

#[cfg(test)]
mod tests {
    use guest_abi::GpaRange;
    use tiering::EngineStats;
    use tiering::stats::MoveCount;

    use super::*;
    use crate::suite_common::{AnalysisError, Trace, analyze, migration_rates};
    use crate::testing::hot_frame;

    const MIB: u64 = 1 << 20;

    /// An 8-frame guest whose phase 0 makes frame 1 hot and phase 1 frame
    /// 6; room for one frame. The placement starts on frame 0, finds
    /// frame 1 at 0.2 s, frame 6 at 1.3 s.
    fn trace() -> Trace {
        let hot = |frame: u64| hot_frame(frame, 0.5);
        let on = |frame: usize| {
            let mut t = vec![1u8; 8];
            t[frame] = 0;
            t
        };
        let mut samples = Vec::new();
        for i in 0..20 {
            let at = 10.0 + f64::from(i) * 0.1;
            let phase = if at < 11.0 { 0 } else { 1 };
            let fast = match at {
                a if a < 10.15 => 0,
                a if a < 11.25 => 1,
                _ => 6,
            };
            samples.push(Sample {
                at_secs: at,
                phase: Some(phase),
                tiers: on(fast),
            });
        }
        let record = |at_ms, bytes| IntervalRecord {
            at_ms,
            bytes,
            ..IntervalRecord::default()
        };
        Trace {
            samples,
            phase_starts: [(0, 10.0), (1, 11.0)].into(),
            truths: [(0, hot(1)), (1, hot(6))].into(),
            reports: vec![
                PhaseReport {
                    vcpu: 0,
                    phase: 0,
                    ops: 2_000_000,
                    bytes: 0,
                    nanos: 1_000_000_000,
                },
                PhaseReport {
                    vcpu: 0,
                    phase: 1,
                    ops: 1_000_000,
                    bytes: 0,
                    nanos: 1_000_000_000,
                },
            ],
            ram: vec![GpaRange {
                start: 0,
                len: 16 * MIB,
            }],
            stats: EngineStats {
                intervals: 4,
                promotions: MoveCount {
                    frames: 2,
                    bytes: 4 * MIB,
                },
                recent: vec![
                    record(9_000, 8 * MIB),
                    record(10_200, 4 * MIB),
                    record(11_200, 4 * MIB),
                    record(11_400, 4 * MIB),
                ],
                ..EngineStats::default()
            },
        }
    }

    fn settings() -> PolicySettings {
        let mut s = PolicySettings::new(true, Some(64 << 20)).unwrap();
        s.run.guest_bytes = 16 * MIB;
        s.run.vcpus = 1;
        s.shift_window_secs = 0.5;
        s
    }

    #[test]
    fn ratios_follow_the_hot_frame_through_a_shift() {
        let case = Case::new("dirty-log", 0.125, 1);
        let s = settings();
        let r = analyze(&s, &case, "hotset", &trace()).unwrap();
        assert_eq!(r.quota_frames, 1);
        assert_eq!(r.timeline.len(), 20);
        assert!(r.timeline.iter().all(|p| p.oracle_hit == 1.0));
        assert_eq!(r.timeline[0].ratio, Some(0.0));
        assert_eq!(r.timeline[2].ratio, Some(1.0));
        let [p0, p1] = r.phases.as_slice() else {
            panic!("{:?}", r.phases)
        };
        assert!((p0.row.convergence_secs.unwrap() - 0.2).abs() < 1e-9);
        assert!((p1.row.convergence_secs.unwrap() - 0.3).abs() < 1e-9);
        assert_eq!(p0.steady_ratio, Some(1.0));
        assert_eq!(p1.steady_ratio, Some(1.0));
        assert_eq!(p1.window_ratio, Some(1.0));
        // Phase 0 inherits frame 0 on the fast tier: one swap; phase 1
        // inherits frame 1: one swap.
        assert_eq!((p0.promotions_needed, p0.demotions_needed), (1, 1));
        assert_eq!(p1.min_bytes, 4 * MIB);
        // Intervals ending in phase 0 moved 4 MiB, in phase 1 8 MiB;
        // boot's 8 MiB are left out.
        assert_eq!(p0.moved_bytes, 4 * MIB);
        assert_eq!(p1.moved_bytes, 8 * MIB);
        assert_eq!(r.moved_bytes, 12 * MIB);
        assert_eq!(r.min_bytes, 8 * MIB);
        assert_eq!(r.bytes_ratio, Some(1.5));
        assert_eq!(r.shift_ratio, Some(1.0));
        assert!((r.row.convergence_secs.unwrap() - 0.3).abs() < 1e-9);
        assert_eq!(p0.row.mops, Some(2.0));
        assert_eq!(r.row.mops, Some(1.5));
        assert_eq!(r.row.rates.len(), 3);
        assert!((r.row.rates[0].mbps - 4.0 * MIB as f64 / 1e6 / 1.2).abs() < 1e-9);
        assert_eq!(r.engine.intervals, 4);
    }

    /// `trace` as a run 4× as long in real time records it: every time
    /// (samples, phase starts, the engine's intervals) 4× later.
    fn slowed(mut t: Trace, speed: u32) -> Trace {
        let f = f64::from(speed);
        for s in &mut t.samples {
            s.at_secs *= f;
        }
        for start in t.phase_starts.values_mut() {
            *start *= f;
        }
        for r in &mut t.stats.recent {
            r.at_ms *= u64::from(speed);
        }
        t
    }

    #[test]
    fn a_fast_guest_is_scored_on_its_emulated_clock() {
        let s = settings();
        let real = analyze(&s, &Case::new("dirty-log", 0.125, 1), "hotset", &trace()).unwrap();
        let fast_case = Case::new("dirty-log", 0.125, 4);
        let fast = analyze(&s, &fast_case, "hotset", &slowed(trace(), 4)).unwrap();
        // Recorded 4× later in real time, every time lands where it did at
        // 1×: phase 0 is 1 emulated s long, the after-shift ratio is read
        // 0.5 emulated s (2 real s) into phase 1, convergence takes 0.3
        // emulated s, rates are per emulated second.
        assert_eq!(fast.speed, 4);
        assert_eq!(fast.row.args, s.workload_args(&fast_case, "hotset"));
        assert_eq!(fast.label(), "hotset, dirty-log, quota 12.5%, 4×");
        assert!((fast.phases[0].seconds - 1.0).abs() < 1e-9);
        assert!((fast.phases[1].row.start_secs - 1.0).abs() < 1e-9);
        assert!((fast.row.convergence_secs.unwrap() - 0.3).abs() < 1e-9);
        let comparable = |mut r: RunResult| {
            r.speed = 1;
            r.row.args.clear();
            r
        };
        assert_eq!(comparable(fast), comparable(real));
    }

    #[test]
    fn a_fast_guest_read_on_the_real_clock_would_miss_the_window() {
        // The same slowed trace scored as a real guest: 0.5 s into phase 1
        // the placement has not yet found frame 6 (it does at 1.2 real s).
        let s = settings();
        let r = analyze(
            &s,
            &Case::new("dirty-log", 0.125, 1),
            "hotset",
            &slowed(trace(), 4),
        )
        .unwrap();
        assert_eq!(r.phases[1].window_ratio, Some(0.0));
        assert!((r.phases[0].seconds - 4.0).abs() < 1e-9);
    }

    #[test]
    fn the_first_interval_spans_from_the_engine_start() {
        // Phase 0 began 0.1 s after the engine; its first interval ended
        // at 0.2 s having moved 2 MiB.
        let first = IntervalRecord {
            at_ms: 200,
            bytes: 2 * MIB,
            ..IntervalRecord::default()
        };
        let rates = migration_rates(&[first], 0.1);
        assert_eq!(rates.len(), 1);
        assert!((rates[0].secs - 0.1).abs() < 1e-9);
        assert!((rates[0].mbps - 2.0 * MIB as f64 / 1e6 / 0.2).abs() < 1e-9);
    }

    #[test]
    fn a_phase_that_never_converges_has_no_convergence_time() {
        let case = Case::new("dirty-log", 0.125, 1);
        let mut t = trace();
        for s in &mut t.samples {
            s.tiers = vec![1, 0, 1, 1, 1, 1, 1, 1];
        }
        let r = analyze(&settings(), &case, "hotset", &t).unwrap();
        assert_eq!(r.phases[1].row.convergence_secs, None);
        assert_eq!(r.phases[1].steady_ratio, Some(0.0));
        assert_eq!(r.row.convergence_secs, None);
        assert_eq!(r.shift_ratio, Some(0.0));
        assert_eq!(r.steady_ratio, Some(0.5));
    }

    #[test]
    fn no_phase_is_an_error() {
        let case = Case::new("dirty-log", 0.125, 1);
        let mut t = trace();
        t.phase_starts.clear();
        assert!(matches!(
            analyze(&settings(), &case, "hotset", &t),
            Err(AnalysisError::NoPhases)
        ));
    }
}
