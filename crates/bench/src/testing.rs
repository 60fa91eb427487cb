//! Fixed results for unit tests of rendering and serialization (made-up
//! numbers with known renderings; measurement itself is tested on real
//! memory elsewhere).

use guest_abi::{AccessRange, GpaRange};
use tiering::EngineStats;
use tiering::stats::{IntervalRecord, MoveCount};
use vmm::guest_state::PhaseReport;

use crate::bandwidth::{Bandwidth, GB, GIB};
use crate::copy::CopyReference;
use crate::copy::{
    BestParallel, CopyResult, CopySettings, EngineResult, ParallelResult, RangeSizeResult,
};
use crate::invocation::Invocation;
use crate::machine::{LoadAverage, MachineInfo};
use crate::migrate::{
    BatchSizeResult, GuestLoad, Leg, MigrateResult, MigrateSettings, PhaseTimes, Protocol,
    ScenarioResult, SoakLeg, SoakResult, SoakSettings, StallSummary, Verification, scenarios,
};
use crate::policy::{PhaseResult, PolicyResult, PolicySettings, RunResult, TimePoint};
use crate::report::BenchReport;
use crate::stats::ratio;
use crate::suite::SuiteResult;
use crate::suite_common::{EngineSummary, PhaseRow, RatePoint, RunRow, Sample, Trace};
use crate::track::{
    Collects, HeatSizeResult, PairedMeasurement, PairedResult, PhaseMops, PhaseSchedule,
    RunMeasurement, TrackResult, TrackSettings, WorkloadResult,
};
use crate::workloads::{self, Config, WorkloadsResult, WorkloadsSettings};

/// A bandwidth with the given median and a 10% spread.
pub fn bandwidth(median_gbps: f64) -> Bandwidth {
    let samples = vec![median_gbps * 0.95, median_gbps, median_gbps * 1.05];
    Bandwidth {
        median_gbps,
        median_gibps: median_gbps * GB / GIB,
        min_gbps: samples[0],
        max_gbps: samples[2],
        spread: 0.1,
        samples_gbps: samples,
    }
}

/// A copy result for 2 CPUs: memcpy loop 5 GB/s, best parallel 10 GB/s
/// (2 threads, nt), engines between.
pub fn sample_copy_result() -> CopyResult {
    let settings = CopySettings::new(true, None, 2).unwrap();
    let best = 10.0;
    let parallel = [
        (1, "memcpy", 6.0),
        (1, "nt", 7.0),
        (2, "memcpy", 9.0),
        (2, "nt", best),
    ]
    .map(|(threads, mode, gbps)| ParallelResult {
        threads,
        mode: mode.to_owned(),
        bandwidth: bandwidth(gbps),
        vs_best_parallel: ratio(gbps, best),
    })
    .to_vec();
    let engines = [
        ("cpu", 1, false, 4.5),
        ("threads:1", 1, false, 4.4),
        ("threads:2", 2, false, 7.5),
        ("threads:2:pin", 2, true, 7.7),
    ];
    let range_sizes = settings
        .range_sizes
        .iter()
        .map(|&range_size| {
            let memcpy = 5.0;
            let engines = engines
                .iter()
                .flat_map(|&(spec, threads, pinned, gbps)| {
                    [("memcpy", gbps), ("nt", gbps * 1.2)].map(|(mode, gbps)| EngineResult {
                        name: format!("{spec}/{mode}"),
                        spec: spec.to_owned(),
                        mode: mode.to_owned(),
                        threads,
                        pinned,
                        bandwidth: bandwidth(gbps),
                        vs_memcpy: ratio(gbps, memcpy),
                        vs_best_parallel: ratio(gbps, best),
                    })
                })
                .collect();
            RangeSizeResult {
                range_size,
                ranges: (settings.batch_bytes / range_size) as usize,
                memcpy_loop: bandwidth(memcpy),
                memcpy_vs_best_parallel: ratio(memcpy, best),
                engines,
            }
        })
        .collect();
    CopyResult {
        settings,
        parallel,
        best_parallel: BestParallel {
            threads: 2,
            mode: "nt".to_owned(),
            median_gbps: best,
        },
        range_sizes,
    }
}

/// A report of a quick copy run on a made-up 2-core machine.
pub fn sample_report() -> BenchReport {
    let invocation = Invocation {
        command_line: "tierbench copy --quick --markdown out.md".to_owned(),
        args: ["tierbench", "copy", "--quick", "--markdown", "out.md"]
            .map(String::from)
            .to_vec(),
        date: "2026-01-02".to_owned(),
        quick: true,
        load_start: Some(LoadAverage {
            one: 0.5,
            five: 0.4,
            fifteen: 0.3,
        }),
        load_end: Some(LoadAverage {
            one: 1.25,
            five: 0.5,
            fifteen: 0.3,
        }),
    };
    let machine = MachineInfo {
        cores: 2,
        model_name: "Test CPU 9000".to_owned(),
        kernel: "Linux 6.18.0 x86_64".to_owned(),
    };
    let mut report = BenchReport::new(invocation, machine);
    report.results.push(SuiteResult::Copy(sample_copy_result()));
    report
}

/// A passed verification.
pub fn verification() -> Verification {
    Verification {
        guest: "exited 0 after its own final check".to_owned(),
        image: "memcheck buffer intact at its final round (7)".to_owned(),
        words_checked: 1 << 20,
        backing_verified: true,
        leaked_slots: 0,
    }
}

/// A quick migrate result against a best copy of 10 GB/s (the sample copy
/// result's): batch sizes 1 / 16 / 64; the write-busy guest moves 1, 4
/// and 8 GB/s (remap) and stalls 1.5 / 2 / 5 ms (p50 / p99 / max) with
/// remap, 0.1 / 0.8 / 1.2 ms with pre-copy; the idle guest never stalls.
pub fn sample_migrate_result() -> MigrateResult {
    let settings = MigrateSettings::new(true, None, 2).unwrap();
    let copy = sample_copy_result();
    let reference = CopyReference {
        bytes: 64 << 20,
        repetitions: 3,
        parallel: copy.parallel,
        best: copy.best_parallel,
    };
    let best = reference.best.median_gbps;
    let results = scenarios()
        .into_iter()
        .map(|scenario| {
            let (gbps, stalls): ([f64; 3], StallSummary) = match (scenario.protocol, scenario.guest)
            {
                (Protocol::Remap, GuestLoad::Idle) => ([1.5, 5.0, 9.0], StallSummary::default()),
                (Protocol::Remap, GuestLoad::WriteBusy) => (
                    [1.0, 4.0, 8.0],
                    StallSummary {
                        count: 40,
                        p50_us: Some(1500.0),
                        p99_us: Some(2000.0),
                        max_us: Some(5000.0),
                    },
                ),
                (Protocol::RemapPrecopy, GuestLoad::Idle) => {
                    ([1.2, 4.5, 8.1], StallSummary::default())
                }
                (Protocol::RemapPrecopy, GuestLoad::WriteBusy) => (
                    [0.9, 3.5, 7.2],
                    StallSummary {
                        count: 12,
                        p50_us: Some(100.0),
                        p99_us: Some(800.0),
                        max_us: Some(1200.0),
                    },
                ),
            };
            // The busy guest leaves a copy half the idle machine's bandwidth.
            let loaded = match scenario.guest {
                GuestLoad::Idle => best,
                GuestLoad::WriteBusy => best / 2.0,
            };
            let batch_sizes = settings
                .batch_sizes
                .iter()
                .zip(gbps)
                .map(|(&frames_per_batch, gbps)| {
                    let frames_moved = 192;
                    let bytes_moved = frames_moved as u64 * settings.frame_size;
                    let seconds = bytes_moved as f64 / (gbps * GB);
                    let batches = frames_moved / frames_per_batch;
                    BatchSizeResult {
                        frames_per_batch,
                        batches,
                        frames_moved,
                        bytes_moved,
                        migrate_seconds: seconds,
                        gbps,
                        bandwidth: bandwidth(gbps),
                        vs_best_copy: ratio(gbps, best),
                        vs_loaded_copy: ratio(gbps, loaded),
                        mean_batch_us: seconds * 1e6 / batches as f64,
                        phases: PhaseTimes {
                            protect_s: seconds * 0.1,
                            copy_s: seconds * 0.6,
                            remap_s: seconds * 0.15,
                            dirty_s: 0.0,
                            commit_s: seconds * 0.05,
                            other_s: seconds * 0.1,
                            overlap_s: 0.0,
                            total_s: seconds,
                        },
                        bytes_copied: bytes_moved,
                        recopied_pages: 0,
                        stalls: stalls.clone(),
                    }
                })
                .collect();
            ScenarioResult {
                protocol: scenario.protocol,
                guest: scenario.guest,
                workload: "memcheck:size=131072K,seconds=86400".to_owned(),
                pool_frames: 64,
                pool_range: (4, 67),
                loaded_copy: Some(bandwidth(loaded)),
                batch_sizes,
                verification: verification(),
            }
        })
        .collect();
    MigrateResult::new(settings, reference, results)
}

/// A small soak: 20000 migrations over three legs, nothing aborted.
pub fn sample_soak_result() -> SoakResult {
    let settings = SoakSettings::new(20_000, Some(32 << 20)).unwrap();
    let legs = Leg::ALL
        .iter()
        .zip(settings.leg_targets())
        .map(|(&leg, target)| SoakLeg {
            leg,
            target,
            batches: target / 8,
            migrations: target + 3,
            exchanged: if leg == Leg::Exchange { target + 3 } else { 0 },
            aborted: 0,
            recopied_pages: 0,
            seconds: 2.0,
            rate_per_sec: (target + 3) as f64 / 2.0,
            stalls: StallSummary {
                count: 10,
                p50_us: Some(30.0),
                p99_us: Some(90.0),
                max_us: Some(95.0),
            },
            verification: verification(),
        })
        .collect();
    SoakResult::new(settings, legs, std::time::Duration::from_secs(8))
}

/// One run of `mops` Mops/s; with a tracker, its [`collects`].
fn track_run(mops: f64, tracked: bool) -> RunMeasurement {
    RunMeasurement {
        mops,
        collects: tracked.then(collects),
    }
}

/// The timed `collect()` calls of one tracked run: 300 (the first), 100
/// and 100 µs CPU, 350, 150 and 150 µs wall, 1000 dirty pages.
fn collects() -> Collects {
    use std::time::Duration;
    Collects {
        cpu: [300, 100, 100].map(Duration::from_micros).to_vec(),
        wall: [350, 150, 150].map(Duration::from_micros).to_vec(),
        dirty_pages: 1000,
        accessed_pages: 1000,
    }
}

/// A paired run of `schedule` whose untracked phases ran at `untracked`
/// Mops/s and tracked ones at `tracked`, with three timed collects.
pub fn paired_measurement(
    schedule: PhaseSchedule,
    untracked: f64,
    tracked: f64,
) -> PairedMeasurement {
    let first = u64::from(schedule.warmup);
    PairedMeasurement {
        phases: (first..u64::from(schedule.phases()))
            .map(|phase| {
                let is_tracked = schedule.tracked(phase);
                PhaseMops {
                    phase,
                    tracked: is_tracked,
                    mops: if is_tracked { tracked } else { untracked },
                    cpu: None,
                }
            })
            .collect(),
        collects: collects(),
    }
}

/// A quick track result (256 MiB guest, 3 repetitions): hotset untracked
/// 100 Mops/s, with the dirty log 95 (5 % slower); zipf 20 and 19.9;
/// paired runs (two of one block each): hotset 100 against 97 and 98 (2.5 %
/// ± 6.4 %: met, not shown), zipf 20 against 20.2 and 19.8 (0 %);
/// heat-model times for the three sizes.
pub fn sample_track_result() -> TrackResult {
    let mut settings = TrackSettings::new(true, None).unwrap();
    settings.repetitions = 3;
    settings.trackers = vec!["none".to_owned(), "dirty-log".to_owned()];
    let workloads = [
        ("hotset", [98.0, 100.0, 102.0], [95.0, 94.0, 97.0]),
        ("zipf", [20.0, 19.0, 21.0], [19.9, 19.8, 20.0]),
    ]
    .map(|(name, none, dirty)| {
        let runs = [
            none.map(|m| track_run(m, false)).to_vec(),
            dirty.map(|m| track_run(m, true)).to_vec(),
        ];
        WorkloadResult::build(&settings, name, &settings.variants(), &runs).unwrap()
    })
    .to_vec();
    let heat = [(512, 0.7), (32 << 10, 41.0), (512 << 10, 810.0)]
        .map(|(frames, update_us)| HeatSizeResult {
            frames,
            guest_bytes: frames as u64 * (2 << 20),
            repetitions: 3,
            update_full_us: update_us,
            update_sampled_us: update_us * 2.5,
            hottest_quarter_us: update_us * 10.0,
        })
        .to_vec();
    let schedule = settings.paired_schedule();
    let paired = [
        ("hotset", 100.0, [97.0, 98.0]),
        ("zipf", 20.0, [20.2, 19.8]),
    ]
    .map(|(name, untracked, tracked)| {
        let runs = tracked.map(|t| paired_measurement(schedule, untracked, t));
        PairedResult::build(&settings, name, "dirty-log", 200, schedule, &runs).unwrap()
    })
    .to_vec();
    TrackResult::new(settings, workloads, paired, heat)
}

/// A policy result of the quick settings (256 MiB guest, quota 25 %):
/// hotset at 1× steady at 98 %, 95 % 2 s after the shift (0.4 s to
/// converge), 8 MiB moved of 8 MiB needed; zipf at 4× steady at 96 %, 80 %
/// after the shift (never converging), 12 MiB moved of 4 MiB needed.
pub fn sample_policy_result() -> PolicyResult {
    let settings = PolicySettings::new(true, None).unwrap();
    let runs = [
        ("hotset", 0, 0.98, Some(0.95), Some(0.4), 8u64, 8u64),
        ("zipf", 1, 0.96, Some(0.80), None, 12, 4),
    ]
    .map(|(workload, case, steady, shift, convergence, moved, min)| {
        let case = &settings.cases[case];
        let mib = 1u64 << 20;
        let phases = (0..2u64)
            .map(|phase| PhaseResult {
                row: PhaseRow {
                    phase,
                    start_secs: 2.0 * phase as f64,
                    samples: 20,
                    mops: Some(10.0),
                    oracle_hit: 0.9,
                    convergence_secs: convergence,
                },
                seconds: 2.0,
                steady_ratio: Some(steady),
                window_ratio: shift,
                promotions_needed: 1,
                demotions_needed: 1,
                min_bytes: min * mib / 2,
                moved_bytes: moved * mib / 2,
            })
            .collect();
        let timeline = (0..=40)
            .map(|i| TimePoint {
                secs: f64::from(i) * 0.1,
                phase: u64::from(i >= 20),
                engine_hit: 0.9 * steady,
                oracle_hit: 0.9,
                ratio: Some(steady),
                fast_frames: settings.quota_frames(case),
            })
            .collect();
        RunResult {
            row: RunRow {
                workload: workload.to_owned(),
                args: settings.workload_args(case, workload),
                mops: Some(10.0),
                convergence_secs: convergence,
                rates: (1..20)
                    .map(|i| RatePoint {
                        secs: f64::from(i) * 0.2,
                        mbps: if i % 10 == 1 { 20.0 } else { 0.0 },
                    })
                    .collect(),
            },
            tracker: case.tracker.clone(),
            quota_share: case.quota_share,
            speed: case.speed,
            quota_bytes: settings.quota_bytes(case),
            quota_frames: settings.quota_frames(case),
            steady_ratio: Some(steady),
            shift_ratio: shift,
            moved_bytes: moved * mib,
            min_bytes: min * mib,
            bytes_ratio: Some(moved as f64 / min as f64),
            phases,
            engine: EngineSummary {
                intervals: 30,
                promoted_frames: moved / 4,
                promoted_bytes: moved * mib / 2,
                demoted_frames: moved / 4,
                demoted_bytes: moved * mib / 2,
                exchanges: moved / 4,
                aborted: 0,
                tracker_errors: 0,
                last_error: None,
                collect_us: 120.0,
                heat_us: 15.0,
                plan_us: 8.0,
                migrate_us: 900.0,
            },
            timeline,
        }
    })
    .to_vec();
    PolicyResult::new(settings, runs)
}

/// The ground truth of a phase that makes the 2 MiB `frame` hot, with
/// `write_fraction` of its accesses writes.
pub fn hot_frame(frame: u64, write_fraction: f64) -> Vec<AccessRange> {
    const FRAME: u64 = 2 << 20;
    vec![AccessRange {
        gpa: frame * FRAME,
        len: FRAME,
        weight: 1.0,
        write_fraction,
    }]
}

/// A made-up trace of a 64 MiB guest (32 frames): phase 0 (at 10 s)
/// makes frame 1 hot, phase 1 (at 11 s) frame 20. Frames 0..8 start
/// fast; with `engine`, frame 20 is swapped with frame 7 at 11.5 s and
/// the engine's records say so.
pub fn sample_workloads_trace(engine: bool) -> Trace {
    const MIB: u64 = 1 << 20;
    let hot = |frame: u64| hot_frame(frame, 0.0);
    let samples = (0..20)
        .map(|i| {
            let at_secs = 10.0 + f64::from(i) * 0.1;
            let mut tiers: Vec<u8> = (0..32).map(|f| u8::from(f >= 8)).collect();
            if engine && at_secs >= 11.5 {
                tiers.swap(7, 20);
            }
            Sample {
                at_secs,
                phase: Some(u64::from(i >= 10)),
                tiers,
            }
        })
        .collect();
    let report = |vcpu, phase| PhaseReport {
        vcpu,
        phase,
        ops: 1_000_000,
        bytes: 8_000_000,
        nanos: 100_000_000,
    };
    let record = |at_ms, promoted, demoted| IntervalRecord {
        at_ms,
        promoted,
        demoted,
        bytes: (promoted + demoted) as u64 * 2 * MIB,
        ..IntervalRecord::default()
    };
    let stats = if engine {
        EngineStats {
            intervals: 3,
            promotions: MoveCount {
                frames: 2,
                bytes: 4 * MIB,
            },
            demotions: MoveCount {
                frames: 1,
                bytes: 2 * MIB,
            },
            // The first interval (boot) is before phase 0.
            recent: vec![
                record(9_800, 1, 0),
                record(11_200, 0, 0),
                record(11_400, 1, 1),
            ],
            ..EngineStats::default()
        }
    } else {
        EngineStats::default()
    };
    Trace {
        samples,
        phase_starts: [(0, 10.0), (1, 11.0)].into(),
        truths: [(0, hot(1)), (1, hot(20))].into(),
        reports: vec![report(0, 0), report(1, 0), report(0, 1), report(1, 1)],
        ram: vec![GpaRange {
            start: 0,
            len: 64 * MIB,
        }],
        stats,
    }
}

/// A made-up workloads result: hotset in the quick settings (on the
/// 64 MiB guest of [`sample_workloads_trace`]) under every configuration,
/// each scored by the suite's analysis.
pub fn sample_workloads_result() -> WorkloadsResult {
    let mut settings = WorkloadsSettings {
        mixes: Vec::new(),
        ..WorkloadsSettings::new(true, Some(64 << 20)).unwrap()
    };
    settings.run.workloads = vec!["hotset".to_owned()];
    let runs = settings
        .cases()
        .iter()
        .map(|case| {
            let mut trace = sample_workloads_trace(case.config.tracker().is_some());
            for s in &mut trace.samples {
                match case.config {
                    Config::AllFast => s.tiers.fill(0),
                    Config::AllSlow => s.tiers.fill(1),
                    _ => {}
                }
            }
            workloads::analyze(&settings, case, "hotset", &trace).unwrap()
        })
        .collect();
    WorkloadsResult { settings, runs }
}
