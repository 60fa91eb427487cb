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
use crate::plot::PlotError;
use crate::table::{RowWidthError, Table};

/// One benchmark suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Copy engines against memcpy and the best parallel copy (issue 3).
    Copy,
}

impl Suite {
    /// Every suite, in the order `all` runs them.
    pub const ALL: [Suite; 1] = [Suite::Copy];

    /// The suite's name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Copy => "copy",
        }
    }

    /// A one-line description, the heading of its report section.
    pub fn title(self) -> &'static str {
        match self {
            Suite::Copy => "copy engines against memcpy and the best parallel copy",
        }
    }
}

/// What the command line asks to run: one suite or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Selection {
    /// Copy engines (4 KiB / 64 KiB / 2 MiB ranges, 1..N threads) against
    /// memcpy and the best parallel copy.
    Copy,
    /// Every suite.
    All,
}

impl Selection {
    /// The suites selected, in run order.
    pub fn suites(self) -> Vec<Suite> {
        match self {
            Selection::Copy => vec![Suite::Copy],
            Selection::All => Suite::ALL.to_vec(),
        }
    }
}

/// Options every suite receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunOptions {
    /// CI smoke mode: smaller inputs, fewer repetitions.
    pub quick: bool,
    /// Override of the suite's main size (the copy batch), for tests.
    pub bytes: Option<u64>,
}

/// Why a suite failed.
#[derive(Debug, Error)]
pub enum SuiteError {
    /// The copy suite failed.
    #[error("copy suite")]
    Copy(#[from] CopySuiteError),
}

/// Runs `suite`.
pub fn run(suite: Suite, options: &RunOptions) -> Result<SuiteResult, SuiteError> {
    match suite {
        Suite::Copy => {
            let cpus = thread::available_parallelism().map_or(1, NonZeroUsize::get);
            let settings = CopySettings::new(options.quick, options.bytes, cpus)
                .map_err(CopySuiteError::from)?;
            Ok(SuiteResult::Copy(copy::run(settings)?))
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
}

impl SuiteResult {
    /// Which suite produced it.
    pub fn suite(&self) -> Suite {
        match self {
            SuiteResult::Copy(_) => Suite::Copy,
        }
    }

    /// Lines explaining the method and the reference numbers.
    pub fn summary(&self) -> Vec<String> {
        match self {
            SuiteResult::Copy(result) => result.summary(),
        }
    }

    /// The tables to print and to write as markdown.
    pub fn tables(&self) -> Result<Vec<Table>, RowWidthError> {
        match self {
            SuiteResult::Copy(result) => result.tables(),
        }
    }

    /// Writes the suite's SVG pictures into `dir` (which must exist);
    /// returns the files written.
    pub fn write_svgs(&self, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
        match self {
            SuiteResult::Copy(result) => copy::write_svgs(result, dir),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_selects_every_suite_once() {
        assert_eq!(Selection::All.suites(), Suite::ALL.to_vec());
        assert_eq!(Selection::Copy.suites(), vec![Suite::Copy]);
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
        };
        let err = run(Suite::Copy, &options).unwrap_err();
        assert!(matches!(err, SuiteError::Copy(CopySuiteError::Settings(_))));
    }
}
