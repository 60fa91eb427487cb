//! The tiered host's integrity campaign (`docs/testing.md`): the Linux
//! guest and the payload `numa` scenario, looped with frequent exchanges
//! (`--shuffle` on top of the tiering engine) and, as the baseline, with
//! migration off. Every run verifies the guest's data: the Linux guest's
//! init writes and checks 96 MiB, hotset verifies every word it wrote. A
//! run fails on any guest failure (a data error, a triple fault, a hang),
//! and every failure of a loop is reported with its log, not just the
//! first.
//!
//! `TIERVISOR_CAMPAIGN_RUNS` sets the runs per loop (default 2: the short
//! loop of the test command), and `TIERVISOR_CAMPAIGN_WORDS` adds
//! space-separated words to each run's kernel command line (to split a
//! failure's causes, for example `tiervisor.engine=off`: the shuffle
//! without the tiering engine and its tracker); each run's result is
//! appended to
//! `target/nested/campaign.tsv` (the build directory's), and the console
//! log of each failed run is kept as `logs/campaign-LABEL-RUN.log`.
//! Needs `TIERVISOR_NESTED_DIR` like the scenarios; without it each test
//! says so and passes.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use tiered_host::{Console, Scenario, TieredHost};

/// One QEMU at a time.
static ONE_HOST: Mutex<()> = Mutex::new(());

/// Runs per loop unless `TIERVISOR_CAMPAIGN_RUNS` says otherwise.
const DEFAULT_RUNS: usize = 2;

/// What a loop varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Migration {
    /// The tiering engine plus random moves at this many frames per
    /// second: the fast tier is full, so most become exchanges.
    Shuffled(u32),
    /// No migrator and no engine: the baseline.
    Off,
}

impl Migration {
    fn word(self) -> String {
        match self {
            Migration::Shuffled(n) => format!("tiervisor.shuffle={n}"),
            Migration::Off => "tiervisor.migration=off".into(),
        }
    }
}

/// Why a run failed, from its console; `None` when it passed.
type Judge = fn(&Console, Migration) -> Option<String>;

fn runs() -> usize {
    std::env::var("TIERVISOR_CAMPAIGN_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_RUNS)
}

/// Loops `scenario` with `migration`, judging each run with `judge`;
/// fails at the end listing every failed run.
fn campaign(test: &str, scenario: Scenario, migration: Migration, judge: Judge) {
    let Some(dir) = std::env::var_os("TIERVISOR_NESTED_DIR").map(PathBuf::from) else {
        eprintln!("{test}: skipped: set TIERVISOR_NESTED_DIR (scripts/test-all.sh does)");
        return;
    };
    let _one = ONE_HOST.lock().unwrap_or_else(|e| e.into_inner());
    let host = TieredHost::new(&dir).unwrap();
    let mut scenario = scenario.with(&migration.word());
    let words = std::env::var("TIERVISOR_CAMPAIGN_WORDS").unwrap_or_default();
    for word in words.split_whitespace() {
        scenario = scenario.with(word);
    }
    let total = runs();
    let mut failures = Vec::new();
    for run in 1..=total {
        let started = Instant::now();
        let verdict = match host.run(&scenario) {
            Err(e) => Some(format!("the host did not run: {e}")),
            Ok(console) if !console.done || !console.errors.is_empty() => Some(format!(
                "the scenario did not finish: {:?}\n{}",
                console.errors,
                console.tail(40)
            )),
            Ok(console) => judge(&console, migration).map(|why| {
                let mut why = why;
                let _ = write!(why, "\n--- console tail ---\n{}", console.tail(40));
                why
            }),
        };
        let seconds = started.elapsed().as_secs_f64();
        let outcome = if verdict.is_some() { "fail" } else { "pass" };
        eprintln!("{test}: run {run}/{total}: {outcome} in {seconds:.0} s");
        record(&dir, test, run, outcome, seconds);
        if let Some(why) = verdict {
            let kept = keep_log(&host, &scenario, test, run);
            failures.push(format!("run {run}: {why}\n(log: {})", kept.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{test}: {} of {total} runs failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Appends one run's result to `DIR/campaign.tsv`.
fn record(dir: &Path, test: &str, run: usize, outcome: &str, seconds: f64) {
    let words = std::env::var("TIERVISOR_CAMPAIGN_WORDS").unwrap_or_default();
    let line = format!("{test}\t{run}\t{outcome}\t{seconds:.1}\t{words}\n");
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("campaign.tsv"));
    if let Ok(mut f) = file {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Copies a failed run's console log beside the others; its new path.
fn keep_log(host: &TieredHost, scenario: &Scenario, test: &str, run: usize) -> PathBuf {
    let log = host.log_path(scenario);
    let kept = log.with_file_name(format!("campaign-{test}-{run}.log"));
    let _ = fs::copy(&log, &kept);
    kept
}

/// The Linux guest passed its data check and powered off; with migration
/// on, frames moved and no move was aborted by the guest's doing.
fn linux_judge(console: &Console, migration: Migration) -> Option<String> {
    let guest = console.guest_lines();
    if !guest.iter().any(|l| l.starts_with("result=pass")) {
        let consoled = console
            .blocks
            .get("guest-console")
            .map_or("", String::as_str);
        return Some(format!(
            "the guest's data check did not pass: {guest:?}\n--- guest console ---\n{consoled}"
        ));
    }
    if console.rc != Some(0) {
        return Some(format!("tiervisor exited {:?}", console.rc));
    }
    let Some(report) = console.report() else {
        return Some("no report".into());
    };
    if report.end_kind() != Some("power-off") {
        return Some(format!("the guest must power off: {:?}", report.end_kind()));
    }
    moved_as_asked(&report.0, migration)
}

/// hotset verified its data (tiervisor exits 0 only then) and the
/// placement check passed; with migration on, frames moved.
fn numa_judge(console: &Console, migration: Migration) -> Option<String> {
    if console.rc != Some(0) {
        return Some(format!("tiervisor exited {:?}", console.rc));
    }
    let Some(report) = console.report() else {
        return Some("no report".into());
    };
    if report.end_kind() != Some("success") {
        return Some(format!("the guest must exit 0: {:?}", report.end_kind()));
    }
    let placement = report.placement_check().cloned().unwrap_or_default();
    if !(placement["backing_error"].is_null() && placement["leaked_slots"] == 0) {
        return Some(format!("placement map and backing disagree: {placement}"));
    }
    moved_as_asked(&report.0, migration)
}

/// With shuffling, the shuffler moved frames; with migration off, no
/// migrator moved anything.
fn moved_as_asked(report: &serde_json::Value, migration: Migration) -> Option<String> {
    let shuffled = report["migrations"]["moved"].as_u64().unwrap_or(0);
    match migration {
        Migration::Shuffled(_) if shuffled == 0 => {
            Some(format!("--shuffle moved nothing: {}", report["migrations"]))
        }
        Migration::Off if !report["tiering"].is_null() || shuffled > 0 => Some(format!(
            "migration was to be off: tiering {}, migrations {}",
            report["tiering"], report["migrations"]
        )),
        _ => None,
    }
}

#[test]
fn linux_guest_with_frequent_exchanges() {
    campaign(
        "linux-exchanges",
        Scenario::new("linux", 600).on_one_host_cpu(),
        Migration::Shuffled(20),
        linux_judge,
    );
}

#[test]
fn linux_guest_without_migration() {
    campaign(
        "linux-baseline",
        Scenario::new("linux", 600).on_one_host_cpu(),
        Migration::Off,
        linux_judge,
    );
}

#[test]
fn numa_payload_with_frequent_exchanges() {
    campaign(
        "numa-exchanges",
        Scenario::new("numa", 300).single_threaded(),
        Migration::Shuffled(20),
        numa_judge,
    );
}

#[test]
fn numa_payload_without_migration() {
    campaign(
        "numa-baseline",
        Scenario::new("numa", 300).single_threaded(),
        Migration::Off,
        numa_judge,
    );
}
