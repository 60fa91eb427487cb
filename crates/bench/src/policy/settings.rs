//! What the policy suite measures, from `--quick` and the hidden `--bytes`
//! override (guest RAM): the workloads, the engine configurations
//! ([`Case`]: tracker and fast-tier quota), phase lengths, and the targets
//! of the policy issue.

use serde::{Deserialize, Serialize};

use guest_memory::Placement;
use tiering::TieringPolicy;

use crate::suite_common::{GuestRun, RunDefaults, RunSpec, SettingsError, format_share};

/// How the suite's guest runs differ from the workloads suite's: a
/// 256 MiB quick guest, 2 s phases, three workloads.
pub const RUN_DEFAULTS: RunDefaults = RunDefaults {
    quick_guest: 256 << 20,
    quick_phase_secs: 2.0,
    workloads: &["hotset", "zipf", "pmbench"],
};
/// Share of a phase shorter than the target's 3 s at which the
/// after-shift ratio is read instead: late enough to judge, early enough
/// that a sample lands before the phase ends.
pub const SHORT_PHASE_WINDOW: f64 = 0.9;
/// Target: steady-state DRAM-hit ratio, at least this share of the
/// oracle's.
pub const TARGET_STEADY: f64 = 0.95;
/// Target: DRAM-hit share of the oracle's reached after a phase shift.
pub const TARGET_AFTER_SHIFT: f64 = 0.90;
/// Target: seconds after a phase shift by which [`TARGET_AFTER_SHIFT`]
/// is reached.
pub const TARGET_SHIFT_SECS: f64 = 3.0;
/// Target: bytes migrated, at most this multiple of the minimum needed.
pub const TARGET_BYTES_RATIO: f64 = 1.5;

/// What the policy suite measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySettings {
    /// Guest shape, workloads, phases and sampling (flattened: the
    /// JSON keeps its keys).
    #[serde(flatten)]
    pub run: GuestRun,
    /// Engine configurations, in run order (each runs every workload).
    pub cases: Vec<Case>,
    /// Seconds after a phase began at which the after-shift ratio is
    /// read: the target's 3 s, or 90 % of the phase when phases are
    /// shorter (`--quick`).
    pub shift_window_secs: f64,
}

impl PolicySettings {
    /// Settings for a full or `quick` run, guest RAM overridden by
    /// `guest_bytes` when given.
    pub fn new(quick: bool, guest_bytes: Option<u64>) -> Result<Self, SettingsError> {
        let run = GuestRun::new(quick, guest_bytes, &RUN_DEFAULTS)?;
        let cases = if quick {
            vec![Case::new("dirty-log", 0.25)]
        } else {
            vec![
                Case::new("dirty-log", 0.25),
                Case::new("combined", 0.25),
                Case::new("dirty-log", 0.125),
                Case::new("dirty-log", 0.5),
            ]
        };
        run.check_shares("a fast-tier quota", cases.iter().map(|c| c.quota_share))?;
        let settings = Self {
            shift_window_secs: TARGET_SHIFT_SECS.min(run.phase_seconds * SHORT_PHASE_WINDOW),
            run,
            cases,
        };
        Ok(settings)
    }

    /// Frames the fast tier holds under `case`'s quota (whole frames).
    pub fn quota_frames(&self, case: &Case) -> usize {
        self.run.share_frames(case.quota_share)
    }

    /// `case`'s quota in bytes.
    pub fn quota_bytes(&self, case: &Case) -> u64 {
        self.quota_frames(case) as u64 * self.run.frame_size
    }

    /// How a run under `case` is set up: the fast tier is the quota and
    /// starts empty (slow-first), the engine runs with `case`'s tracker.
    pub fn run_spec(&self, case: &Case) -> RunSpec {
        let quota = self.quota_bytes(case);
        let mut policy = TieringPolicy::with_quota(quota);
        policy.tracker = case.tracker.clone();
        self.run
            .spec(quota, Placement::SlowFirst, Some(policy), None)
    }

    /// One line describing the method, for reports.
    pub fn describe(&self) -> String {
        let cases = self
            .cases
            .iter()
            .map(Case::label)
            .collect::<Vec<_>>()
            .join("; ");
        self.run.describe(
            "fast = the quota, empty at boot: slow-first placement; slow = all of RAM",
            ", the engine's default policy but for tracker and quota",
            &format!("engine configurations: {cases}"),
        )
    }
}

/// One engine configuration: a tracker and a fast-tier quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// The engine's tracker (`policy.tracker`).
    pub tracker: String,
    /// Fast-tier quota as a share of guest RAM.
    pub quota_share: f64,
}

impl Case {
    fn new(tracker: &str, quota_share: f64) -> Self {
        Self {
            tracker: tracker.to_owned(),
            quota_share,
        }
    }

    /// `dirty-log, quota 25%`.
    pub fn label(&self) -> String {
        format!("{}, quota {}", self.tracker, format_share(self.quota_share))
    }

    /// `dirty-log-q25`, for file names.
    pub fn tag(&self) -> String {
        format!(
            "{}-q{}",
            self.tracker,
            format_share(self.quota_share).trim_end_matches('%')
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest_size::GuestSizeError;

    #[test]
    fn quick_is_smaller_than_full() {
        let full = PolicySettings::new(false, None).unwrap();
        let quick = PolicySettings::new(true, None).unwrap();
        assert_eq!(full.run.guest_bytes, 1 << 30);
        assert!(quick.run.guest_bytes < full.run.guest_bytes);
        assert!(
            quick.run.phases >= 2 && full.run.phases >= 2,
            "a phase shift"
        );
        assert_eq!(full.shift_window_secs, 3.0);
        assert!((quick.shift_window_secs - 1.8).abs() < 1e-12);
        assert_eq!(quick.cases.len(), 1);
        let labels: Vec<String> = full.cases.iter().map(Case::label).collect();
        assert_eq!(
            labels,
            [
                "dirty-log, quota 25%",
                "combined, quota 25%",
                "dirty-log, quota 12.5%",
                "dirty-log, quota 50%"
            ]
        );
        assert_eq!(full.cases[2].tag(), "dirty-log-q12.5");
        assert_eq!(full.quota_frames(&full.cases[0]), 128);
        assert_eq!(full.quota_bytes(&full.cases[2]), 128 << 20);
    }

    #[test]
    fn workload_strings_parse() {
        let s = PolicySettings::new(true, Some(128 << 20)).unwrap();
        for w in &s.run.workloads {
            let args = s.run.workload_args(w);
            assert!(workloads::Spec::parse(&args).is_ok(), "{args}");
        }
        assert_eq!(
            s.run.workload_args("zipf"),
            "zipf:size=64M,phases=2,seconds=2,items=131072"
        );
    }

    #[test]
    fn bad_guest_sizes_are_refused() {
        assert!(matches!(
            PolicySettings::new(true, Some((64 << 20) + 4096)),
            Err(SettingsError::GuestSize(
                GuestSizeError::NotWholeFrames { .. }
            ))
        ));
        assert!(matches!(
            PolicySettings::new(true, Some(32 << 20)),
            Err(SettingsError::GuestSize(GuestSizeError::TooSmall { .. }))
        ));
    }

    #[test]
    fn description_names_sizes_and_cases() {
        let text = PolicySettings::new(false, None).unwrap().describe();
        for part in [
            "1 GiB guest",
            "hotset, zipf, pmbench",
            "combined, quota 25%",
        ] {
            assert!(text.contains(part), "{part} missing from {text}");
        }
    }
}
