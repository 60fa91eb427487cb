//! [`BackendError`]: why a tier's backing object (memfd, device-DAX
//! device, file) or its view mapping could not be created or used.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

use crate::size::format_size;

/// Why a tier backend could not be created or used.
#[derive(Debug, Error)]
pub enum BackendError {
    /// `memfd_create` failed.
    #[error("memfd_create failed")]
    MemfdCreate(#[source] io::Error),
    /// The backing could not be sized.
    #[error("cannot size the backing to {}", format_size(*.size))]
    Resize {
        /// Size asked for.
        size: u64,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The file or device could not be opened.
    #[error("cannot open {}", .path.display())]
    Open {
        /// Path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The backing could not be inspected.
    #[error("cannot stat the backing")]
    Stat(#[source] io::Error),
    /// The view mapping failed.
    #[error("cannot map the tier view ({})", format_size(*.len))]
    MapView {
        /// View length.
        len: u64,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Hugepages ran out while reserving or faulting in a hugetlb tier.
    #[error(
        "not enough free 2 MiB hugepages: tier needs {needed}, host has {available} \
         (raise /proc/sys/vm/nr_hugepages)"
    )]
    Hugepages {
        /// Pages the tier needs.
        needed: u64,
        /// Pages free and unreserved before the attempt.
        available: u64,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// `mbind` failed.
    #[error("cannot bind the tier to numa node {node}")]
    Mbind {
        /// Node.
        node: u32,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A slot index beyond the tier.
    #[error("slot {slot} out of range (tier has {count} slots)")]
    SlotOutOfRange {
        /// Slot asked for.
        slot: usize,
        /// Slots in the tier.
        count: usize,
    },
    /// A slot of a shared backing (it is a guest frame's memory).
    #[error("slot {0} is a guest frame of the shared backing and cannot be discarded")]
    SharedSlot(usize),
    /// Punching a hole for a released slot failed.
    #[error("cannot discard slot {slot}")]
    Discard {
        /// Slot.
        slot: usize,
        /// The cause.
        #[source]
        source: io::Error,
    },
}
