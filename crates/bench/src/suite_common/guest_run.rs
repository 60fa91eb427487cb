//! What every guest run of the policy and workloads suites shares: the
//! guest's shape, the workloads over half of its RAM, the phases and the
//! sampling period ([`GuestRun`], embedded in both suites' settings), and
//! why settings are refused ([`SettingsError`]).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use guest_memory::Placement;
use tiering::TieringPolicy;

use super::RunSpec;
use crate::guest_size::{GuestSizeError, check_guest_size};
use crate::size::format_size;

/// Frame size of the benchmark VMs: the VMM's default, huge-page frames.
pub const FRAME_SIZE: u64 = 2 << 20;
/// Guest RAM in the full run (the track suite's size).
pub const FULL_GUEST: u64 = 1 << 30;
/// Smallest guest RAM accepted: the smallest share (an eighth) must still
/// be whole frames of a buffer the payload can use.
pub const MIN_GUEST: u64 = 64 << 20;
/// vCPUs of every benchmark guest: both cores of the development machine,
/// so the engine's thread competes with the guest as on a busy host.
pub const VCPUS: u32 = 2;
/// Phases per run in the full mode: the first follows boot and warm-up,
/// each later one is a phase shift (two shifts).
pub const FULL_PHASES: u32 = 3;
/// Phases in `--quick` mode: one shift.
pub const QUICK_PHASES: u32 = 2;
/// Seconds per phase in the full run: longer than the 3 s the policy
/// issue gives the engine after a shift, so the steady state is seen too.
pub const FULL_PHASE_SECS: f64 = 5.0;
/// Milliseconds between two placement samples.
pub const SAMPLE_MS: u64 = 100;

/// Why the settings were refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SettingsError {
    /// The guest size was refused.
    #[error(transparent)]
    GuestSize(#[from] GuestSizeError),
    /// A share of guest RAM (a quota, a DRAM share) is not at least one
    /// whole frame.
    #[error("{what} of {share} of {guest} bytes holds no whole frame")]
    NoWholeFrame {
        /// What the share is: `a fast-tier quota`, `a DRAM share`.
        what: &'static str,
        /// The share of guest RAM.
        share: f64,
        /// Guest RAM.
        guest: u64,
    },
}

/// What a suite's guest runs differ in: the quick guest and phase
/// length, and the workloads.
#[derive(Debug, Clone, Copy)]
pub struct RunDefaults {
    /// Guest RAM in `--quick` mode.
    pub quick_guest: u64,
    /// Seconds per phase in `--quick` mode.
    pub quick_phase_secs: f64,
    /// The phased workloads, in run order.
    pub workloads: &'static [&'static str],
}

/// The shape of every guest run of a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestRun {
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
    /// Phases of each guest run.
    pub phases: u32,
    /// Seconds per phase.
    pub phase_seconds: f64,
    /// Milliseconds between placement samples.
    pub sample_ms: u64,
}

impl GuestRun {
    /// The runs of a full or `quick` suite as `defaults` says, guest RAM
    /// overridden by `guest_bytes` when given.
    pub fn new(
        quick: bool,
        guest_bytes: Option<u64>,
        defaults: &RunDefaults,
    ) -> Result<Self, SettingsError> {
        let guest_bytes = guest_bytes.unwrap_or(if quick {
            defaults.quick_guest
        } else {
            FULL_GUEST
        });
        check_guest_size(guest_bytes, FRAME_SIZE, MIN_GUEST)?;
        let (phases, phase_seconds) = if quick {
            (QUICK_PHASES, defaults.quick_phase_secs)
        } else {
            (FULL_PHASES, FULL_PHASE_SECS)
        };
        Ok(Self {
            guest_bytes,
            frame_size: FRAME_SIZE,
            vcpus: VCPUS,
            buffer_bytes: guest_bytes / 2,
            workloads: defaults.workloads.iter().map(|&w| w.to_owned()).collect(),
            phases,
            phase_seconds,
            sample_ms: SAMPLE_MS,
        })
    }

    /// Whole frames in `share` of guest RAM.
    pub fn share_frames(&self, share: f64) -> usize {
        share_frames(self.guest_bytes, self.frame_size, share)
    }

    /// Refuses the first of `shares` (each `what`) that holds no whole
    /// frame.
    pub fn check_shares(
        &self,
        what: &'static str,
        shares: impl IntoIterator<Item = f64>,
    ) -> Result<(), SettingsError> {
        match shares.into_iter().find(|&s| self.share_frames(s) == 0) {
            Some(share) => Err(SettingsError::NoWholeFrame {
                what,
                share,
                guest: self.guest_bytes,
            }),
            None => Ok(()),
        }
    }

    /// The payload's workload string for `workload` over the buffer
    /// ([`workload_args`]).
    pub fn workload_args(&self, workload: &str) -> String {
        workload_args(workload, self.buffer_bytes, self.phases, self.phase_seconds)
    }

    /// How a run of this shape is set up: a fast tier of `fast_bytes`,
    /// frames starting as `placement` says, the engine with `tiering`'s
    /// policy when given, the tiers on `tier_nodes` when given.
    pub fn spec(
        &self,
        fast_bytes: u64,
        placement: Placement,
        tiering: Option<TieringPolicy>,
        tier_nodes: Option<[u32; 2]>,
    ) -> RunSpec {
        RunSpec {
            guest_bytes: self.guest_bytes,
            frame_size: self.frame_size,
            vcpus: self.vcpus,
            phases: self.phases,
            phase_seconds: self.phase_seconds,
            sample_ms: self.sample_ms,
            fast_bytes,
            placement,
            tiering,
            tier_nodes,
        }
    }

    /// One line describing the method, for reports: the guest, its
    /// `tiers`, the `engine` clause (may be empty), the workloads and the
    /// suite's `configurations`.
    pub fn describe(&self, tiers: &str, engine: &str, configurations: &str) -> String {
        format!(
            "{} guest on {} vCPUs, {} frames, two memfd tiers ({tiers}), remap-precopy \
             migrator{engine}; workloads {} over a {} buffer ({} phases of {} s); \
             {configurations}; placement sampled every {} ms",
            format_size(self.guest_bytes),
            self.vcpus,
            format_size(self.frame_size),
            self.workloads.join(", "),
            format_size(self.buffer_bytes),
            self.phases,
            self.phase_seconds,
            self.sample_ms,
        )
    }
}

/// The payload's workload string for `workload` over a buffer of
/// `buffer_bytes`, in `phases` phases of `phase_seconds`. zipf's records
/// fill an eighth of the buffer (as hotset's hot set does): with records
/// spread over the whole buffer its frames are nearly equally hot and any
/// placement is as good as the oracle's.
pub fn workload_args(workload: &str, buffer_bytes: u64, phases: u32, phase_seconds: f64) -> String {
    let extra = match workload {
        "zipf" => format!(",items={}", buffer_bytes / 8 / 64),
        _ => String::new(),
    };
    format!(
        "{workload}:size={}M,phases={phases},seconds={phase_seconds}{extra}",
        buffer_bytes >> 20,
    )
}

/// Whole frames of `frame_size` in `share` of `guest_bytes`.
pub fn share_frames(guest_bytes: u64, frame_size: u64, share: f64) -> usize {
    let frames = guest_bytes / frame_size;
    (frames as f64 * share).floor() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: RunDefaults = RunDefaults {
        quick_guest: 128 << 20,
        quick_phase_secs: 1.0,
        workloads: &["hotset", "zipf"],
    };

    #[test]
    fn quick_runs_are_smaller_and_shares_are_whole_frames() {
        let full = GuestRun::new(false, None, &DEFAULTS).unwrap();
        let quick = GuestRun::new(true, None, &DEFAULTS).unwrap();
        assert_eq!(full.guest_bytes, FULL_GUEST);
        assert_eq!(
            (quick.guest_bytes, quick.buffer_bytes),
            (128 << 20, 64 << 20)
        );
        assert_eq!((quick.phases, quick.phase_seconds), (2, 1.0));
        assert_eq!(quick.share_frames(0.25), 16);
        assert!(quick.check_shares("a DRAM share", [0.5, 0.25]).is_ok());
        let err = quick.check_shares("a DRAM share", [0.001]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a DRAM share of 0.001 of 134217728 bytes holds no whole frame"
        );
        assert!(matches!(
            GuestRun::new(true, Some(32 << 20), &DEFAULTS),
            Err(SettingsError::GuestSize(GuestSizeError::TooSmall { .. }))
        ));
    }
}
