//! End-to-end: `tierbench policy --quick` runs as a user runs it, on real
//! KVM with the tiering engine on, with a small guest (hidden `--bytes`)
//! so it takes seconds. The targets are never asserted (they are what the
//! suite measures); the structure of the results is: every workload,
//! every phase, at both emulated guest speeds (phases read on the
//! emulated clock), DRAM-hit ratios that are shares and never beat the
//! oracle, consistent byte counts, every output file.

mod common;

use std::fs;

use bench::policy::hit_chart_name;
use bench::report::BenchReport;
use bench::suite::SuiteResult;

use common::{quick_suite, tierbench};

#[test]
fn quick_policy_suite_scores_every_workload_against_the_oracle() {
    let (files, stdout) = quick_suite("policy", "policy-quick", &["--bytes", "128M"]);
    for target in [
        "steady-state DRAM-hit",
        "after a phase shift",
        "bytes migrated",
    ] {
        assert!(stdout.contains(target), "{target} missing: {stdout}");
    }

    let report = BenchReport::from_json(&fs::read_to_string(&files.json).unwrap()).unwrap();
    assert!(report.invocation.quick);
    let [SuiteResult::Policy(result)] = report.results.as_slice() else {
        panic!("expected one policy result, got {:?}", report.results);
    };
    let settings = &result.settings;
    assert_eq!(settings.run.guest_bytes, 128 << 20);
    let workloads = &settings.run.workloads;
    let runs: Vec<(&str, u32)> = result
        .runs
        .iter()
        .map(|r| (r.row.workload.as_str(), r.speed))
        .collect();
    assert_eq!(
        runs,
        [
            ("hotset", 1),
            ("hotset", 4),
            ("zipf", 1),
            ("zipf", 4),
            ("pmbench", 1),
            ("pmbench", 4)
        ]
    );
    for r in &result.runs {
        let what = r.label();
        assert_eq!(r.quota_frames, 16, "{what}");
        let phases: Vec<u64> = r.phases.iter().map(|p| p.row.phase).collect();
        assert_eq!(phases, [0, 1], "{what}: a phase shift");
        // s× longer in real time, a phase lasts its emulated length. The
        // upper bound leaves room for a busy host's late phase end (the
        // barrier waits on a descheduled vCPU) and still fails a speed
        // that was not scaled (4× off).
        let length = r.phases[0].seconds / settings.run.phase_seconds;
        assert!((0.8..2.5).contains(&length), "{what}: {:?}", r.phases[0]);
        assert!(!r.timeline.is_empty(), "{what}");
        for p in &r.timeline {
            assert!(
                p.engine_hit >= 0.0 && p.engine_hit <= p.oracle_hit + 1e-9,
                "{what}: the oracle is never beaten: {p:?}"
            );
            assert!(p.oracle_hit > 0.0 && p.oracle_hit <= 1.0 + 1e-9, "{what}");
            let ratio = p.ratio.unwrap();
            assert!((0.0..=1.05).contains(&ratio), "{what}: {p:?}");
            assert!(p.fast_frames <= r.quota_frames, "{what}: quota kept");
        }
        for ratio in [r.steady_ratio, r.shift_ratio].into_iter().flatten() {
            assert!((0.0..=1.05).contains(&ratio), "{what}: {ratio}");
        }
        for p in &r.phases {
            assert!(p.row.samples > 0, "{what}: {p:?}");
            assert!(p.row.mops.is_some_and(|m| m > 0.0), "{what}: {p:?}");
            assert_eq!(
                p.min_bytes,
                (p.promotions_needed + p.demotions_needed) as u64 * settings.run.frame_size,
                "{what}"
            );
            assert!(p.promotions_needed <= r.quota_frames, "{what}: {p:?}");
        }
        let e = &r.engine;
        assert!(e.intervals > 0, "{what}: the engine ran");
        assert_eq!(e.tracker_errors, 0, "{what}: {:?}", e.last_error);
        assert!(
            r.moved_bytes <= e.promoted_bytes + e.demoted_bytes,
            "{what}: phases moved no more than the whole run"
        );
        assert!(
            r.row
                .rates
                .iter()
                .all(|p| p.mbps.is_finite() && p.mbps >= 0.0)
        );
    }
    let targets = &result.targets;
    for v in [&targets.steady, &targets.after_shift, &targets.bytes] {
        assert_eq!(v.runs, 6);
        assert_eq!(v.met, v.runs_met == 6);
    }

    let mut svgs: Vec<String> = fs::read_dir(&files.svg)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    svgs.sort();
    let mut expected: Vec<String> = result.runs.iter().map(hit_chart_name).collect();
    expected.extend(
        workloads
            .iter()
            .map(|w| format!("policy-migration-{w}.svg")),
    );
    expected.sort();
    assert_eq!(svgs, expected);
    for name in &svgs {
        assert!(
            fs::read_to_string(files.svg.join(name))
                .unwrap()
                .trim_end()
                .ends_with("</svg>")
        );
    }

    let markdown = fs::read_to_string(&files.md).unwrap();
    assert!(markdown.contains("### policy: "));
    assert!(markdown.contains("| workload | tracker | quota | speed | steady | after shift |"));
    assert!(markdown.contains("| hotset | dirty-log | 25% (32 MiB) | 4× |"));
}

#[test]
fn guest_too_small_is_refused() {
    let out = tierbench(&["policy", "--quick", "--bytes", "32M"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("below the"), "{stderr}");
}
