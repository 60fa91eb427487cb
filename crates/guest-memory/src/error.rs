//! The crate's top-level error, returned by [`crate::TieredMemory`]. Module
//! errors that describe themselves are passed through unchanged.

use std::io;

use thiserror::Error;
use vm_memory::GuestRegionCollectionError;
use vm_memory::mmap::MmapRegionError;

use crate::backend_error::BackendError;
use crate::config_error::ConfigError;
use crate::ledger::LedgerError;
use crate::numa_error::NumaError;
use crate::size::format_size;
use crate::verify::VerifyError;

/// Errors of [`crate::TieredMemory`].
#[derive(Debug, Error)]
pub enum Error {
    /// The configuration is invalid (nothing was created).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A tier backend could not be created.
    #[error("tier '{tier}'")]
    Backend {
        /// Tier name.
        tier: String,
        /// The cause.
        #[source]
        source: BackendError,
    },
    /// The one memfd of a shared-numa backing could not be created.
    #[error("cannot create the shared-numa backing of guest ram")]
    SharedBacking(#[source] BackendError),
    /// A NUMA policy could not be set, or pages could not be located.
    #[error(transparent)]
    Numa(#[from] NumaError),
    /// Host address space for a RAM region could not be reserved.
    #[error("cannot reserve {} of address space for guest RAM at {gpa:#x}", format_size(*.len))]
    Reserve {
        /// Region start.
        gpa: u64,
        /// Region length.
        len: u64,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Mapping tier slots over guest frames failed.
    #[error(
        "cannot map frames {first}..{} to tier '{tier}' from slot {slot}{}",
        .first + .count, max_map_count_hint(.source)
    )]
    MapFrames {
        /// First frame.
        first: usize,
        /// Number of frames.
        count: usize,
        /// Tier name.
        tier: String,
        /// First slot.
        slot: usize,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Frames that do not exist or straddle two RAM regions.
    #[error("frames {first}..{} are not a run inside one ram region", .first.saturating_add(*.count))]
    NotARun {
        /// First frame.
        first: usize,
        /// Number of frames.
        count: usize,
    },
    /// No such tier.
    #[error("no tier {0}")]
    NoSuchTier(crate::ids::TierId),
    /// Slots beyond the tier's end.
    #[error("tier '{tier}' has no slots {slot}..{}", .slot.saturating_add(*.count))]
    SlotsOutOfRange {
        /// Tier name.
        tier: String,
        /// First slot.
        slot: usize,
        /// Number of slots.
        count: usize,
    },
    /// A RAM region that ends beyond the 64-bit guest address space.
    #[error("ram region at {0:#x} overflows the guest address space")]
    RegionOverflow(u64),
    /// vm-memory refused a host range.
    #[error("vm-memory refused the host range of a ram region")]
    GuestRegion(#[source] MmapRegionError),
    /// vm-memory refused the set of regions.
    #[error("vm-memory refused the ram regions")]
    GuestRegions(#[source] GuestRegionCollectionError),
    /// A placement or slot change was refused.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The backing does not match the placement map.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

fn max_map_count_hint(err: &io::Error) -> &'static str {
    if err.raw_os_error() == Some(libc::ENOMEM) {
        " (too many mappings? see /proc/sys/vm/max_map_count)"
    } else {
        ""
    }
}
