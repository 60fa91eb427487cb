//! The memory configuration and its validation. Everything that can be
//! checked without creating anything is checked here, so that a bad
//! configuration fails before any memfd, file or mapping exists.

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::backend::{BackendKind, PlannedTier};
use crate::backing::{self, Backing};
use crate::config_error::ConfigError;
use crate::gpa_range::GpaRange;
use crate::host::{self, HUGEPAGE_SIZE};
use crate::initial_placement::Placement;
use crate::layout::ram_regions;
use crate::size_limits::{DEFAULT_FRAME_SIZE, MAX_SIZE, MIN_FRAME_SIZE};
use crate::tier_spec::{BackendSpec, TierSpec};

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

/// A validated configuration, ready to be built.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub frame_size: u64,
    pub regions: Vec<GpaRange>,
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
        if let Some(p) = spec.profile
            && (p.read_latency_ns == 0 || p.read_bandwidth == 0)
        {
            return Err(ConfigError::ZeroProfile(spec.name.clone()));
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
