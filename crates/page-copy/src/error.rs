//! The error every copy engine returns: the crate-wide `CopyError`.

use thiserror::Error;

use crate::range::RangeError;
use crate::threaded::PoolError;

/// Why a copy engine could not be built or a batch could not be copied.
#[derive(Debug, Error)]
pub enum CopyError {
    /// The batch failed validation; nothing was copied.
    #[error("invalid copy batch")]
    Range(#[from] RangeError),
    /// The worker pool could not be built.
    #[error("start copy worker pool")]
    Pool(#[from] PoolError),
    /// A participant panicked while copying; the destination content of the
    /// batch is unspecified, the pool stays usable.
    #[error("copy worker {worker} panicked: {message}")]
    WorkerPanicked {
        /// Participant index: 0 is the calling thread, 1.. are pool threads.
        worker: usize,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The requested engine does not exist on this host.
    #[error("copy engine unavailable: {0}")]
    Unavailable(String),
    /// The kernel offload device exists but could not be opened.
    #[error("kernel copy engine: opening {path}")]
    KernelOpen {
        /// The device.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused a batch as a whole; nothing of it was copied.
    #[error("kernel copy engine: batch refused")]
    KernelBatch(#[source] std::io::Error),
    /// The kernel could not copy one range (a bad address, DMA and CPU
    /// both failing); the batch's destinations are unspecified.
    #[error("kernel copy engine: range {index} failed")]
    KernelRange {
        /// Index of the range in the batch.
        index: usize,
        /// The kernel's errno for it.
        #[source]
        source: std::io::Error,
    },
}
