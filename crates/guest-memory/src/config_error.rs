//! [`ConfigError`]: why a memory configuration was rejected (its own
//! checks, the tiers against the backing, the host).

use std::io;
use std::path::PathBuf;

use thiserror::Error;

use crate::host::{self, HostError};
use crate::host_tiers::HostTiersError;
use crate::size::format_size;
use crate::size_limits::MAX_SIZE;

/// Why a configuration was rejected.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// No tier given.
    #[error("no tiers configured (need at least one --tier)")]
    NoTiers,
    /// Frame size not a power of two.
    #[error("frame size {0} is not a power of two")]
    FrameSizeNotPowerOfTwo(u64),
    /// Frame size below the minimum (4 KiB or the host page size).
    #[error("frame size {} is below the minimum of {}", format_size(*.frame_size), format_size(*.min))]
    FrameSizeTooSmall {
        /// Given frame size.
        frame_size: u64,
        /// Minimum.
        min: u64,
    },
    /// Memory size zero.
    #[error("memory size is zero")]
    ZeroMemory,
    /// Memory size above [`MAX_SIZE`].
    #[error("memory size {} exceeds the maximum of {}", format_size(*.0), format_size(MAX_SIZE))]
    MemoryTooLarge(u64),
    /// Memory size not a whole number of frames.
    #[error(
        "memory size {} ({size} bytes) is not a multiple of the frame size {} ({frame_size} bytes)",
        format_size(*.size), format_size(*.frame_size)
    )]
    MemoryNotFrameMultiple {
        /// Memory size.
        size: u64,
        /// Frame size.
        frame_size: u64,
    },
    /// A RAM region not a whole number of frames.
    #[error(
        "ram region at {gpa:#x} of {} is not a multiple of the frame size {}",
        format_size(*.len), format_size(*.frame_size)
    )]
    RegionNotFrameMultiple {
        /// Region start.
        gpa: u64,
        /// Region length.
        len: u64,
        /// Frame size.
        frame_size: u64,
    },
    /// Two tiers with one name.
    #[error("duplicate tier name '{0}'")]
    DuplicateTierName(String),
    /// A declared profile with a zero latency or bandwidth.
    #[error("tier '{0}': a declared profile needs a read latency and bandwidth above zero")]
    ZeroProfile(String),
    /// A memfd tier without a size.
    #[error("tier '{0}': backend=memfd needs a size")]
    MemfdWithoutSize(String),
    /// A tier size not a whole number of frames.
    #[error(
        "tier '{tier}': size {} ({size} bytes) is not a multiple of the frame size {}",
        format_size(*.size), format_size(*.frame_size)
    )]
    TierNotFrameMultiple {
        /// Tier name.
        tier: String,
        /// Tier size.
        size: u64,
        /// Frame size.
        frame_size: u64,
    },
    /// A tier smaller than one frame.
    #[error("tier '{tier}': {} cannot hold one frame of {}", format_size(*.capacity), format_size(*.frame_size))]
    TierBelowOneFrame {
        /// Tier name.
        tier: String,
        /// Tier capacity.
        capacity: u64,
        /// Frame size.
        frame_size: u64,
    },
    /// A tier above [`MAX_SIZE`].
    #[error("tier '{tier}': size {} exceeds the maximum of {}", format_size(*.size), format_size(MAX_SIZE))]
    TierTooLarge {
        /// Tier name.
        tier: String,
        /// Tier size.
        size: u64,
    },
    /// A NUMA node the host does not have.
    #[error(
        "tier '{tier}': numa node {node} does not exist (no {}/node{node})",
        host::NUMA_NODE_DIR
    )]
    NoSuchNumaNode {
        /// Tier name.
        tier: String,
        /// Node asked for.
        node: u32,
    },
    /// A hugetlb tier with frames that are not whole hugepages.
    #[error("tier '{tier}': hugetlb needs a frame size that is a multiple of 2 MiB, not {}", format_size(*.frame_size))]
    HugetlbFrameSize {
        /// Tier name.
        tier: String,
        /// Frame size.
        frame_size: u64,
    },
    /// The host's 2 MiB hugepage pool cannot be read.
    #[error("cannot read the host's 2 MiB hugepage pool")]
    HugepagePool(#[source] HostError),
    /// Too few free hugepages for the hugetlb tiers.
    #[error(
        "hugetlb tiers need {needed} free 2 MiB hugepages but the host has {available} \
         (raise /proc/sys/vm/nr_hugepages)"
    )]
    NotEnoughHugepages {
        /// Pages needed.
        needed: u64,
        /// Pages free and unreserved.
        available: u64,
    },
    /// A file backend path that cannot be inspected.
    #[error("tier '{tier}': cannot stat {}", .path.display())]
    Stat {
        /// Tier name.
        tier: String,
        /// Path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A file backend path that is neither a regular file nor a device.
    #[error("tier '{tier}': {} is neither a regular file nor a device-DAX character device", .path.display())]
    NotFileOrDevice {
        /// Tier name.
        tier: String,
        /// Path.
        path: PathBuf,
    },
    /// A character device that is not device-DAX.
    #[error("tier '{tier}': {} is not a device-DAX device", .path.display())]
    NotDax {
        /// Tier name.
        tier: String,
        /// Path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: HostError,
    },
    /// Frames not aligned as the device-DAX device needs.
    #[error(
        "tier '{tier}': frame size {} is not a multiple of the {} alignment of {}",
        format_size(*.frame_size), format_size(*.align), .path.display()
    )]
    DaxAlignment {
        /// Tier name.
        tier: String,
        /// Path.
        path: PathBuf,
        /// Device alignment.
        align: u64,
        /// Frame size.
        frame_size: u64,
    },
    /// A size larger than the device-DAX device.
    #[error(
        "tier '{tier}': size {} is larger than {} ({})",
        format_size(*.size), .path.display(), format_size(*.device_size)
    )]
    SizeBeyondDevice {
        /// Tier name.
        tier: String,
        /// Path.
        path: PathBuf,
        /// Size asked for.
        size: u64,
        /// Device size.
        device_size: u64,
    },
    /// Shared-numa backing with a tier that is not a memfd.
    #[error("backing shared-numa needs backend=memfd on every tier: tier '{0}' is backend=file")]
    SharedNumaNeedsMemfd(String),
    /// Shared-numa tiers without a node, and the host's memory nodes could
    /// not be read.
    #[error(
        "backing shared-numa: tier '{tier}' names no numa-node and the host's memory nodes are unknown"
    )]
    HostNodes {
        /// The first tier without a node.
        tier: String,
        /// Why.
        #[source]
        source: HostTiersError,
    },
    /// Shared-numa tiers without a node outnumber the host's free memory nodes.
    #[error(
        "backing shared-numa: tier '{tier}' names no numa-node and no host memory node is left \
         (host memory nodes, fastest first: {nodes:?})"
    )]
    NoHostNodeLeft {
        /// The tier.
        tier: String,
        /// The host's memory nodes, fastest first.
        nodes: Vec<u32>,
    },
    /// Shared-numa backing with a hugetlb tier.
    #[error("backing shared-numa does not support hugetlb: tier '{0}' has hugetlb=on")]
    SharedNumaHugetlb(String),
    /// Shared-numa backing with two tiers on one node.
    #[error(
        "backing shared-numa needs a distinct numa-node per tier: \
         tiers '{first}' and '{second}' are both on node {node}"
    )]
    SharedNumaSameNode {
        /// The first tier on the node.
        first: String,
        /// The second tier on the node.
        second: String,
        /// The node.
        node: u32,
    },
    /// The tiers together hold less than the guest RAM.
    #[error("tiers too small: guest RAM is {} but tiers hold {}", format_size(*.memory), format_size(*.capacity))]
    TiersTooSmall {
        /// Guest RAM.
        memory: u64,
        /// Sum of tier capacities.
        capacity: u64,
    },
}
