//! Why the copy suite failed: `CopySuiteError`, the error of every step of
//! a copy-suite run (settings, buffers, engines, baselines, verification).

use thiserror::Error;

use page_copy::{CopyError, PoolError};

use super::baselines::BaselineError;
use super::settings::SettingsError;
use crate::memory::MemoryError;

/// Why the copy suite failed.
#[derive(Debug, Error)]
pub enum CopySuiteError {
    /// Bad settings (e.g. a `--bytes` override).
    #[error("copy suite settings")]
    Settings(#[from] SettingsError),
    /// The buffers could not be mapped.
    #[error("map copy buffers")]
    Memory(#[from] MemoryError),
    /// An engine's thread pool could not start.
    #[error("start copy engine")]
    Pool(#[from] PoolError),
    /// An engine refused or failed a batch.
    #[error("{measurement}")]
    Copy {
        /// The measurement.
        measurement: String,
        /// The engine's error.
        #[source]
        source: CopyError,
    },
    /// A parallel baseline run failed.
    #[error("{measurement}")]
    Baseline {
        /// The measurement.
        measurement: String,
        /// What went wrong.
        #[source]
        source: BaselineError,
    },
    /// A copy left a destination byte different from the source.
    #[error("{measurement}: destination differs from source at byte {offset}")]
    Mismatch {
        /// The measurement.
        measurement: String,
        /// First differing byte.
        offset: usize,
    },
    /// A measurement refers to an engine or range size that does not exist.
    #[error("no such measurement: {0}")]
    UnknownMeasurement(String),
    /// A measurement has no timed runs.
    #[error("no samples for {0}")]
    NoSamples(String),
}
