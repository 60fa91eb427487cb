//! End-to-end: `tierbench` run as a user runs it, on real memory, with a
//! small batch so the whole suite takes a few seconds.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::num::NonZeroUsize;
use std::thread;

use bench::report::BenchReport;
use bench::suite::SuiteResult;

use common::{quick_suite, tierbench};

/// The engine names the copy suite must report on this machine.
fn expected_engines() -> BTreeSet<String> {
    let cpus = thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let mut specs = vec!["cpu".to_owned()];
    specs.extend((1..=cpus).map(|k| format!("threads:{k}")));
    specs.push(format!("threads:{cpus}:pin"));
    specs
        .iter()
        .flat_map(|s| [format!("{s}/memcpy"), format!("{s}/nt")])
        .collect()
}

#[test]
fn quick_copy_suite_writes_every_output() {
    let (files, stdout) = quick_suite("copy", "cli-quick", &["--bytes", "4M"]);
    let (json, svg, md) = (files.json, files.svg, files.md);
    // Tables on stdout.
    assert!(stdout.contains("memcpy loop (baseline)"), "{stdout}");
    assert!(stdout.contains("× best parallel"));

    // JSON: parses, every engine on every range size, all bandwidths > 0.
    let report = BenchReport::from_json(&fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report.tool, "tierbench");
    assert!(report.invocation.quick);
    assert!(
        report
            .invocation
            .command_line
            .contains("copy --quick --bytes 4M")
    );
    assert!(report.machine.cores >= 1);
    let [SuiteResult::Copy(copy)] = report.results.as_slice() else {
        panic!("expected one copy result, got {:?}", report.results);
    };
    assert_eq!(copy.settings.batch_bytes, 4 << 20);
    assert_eq!(copy.settings.max_threads, report.machine.cores);
    assert_eq!(copy.parallel.len(), 2 * report.machine.cores);
    assert!(copy.best_parallel.median_gbps > 0.0);
    let best = copy
        .parallel
        .iter()
        .map(|p| p.bandwidth.median_gbps)
        .fold(0.0, f64::max);
    assert_eq!(copy.best_parallel.median_gbps, best);
    let sizes: Vec<u64> = copy.range_sizes.iter().map(|r| r.range_size).collect();
    assert_eq!(sizes, [4 << 10, 64 << 10, 2 << 20]);
    for size in &copy.range_sizes {
        assert_eq!(size.ranges as u64 * size.range_size, 4 << 20);
        assert!(size.memcpy_loop.median_gbps > 0.0);
        let names: BTreeSet<String> = size.engines.iter().map(|e| e.name.clone()).collect();
        assert_eq!(names, expected_engines());
        for engine in &size.engines {
            let bw = &engine.bandwidth;
            assert_eq!(bw.samples_gbps.len(), copy.settings.repetitions);
            assert!(bw.median_gbps > 0.0, "{} {}", engine.name, size.range_size);
            assert!(bw.min_gbps <= bw.median_gbps && bw.median_gbps <= bw.max_gbps);
            let vs_memcpy = engine.vs_memcpy.unwrap();
            let expected = bw.median_gbps / size.memcpy_loop.median_gbps;
            assert!((vs_memcpy - expected).abs() < 1e-9 * expected);
        }
    }

    // One SVG per range size, each a complete SVG document.
    let mut svgs: Vec<String> = fs::read_dir(&svg)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    svgs.sort();
    assert_eq!(svgs, ["copy-2MiB.svg", "copy-4KiB.svg", "copy-64KiB.svg"]);
    for name in &svgs {
        let text = fs::read_to_string(svg.join(name)).unwrap();
        let start = text.trim_start();
        assert!(
            start.starts_with("<svg") || start.starts_with("<?xml"),
            "{name}"
        );
        assert!(text.trim_end().ends_with("</svg>"), "{name}");
        assert!(
            text.contains("best parallel"),
            "{name} lacks the reference line"
        );
    }

    // Markdown: command, machine, date and the table header.
    let markdown = fs::read_to_string(&md).unwrap();
    assert!(markdown.contains(&format!("* Command: `{}`", report.invocation.command_line)));
    assert!(markdown.contains(&format!("* Machine: {}", report.machine.describe())));
    assert!(markdown.contains(&format!("* Date: {} (UTC)", report.invocation.date)));
    assert!(markdown.contains("| engine | GB/s | GiB/s | spread | × memcpy | × best parallel |"));
    assert!(markdown.contains("|---|---:|---:|---:|---:|---:|"));
}

#[test]
fn batch_that_is_not_whole_huge_ranges_is_refused() {
    let out = tierbench(&["copy", "--quick", "--bytes", "3M"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a positive multiple of 2097152"),
        "{stderr}"
    );
}

#[test]
fn unknown_suite_is_a_usage_error() {
    let out = tierbench(&["bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("copy"));
}

/// `tierbench all --quick`, the smoke run of the whole harness: every
/// suite (not the soak) runs once, in order, into one JSON report, one
/// markdown document and one chart directory.
#[test]
fn quick_all_runs_every_suite_once() {
    use bench::suite::Suite;

    let (files, _) = quick_suite("all", "all-quick", &[]);
    let report = BenchReport::from_json(&fs::read_to_string(&files.json).unwrap()).unwrap();
    assert!(report.invocation.quick);
    let suites: Vec<Suite> = report.results.iter().map(SuiteResult::suite).collect();
    assert_eq!(suites, Suite::ALL);
    let markdown = fs::read_to_string(&files.md).unwrap();
    for suite in Suite::ALL {
        let heading = format!("### {}: {}", suite.name(), suite.title());
        assert!(markdown.contains(&heading), "{heading} missing");
    }
    let charts = fs::read_dir(&files.svg).unwrap().count();
    assert!(charts >= Suite::ALL.len(), "{charts} charts");
}
