//! What the workloads suite measures, from `--quick` and the hidden
//! `--bytes` override (guest RAM): the payloads, the placement
//! configurations ([`Config`]), the DRAM shares, phase lengths, and how
//! each run is set up ([`RunCase`] → [`RunSpec`]).

use serde::{Deserialize, Serialize};

use guest_memory::Placement;
use tiering::TieringPolicy;

use super::host_tiers::HostTiers;
use crate::model::Pattern;
use crate::suite_common::{GuestRun, RunDefaults, RunSpec, SettingsError, format_share};

/// How the suite's guest runs differ from the policy suite's: a 128 MiB
/// quick guest, 1 s phases, four workloads (each phased).
pub const RUN_DEFAULTS: RunDefaults = RunDefaults {
    quick_guest: 128 << 20,
    quick_phase_secs: 1.0,
    workloads: &["hotset", "zipf", "pmbench", "stream"],
};
/// DRAM shares of guest RAM in the full run.
pub const FULL_SHARES: [f64; 3] = [0.125, 0.25, 0.5];
/// The DRAM share in `--quick` mode.
pub const QUICK_SHARE: f64 = 0.25;
/// The two-VM mixes of the full run (quick: the first): a skewed
/// random workload beside another, and a random one beside a stream.
pub const MIXES: [[&str; 2]; 2] = [["hotset", "zipf"], ["pmbench", "stream"]];
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
    /// Guest shape, workloads, phases and sampling (flattened: the
    /// JSON keeps its keys).
    #[serde(flatten)]
    pub run: GuestRun,
    /// DRAM shares of guest RAM for the configurations that are no bound.
    pub shares: Vec<f64>,
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
        let run = GuestRun::new(quick, guest_bytes, &RUN_DEFAULTS)?;
        let shares = if quick {
            vec![QUICK_SHARE]
        } else {
            FULL_SHARES.to_vec()
        };
        run.check_shares("a DRAM share", shares.iter().copied())?;
        Ok(Self {
            run,
            shares,
            mixes: if quick {
                vec![MIXES[0].map(str::to_owned)]
            } else {
                MIXES.map(|m| m.map(str::to_owned)).to_vec()
            },
            tiers: HostTiers::detect(),
        })
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

    /// Frames on the fast tier under `case` (all of RAM for all-fast,
    /// none for all-slow): the oracle's room.
    pub fn fast_frames(&self, case: &RunCase) -> usize {
        match case.config {
            Config::AllFast => (self.run.guest_bytes / self.run.frame_size) as usize,
            Config::AllSlow => 0,
            _ => self.run.share_frames(case.share.unwrap_or(0.0)),
        }
    }

    /// How a run under `case` is set up. all-slow still has a one-frame
    /// fast tier (the VMM wants two tiers), left empty by slow-first.
    pub fn run_spec(&self, case: &RunCase) -> RunSpec {
        let fast_frames = self.fast_frames(case).max(1) as u64;
        let fast_bytes = fast_frames * self.run.frame_size;
        let placement = match case.config {
            Config::AllSlow => Placement::SlowFirst,
            _ => Placement::FastFirst,
        };
        let tiering = case.config.tracker().map(|tracker| {
            let mut policy = TieringPolicy::with_quota(fast_bytes);
            policy.tracker = tracker.to_owned();
            policy
        });
        self.run
            .spec(fast_bytes, placement, tiering, self.tiers.nodes())
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
        let shares = self
            .shares
            .iter()
            .map(|&s| format_share(s))
            .collect::<Vec<_>>()
            .join(", ");
        self.run.describe(
            &format!("fast = the DRAM share, slow = all of RAM; {speed}"),
            "",
            &format!(
                "configurations: all-fast and all-slow (bounds), first-touch (fast-first, no \
                 engine), tiering-dirty-log and tiering-fault-sample (fast-first, then the \
                 engine's default policy with that tracker), at DRAM shares {shares}"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest_size::GuestSizeError;

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
        assert!(quick.run.guest_bytes < full.run.guest_bytes);
        assert!(quick.run.phase_seconds < full.run.phase_seconds);
    }

    #[test]
    fn specs_place_frames_as_the_config_says() {
        let s = WorkloadsSettings::new(true, None).unwrap();
        let [fast, slow, touch, dirty, fault] = s.cases().try_into().unwrap();
        let spec = s.run_spec(&fast);
        assert_eq!(
            (spec.fast_bytes, spec.placement),
            (s.run.guest_bytes, Placement::FastFirst)
        );
        assert!(spec.tiering.is_none());
        let spec = s.run_spec(&slow);
        assert_eq!(spec.placement, Placement::SlowFirst);
        assert_eq!(s.fast_frames(&slow), 0);
        let spec = s.run_spec(&touch);
        assert_eq!(
            (spec.fast_bytes, spec.placement),
            (s.run.guest_bytes / 4, Placement::FastFirst)
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
            assert_eq!(policy.fast_quota.max_bytes, s.run.guest_bytes / 4);
        }
    }

    #[test]
    fn workload_strings_parse() {
        let s = WorkloadsSettings::new(true, None).unwrap();
        for w in &s.run.workloads {
            let args = s.run.workload_args(w);
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
