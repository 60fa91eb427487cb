//! End-to-end: `tierbench track --quick` runs as a user runs it, on real
//! KVM, with a small guest (hidden `--bytes`) so it takes seconds. Timings
//! and the slowdown target are never asserted; the structure of the
//! results is: every workload with every tracker, finite numbers, every
//! output file.

mod common;

use std::fs;

use bench::report::BenchReport;
use bench::suite::SuiteResult;
use bench::track::{NONE, TRACKERS};

use common::{quick_suite, tierbench};

fn finite_positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

#[test]
fn quick_track_suite_reports_every_tracker_on_every_workload() {
    let (files, stdout) = quick_suite("track", "track-quick", &["--bytes", "128M"]);
    let (json, svg, md) = (files.json, files.svg, files.md);
    assert!(stdout.contains("target: guest slowdown ≤ 2%"), "{stdout}");

    let report = BenchReport::from_json(&fs::read_to_string(&json).unwrap()).unwrap();
    assert!(report.invocation.quick);
    let [SuiteResult::Track(result)] = report.results.as_slice() else {
        panic!("expected one track result, got {:?}", report.results);
    };
    let settings = &result.settings;
    assert_eq!(settings.guest_bytes, 128 << 20);
    // A default run: the trackers that need the host kernel (damon,
    // access-log) only run when named.
    let names: Vec<&str> = TRACKERS
        .iter()
        .filter(|t| t.by_default)
        .map(|t| t.name)
        .collect();
    assert_eq!(settings.trackers, names);
    let variants = settings.variants();
    assert_eq!(
        variants.len(),
        1 + (names.len() - 1) * settings.intervals_ms.len()
    );

    let workloads: Vec<&str> = result
        .workloads
        .iter()
        .map(|w| w.workload.as_str())
        .collect();
    assert_eq!(workloads, ["hotset", "zipf"]);
    for w in &result.workloads {
        assert!(
            w.args.starts_with(&format!("{}:size=64M", w.workload)),
            "{}",
            w.args
        );
        let rows: Vec<String> = w.trackers.iter().map(|t| t.label()).collect();
        let expected: Vec<String> = variants.iter().map(|v| v.label()).collect();
        assert_eq!(rows, expected, "{}", w.workload);
        for t in &w.trackers {
            let what = format!("{} {}", w.workload, t.label());
            let tp = &t.throughput;
            assert_eq!(tp.samples_mops.len(), settings.repetitions, "{what}");
            assert!(
                tp.samples_mops.iter().all(|&m| finite_positive(m)),
                "{what}"
            );
            assert!(tp.min_mops <= tp.median_mops && tp.median_mops <= tp.max_mops);
            assert!(tp.spread.is_finite() && tp.spread >= 0.0, "{what}");
            if t.tracker == NONE {
                assert_eq!(t.interval_ms, None);
                assert!(t.slowdown.is_none() && t.cost.is_none(), "{what}");
                continue;
            }
            let slowdown = t.slowdown.unwrap();
            assert!(slowdown.is_finite() && slowdown < 1.0, "{what}: {slowdown}");
            assert_eq!(t.paired_slowdowns.len(), settings.repetitions, "{what}");
            let c = t.cost.as_ref().unwrap_or_else(|| panic!("{what}: no cost"));
            assert!(c.calls >= settings.repetitions, "{what}: {c:?}");
            for x in [
                c.cpu_us_per_interval,
                c.cpu_us_mean,
                c.cpu_us_max,
                c.cpu_us_per_interval_per_gib,
                c.wall_us_per_interval,
                c.core_share,
            ] {
                assert!(x.is_finite() && x >= 0.0, "{what}: {c:?}");
            }
            assert!(c.cpu_us_per_interval <= c.cpu_us_max, "{what}: {c:?}");
            // Both workloads write: the dirty log sees pages every interval.
            if t.tracker == "dirty-log" {
                assert!(c.dirty_pages_per_interval > 0.0, "{what}: {c:?}");
            }
        }
    }
    // Paired runs: every tracker on every workload, each phase of each
    // run measured, tracked phases only where the schedule says.
    let schedule = settings.paired_schedule();
    let trackers: Vec<&str> = names[1..].to_vec();
    let mut expected = Vec::new();
    for w in ["hotset", "zipf"] {
        for &t in &trackers {
            expected.push((w.to_owned(), t.to_owned()));
        }
    }
    let got: Vec<(String, String)> = result
        .paired
        .iter()
        .map(|p| (p.workload.clone(), p.tracker.clone()))
        .collect();
    assert_eq!(got, expected);
    for p in &result.paired {
        let what = format!("paired {} {}", p.workload, p.tracker);
        assert_eq!(p.runs.len(), settings.paired_repetitions, "{what}");
        assert_eq!(
            p.block_slowdowns.len(),
            settings.paired_repetitions * settings.paired_blocks as usize,
            "{what}"
        );
        for run in &p.runs {
            let phases: Vec<u64> = run.phases.iter().map(|m| m.phase).collect();
            let counted: Vec<u64> =
                (u64::from(schedule.warmup)..u64::from(schedule.phases())).collect();
            assert_eq!(phases, counted, "{what}");
            for m in &run.phases {
                assert_eq!(m.tracked, schedule.tracked(m.phase), "{what}");
                assert!(finite_positive(m.mops), "{what}: {m:?}");
            }
        }
        let slowdown = p.slowdown.unwrap();
        assert!(slowdown.is_finite() && slowdown < 1.0, "{what}: {slowdown}");
        assert!(finite_positive(p.untracked_mops) && finite_positive(p.tracked_mops));
        // The tracker ran.
        let c = p.cost.as_ref().unwrap_or_else(|| panic!("{what}: no cost"));
        assert!(c.calls >= settings.paired_repetitions, "{what}: {c:?}");
    }

    let judged: Vec<u64> = result
        .target
        .per_interval
        .iter()
        .map(|v| v.interval_ms)
        .collect();
    assert_eq!(judged, settings.intervals_ms, "every interval judged");

    let frames: Vec<usize> = result.heat.iter().map(|h| h.frames).collect();
    assert_eq!(frames, [512, 32 << 10, 512 << 10]);
    for h in &result.heat {
        assert_eq!(h.guest_bytes, h.frames as u64 * (2 << 20));
        for t in [h.update_full_us, h.update_sampled_us, h.hottest_quarter_us] {
            assert!(finite_positive(t), "{h:?}");
        }
    }

    let mut svgs: Vec<String> = fs::read_dir(&svg)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    svgs.sort();
    assert_eq!(
        svgs,
        ["track-heat.svg", "track-paired.svg", "track-throughput.svg"]
    );
    for name in &svgs {
        assert!(
            fs::read_to_string(svg.join(name))
                .unwrap()
                .trim_end()
                .ends_with("</svg>")
        );
    }

    let markdown = fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("### track: "));
    assert!(markdown.contains("| workload | tracker | interval | Mops/s |"));
    assert!(markdown.contains("| workload | tracker | interval | untracked Mops/s |"));
    assert!(markdown.contains("| 1 TiB | 524288 |"));
}

/// `--paired-only`: the paired runs of the one tracker asked for, judged,
/// and nothing of the fresh-VM runs or the heat model (no empty tables or
/// charts either).
#[test]
fn paired_only_runs_the_paired_runs_alone() {
    let (files, _) = quick_suite(
        "track",
        "track-paired-only",
        &[
            "--bytes",
            "128M",
            "--tracker",
            "dirty-log",
            "--blocks",
            "2",
            "--paired-only",
        ],
    );
    let (json, svg, md) = (files.json, files.svg, files.md);
    let report = BenchReport::from_json(&fs::read_to_string(&json).unwrap()).unwrap();
    let [SuiteResult::Track(result)] = report.results.as_slice() else {
        panic!("expected one track result, got {:?}", report.results);
    };
    assert!(result.workloads.is_empty() && result.heat.is_empty());
    let paired: Vec<(&str, &str)> = result
        .paired
        .iter()
        .map(|p| (p.workload.as_str(), p.tracker.as_str()))
        .collect();
    assert_eq!(paired, [("hotset", "dirty-log"), ("zipf", "dirty-log")]);
    for p in &result.paired {
        assert_eq!(p.block_slowdowns.len(), 2, "{p:?}");
        assert!(p.slowdown.is_some_and(f64::is_finite), "{p:?}");
    }
    assert_eq!(result.target.per_interval.len(), 1);
    let svgs: Vec<String> = fs::read_dir(&svg)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(svgs, ["track-paired.svg"]);
    let markdown = fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("| workload | tracker | interval | untracked Mops/s |"));
    assert!(!markdown.contains("| workload | tracker | interval | Mops/s |"));
    assert!(!markdown.contains("| 1 TiB |"));
}

#[test]
fn guest_too_small_is_refused() {
    let out = tierbench(&["track", "--quick", "--bytes", "32M"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("below the"), "{stderr}");
}
