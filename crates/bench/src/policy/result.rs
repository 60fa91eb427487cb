//! What the policy suite found: serde types for the JSON file, the
//! issue's targets judged against them (reported, never asserted), and
//! the tables printed and written as markdown.

use serde::{Deserialize, Serialize};

use super::settings::{
    Case, PolicySettings, TARGET_AFTER_SHIFT, TARGET_BYTES_RATIO, TARGET_SHIFT_SECS, TARGET_STEADY,
    format_speed, real_speed,
};
use crate::size::format_size;
use crate::suite_common::rows::{self, KeyedRun, PhaseRow, RunRow, SuiteTables};
use crate::suite_common::{EngineSummary, format_share};
use crate::table::{Align, RowWidthError, Table};
use crate::track::{format_percent, format_us};
use crate::verdict::Verdict;

/// The policy suite's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// What was measured.
    pub settings: PolicySettings,
    /// One entry per workload and engine configuration.
    pub runs: Vec<RunResult>,
    /// The targets against these runs.
    pub targets: Targets,
}

/// One workload under one engine configuration. Times (convergence,
/// phases, the timeline, migration rates) are in the guest's emulated
/// seconds; throughput is the real guest's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Workload, payload string (phases in real seconds), throughput,
    /// convergence and migration rates (MB per emulated second)
    /// (flattened: the JSON keeps its keys).
    #[serde(flatten)]
    pub row: RunRow,
    /// The engine's tracker.
    pub tracker: String,
    /// Fast-tier quota as a share of guest RAM.
    pub quota_share: f64,
    /// The guest's emulated speed (1 = real).
    #[serde(default = "real_speed")]
    pub speed: u32,
    /// Fast-tier quota, bytes.
    pub quota_bytes: u64,
    /// Fast-tier quota, frames (the oracle's Q).
    pub quota_frames: usize,
    /// Mean over phases of each phase's steady-state ratio.
    pub steady_ratio: Option<f64>,
    /// The lowest ratio at the shift window over the phases after a shift
    /// (phase ≥ 1); `None` when one has no sample that late.
    pub shift_ratio: Option<f64>,
    /// Bytes the engine moved during the phases (both ways).
    pub moved_bytes: u64,
    /// The fewest bytes that reach the oracle's placement in every phase.
    pub min_bytes: u64,
    /// `moved_bytes / min_bytes`.
    pub bytes_ratio: Option<f64>,
    /// Per phase.
    pub phases: Vec<PhaseResult>,
    /// The engine's own counters over the whole run (boot included).
    pub engine: EngineSummary,
    /// The DRAM-hit ratio at every placement sample inside a phase.
    pub timeline: Vec<TimePoint>,
}

/// One phase of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// Phase, start, samples, throughput, the oracle's DRAM-hit ratio
    /// (top-Q frames) and convergence (flattened: the JSON keeps its
    /// keys).
    #[serde(flatten)]
    pub row: PhaseRow,
    /// Its length, seconds.
    pub seconds: f64,
    /// Mean engine/oracle ratio over the phase's second half.
    pub steady_ratio: Option<f64>,
    /// Engine/oracle ratio at the shift window (3 s, or the phase's end in
    /// `--quick`).
    pub window_ratio: Option<f64>,
    /// Promotions the oracle's placement needs from the inherited one.
    pub promotions_needed: usize,
    /// Demotions they need (the quota is full).
    pub demotions_needed: usize,
    /// `(promotions + demotions) × frame size`.
    pub min_bytes: u64,
    /// Bytes the engine moved in the phase.
    pub moved_bytes: u64,
}

/// The DRAM-hit ratio at one placement sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimePoint {
    /// Seconds after phase 0 began.
    pub secs: f64,
    /// The phase running.
    pub phase: u64,
    /// Share of the phase's accesses the placement serves from DRAM.
    pub engine_hit: f64,
    /// The oracle's share.
    pub oracle_hit: f64,
    /// `engine_hit / oracle_hit`.
    pub ratio: Option<f64>,
    /// Frames on the fast tier.
    pub fast_frames: usize,
}

/// The targets against every run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    /// Steady-state DRAM-hit ratio ≥ 97 % of the oracle's.
    pub steady: Verdict,
    /// ≥ 90 % of the oracle's within 3 s of a phase shift.
    pub after_shift: Verdict,
    /// Bytes migrated ≤ [`TARGET_BYTES_RATIO`] × the minimum.
    pub bytes: Verdict,
}

impl Targets {
    /// Judges `runs`.
    pub fn judge(runs: &[RunResult]) -> Self {
        let values = |f: fn(&RunResult) -> Option<f64>| -> Vec<(String, Option<f64>)> {
            runs.iter().map(|r| (r.label(), f(r))).collect()
        };
        Self {
            steady: Verdict::judge(&values(|r| r.steady_ratio), TARGET_STEADY, true),
            after_shift: Verdict::judge(&values(|r| r.shift_ratio), TARGET_AFTER_SHIFT, true),
            bytes: Verdict::judge(
                &values(RunResult::judged_bytes_ratio),
                TARGET_BYTES_RATIO,
                false,
            ),
        }
    }

    /// One line per target.
    pub fn describe(&self, shift_window_secs: f64) -> Vec<String> {
        vec![
            self.steady.describe(
                &format!(
                    "steady-state DRAM-hit ≥ {} of the oracle's",
                    format_share(TARGET_STEADY)
                ),
                "runs",
                format_ratio,
            ),
            self.after_shift.describe(
                &format!(
                    "DRAM-hit ≥ {} of the oracle's {} s after a phase shift (the issue: within \
                     {} s)",
                    format_share(TARGET_AFTER_SHIFT),
                    shift_window_secs,
                    TARGET_SHIFT_SECS
                ),
                "runs",
                format_ratio,
            ),
            self.bytes.describe(
                &format!("bytes migrated ≤ {TARGET_BYTES_RATIO}× the minimum needed"),
                "runs",
                |v| v.map_or_else(|| "—".to_owned(), |v| format!("{v:.2}×")),
            ),
        ]
    }
}

impl RunResult {
    /// The bytes ratio the target is judged on: as measured, 0 when
    /// nothing was needed and nothing moved, `None` (a miss) when nothing
    /// was needed and something moved.
    pub fn judged_bytes_ratio(&self) -> Option<f64> {
        match (self.min_bytes, self.moved_bytes) {
            (0, 0) => Some(0.0),
            (0, _) => None,
            _ => self.bytes_ratio,
        }
    }

    /// The engine configuration it ran under.
    pub fn case(&self) -> Case {
        Case::new(&self.tracker, self.quota_share, self.speed)
    }

    /// `hotset, dirty-log, quota 25%, 4×`.
    pub fn label(&self) -> String {
        format!("{}, {}", self.row.workload, self.case().label())
    }
}

/// `97.3%`, or `—`.
pub fn format_ratio(ratio: Option<f64>) -> String {
    format_percent(ratio)
}

impl PolicyResult {
    /// Puts the run together and judges it.
    pub fn new(settings: PolicySettings, runs: Vec<RunResult>) -> Self {
        let targets = Targets::judge(&runs);
        Self {
            settings,
            runs,
            targets,
        }
    }

    /// Lines explaining the method and the targets.
    pub fn summary(&self) -> Vec<String> {
        let mut lines = vec![
            self.settings.describe(),
            "DRAM-hit at a sample = Σ over frames on the fast tier of the oracle's access \
             probability for the phase running (the payload's ground truth, read by the harness \
             only, never by the engine); oracle = Σ of the Q largest (Q = quota frames); ratio = \
             engine / oracle. Boot and warm-up are left out; the payload's own frames (code, \
             stacks) are outside the ground truth and count 0"
                .to_owned(),
            format!(
                "steady = mean ratio over the second half of each phase, averaged over phases; \
                 after shift = the lowest ratio {} s into a phase ≥ 1; convergence = the longest \
                 time from a phase ≥ 1 beginning to the ratio first reaching {}; all times in the \
                 guest's emulated seconds (s× real ones at speed s×, migration rates in MB per \
                 emulated second); Mops/s are the real guest's",
                self.settings.shift_window_secs,
                format_share(TARGET_AFTER_SHIFT)
            ),
            "minimum bytes = per phase, the fewest promotions that give the placement the phase \
             inherited the oracle's DRAM-hit (frames as hot as the Q-th are interchangeable, \
             frames never accessed never needed) plus the demotions that make room, × frame \
             size; migrated = the engine's promoted + demoted bytes in intervals ending inside \
             the phases"
                .to_owned(),
        ];
        lines.extend(self.targets.describe(self.settings.shift_window_secs));
        lines
    }
}

impl SuiteTables for PolicyResult {
    fn run_table(&self) -> Result<Table, RowWidthError> {
        rows::table_of(
            format!(
                "Tiering engine against the oracle ({} guest, DRAM-hit as a share of the \
                 oracle's)",
                format_size(self.settings.run.guest_bytes)
            ),
            &rows::columns(
                &["workload", "tracker"],
                &[
                    "quota",
                    "speed",
                    "steady",
                    "after shift",
                    "convergence",
                    "migrated",
                    "minimum",
                    "migrated / min",
                    "Mops/s",
                ],
            ),
            &self.runs,
            |r| {
                vec![
                    r.row.workload.clone(),
                    r.tracker.clone(),
                    format!(
                        "{} ({})",
                        format_share(r.quota_share),
                        format_size(r.quota_bytes)
                    ),
                    format_speed(r.speed),
                    format_ratio(r.steady_ratio),
                    format_ratio(r.shift_ratio),
                    rows::format_secs(r.row.convergence_secs),
                    format_size(r.moved_bytes),
                    format_size(r.min_bytes),
                    rows::format_times(r.bytes_ratio),
                    rows::format_mops(r.row.mops),
                ]
            },
        )
    }

    fn phase_table(&self) -> Result<Table, RowWidthError> {
        let window = format!("at {} s", self.settings.shift_window_secs);
        rows::phase_table(
            "Per phase (phase 0 follows boot and warm-up; later phases are shifts)",
            &[
                "phase",
                "Mops/s",
                "oracle hit",
                "steady",
                &window,
                "convergence",
                "promotions needed",
                "migrated",
                "minimum",
            ],
            &self.runs,
            |_, p| {
                vec![
                    p.row.phase.to_string(),
                    rows::format_mops(p.row.mops),
                    format_ratio(Some(p.row.oracle_hit)),
                    format_ratio(p.steady_ratio),
                    format_ratio(p.window_ratio),
                    rows::format_secs(p.row.convergence_secs),
                    p.promotions_needed.to_string(),
                    format_size(p.moved_bytes),
                    format_size(p.min_bytes),
                ]
            },
        )
    }

    fn engine_table(&self) -> Result<Table, RowWidthError> {
        rows::keyed_table(
            "Engine counters over the whole run (boot and warm-up included) and mean time per \
             interval",
            &[
                "intervals",
                "promoted",
                "demoted",
                "exchanges",
                "aborted",
                "collect",
                "heat",
                "plan",
                "migrate",
            ],
            &self.runs,
            |r| {
                let e = &r.engine;
                Some(vec![
                    e.intervals.to_string(),
                    format!("{} ({})", e.promoted_frames, format_size(e.promoted_bytes)),
                    format!("{} ({})", e.demoted_frames, format_size(e.demoted_bytes)),
                    e.exchanges.to_string(),
                    e.aborted.to_string(),
                    format_us(e.collect_us),
                    format_us(e.heat_us),
                    format_us(e.plan_us),
                    format_us(e.migrate_us),
                ])
            },
        )
    }
}

impl KeyedRun for RunResult {
    type Phase = PhaseResult;
    const KEY: &'static [(&'static str, Align)] = &[
        ("workload", Align::Left),
        ("tracker", Align::Left),
        ("quota", Align::Right),
        ("speed", Align::Right),
    ];

    fn key(&self) -> Vec<String> {
        vec![
            self.row.workload.clone(),
            self.tracker.clone(),
            format_share(self.quota_share),
            format_speed(self.speed),
        ]
    }

    fn phases(&self) -> &[PhaseResult] {
        &self.phases
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_policy_result;

    #[test]
    fn targets_name_the_worst_run() {
        let r = sample_policy_result();
        // zipf's 96 % steady state kept the old 95 % bound, not 97 %.
        assert!(!r.targets.steady.met, "{:?}", r.targets);
        assert_eq!(r.targets.steady.bound, 0.97);
        assert_eq!(r.targets.steady.runs_met, 1);
        assert!(!r.targets.after_shift.met);
        assert_eq!(
            r.targets.after_shift.worst_run.as_deref(),
            Some("zipf, dirty-log, quota 25%, 4×")
        );
        assert!(!r.targets.bytes.met);
        assert_eq!(r.targets.bytes.worst, Some(3.0));
        let lines = r.targets.describe(3.0);
        assert!(lines[0].contains("≥ 97% of the oracle's"), "{lines:?}");
        assert!(
            lines[0].contains("NOT MET (1 of 2 runs); worst 96.0% (zipf"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("NOT MET (1 of 2 runs); worst 80.0% (zipf"),
            "{lines:?}"
        );
        assert!(lines[2].contains("worst 3.00×"), "{lines:?}");
        assert!(
            !Targets::judge(&[]).steady.met,
            "nothing measured is not met"
        );
        let mut none_needed = r.runs[0].clone();
        none_needed.min_bytes = 0;
        none_needed.moved_bytes = 0;
        assert_eq!(none_needed.judged_bytes_ratio(), Some(0.0));
        none_needed.moved_bytes = 1;
        assert_eq!(none_needed.judged_bytes_ratio(), None);
    }

    #[test]
    fn a_missing_value_misses() {
        let values = [("a".to_owned(), Some(0.99)), ("b".to_owned(), None)];
        let v = Verdict::judge(&values, 0.95, true);
        assert!(!v.met);
        assert_eq!(v.runs_met, 1);
        assert_eq!(v.worst_run.as_deref(), Some("b"));
        assert_eq!(v.worst, None);
    }

    #[test]
    fn tables_have_a_row_per_run_and_phase() {
        let r = sample_policy_result();
        let tables = r.tables().unwrap();
        assert_eq!(tables.len(), 3);
        assert_eq!(tables[0].rows().len(), 2);
        assert_eq!(tables[1].rows().len(), 4);
        assert_eq!(tables[2].rows().len(), 2);
        let row = &tables[0].rows()[0];
        assert_eq!(row[2], "25% (64 MiB)");
        assert_eq!(row[3], "1×");
        assert_eq!(row[4], "98.0%");
        assert_eq!(row[6], "0.4 s");
        assert_eq!(row[9], "1.00×");
        assert_eq!(tables[0].rows()[1][3], "4×");
        assert_eq!(tables[0].rows()[1][6], "never");
        assert_eq!(tables[1].headers()[3], "speed");
        assert_eq!(tables[1].headers()[8], "at 1.8 s");
        assert_eq!(tables[1].rows()[2][..4], ["zipf", "dirty-log", "25%", "4×"]);
        assert_eq!(tables[2].rows()[1][3], "4×");
    }
}
