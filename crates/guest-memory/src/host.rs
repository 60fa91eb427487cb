//! Facts about the host read from sysfs: which NUMA nodes exist, how many
//! 2 MiB hugepages are free, and the size and alignment of device-DAX devices.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::size::MIB;

/// Directory holding one `node<N>` entry per host NUMA node.
pub const NUMA_NODE_DIR: &str = "/sys/devices/system/node";
/// The host's pool of 2 MiB hugepages.
pub const HUGEPAGES_2M_DIR: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";
/// Size of a hugetlb page used by hugetlb tiers.
pub const HUGEPAGE_SIZE: u64 = 2 * MIB;
/// Alignment assumed for a device-DAX device that does not report one.
pub const DEFAULT_DAX_ALIGN: u64 = 2 * MIB;

/// A sysfs attribute could not be read or understood.
#[derive(Debug, Error)]
pub enum HostError {
    /// Reading the attribute failed.
    #[error("cannot read {path}")]
    Read {
        /// The attribute file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The attribute is not a number.
    #[error("{path}: '{text}' is not a number")]
    NotANumber {
        /// The attribute file.
        path: PathBuf,
        /// What it held.
        text: String,
    },
}

/// Whether host NUMA node `node` exists.
pub fn numa_node_exists(node: u32) -> bool {
    Path::new(NUMA_NODE_DIR)
        .join(format!("node{node}"))
        .is_dir()
}

/// Free 2 MiB hugepages not yet promised to a mapping.
pub fn available_hugepages() -> Result<u64, HostError> {
    let dir = Path::new(HUGEPAGES_2M_DIR);
    let free = read_number(&dir.join("free_hugepages"))?;
    let reserved = read_number(&dir.join("resv_hugepages"))?;
    Ok(free.saturating_sub(reserved))
}

/// Size and mapping alignment of a device-DAX device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaxGeometry {
    /// Bytes the device holds.
    pub size: u64,
    /// Required alignment of mappings (and of their offsets).
    pub align: u64,
}

/// The geometry of the character device `major:minor`, from `/sys/dev/char`.
pub fn dax_geometry(major: u32, minor: u32) -> Result<DaxGeometry, HostError> {
    dax_geometry_in(&PathBuf::from(format!("/sys/dev/char/{major}:{minor}")))
}

/// The geometry of the device whose sysfs directory is `dir`: `size`, and
/// `align` (or the region's `device/dax_region/align` on older kernels).
pub fn dax_geometry_in(dir: &Path) -> Result<DaxGeometry, HostError> {
    let size = read_number(&dir.join("size"))?;
    let align = [dir.join("align"), dir.join("device/dax_region/align")]
        .iter()
        .find(|p| p.exists())
        .map(|p| read_number(p))
        .transpose()?
        .unwrap_or(DEFAULT_DAX_ALIGN);
    Ok(DaxGeometry { size, align })
}

/// Reads a sysfs attribute holding one decimal (or `0x` hexadecimal) number.
fn read_number(path: &Path) -> Result<u64, HostError> {
    let text = fs::read_to_string(path).map_err(|source| HostError::Read {
        path: path.to_owned(),
        source,
    })?;
    let trimmed = text.trim();
    let parsed = match trimmed.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => trimmed.parse(),
    };
    parsed.map_err(|_| HostError::NotANumber {
        path: path.to_owned(),
        text: trimmed.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("guestmem-host-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn node_zero_exists_and_absurd_node_does_not() {
        assert!(numa_node_exists(0));
        assert!(!numa_node_exists(4000));
    }

    #[test]
    fn hugepage_pool_is_readable() {
        // The pool may be empty; it must still be readable on a host with 2 MiB pages.
        let free: u64 = fs::read_to_string(Path::new(HUGEPAGES_2M_DIR).join("free_hugepages"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(available_hugepages().unwrap() <= free);
    }

    #[test]
    fn dax_geometry_reads_size_and_align() {
        let dir = scratch_dir("align");
        fs::write(dir.join("size"), "17179869184\n").unwrap();
        fs::write(dir.join("align"), "1073741824\n").unwrap();
        assert_eq!(
            dax_geometry_in(&dir).unwrap(),
            DaxGeometry {
                size: 16 << 30,
                align: 1 << 30
            }
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dax_geometry_falls_back_to_region_align_then_default() {
        let dir = scratch_dir("region");
        fs::write(dir.join("size"), "0x40000000\n").unwrap();
        assert_eq!(dax_geometry_in(&dir).unwrap().align, DEFAULT_DAX_ALIGN);
        fs::create_dir_all(dir.join("device/dax_region")).unwrap();
        fs::write(dir.join("device/dax_region/align"), "4096\n").unwrap();
        assert_eq!(
            dax_geometry_in(&dir).unwrap(),
            DaxGeometry {
                size: 1 << 30,
                align: 4096
            }
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dax_geometry_errors_name_the_attribute() {
        let dir = scratch_dir("bad");
        let err = dax_geometry_in(&dir).unwrap_err();
        assert!(err.to_string().ends_with("/size"), "{err}");
        fs::write(dir.join("size"), "lots\n").unwrap();
        let err = dax_geometry_in(&dir).unwrap_err();
        assert!(err.to_string().contains("'lots' is not a number"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
