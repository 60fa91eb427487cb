//! The suites tierbench knows, how one is run, and what each returns.
//!
//! A new suite adds a variant to [`Suite`], [`Selection`] and
//! [`SuiteResult`], and one arm to each `match` here; `all` picks it up
//! from [`Suite::ALL`].

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::thread;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::copy::{self, CopyResult, CopySettings, CopySuiteError};
use crate::migrate::{
    self, MigrateResult, MigrateSettings, MigrateSuiteError, SOAK_DEFAULT_MIGRATIONS, SoakResult,
    SoakSettings,
};
use crate::plot::PlotError;
use crate::policy::{self, PolicyResult, PolicySettings, PolicySuiteError};
use crate::suite_common::SuiteTables;
use crate::table::{RowWidthError, Table};
use crate::track::{self, TrackResult, TrackSettings, TrackSuiteError};
use crate::workloads::{self, WorkloadsResult, WorkloadsSettings, WorkloadsSuiteError};

/// One benchmark suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Copy engines against memcpy and the best parallel copy (issue 3).
    Copy,
    /// End-to-end live migration in a KVM VM (issue 3).
    Migrate,
    /// The migration soak (`migrate --soak N`); never part of `all`.
    MigrateSoak,
    /// What guest access tracking costs (issue 4).
    Track,
    /// The tiering engine against the oracle.
    Policy,
    /// Every payload under every placement configuration, modeled cost.
    Workloads,
}

impl Suite {
    /// Every suite, in the order `all` runs them (the soak is run only
    /// when asked for).
    pub const ALL: [Suite; 5] = [
        Suite::Copy,
        Suite::Migrate,
        Suite::Track,
        Suite::Policy,
        Suite::Workloads,
    ];

    /// The suite's name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Copy => "copy",
            Suite::Migrate => "migrate",
            Suite::MigrateSoak => "migrate-soak",
            Suite::Track => "track",
            Suite::Policy => "policy",
            Suite::Workloads => "workloads",
        }
    }

    /// A one-line description, the heading of its report section.
    pub fn title(self) -> &'static str {
        match self {
            Suite::Copy => "copy engines against memcpy and the best parallel copy",
            Suite::Migrate => {
                "live migration in a KVM VM: bandwidth against the best copy, and guest write stalls"
            }
            Suite::MigrateSoak => "migration soak: random live migrations under a verifying guest",
            Suite::Track => {
                "access tracking: guest slowdown and host cost of each tracker, heat-model time"
            }
            Suite::Policy => {
                "tiering policy: the engine's DRAM-hit ratio against the oracle, convergence after \
                 a phase shift, bytes migrated"
            }
            Suite::Workloads => {
                "guest workloads: bounds, first-touch and the engine at several DRAM shares, with \
                 modeled DRAM+CXL and DRAM+Optane cost"
            }
        }
    }
}

/// What the command line asks to run: one suite or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Selection {
    /// Copy engines (4 KiB / 64 KiB / 2 MiB ranges, 1..N threads) against
    /// memcpy and the best parallel copy.
    Copy,
    /// Live migration in a KVM VM: batches of 1..512 frames, plain remap
    /// and pre-copy, idle and write-busy guest (with --soak: the soak).
    Migrate,
    /// Access tracking: hotset and zipf guest throughput with each
    /// tracker against none, tracker CPU time, heat-model time.
    Track,
    /// Tiering policy: hotset, zipf and pmbench with the tiering engine,
    /// the guest real and emulated 4× faster; DRAM-hit ratio against the
    /// oracle, convergence after a phase shift, bytes migrated against
    /// the minimum.
    Policy,
    /// Workloads: hotset, zipf, pmbench and stream under all-fast,
    /// all-slow, first-touch and the engine (each tracker) at several DRAM
    /// shares; DRAM-hit against the oracle and modeled CXL/Optane cost.
    Workloads,
    /// Every suite (without the soak).
    All,
}

impl Selection {
    /// The suites selected, in run order.
    pub fn suites(self) -> Vec<Suite> {
        match self {
            Selection::Copy => vec![Suite::Copy],
            Selection::Migrate => vec![Suite::Migrate],
            Selection::Track => vec![Suite::Track],
            Selection::Policy => vec![Suite::Policy],
            Selection::Workloads => vec![Suite::Workloads],
            Selection::All => Suite::ALL.to_vec(),
        }
    }
}

/// Options every suite receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunOptions {
    /// CI smoke mode: smaller inputs, fewer repetitions.
    pub quick: bool,
    /// Override of the suite's main size (the copy batch, the migrate
    /// guest's RAM, the track and policy guests' RAM), for tests.
    pub bytes: Option<u64>,
    /// Migrations of a soak run (`--soak`), when given.
    pub soak: Option<u64>,
    /// Migrate suite: hugetlb tiers instead of shmem (`--hugetlb`).
    pub hugetlb: bool,
    /// Migrate suite test hook (`--hold-until-write-waits`).
    pub hold_until_write_waits: bool,
    /// Track suite: the one tracker to measure (`--tracker`), all when
    /// `None`.
    pub tracker: Option<&'static str>,
    /// Track suite: blocks of four phases per paired run (`--blocks`),
    /// the suite's default when `None`.
    pub blocks: Option<u32>,
    /// Track suite: the paired runs alone (`--paired-only`).
    pub paired_only: bool,
}

/// Why a suite failed.
#[derive(Debug, Error)]
pub enum SuiteError {
    /// The copy suite failed.
    #[error("copy suite")]
    Copy(#[from] CopySuiteError),
    /// The migrate suite or its soak failed.
    #[error("migrate suite")]
    Migrate(#[from] MigrateSuiteError),
    /// The track suite failed.
    #[error("track suite")]
    Track(#[from] TrackSuiteError),
    /// The policy suite failed.
    #[error("policy suite")]
    Policy(#[source] PolicySuiteError),
    /// The workloads suite failed.
    #[error("workloads suite")]
    Workloads(#[source] WorkloadsSuiteError),
}

/// Runs `suite`.
pub fn run(suite: Suite, options: &RunOptions) -> Result<SuiteResult, SuiteError> {
    let cpus = thread::available_parallelism().map_or(1, NonZeroUsize::get);
    match suite {
        Suite::Copy => {
            let settings = CopySettings::new(options.quick, options.bytes, cpus)
                .map_err(CopySuiteError::from)?;
            Ok(SuiteResult::Copy(copy::run(settings)?))
        }
        Suite::Migrate => {
            let settings = MigrateSettings::new(options.quick, options.bytes, cpus)
                .map_err(MigrateSuiteError::from)?
                .with_hugetlb(options.hugetlb)
                .with_write_wait_hold(options.hold_until_write_waits);
            Ok(SuiteResult::Migrate(Box::new(migrate::run(settings)?)))
        }
        Suite::MigrateSoak => {
            let migrations = options.soak.unwrap_or(SOAK_DEFAULT_MIGRATIONS);
            let settings =
                SoakSettings::new(migrations, options.bytes).map_err(MigrateSuiteError::from)?;
            Ok(SuiteResult::MigrateSoak(migrate::run_soak(settings)?))
        }
        Suite::Track => {
            let mut settings =
                TrackSettings::new(options.quick, options.bytes).map_err(TrackSuiteError::from)?;
            if let Some(name) = options.tracker {
                settings.keep_only(name);
            }
            if let Some(blocks) = options.blocks {
                settings.paired_blocks = blocks;
            }
            if options.paired_only {
                settings.keep_paired_only();
            }
            Ok(SuiteResult::Track(track::run(settings)?))
        }
        Suite::Policy => {
            let settings = PolicySettings::new(options.quick, options.bytes)
                .map_err(PolicySuiteError::settings("policy"))
                .map_err(SuiteError::Policy)?;
            Ok(SuiteResult::Policy(
                policy::run(settings).map_err(SuiteError::Policy)?,
            ))
        }
        Suite::Workloads => {
            let settings = WorkloadsSettings::new(options.quick, options.bytes)
                .map_err(WorkloadsSuiteError::settings("workloads"))
                .map_err(SuiteError::Workloads)?;
            Ok(SuiteResult::Workloads(
                workloads::run(settings).map_err(SuiteError::Workloads)?,
            ))
        }
    }
}

/// The result of one suite; in JSON, an object whose `suite` field names
/// the suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "suite", rename_all = "lowercase")]
pub enum SuiteResult {
    /// The copy suite's result.
    Copy(CopyResult),
    /// The migrate suite's result (boxed: its targets make it the
    /// largest).
    Migrate(Box<MigrateResult>),
    /// A soak run's result.
    #[serde(rename = "migrate-soak")]
    MigrateSoak(SoakResult),
    /// The track suite's result.
    Track(TrackResult),
    /// The policy suite's result.
    Policy(PolicyResult),
    /// The workloads suite's result.
    Workloads(WorkloadsResult),
}

impl SuiteResult {
    /// Which suite produced it.
    pub fn suite(&self) -> Suite {
        match self {
            SuiteResult::Copy(_) => Suite::Copy,
            SuiteResult::Migrate(_) => Suite::Migrate,
            SuiteResult::MigrateSoak(_) => Suite::MigrateSoak,
            SuiteResult::Track(_) => Suite::Track,
            SuiteResult::Policy(_) => Suite::Policy,
            SuiteResult::Workloads(_) => Suite::Workloads,
        }
    }

    /// Lines explaining the method and the reference numbers.
    pub fn summary(&self) -> Vec<String> {
        match self {
            SuiteResult::Copy(result) => result.summary(),
            SuiteResult::Migrate(result) => result.summary(),
            SuiteResult::MigrateSoak(result) => result.summary(),
            SuiteResult::Track(result) => result.summary(),
            SuiteResult::Policy(result) => result.summary(),
            SuiteResult::Workloads(result) => result.summary(),
        }
    }

    /// The tables to print and to write as markdown.
    pub fn tables(&self) -> Result<Vec<Table>, RowWidthError> {
        match self {
            SuiteResult::Copy(result) => result.tables(),
            SuiteResult::Migrate(result) => result.tables(),
            SuiteResult::MigrateSoak(result) => result.tables(),
            SuiteResult::Track(result) => result.tables(),
            SuiteResult::Policy(result) => SuiteTables::tables(result),
            SuiteResult::Workloads(result) => SuiteTables::tables(result),
        }
    }

    /// Writes the suite's SVG pictures into `dir` (which must exist);
    /// returns the files written (a soak draws none).
    pub fn write_svgs(&self, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
        match self {
            SuiteResult::Copy(result) => copy::write_svgs(result, dir),
            SuiteResult::Migrate(result) => migrate::write_svgs(result, dir),
            SuiteResult::MigrateSoak(_) => Ok(Vec::new()),
            SuiteResult::Track(result) => track::write_svgs(result, dir),
            SuiteResult::Policy(result) => policy::write_svgs(result, dir),
            SuiteResult::Workloads(result) => workloads::write_svgs(result, dir),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn all_selects_every_suite_once_without_the_soak() {
        assert_eq!(Selection::All.suites(), Suite::ALL.to_vec());
        assert_eq!(Selection::Copy.suites(), vec![Suite::Copy]);
        assert_eq!(Selection::Migrate.suites(), vec![Suite::Migrate]);
        assert_eq!(Selection::Track.suites(), vec![Suite::Track]);
        assert_eq!(Selection::Policy.suites(), vec![Suite::Policy]);
        assert_eq!(Selection::Workloads.suites(), vec![Suite::Workloads]);
        assert!(!Suite::ALL.contains(&Suite::MigrateSoak));
    }

    #[test]
    fn names_match_the_command_line() {
        for suite in Suite::ALL {
            let selection = Selection::from_str(suite.name(), false).unwrap();
            assert_eq!(selection.suites(), vec![suite]);
        }
        assert!(Selection::from_str("all", false).is_ok());
    }

    #[test]
    fn bad_batch_override_is_a_settings_error() {
        let options = RunOptions {
            quick: true,
            bytes: Some(12345),
            soak: None,
            hugetlb: false,
            hold_until_write_waits: false,
            tracker: None,
            blocks: None,
            paired_only: false,
        };
        let err = run(Suite::Copy, &options).unwrap_err();
        assert!(matches!(err, SuiteError::Copy(CopySuiteError::Settings(_))));
        let err = run(Suite::Migrate, &options).unwrap_err();
        assert!(matches!(
            err,
            SuiteError::Migrate(MigrateSuiteError::Settings(_))
        ));
        let err = run(Suite::Track, &options).unwrap_err();
        assert!(matches!(
            err,
            SuiteError::Track(TrackSuiteError::Settings(_))
        ));
        let err = run(Suite::Policy, &options).unwrap_err();
        assert!(matches!(
            err,
            SuiteError::Policy(PolicySuiteError::Settings { .. })
        ));
        let err = run(Suite::Workloads, &options).unwrap_err();
        assert!(matches!(
            err,
            SuiteError::Workloads(WorkloadsSuiteError::Settings { .. })
        ));
    }

    #[test]
    fn soak_settings_are_checked_before_any_vm() {
        let options = RunOptions {
            quick: false,
            bytes: None,
            soak: Some(2),
            hugetlb: false,
            hold_until_write_waits: false,
            tracker: None,
            blocks: None,
            paired_only: false,
        };
        let err = run(Suite::MigrateSoak, &options).unwrap_err();
        assert!(
            err.source()
                .is_some_and(|e| e.to_string().contains("settings"))
        );
    }

    #[test]
    fn soak_results_are_tagged_migrate_soak() {
        let value = serde_json::to_value(SuiteResult::MigrateSoak(
            crate::testing::sample_soak_result(),
        ))
        .unwrap();
        assert_eq!(value["suite"], "migrate-soak");
        let value = serde_json::to_value(SuiteResult::Migrate(Box::new(
            crate::testing::sample_migrate_result(),
        )))
        .unwrap();
        assert_eq!(value["suite"], "migrate");
        let value = serde_json::to_value(SuiteResult::Track(crate::testing::sample_track_result()))
            .unwrap();
        assert_eq!(value["suite"], "track");
        let value =
            serde_json::to_value(SuiteResult::Policy(crate::testing::sample_policy_result()))
                .unwrap();
        assert_eq!(value["suite"], "policy");
    }
}
