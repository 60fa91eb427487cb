//! What the workloads suite measures, from `--quick` and the hidden
//! `--bytes` override (guest RAM): the payloads, the placement
//! configurations ([`Config`]), the DRAM shares, phase lengths, and how
//! each run is set up ([`RunCase`] → [`RunSpec`]).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use guest_memory::Placement;
use tiering::TieringPolicy;

use super::host_tiers::HostTiers;
use crate::guest_size::{GuestSizeError, check_guest_size};
use crate::model::Pattern;
use crate::size::format_size;
use crate::suite_common::{RunSpec, format_share, share_frames, workload_args};

/// Frame size of the benchmark VMs: the VMM's default, huge-page frames
/// (as in the policy suite).
pub const FRAME_SIZE: u64 = 2 << 20;
/// Guest RAM in the full run.
pub const FULL_GUEST: u64 = 1 << 30;
/// Guest RAM in `--quick` mode.
pub const QUICK_GUEST: u64 = 128 << 20;
/// Smallest guest RAM accepted: an eighth must still be whole frames of a
/// buffer the payload can use.
pub const MIN_GUEST: u64 = 64 << 20;
/// vCPUs of every guest (both cores of the development machine).
pub const VCPUS: u32 = 2;
/// The payloads, each phased.
pub const WORKLOADS: [&str; 4] = ["hotset", "zipf", "pmbench", "stream"];
/// DRAM shares of guest RAM in the full run.
pub const FULL_SHARES: [f64; 3] = [0.125, 0.25, 0.5];
/// The DRAM share in `--quick` mode.
pub const QUICK_SHARE: f64 = 0.25;
/// Phases per run in the full mode (two shifts).
pub const FULL_PHASES: u32 = 3;
/// Phases in `--quick` mode (one shift).
pub const QUICK_PHASES: u32 = 2;
/// Seconds per phase in the full run.
pub const FULL_PHASE_SECS: f64 = 5.0;
/// Seconds per phase in `--quick` mode.
pub const QUICK_PHASE_SECS: f64 = 1.0;
/// The two-VM mixes of the full run (quick: the first): a skewed
/// random workload beside another, and a random one beside a stream.
pub const MIXES: [[&str; 2]; 2] = [["hotset", "zipf"], ["pmbench", "stream"]];
/// Milliseconds between two placement samples.
pub const SAMPLE_MS: u64 = 100;

/// Why the settings were refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SettingsError {
    /// The guest size was refused.
    #[error(transparent)]
    GuestSize(#[from] GuestSizeError),
    /// A DRAM share is not at least one whole frame.
    #[error("a DRAM share of {share} of {guest} bytes holds no whole frame")]
    Share {
        /// The share of guest RAM.
        share: f64,
        /// Guest RAM.
        guest: u64,
    },
}

/// Where the guest's frames live and who moves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Config {
    /// All of RAM on the fast tier, no engine: the upper bound.
    AllFast,
    /// All of RAM on the slow tier (slow-first), no engine: the lower
    /// bound.
    AllSlow,
    /// The fast tier is the DRAM share, filled first by address
    /// (fast-first), no engine: static first-touch placement.
    FirstTouch,
    /// First-touch placement, then the engine with the dirty-log tracker.
    TieringDirtyLog,
    /// First-touch placement, then the engine with the fault-sample
    /// tracker.
    TieringFaultSample,
}

impl Config {
    /// Every configuration, in run order.
    pub const ALL: [Config; 5] = [
        Config::AllFast,
        Config::AllSlow,
        Config::FirstTouch,
        Config::TieringDirtyLog,
        Config::TieringFaultSample,
    ];

    /// `tiering-dirty-log`.
    pub fn name(self) -> &'static str {
        match self {
            Config::AllFast => "all-fast",
            Config::AllSlow => "all-slow",
            Config::FirstTouch => "first-touch",
            Config::TieringDirtyLog => "tiering-dirty-log",
            Config::TieringFaultSample => "tiering-fault-sample",
        }
    }

    /// Whether it is a bound (run once, whatever the DRAM share).
    pub fn is_bound(self) -> bool {
        matches!(self, Config::AllFast | Config::AllSlow)
    }

    /// The engine's tracker, when the engine runs.
    pub fn tracker(self) -> Option<&'static str> {
        match self {
            Config::TieringDirtyLog => Some("dirty-log"),
            Config::TieringFaultSample => Some("fault-sample"),
            _ => None,
        }
    }
}

/// One run's configuration: a [`Config`] and, unless it is a bound, the
/// DRAM share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunCase {
    /// Placement and engine.
    pub config: Config,
    /// Fast tier as a share of guest RAM; `None` for the bounds.
    pub share: Option<f64>,
}

impl RunCase {
    /// `first-touch, DRAM 25%` or `all-fast`.
    pub fn label(&self) -> String {
        match self.share {
            Some(share) => format!("{}, DRAM {}", self.config.name(), format_share(share)),
            None => self.config.name().to_owned(),
        }
    }
}

/// What the workloads suite measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadsSettings {
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
    /// DRAM shares of guest RAM for the configurations that are no bound.
    pub shares: Vec<f64>,
    /// Phases of each guest run.
    pub phases: u32,
    /// Seconds per phase.
    pub phase_seconds: f64,
    /// Milliseconds between placement samples.
    pub sample_ms: u64,
    /// Pairs of workloads run side by side, each in its own VM, under
    /// every configuration that is no bound.
    #[serde(default)]
    pub mixes: Vec<[String; 2]>,
    /// Where the tiers' memory comes from: two NUMA nodes (measured on
    /// real tiers) or one (modeled).
    #[serde(default)]
    pub tiers: HostTiers,
}

impl WorkloadsSettings {
    /// Settings for a full or `quick` run, guest RAM overridden by
    /// `guest_bytes` when given.
    pub fn new(quick: bool, guest_bytes: Option<u64>) -> Result<Self, SettingsError> {
        let guest = guest_bytes.unwrap_or(if quick { QUICK_GUEST } else { FULL_GUEST });
        check_guest_size(guest, FRAME_SIZE, MIN_GUEST)?;
        let settings = Self {
            guest_bytes: guest,
            frame_size: FRAME_SIZE,
            vcpus: VCPUS,
            buffer_bytes: guest / 2,
            workloads: WORKLOADS.map(str::to_owned).to_vec(),
            shares: if quick {
                vec![QUICK_SHARE]
            } else {
                FULL_SHARES.to_vec()
            },
            phases: if quick { QUICK_PHASES } else { FULL_PHASES },
            phase_seconds: if quick {
                QUICK_PHASE_SECS
            } else {
                FULL_PHASE_SECS
            },
            sample_ms: SAMPLE_MS,
            mixes: if quick {
                vec![MIXES[0].map(str::to_owned)]
            } else {
                MIXES.map(|m| m.map(str::to_owned)).to_vec()
            },
            tiers: HostTiers::detect(),
        };
        for &share in &settings.shares {
            if settings.share_frames(share) == 0 {
                return Err(SettingsError::Share { share, guest });
            }
        }
        Ok(settings)
    }

    /// Every run's configuration for one workload: the bounds once, every
    /// other configuration at every share.
    pub fn cases(&self) -> Vec<RunCase> {
        let mut cases = Vec::new();
        for config in Config::ALL {
            if config.is_bound() {
                cases.push(RunCase {
                    config,
                    share: None,
                });
            } else {
                cases.extend(self.shares.iter().map(|&s| RunCase {
                    config,
                    share: Some(s),
                }));
            }
        }
        cases
    }

    /// The configurations a mix runs under: every one but the bounds.
    pub fn mix_cases(&self) -> Vec<RunCase> {
        self.cases()
            .into_iter()
            .filter(|c| !c.config.is_bound())
            .collect()
    }

    /// Whole frames in `share` of guest RAM.
    pub fn share_frames(&self, share: f64) -> usize {
        share_frames(self.guest_bytes, self.frame_size, share)
    }

    /// Frames on the fast tier under `case` (all of RAM for all-fast,
    /// none for all-slow): the oracle's room.
    pub fn fast_frames(&self, case: &RunCase) -> usize {
        match case.config {
            Config::AllFast => (self.guest_bytes / self.frame_size) as usize,
            Config::AllSlow => 0,
            _ => self.share_frames(case.share.unwrap_or(0.0)),
        }
    }

    /// How a run under `case` is set up. all-slow still has a one-frame
    /// fast tier (the VMM wants two tiers), left empty by slow-first.
    pub fn run_spec(&self, case: &RunCase) -> RunSpec {
        let fast_frames = self.fast_frames(case).max(1) as u64;
        let fast_bytes = fast_frames * self.frame_size;
        let placement = match case.config {
            Config::AllSlow => Placement::SlowFirst,
            _ => Placement::FastFirst,
        };
        let tiering = case.config.tracker().map(|tracker| {
            let mut policy = TieringPolicy::with_quota(fast_bytes);
            policy.tracker = tracker.to_owned();
            policy
        });
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
            tier_nodes: self.tiers.nodes(),
        }
    }

    /// The payload's workload string for `workload` (as the policy suite
    /// builds it: [`workload_args`]).
    pub fn workload_args(&self, workload: &str) -> String {
        workload_args(workload, self.buffer_bytes, self.phases, self.phase_seconds)
    }

    /// How `workload` reaches memory, for the model: stream streams,
    /// the others touch their buffer at random.
    pub fn pattern(&self, workload: &str) -> Pattern {
        if workload == "stream" {
            Pattern::Sequential
        } else {
            Pattern::Random
        }
    }

    /// One line describing the method, for reports.
    pub fn describe(&self) -> String {
        let speed = match self.tiers {
            HostTiers::OneNode => "both run at this machine's DRAM speed".to_owned(),
            HostTiers::Numa { fast, slow } => {
                format!("fast on NUMA node {fast}, slow on node {slow}: measured on real tiers")
            }
        };
        format!(
            "{} guest on {} vCPUs, {} frames, two memfd tiers (fast = the DRAM share, slow = all \
             of RAM; {speed}), remap-precopy migrator; workloads \
             {} over a {} buffer ({} phases of {} s); configurations: all-fast and all-slow \
             (bounds), first-touch (fast-first, no engine), tiering-dirty-log and \
             tiering-fault-sample (fast-first, then the engine's default policy with that \
             tracker), at DRAM shares {}; placement sampled every {} ms",
            format_size(self.guest_bytes),
            self.vcpus,
            format_size(self.frame_size),
            self.workloads.join(", "),
            format_size(self.buffer_bytes),
            self.phases,
            self.phase_seconds,
            self.shares
                .iter()
                .map(|&s| format_share(s))
                .collect::<Vec<_>>()
                .join(", "),
            self.sample_ms,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_runs_every_config_at_one_share() {
        let quick = WorkloadsSettings::new(true, None).unwrap();
        let labels: Vec<String> = quick.cases().iter().map(RunCase::label).collect();
        assert_eq!(
            labels,
            [
                "all-fast",
                "all-slow",
                "first-touch, DRAM 25%",
                "tiering-dirty-log, DRAM 25%",
                "tiering-fault-sample, DRAM 25%"
            ]
        );
        let full = WorkloadsSettings::new(false, None).unwrap();
        assert_eq!(full.cases().len(), 2 + 3 * 3);
        assert_eq!(quick.mixes.len(), 1);
        assert_eq!(full.mixes.len(), 2);
        assert_eq!(full.mix_cases().len(), 3 * 3);
        assert!(full.mix_cases().iter().all(|c| !c.config.is_bound()));
        assert!(quick.guest_bytes < full.guest_bytes);
        assert!(quick.phase_seconds < full.phase_seconds);
    }

    #[test]
    fn specs_place_frames_as_the_config_says() {
        let s = WorkloadsSettings::new(true, None).unwrap();
        let [fast, slow, touch, dirty, fault] = s.cases().try_into().unwrap();
        let spec = s.run_spec(&fast);
        assert_eq!(
            (spec.fast_bytes, spec.placement),
            (s.guest_bytes, Placement::FastFirst)
        );
        assert!(spec.tiering.is_none());
        let spec = s.run_spec(&slow);
        assert_eq!(spec.placement, Placement::SlowFirst);
        assert_eq!(s.fast_frames(&slow), 0);
        let spec = s.run_spec(&touch);
        assert_eq!(
            (spec.fast_bytes, spec.placement),
            (s.guest_bytes / 4, Placement::FastFirst)
        );
        assert!(spec.tiering.is_none());
        assert_eq!(spec.tier_nodes, s.tiers.nodes());
        let numa = WorkloadsSettings {
            tiers: HostTiers::Numa { fast: 0, slow: 1 },
            ..s.clone()
        };
        let config = crate::suite_common::spec_config(&numa.run_spec(&touch), "hotset");
        let nodes: Vec<Option<u32>> = config
            .memory
            .tiers
            .iter()
            .map(|t| match t.backend {
                guest_memory::BackendSpec::Memfd { numa_node, .. } => numa_node,
                _ => panic!("{t:?}"),
            })
            .collect();
        assert_eq!(nodes, [Some(0), Some(1)]);
        assert!(numa.describe().contains("measured on real tiers"));
        for (case, tracker) in [(dirty, "dirty-log"), (fault, "fault-sample")] {
            let policy = s.run_spec(&case).tiering.unwrap();
            assert_eq!(policy.tracker, tracker);
            assert_eq!(policy.fast_quota.max_bytes, s.guest_bytes / 4);
        }
    }

    #[test]
    fn workload_strings_parse() {
        let s = WorkloadsSettings::new(true, None).unwrap();
        for w in &s.workloads {
            let args = s.workload_args(w);
            assert!(::workloads::Spec::parse(&args).is_ok(), "{args}");
        }
    }

    #[test]
    fn bad_guest_sizes_are_refused() {
        assert!(matches!(
            WorkloadsSettings::new(true, Some(32 << 20)),
            Err(SettingsError::GuestSize(GuestSizeError::TooSmall { .. }))
        ));
    }
}
