//! End-to-end: `tierbench workloads --quick` runs as a user runs it, on
//! real KVM, every payload under every configuration, with a small guest
//! so it takes under a minute. Timings are never asserted; the structure
//! and the invariants are: every configuration of every workload, shares
//! in [0, 1], the bounds at 1 and 0, the oracle never beaten, all-fast
//! modeled no slower than all-slow, the two-VM mix, every output file.
//! And the dependency
//! graph keeps ground truth away from the engine.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::process::Command;

use bench::report::BenchReport;
use bench::suite::SuiteResult;
use bench::workloads::{
    Config, MAX_COLUMNS, MAX_ROWS, hit_chart_name, migration_chart_name, tier_map_name,
};

use common::{quick_suite, tierbench};

#[test]
fn quick_workloads_suite_runs_every_config_and_keeps_the_bounds() {
    let (files, stdout) = quick_suite("workloads", "workloads-quick", &[]);
    for part in [
        "modeled DRAM+CXL",
        "modeled DRAM+Optane",
        "tiering-fault-sample",
    ] {
        assert!(stdout.contains(part), "{part} missing: {stdout}");
    }

    let report = BenchReport::from_json(&fs::read_to_string(&files.json).unwrap()).unwrap();
    assert!(report.invocation.quick);
    let [SuiteResult::Workloads(result)] = report.results.as_slice() else {
        panic!("expected one workloads result, got {:?}", report.results);
    };
    let settings = &result.settings;
    assert_eq!(settings.shares, [0.25]);
    for workload in ["hotset", "zipf", "pmbench", "stream"] {
        let runs: Vec<_> = result
            .runs
            .iter()
            .filter(|r| r.row.workload == workload && r.mix.is_none())
            .collect();
        let configs: Vec<Config> = runs.iter().map(|r| r.config).collect();
        assert_eq!(configs, Config::ALL, "{workload}: every config once");
        let by = |c: Config| runs.iter().find(|r| r.config == c).unwrap();
        let (fast, slow) = (by(Config::AllFast), by(Config::AllSlow));
        assert!(fast.dram_hit.unwrap() > 0.999, "{workload}: {fast:?}");
        assert!(slow.dram_hit.unwrap() < 0.001, "{workload}: {slow:?}");
        for model in ["DRAM+CXL", "DRAM+Optane"] {
            let f = fast.modeled_on(model).unwrap();
            let s = slow.modeled_on(model).unwrap();
            assert!(
                f.stall_ns_per_op().unwrap() <= s.stall_ns_per_op().unwrap(),
                "{workload} {model}: all-fast stalls no more per op than all-slow"
            );
            assert!(f.relative_throughput.unwrap() >= s.relative_throughput.unwrap());
            assert!((f.relative_throughput.unwrap() - 1.0).abs() < 1e-9);
        }
        for r in &runs {
            let what = r.label();
            let hit = r.dram_hit.unwrap();
            let oracle = r.oracle_hit.unwrap();
            assert!((0.0..=1.0 + 1e-9).contains(&hit), "{what}: {hit}");
            assert!((0.0..=1.0 + 1e-9).contains(&oracle), "{what}: {oracle}");
            assert!(hit <= oracle + 1e-9, "{what}: the oracle is never beaten");
            for p in &r.timeline {
                assert!(p.dram_hit <= p.oracle_hit + 1e-9, "{what}: {p:?}");
            }
            let phases: Vec<u64> = r.phases.iter().map(|p| p.row.phase).collect();
            assert_eq!(phases, [0, 1], "{what}: a phase shift");
            for p in &r.phases {
                assert!(p.row.mops.is_some_and(|m| m > 0.0), "{what}: {p:?}");
                assert!(p.demand.ops > 0 && p.demand.nanos > 0, "{what}: {p:?}");
            }
            assert_eq!(r.modeled.len(), 2, "{what}");
            for c in &r.modeled {
                let rel = c.relative_throughput.unwrap();
                assert!(rel > 0.0 && rel <= 1.0 + 1e-9, "{what}: {c:?}");
                assert!(c.stall_secs >= c.extra_secs, "{what}: {c:?}");
            }
            match r.config.tracker() {
                Some(_) => {
                    let e = r.engine.as_ref().unwrap();
                    assert!(e.intervals > 0, "{what}: the engine ran");
                    assert_eq!(e.tracker_errors, 0, "{what}: {:?}", e.last_error);
                    assert!(r.moved_bytes <= e.promoted_bytes + e.demoted_bytes);
                    assert!(!r.row.rates.is_empty(), "{what}: a rate per interval");
                    assert!(r.row.rates.iter().all(|p| p.secs >= 0.0 && p.mbps >= 0.0));
                    assert_eq!(
                        r.moved_bytes > 0,
                        r.row.rates.iter().any(|p| p.mbps > 0.0),
                        "{what}: every interval's moves are in the rates"
                    );
                }
                None => {
                    assert!(r.engine.is_none(), "{what}");
                    assert_eq!(r.moved_bytes, 0, "{what}: nothing moves frames");
                    assert!(r.row.rates.is_empty(), "{what}");
                }
            }
            assert_eq!(r.promoted_bytes + r.demoted_bytes, r.moved_bytes, "{what}");
            assert_eq!(r.phases[0].row.start_secs, 0.0, "{what}");
            assert!(r.phases[1].row.start_secs > 0.0, "{what}");
            // The tier map: every frame, every sample from phase 0 on, in
            // bounded rows and columns of runs that cover every column.
            match &r.tier_map {
                Some(map) => {
                    let frames = (settings.run.guest_bytes / settings.run.frame_size) as usize;
                    assert_eq!(map.frames, frames, "{what}");
                    assert!(map.rows.len() <= MAX_ROWS && map.columns() <= MAX_COLUMNS);
                    assert!(map.columns() >= r.timeline.len(), "{what}");
                    assert!(map.edges.windows(2).all(|w| w[0] < w[1]), "{what}");
                    for row in &map.rows {
                        let covered: u32 = row.iter().map(|[n, _]| n).sum();
                        assert_eq!(covered as usize, map.columns(), "{what}");
                    }
                }
                None => assert!(r.config.is_bound(), "{what}: only the bounds keep none"),
            }
        }
    }

    // The two-VM mix: both VMs of every pair under every configuration
    // but the bounds, each scored against its own oracle.
    assert_eq!(settings.mixes, [["hotset", "zipf"]]);
    let mixed: Vec<_> = result.runs.iter().filter(|r| r.mix.is_some()).collect();
    let expected: Vec<(&str, &str, Config)> = [
        Config::FirstTouch,
        Config::TieringDirtyLog,
        Config::TieringFaultSample,
    ]
    .into_iter()
    .flat_map(|c| [("hotset", "zipf", c), ("zipf", "hotset", c)])
    .collect();
    let found: Vec<(&str, &str, Config)> = mixed
        .iter()
        .map(|r| (r.row.workload.as_str(), r.mix.as_deref().unwrap(), r.config))
        .collect();
    assert_eq!(found, expected);
    for r in &mixed {
        let what = r.label();
        assert!(what.ends_with(&format!("beside {}", r.mix.as_ref().unwrap())));
        assert!(
            r.dram_hit.unwrap() <= r.oracle_hit.unwrap() + 1e-9,
            "{what}"
        );
        assert!(
            r.phases.iter().all(|p| p.row.mops.is_some_and(|m| m > 0.0)),
            "{what}"
        );
        assert_eq!(r.engine.is_some(), r.config.tracker().is_some(), "{what}");
    }
    assert!(stdout.contains("beside zipf"));

    let svgs: BTreeSet<String> = fs::read_dir(&files.svg)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let tiered = [
        Config::FirstTouch,
        Config::TieringDirtyLog,
        Config::TieringFaultSample,
    ];
    let mut expected = BTreeSet::new();
    for w in &settings.run.workloads {
        expected.insert(hit_chart_name(w, 0.25));
        expected.insert(migration_chart_name(w, 0.25));
        expected.extend(tiered.map(|c| tier_map_name(w, 0.25, c)));
    }
    assert_eq!(svgs, expected);
    for name in &svgs {
        let svg = fs::read_to_string(files.svg.join(name)).unwrap();
        assert!(svg.trim_start().starts_with("<svg"), "{name}");
        assert!(svg.trim_end().ends_with("</svg>"), "{name}");
        let parts: &[&str] = if name.starts_with("workloads-hit-") {
            &["oracle (DRAM 25%)"]
        } else if name.starts_with("workloads-migration-") {
            &[
                "MB/s moved per engine interval",
                "tiering-dirty-log",
                "tiering-fault-sample",
            ]
        } else {
            &[
                "fast tier (DRAM)",
                "slow tier",
                "phase 0",
                "phase 1",
                "<rect",
            ]
        };
        for part in parts {
            assert!(svg.contains(part), "{name} lacks {part}");
        }
    }
    for chart in ["DRAM-hit over time", "migration rate", "tier over time"] {
        assert!(stdout.contains(chart), "summary names the {chart} charts");
    }
    let markdown = fs::read_to_string(&files.md).unwrap();
    assert!(markdown.contains("### workloads: "));
    assert!(markdown.contains("| modeled DRAM+CXL stall ns/op |"));
    for column in [
        "| converged after shift |",
        "| promoted |",
        "| engine total |",
    ] {
        assert!(markdown.contains(column), "{column} missing");
    }
}

#[test]
fn guest_too_small_is_refused() {
    let out = tierbench(&["workloads", "--quick", "--bytes", "32M"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("below the"), "{stderr}");
}

/// Every workspace package `package` builds with (its own dependencies of
/// every kind, then their normal and build dependencies), from `cargo
/// metadata --no-deps`: the workspace's own manifests, so no registry
/// crate need be downloaded. Registry crates never depend on workspace
/// crates, so the walk through the workspace finds every path between
/// two of them.
fn dependency_closure(package: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let deps: HashMap<&str, Vec<(&str, bool)>> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| (d["name"].as_str().unwrap(), d["kind"] == "dev"))
                .collect();
            (p["name"].as_str().unwrap(), deps)
        })
        .collect();
    assert!(
        deps.contains_key(package),
        "{package} is a workspace package"
    );
    let workspace_deps_of = |name: &str, with_dev: bool| -> Vec<String> {
        deps.get(name)
            .into_iter()
            .flatten()
            .filter(|&&(dep, dev)| deps.contains_key(dep) && (with_dev || !dev))
            .map(|&(dep, _)| dep.to_owned())
            .collect()
    };
    let mut seen = BTreeSet::new();
    let mut todo = workspace_deps_of(package, true);
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(workspace_deps_of(&name, false));
        }
    }
    seen
}

#[test]
fn the_engine_never_depends_on_ground_truth() {
    // The walk does find ground truth where it is used.
    let harness = dependency_closure("bench");
    assert!(harness.contains("oracle") && harness.contains("tiering"));
    let closure = dependency_closure("tiering");
    assert!(
        closure.contains("guest-memory"),
        "the closure is read: {closure:?}"
    );
    for forbidden in ["bench", "oracle"] {
        assert!(
            !closure.contains(forbidden),
            "tiering depends on {forbidden}: {closure:?}"
        );
    }
}
