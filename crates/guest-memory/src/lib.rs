//! Tiered guest memory for tiervisor.
//!
//! Guest RAM is cut into frames; each frame lives in a slot of one tier
//! (a memfd, a device-DAX device or a file), mapped `MAP_SHARED|MAP_FIXED`
//! into a host-virtual range that never moves (KVM memslots are static).
//! The placement map (frame → tier, slot) is the single source of truth.
//!
//! * [`FrameId`] / [`TierId`] — how other crates name a frame and a tier;
//! * [`TierSpec`] / [`Placement`] — configuration as the operator writes it;
//! * [`TieredMemory`] — builds and owns everything: [`TierBackend`]s with their
//!   fds and view mappings, the [`FrameTable`], the placement map and slot
//!   allocators behind a lock, and the vm-memory view of guest RAM;
//! * migration building blocks: [`TieredMemory::reserve_slot`],
//!   [`TieredMemory::map_frames`], [`TieredMemory::commit_move`],
//!   [`TierBackend::discard_slot`], [`TieredMemory::release_slot`];
//! * [`TieredMemory::verify_backing`] — checks real mappings against the map;
//! * [`Backing::SharedNuma`] — all tiers one memfd, tiers are NUMA nodes,
//!   frames moved by [`migrate::KernelMigrator`] (`move_pages(2)`);
//!   [`TieredMemory::frame_nodes`] says where a frame's pages are.

mod backend;
mod backend_error;
mod backing;
mod config;
mod config_error;
mod error;
mod file_backend;
mod frame_table;
mod gpa_range;
mod guest_ranges;
mod host;
mod host_tiers;
mod ids;
mod initial_placement;
pub mod layout;
mod ledger;
mod mapping;
mod memfd;
pub mod migrate;
mod move_pages;
mod numa;
mod numa_check;
mod numa_error;
pub mod page_bits;
pub mod pagemap;
mod placement;
mod proc_maps;
mod runs;
mod shared_numa;
pub mod size;
mod size_limits;
mod slots;
pub mod tier_spec;
mod tier_speed;
mod tiered;
pub mod uffd;
mod verify;

pub use backend::{BackendKind, TierBackend};
pub use backend_error::BackendError;
pub use backing::{Backing, BackingParseError};
pub use config::MemoryConfig;
pub use config_error::ConfigError;
pub use error::Error;
pub use frame_table::{FrameTable, MappedRegion};
pub use gpa_range::GpaRange;
pub use host::{
    DaxGeometry, HUGEPAGE_SIZE, HostError, available_hugepages, dax_geometry, numa_node_exists,
};
pub use host_tiers::{HostTiersError, memory_nodes_fastest_first};
pub use ids::{FrameId, TierId};
pub use initial_placement::{Placement, PlacementParseError};
pub use layout::{HIGH_RAM_START, MMIO_HOLE_START, ram_regions};
pub use ledger::LedgerError;
pub use migrate::{
    Batch, BatchOutcome, BatchReport, Exchange, Migrator, Move, MoveError, MoveStep, MovedFrame,
    StepError,
};
pub use numa_check::NodeCounts;
pub use numa_error::NumaError;
pub use placement::{Location, PlacementError, PlacementMap, PlacementSnapshot};
pub use proc_maps::MapsError;
pub use size::{
    GIB, KIB, MIB, SizeError, TIB, format_size, format_size_arg, format_size_with_decimals,
    parse_size,
};
pub use size_limits::{DEFAULT_FRAME_SIZE, MAX_SIZE, MIN_FRAME_SIZE};
pub use slots::{SlotAllocator, SlotError};
pub use tier_spec::{BackendSpec, TIER_SPEC_KEYS, TierSpec, TierSpecError};
pub use tier_speed::{TierProfile, TierSpeed};
pub use tiered::{TierUsage, TieredMemory};
pub use verify::VerifyError;
