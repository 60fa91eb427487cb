//! Every embedded workload boots on 1 and 2 vCPUs and reports sensibly;
//! `memcheck` writes a pattern over all free guest RAM and reads it back.

mod common;

use common::*;
use serde_json::Value;

fn run_json(name: &str, args: &[&str]) -> Value {
    run_json_and_text(name, args).0
}

/// Like [`run_json`], also returning tiervisor's output (guest logs).
fn run_json_and_text(name: &str, args: &[&str]) -> (Value, String) {
    let dir = scratch(name);
    let json = dir.join("report.json");
    let json_s = json.to_string_lossy().into_owned();
    let mut full = args.to_vec();
    full.extend_from_slice(&["--report-json", &json_s, "--timeout", "120"]);
    let out = tiervisor_run(&full);
    assert_code(&out, 0);
    let t = text(&out);
    assert!(t.contains("result: guest exited successfully"), "{t}");
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (report, t)
}

fn check_report(report: &Value, vcpus: u64, phases: u64) {
    assert_eq!(report["end"]["kind"], "success");
    assert_eq!(report["vcpus"], vcpus);
    let reports = report["phases"].as_array().unwrap();
    assert_eq!(
        reports.len() as u64,
        vcpus * phases,
        "one report per vCPU per phase"
    );
    for vcpu in 0..vcpus {
        for phase in 0..phases {
            let r = reports
                .iter()
                .find(|r| r["vcpu"] == vcpu && r["phase"] == phase)
                .unwrap_or_else(|| panic!("no report for vcpu {vcpu} phase {phase}"));
            assert!(r["ops"].as_u64().unwrap() > 0, "{r}");
            assert!(r["bytes"].as_u64().unwrap() > 0, "{r}");
            assert!(r["nanos"].as_u64().unwrap() > 0, "{r}");
        }
    }
    let truth = report["ground_truth"].as_array().unwrap();
    assert_eq!(truth.len() as u64, phases, "ground truth for every phase");
    let mem = report["memory_bytes"].as_u64().unwrap();
    for gt in truth {
        let ranges = gt["ranges"].as_array().unwrap();
        assert!(!ranges.is_empty());
        let total: f64 = ranges.iter().map(|r| r["weight"].as_f64().unwrap()).sum();
        assert!(total > 0.0);
        for r in ranges {
            let end = r["gpa"].as_u64().unwrap() + r["len"].as_u64().unwrap();
            assert!(end <= mem, "{r}");
        }
    }
    let frames: u64 = report["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["used_frames"].as_u64().unwrap())
        .sum();
    assert_eq!(
        frames * report["frame_size"].as_u64().unwrap(),
        mem,
        "every frame placed"
    );
}

fn workload(name: &str, spec: &str, phases: u64) {
    for vcpus in [1u64, 2] {
        let v = vcpus.to_string();
        let report = run_json(
            &format!("{name}-{vcpus}"),
            &["--workload", spec, "--vcpus", &v, "--memory", "128M"],
        );
        check_report(&report, vcpus, phases);
    }
}

#[test]
fn hotset_boots_on_one_and_two_vcpus() {
    workload("hotset", "hotset:phases=2,seconds=0.3", 2);
}

#[test]
fn zipf_boots_on_one_and_two_vcpus() {
    workload("zipf", "zipf:phases=2,seconds=0.3,theta=0.9", 2);
}

#[test]
fn pmbench_boots_on_one_and_two_vcpus() {
    workload("pmbench", "pmbench:phases=2,seconds=0.3", 2);
}

#[test]
fn stream_boots_on_one_and_two_vcpus() {
    workload("stream", "stream:phases=2,seconds=0.3,op=copy", 2);
}

#[test]
fn memcheck_boots_on_one_and_two_vcpus() {
    workload("memcheck", "memcheck:rounds=2", 1);
}

#[test]
fn hotset_hot_set_moves_between_phases() {
    let report = run_json(
        "hotset-moves",
        &[
            "--workload",
            "hotset:phases=3,seconds=0.2",
            "--vcpus",
            "1",
            "--memory",
            "128M",
        ],
    );
    let truth = report["ground_truth"].as_array().unwrap();
    let hot_starts: Vec<u64> = truth
        .iter()
        .map(|gt| {
            let ranges = gt["ranges"].as_array().unwrap();
            let hot = ranges.iter().max_by(|a, b| {
                let density =
                    |r: &Value| r["weight"].as_f64().unwrap() / r["len"].as_f64().unwrap();
                density(a).total_cmp(&density(b))
            });
            hot.unwrap()["gpa"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(hot_starts.len(), 3);
    assert_ne!(hot_starts[0], hot_starts[1]);
    assert_ne!(hot_starts[1], hot_starts[2]);
}

/// With `verify`, each vCPU increments only its own stripe of words and at
/// the end checks that the stripe adds up to its increments (a lost write
/// would exit 1).
#[test]
fn hotset_verify_finds_every_increment() {
    let (report, text) = run_json_and_text(
        "hotset-verify",
        &[
            "--workload",
            "hotset:size=64M,verify=1,phases=2,seconds=0.3",
            "--vcpus",
            "2",
            "--memory",
            "128M",
        ],
    );
    check_report(&report, 2, 2);
    // The guest took the key: its summary line shows the canonical string.
    assert!(text.contains(",verify=1 on 2 vcpus"), "{text}");
}

/// The guest fills all of its free RAM with a pattern derived from address
/// and round, then reads every word back; frames live on both tiers under
/// every placement policy and frame size.
#[test]
fn memcheck_verifies_all_free_ram_on_every_placement() {
    for (placement, frame) in [
        ("fast-first", "2M"),
        ("slow-first", "2M"),
        ("interleave", "2M"),
        ("interleave", "4K"),
    ] {
        let report = run_json(
            &format!("memcheck-{placement}-{frame}"),
            &[
                "--workload",
                "memcheck:rounds=3",
                "--vcpus",
                "2",
                "--memory",
                "256M",
                "--placement",
                placement,
                "--frame-size",
                frame,
            ],
        );
        check_report(&report, 2, 1);
        // The buffer covered everything above the boot area.
        let bytes: u64 = report["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["bytes"].as_u64().unwrap())
            .sum();
        assert!(
            bytes >= 3 * (256 - 8) * (1 << 20),
            "3 rounds over ~all RAM, got {bytes}"
        );
        let tiers = report["tiers"].as_array().unwrap();
        assert!(
            tiers.iter().all(|t| t["used_frames"].as_u64().unwrap() > 0),
            "both tiers back guest RAM"
        );
    }
}

#[test]
fn embedded_demo_runs_with_defaults() {
    // The README's demo, shortened: same VM shape, shorter phases.
    let report = run_json("demo", &["--workload", "hotset:seconds=0.3"]);
    check_report(&report, 2, 3);
    assert_eq!(report["memory_bytes"], 1u64 << 30);
    let tiers: Vec<(String, u64)> = report["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["used_frames"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tiers,
        [("dram".to_string(), 128), ("slow".to_string(), 384)]
    );
}

/// `--shuffle` moves random frames live while memcheck verifies its data,
/// for each remap protocol.
#[test]
fn shuffle_migrates_frames_under_a_verifying_guest() {
    for migrator in ["remap", "remap-precopy"] {
        let report = run_json(
            &format!("shuffle-{migrator}"),
            &[
                "--workload",
                "memcheck:seconds=1",
                "--memory",
                "256M",
                "--migrator",
                migrator,
                "--shuffle",
                "400",
            ],
        );
        check_report(&report, 2, 1);
        let m = &report["migrations"];
        assert!(m["moved"].as_u64().unwrap() > 50, "{m}");
        assert!(
            m["aborted"].as_u64().unwrap() * 20 <= m["moved"].as_u64().unwrap(),
            "few aborts: {m}"
        );
        // The end-of-run check runs after the shuffler stopped, so it
        // never sees a frame mid-exchange.
        let check = &report["placement_check"];
        assert!(check["backing_error"].is_null(), "{check}");
        assert_eq!(check["leaked_slots"], 0, "{check}");
    }
}

#[test]
fn idle_gives_the_host_cpu_back() {
    let report = run_json(
        "idle",
        &[
            "--workload",
            "idle:phases=2,seconds=0.3",
            "--vcpus",
            "2",
            "--memory",
            "128M",
        ],
    );
    assert_eq!(report["end"]["kind"], "success");
    let reports = report["phases"].as_array().unwrap();
    assert_eq!(reports.len(), 4, "one report per vCPU per phase");
    for r in reports {
        let ops = r["ops"].as_u64().unwrap();
        let nanos = r["nanos"].as_u64().unwrap();
        assert!(ops > 0 && nanos > 0, "{r}");
        // Each operation parks the vCPU for 5 ms, so at most 200 fit in a
        // second; a guest spinning instead would do millions.
        assert!(ops * 5_000_000 <= nanos + 5_000_000, "{r}");
        assert_eq!(r["bytes"], 0, "{r}");
    }
    let truth = report["ground_truth"].as_array().unwrap();
    for gt in truth {
        let total: f64 = gt["ranges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["weight"].as_f64().unwrap())
            .sum();
        assert_eq!(total, 0.0, "an idle guest accesses nothing: {gt}");
    }
}

/// Every tier's speed is in the report: measured for memfd tiers unless
/// declared; tiers that read alike draw the `tiers-alike` warning (the
/// engine can only cost there), tiers that differ do not, and the engine
/// turns the tiers' speeds into the read latency its placement gives.
#[test]
fn the_report_names_each_tiers_speed_and_warns_when_they_read_alike() {
    let speeds_and_warnings = |name: &str, slow: &str| {
        let dram = "name=dram,backend=memfd,size=32M,read-latency=100ns,read-bandwidth=20G";
        let (report, text) = run_json_and_text(
            name,
            &[
                "--workload",
                "hotset:seconds=0.4,phases=2",
                "--vcpus",
                "1",
                "--memory",
                "128M",
                "--tier",
                dram,
                "--tier",
                slow,
            ],
        );
        let speeds: Vec<Value> = report["tiers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["speed"].clone())
            .collect();
        let kinds: Vec<String> = report["tiering"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["kind"].as_str().unwrap().to_owned())
            .collect();
        (report, text, speeds, kinds)
    };

    let (_, text, speeds, kinds) = speeds_and_warnings(
        "speed-alike",
        "name=slow,backend=memfd,size=96M,read-latency=105ns,read-bandwidth=19G",
    );
    assert_eq!(speeds[1]["source"], "declared", "{speeds:?}");
    assert_eq!(speeds[1]["profile"]["read_latency_ns"], 105);
    assert!(kinds.contains(&"tiers-alike".to_owned()), "{kinds:?}");
    assert!(
        text.contains(
            "warning: the tiers read alike (fast 100 ns, 20 GiB/s, slow 105 ns, 19 GiB/s)"
        ),
        "{text}"
    );
    assert!(text.contains("read 100 ns, 20 GiB/s (declared)"), "{text}");

    let (report, text, _, kinds) = speeds_and_warnings(
        "speed-cxl",
        "name=slow,backend=memfd,size=96M,read-latency=300ns,read-bandwidth=4G",
    );
    assert!(!kinds.contains(&"tiers-alike".to_owned()), "{kinds:?}");
    // Heat on both tiers: the estimate lies between their latencies.
    let estimate = report["tiering"]["cost"]["estimated_read_latency_ns"]
        .as_f64()
        .unwrap();
    assert!((100.0..=300.0).contains(&estimate), "{estimate}");
    assert_eq!(report["tiering"]["cost"]["fast_read_latency_ns"], 100);
    assert!(text.contains("(all on the fast tier: 100 ns)"), "{text}");

    // Nothing declared: memfd tiers are measured.
    let (report, _) = run_json_and_text(
        "speed-measured",
        &["--workload", "hotset:seconds=0.2", "--memory", "64M"],
    );
    for tier in report["tiers"].as_array().unwrap() {
        let speed = &tier["speed"];
        assert_eq!(speed["source"], "measured", "{speed}");
        assert!(speed["profile"]["read_latency_ns"].as_u64().unwrap() > 0);
        assert!(speed["profile"]["read_bandwidth"].as_u64().unwrap() > 0);
    }
}
