//! The memory configuration and its validation. Everything that can be
//! checked without creating anything is checked here, so that a bad
//! configuration fails before any memfd, file or mapping exists.

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::backend::BackendKind;
use crate::backing::{self, Backing};
use crate::host::{self, HUGEPAGE_SIZE, HostError};
use crate::layout::{RamRegion, ram_regions};
use crate::policy::Placement;
use crate::size::{MIB, TIB, format_size};
use crate::tier::{BackendSpec, TierSpec};

/// Frame size used when none is given.
pub const DEFAULT_FRAME_SIZE: u64 = 2 * MIB;
/// Smallest frame size.
pub const MIN_FRAME_SIZE: u64 = 4096;
/// Largest guest RAM and largest tier accepted.
pub const MAX_SIZE: u64 = 64 * TIB;

/// Guest memory as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Guest RAM in bytes.
    pub size: u64,
    /// Bytes per frame (power of two, ≥ 4 KiB).
    #[serde(default = "default_frame_size")]
    pub frame_size: u64,
    /// Tiers, fastest first.
    pub tiers: Vec<TierSpec>,
    /// Initial placement of frames on tiers.
    #[serde(default)]
    pub placement: Placement,
    /// Backing mode: per-tier objects (default) or one memfd over NUMA nodes.
    #[serde(default)]
    pub backing: Backing,
}

fn default_frame_size() -> u64 {
    DEFAULT_FRAME_SIZE
}

impl MemoryConfig {
    /// A configuration with the default frame size, placement and backing.
    pub fn new(size: u64, tiers: Vec<TierSpec>) -> Self {
        Self {
            size,
            frame_size: DEFAULT_FRAME_SIZE,
            tiers,
            placement: Placement::default(),
            backing: Backing::default(),
        }
    }
}

/// An empty configuration (no RAM, no tiers; invalid as it is), with the
/// default frame size, placement and backing: a base for
/// `MemoryConfig { size, tiers, ..Default::default() }`.
impl Default for MemoryConfig {
    fn default() -> Self {
        Self::new(0, Vec::new())
    }
}

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
        source: crate::host_tiers::HostTiersError,
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

/// A tier that passed validation: its usable capacity and backend.
#[derive(Debug, Clone)]
pub(crate) struct PlannedTier {
    pub name: String,
    pub capacity: u64,
    pub kind: BackendKind,
}

/// A validated configuration, ready to be built.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub frame_size: u64,
    pub regions: Vec<RamRegion>,
    pub frame_count: usize,
    pub tiers: Vec<PlannedTier>,
}

/// Checks `cfg` against itself and the host.
pub(crate) fn validate(cfg: &MemoryConfig) -> Result<Plan, ConfigError> {
    let frame_size = cfg.frame_size;
    check_frame_size(frame_size)?;
    check_memory_size(cfg.size, frame_size)?;
    let regions = ram_regions(cfg.size);
    for r in &regions {
        if r.len % frame_size != 0 {
            return Err(ConfigError::RegionNotFrameMultiple {
                gpa: r.gpa,
                len: r.len,
                frame_size,
            });
        }
    }
    if cfg.tiers.is_empty() {
        return Err(ConfigError::NoTiers);
    }
    let mut names = HashSet::new();
    for spec in &cfg.tiers {
        if !names.insert(spec.name.as_str()) {
            return Err(ConfigError::DuplicateTierName(spec.name.clone()));
        }
    }
    let specs = backing::resolve_nodes(cfg.backing, &cfg.tiers)?;
    backing::check(cfg.backing, &specs)?;
    let tiers = specs
        .iter()
        .map(|spec| plan_tier(spec, frame_size))
        .collect::<Result<Vec<_>, _>>()?;
    check_hugepages(&tiers)?;
    let capacity = tiers
        .iter()
        .fold(0u64, |sum, t| sum.saturating_add(t.capacity));
    if capacity < cfg.size {
        return Err(ConfigError::TiersTooSmall {
            memory: cfg.size,
            capacity,
        });
    }
    Ok(Plan {
        frame_size,
        frame_count: (cfg.size / frame_size) as usize,
        regions,
        tiers,
    })
}

fn check_frame_size(frame_size: u64) -> Result<(), ConfigError> {
    if !frame_size.is_power_of_two() {
        return Err(ConfigError::FrameSizeNotPowerOfTwo(frame_size));
    }
    let min = MIN_FRAME_SIZE.max(host_page_size());
    if frame_size < min {
        return Err(ConfigError::FrameSizeTooSmall { frame_size, min });
    }
    Ok(())
}

fn check_memory_size(size: u64, frame_size: u64) -> Result<(), ConfigError> {
    if size == 0 {
        return Err(ConfigError::ZeroMemory);
    }
    if size > MAX_SIZE {
        return Err(ConfigError::MemoryTooLarge(size));
    }
    if size % frame_size != 0 {
        return Err(ConfigError::MemoryNotFrameMultiple { size, frame_size });
    }
    Ok(())
}

fn plan_tier(spec: &TierSpec, frame_size: u64) -> Result<PlannedTier, ConfigError> {
    let tier = || spec.name.clone();
    if let Some(size) = spec.size {
        if size > MAX_SIZE {
            return Err(ConfigError::TierTooLarge { tier: tier(), size });
        }
        if size % frame_size != 0 {
            return Err(ConfigError::TierNotFrameMultiple {
                tier: tier(),
                size,
                frame_size,
            });
        }
    }
    let (capacity, kind) = match &spec.backend {
        BackendSpec::Memfd {
            numa_node,
            hugetlb,
            prealloc,
        } => {
            let size = spec
                .size
                .ok_or_else(|| ConfigError::MemfdWithoutSize(tier()))?;
            if let Some(node) = *numa_node {
                if !host::numa_node_exists(node) {
                    return Err(ConfigError::NoSuchNumaNode { tier: tier(), node });
                }
            }
            if *hugetlb && frame_size % HUGEPAGE_SIZE != 0 {
                return Err(ConfigError::HugetlbFrameSize {
                    tier: tier(),
                    frame_size,
                });
            }
            let kind = BackendKind::Memfd {
                numa_node: *numa_node,
                hugetlb: *hugetlb,
                prealloc: *prealloc,
            };
            (size, kind)
        }
        BackendSpec::File { path } => plan_file(&spec.name, path, spec.size, frame_size)?,
    };
    // A size taken from a file is cut down to whole frames.
    let capacity = capacity - capacity % frame_size;
    if capacity == 0 {
        return Err(ConfigError::TierBelowOneFrame {
            tier: tier(),
            capacity,
            frame_size,
        });
    }
    if capacity > MAX_SIZE {
        return Err(ConfigError::TierTooLarge {
            tier: tier(),
            size: capacity,
        });
    }
    Ok(PlannedTier {
        name: spec.name.clone(),
        capacity,
        kind,
    })
}

fn plan_file(
    name: &str,
    path: &Path,
    size: Option<u64>,
    frame_size: u64,
) -> Result<(u64, BackendKind), ConfigError> {
    let tier = || name.to_owned();
    let meta = std::fs::metadata(path).map_err(|source| ConfigError::Stat {
        tier: tier(),
        path: path.to_owned(),
        source,
    })?;
    let file_type = meta.file_type();
    if file_type.is_file() {
        // A larger explicit size grows the file when the tier is created.
        let capacity = size.unwrap_or(meta.len());
        return Ok((
            capacity,
            BackendKind::RegularFile {
                path: path.to_owned(),
            },
        ));
    }
    if !file_type.is_char_device() {
        return Err(ConfigError::NotFileOrDevice {
            tier: tier(),
            path: path.to_owned(),
        });
    }
    let rdev = meta.rdev();
    let geometry = host::dax_geometry(libc::major(rdev), libc::minor(rdev)).map_err(|source| {
        ConfigError::NotDax {
            tier: tier(),
            path: path.to_owned(),
            source,
        }
    })?;
    if geometry.align == 0 || frame_size % geometry.align != 0 {
        return Err(ConfigError::DaxAlignment {
            tier: tier(),
            path: path.to_owned(),
            align: geometry.align,
            frame_size,
        });
    }
    let capacity = size.unwrap_or(geometry.size);
    if capacity > geometry.size {
        return Err(ConfigError::SizeBeyondDevice {
            tier: tier(),
            path: path.to_owned(),
            size: capacity,
            device_size: geometry.size,
        });
    }
    let kind = BackendKind::DevDax {
        path: path.to_owned(),
        align: geometry.align,
    };
    Ok((capacity, kind))
}

/// Checks that the host's free hugepages cover all hugetlb tiers. Creation
/// checks again (the pool may shrink meanwhile), but this fails first and
/// with the numbers.
fn check_hugepages(tiers: &[PlannedTier]) -> Result<(), ConfigError> {
    let needed: u64 = tiers
        .iter()
        .filter(|t| matches!(t.kind, BackendKind::Memfd { hugetlb: true, .. }))
        .map(|t| t.capacity / HUGEPAGE_SIZE)
        .sum();
    if needed == 0 {
        return Ok(());
    }
    let available = host::available_hugepages().map_err(ConfigError::HugepagePool)?;
    if available < needed {
        return Err(ConfigError::NotEnoughHugepages { needed, available });
    }
    Ok(())
}

/// The host's base page size.
pub(crate) fn host_page_size() -> u64 {
    // SAFETY: sysconf reads a constant and has no side effects.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}
