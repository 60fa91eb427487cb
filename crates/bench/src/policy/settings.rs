//! What the policy suite measures, from `--quick` and the hidden `--bytes`
//! override (guest RAM): the workloads, the engine configurations
//! ([`Case`]: tracker and fast-tier quota), phase lengths, and the targets
//! of the policy issue.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use guest_memory::Placement;
use tiering::TieringPolicy;

use crate::guest_size::{GuestSizeError, check_guest_size};
use crate::size::format_size;
use crate::suite_common::{RunSpec, format_share, share_frames, workload_args};

/// Frame size of the benchmark VMs: the VMM's default, huge-page frames.
pub const FRAME_SIZE: u64 = 2 << 20;
/// Guest RAM in the full run (the track suite's size).
pub const FULL_GUEST: u64 = 1 << 30;
/// Guest RAM in `--quick` mode.
pub const QUICK_GUEST: u64 = 256 << 20;
/// Smallest guest RAM accepted: the smallest quota (an eighth) must still
/// be whole frames of a buffer the payload can use.
pub const MIN_GUEST: u64 = 64 << 20;
/// vCPUs of every benchmark guest: both cores of the development machine,
/// so the engine's thread competes with the guest as on a busy host.
pub const VCPUS: u32 = 2;
/// The phased workloads the engine is measured on.
pub const WORKLOADS: [&str; 3] = ["hotset", "zipf", "pmbench"];
/// Phases per run in the full mode: the first follows boot and warm-up,
/// each later one is a phase shift.
pub const FULL_PHASES: u32 = 3;
/// Phases in `--quick` mode: one shift.
pub const QUICK_PHASES: u32 = 2;
/// Seconds per phase in the full run: longer than the 3 s the issue gives
/// the engine after a shift, so the steady state is seen too.
pub const FULL_PHASE_SECS: f64 = 5.0;
/// Seconds per phase in `--quick` mode.
pub const QUICK_PHASE_SECS: f64 = 2.0;
/// Share of a phase shorter than the target's 3 s at which the
/// after-shift ratio is read instead: late enough to judge, early enough
/// that a sample lands before the phase ends.
pub const SHORT_PHASE_WINDOW: f64 = 0.9;
/// Milliseconds between two placement samples.
pub const SAMPLE_MS: u64 = 100;
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

/// Why the settings were refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SettingsError {
    /// The guest size was refused.
    #[error(transparent)]
    GuestSize(#[from] GuestSizeError),
    /// A quota is not at least one whole frame.
    #[error("a fast-tier quota of {share} of {guest} bytes holds no whole frame")]
    Quota {
        /// The quota as a share of guest RAM.
        share: f64,
        /// Guest RAM.
        guest: u64,
    },
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

/// What the policy suite measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySettings {
    /// Guest RAM in bytes.
    pub guest_bytes: u64,
    /// Bytes per frame.
    pub frame_size: u64,
    /// vCPUs of the guest.
    pub vcpus: u32,
    /// The workload's buffer, bytes (half of guest RAM).
    pub buffer_bytes: u64,
    /// Workload names, in run order.
    pub workloads: Vec<String>,
    /// Engine configurations, in run order (each runs every workload).
    pub cases: Vec<Case>,
    /// Phases of each guest run.
    pub phases: u32,
    /// Seconds per phase.
    pub phase_seconds: f64,
    /// Milliseconds between placement samples.
    pub sample_ms: u64,
    /// Seconds after a phase began at which the after-shift ratio is
    /// read: the target's 3 s, or 90 % of the phase when phases are
    /// shorter (`--quick`).
    pub shift_window_secs: f64,
}

impl PolicySettings {
    /// Settings for a full or `quick` run, guest RAM overridden by
    /// `guest_bytes` when given.
    pub fn new(quick: bool, guest_bytes: Option<u64>) -> Result<Self, SettingsError> {
        let guest = guest_bytes.unwrap_or(if quick { QUICK_GUEST } else { FULL_GUEST });
        check_guest_size(guest, FRAME_SIZE, MIN_GUEST)?;
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
        let phase_seconds = if quick {
            QUICK_PHASE_SECS
        } else {
            FULL_PHASE_SECS
        };
        let settings = Self {
            guest_bytes: guest,
            frame_size: FRAME_SIZE,
            vcpus: VCPUS,
            buffer_bytes: guest / 2,
            workloads: WORKLOADS.map(str::to_owned).to_vec(),
            cases,
            phases: if quick { QUICK_PHASES } else { FULL_PHASES },
            phase_seconds,
            sample_ms: SAMPLE_MS,
            shift_window_secs: TARGET_SHIFT_SECS.min(phase_seconds * SHORT_PHASE_WINDOW),
        };
        for case in &settings.cases {
            if settings.quota_frames(case) == 0 {
                return Err(SettingsError::Quota {
                    share: case.quota_share,
                    guest,
                });
            }
        }
        Ok(settings)
    }

    /// Frames the fast tier holds under `case`'s quota (whole frames).
    pub fn quota_frames(&self, case: &Case) -> usize {
        share_frames(self.guest_bytes, self.frame_size, case.quota_share)
    }

    /// `case`'s quota in bytes.
    pub fn quota_bytes(&self, case: &Case) -> u64 {
        self.quota_frames(case) as u64 * self.frame_size
    }

    /// The payload's workload string for `workload` over the suite's
    /// buffer ([`workload_args`]).
    pub fn workload_args(&self, workload: &str) -> String {
        workload_args(workload, self.buffer_bytes, self.phases, self.phase_seconds)
    }

    /// How a run under `case` is set up: the fast tier is the quota and
    /// starts empty (slow-first), the engine runs with `case`'s tracker.
    pub fn run_spec(&self, case: &Case) -> RunSpec {
        let quota = self.quota_bytes(case);
        let mut policy = TieringPolicy::with_quota(quota);
        policy.tracker = case.tracker.clone();
        RunSpec {
            guest_bytes: self.guest_bytes,
            frame_size: self.frame_size,
            vcpus: self.vcpus,
            phases: self.phases,
            phase_seconds: self.phase_seconds,
            sample_ms: self.sample_ms,
            fast_bytes: quota,
            placement: Placement::SlowFirst,
            tiering: Some(policy),
            tier_nodes: None,
        }
    }

    /// One line describing the method, for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} guest on {} vCPUs, {} frames, two memfd tiers (fast = the quota, empty at \
             boot: slow-first placement; slow = all of RAM), remap-precopy migrator, the engine's default \
             policy but for tracker and quota; workloads {} over a {} buffer ({} phases of {} s); \
             engine configurations: {}; placement sampled every {} ms",
            format_size(self.guest_bytes),
            self.vcpus,
            format_size(self.frame_size),
            self.workloads.join(", "),
            format_size(self.buffer_bytes),
            self.phases,
            self.phase_seconds,
            self.cases
                .iter()
                .map(Case::label)
                .collect::<Vec<_>>()
                .join("; "),
            self.sample_ms,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_is_smaller_than_full() {
        let full = PolicySettings::new(false, None).unwrap();
        let quick = PolicySettings::new(true, None).unwrap();
        assert_eq!(full.guest_bytes, 1 << 30);
        assert!(quick.guest_bytes < full.guest_bytes);
        assert!(quick.phases >= 2 && full.phases >= 2, "a phase shift");
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
        for w in &s.workloads {
            let args = s.workload_args(w);
            assert!(workloads::Spec::parse(&args).is_ok(), "{args}");
        }
        assert_eq!(
            s.workload_args("zipf"),
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
