//! The host's memory nodes in order of speed, fastest first, read from
//! sysfs. Shared-numa tiers that name no NUMA node take their nodes from
//! this order, so an operator can say "two tiers" and let the host say
//! which node is DRAM and which is CXL or PMEM.
//!
//! The order: first the kernel's memory tier (`memory_tiering/memory_tierN`,
//! a lower N is faster), then, within a tier, the read latency the
//! firmware's HMAT reports from the nearest initiator
//! (`nodeN/access0/initiators/read_latency`), then the SLIT distance from
//! the first node with CPUs, then the node number. Kernels before 6.6 put
//! HMAT-described CPU-less memory in the DRAM tier (only dax/kmem memory
//! gets a lower one), which is why the latency comes next.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Where sysfs is mounted.
const SYSFS: &str = "/sys";

/// The host's memory nodes could not be read.
#[derive(Debug, Error)]
pub enum HostTiersError {
    /// A sysfs file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A node list that is not `N`, `N-M`, comma-separated.
    #[error("{path}: '{text}' is not a node list")]
    BadNodeList {
        /// The file.
        path: PathBuf,
        /// What it held.
        text: String,
    },
}

/// The host's memory nodes, fastest first.
pub fn memory_nodes_fastest_first() -> Result<Vec<u32>, HostTiersError> {
    memory_nodes_fastest_first_in(Path::new(SYSFS))
}

/// [`memory_nodes_fastest_first`] with sysfs at `sys`.
pub fn memory_nodes_fastest_first_in(sys: &Path) -> Result<Vec<u32>, HostTiersError> {
    let nodes_dir = sys.join("devices/system/node");
    let nodes = read_node_list(&nodes_dir.join("has_memory"))?;
    let tiers = memory_tiers(&sys.join("devices/virtual/memory_tiering"))?;
    let initiator = match read_optional(&nodes_dir.join("has_cpu"))? {
        Some(text) => parse_node_list(&text)
            .ok()
            .and_then(|cpus| cpus.first().copied()),
        None => None,
    };
    let distances = match initiator {
        Some(cpu_node) => read_optional(&nodes_dir.join(format!("node{cpu_node}/distance")))?
            .map(|text| {
                text.split_whitespace()
                    .map(|d| d.parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut ranked = Vec::with_capacity(nodes.len());
    for node in nodes {
        let tier = tiers
            .iter()
            .find(|(_, members)| members.contains(&node))
            .map_or(u64::MAX, |(id, _)| *id);
        let latency =
            read_optional(&nodes_dir.join(format!("node{node}/access0/initiators/read_latency")))?
                .and_then(|text| text.trim().parse::<u64>().ok())
                .unwrap_or(u64::MAX);
        let distance = distances
            .get(node as usize)
            .copied()
            .flatten()
            .unwrap_or(u64::MAX);
        ranked.push(((tier, latency, distance, node), node));
    }
    ranked.sort();
    Ok(ranked.into_iter().map(|(_, node)| node).collect())
}

/// `(tier id, member nodes)` of every memory tier; none without the
/// directory (kernels before 6.1).
fn memory_tiers(dir: &Path) -> Result<Vec<(u64, Vec<u32>)>, HostTiersError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(HostTiersError::Read {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut tiers = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("memory_tier"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        tiers.push((id, read_node_list(&entry.path().join("nodelist"))?));
    }
    Ok(tiers)
}

fn read_optional(path: &Path) -> Result<Option<String>, HostTiersError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HostTiersError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

fn read_node_list(path: &Path) -> Result<Vec<u32>, HostTiersError> {
    let text = fs::read_to_string(path).map_err(|source| HostTiersError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_node_list(&text).map_err(|()| HostTiersError::BadNodeList {
        path: path.to_owned(),
        text: text.trim().to_owned(),
    })
}

/// Parses a kernel node list (`0-1,3`; empty for none), ascending.
fn parse_node_list(text: &str) -> Result<Vec<u32>, ()> {
    let mut nodes = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>(), hi.parse::<u32>()),
            None => (part.parse::<u32>(), part.parse::<u32>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else {
            return Err(());
        };
        if hi < lo || hi - lo > 4096 {
            return Err(());
        }
        nodes.extend(lo..=hi);
    }
    nodes.sort_unstable();
    nodes.dedup();
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs tree in a temporary directory.
    struct FakeSys(PathBuf);

    impl FakeSys {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "tiervisor-host-tiers-{name}-{}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&dir);
            FakeSys(dir)
        }

        fn file(&self, path: &str, text: &str) -> &Self {
            let path = self.0.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
            self
        }
    }

    impl Drop for FakeSys {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn node_lists_parse_like_the_kernel_prints_them() {
        assert_eq!(parse_node_list("0-1,3\n"), Ok(vec![0, 1, 3]));
        assert_eq!(parse_node_list("2"), Ok(vec![2]));
        assert_eq!(parse_node_list("\n"), Ok(vec![]));
        assert_eq!(parse_node_list("1,0-1"), Ok(vec![0, 1]));
        for bad in ["a", "1-", "3-1", "0-99999", "1;2"] {
            assert_eq!(parse_node_list(bad), Err(()), "{bad}");
        }
    }

    #[test]
    fn the_kernels_memory_tier_comes_first() {
        // A 6.6+ host: node 1 (kmem or HMAT-slow) sits in a lower tier
        // even though its SLIT distance would say nothing.
        let sys = FakeSys::new("tiers");
        sys.file("devices/system/node/has_memory", "0-2\n")
            .file("devices/system/node/has_cpu", "0\n")
            .file("devices/system/node/node0/distance", "10 10 10\n")
            .file(
                "devices/virtual/memory_tiering/memory_tier4/nodelist",
                "0,2\n",
            )
            .file(
                "devices/virtual/memory_tiering/memory_tier22/nodelist",
                "1\n",
            );
        assert_eq!(memory_nodes_fastest_first_in(&sys.0).unwrap(), [0, 2, 1]);
    }

    #[test]
    fn within_a_tier_hmat_latency_then_distance_decide() {
        // A 6.1 host with HMAT: both nodes in one tier, node 0 slower by
        // latency (the CPU-less node is node 0 here, to show the order is
        // not the numbering).
        let sys = FakeSys::new("hmat");
        sys.file("devices/system/node/has_memory", "0-1\n")
            .file("devices/system/node/has_cpu", "1\n")
            .file("devices/system/node/node1/distance", "20 10\n")
            .file(
                "devices/system/node/node0/access0/initiators/read_latency",
                "250\n",
            )
            .file(
                "devices/system/node/node1/access0/initiators/read_latency",
                "80\n",
            )
            .file(
                "devices/virtual/memory_tiering/memory_tier4/nodelist",
                "0-1\n",
            );
        assert_eq!(memory_nodes_fastest_first_in(&sys.0).unwrap(), [1, 0]);
        // Without HMAT the distance from the CPUs' node decides alone.
        let sys = FakeSys::new("slit");
        sys.file("devices/system/node/has_memory", "0-1\n")
            .file("devices/system/node/has_cpu", "1\n")
            .file("devices/system/node/node1/distance", "20 10\n");
        assert_eq!(memory_nodes_fastest_first_in(&sys.0).unwrap(), [1, 0]);
    }

    #[test]
    fn a_missing_node_list_is_an_error_naming_the_file() {
        let sys = FakeSys::new("empty");
        let err = memory_nodes_fastest_first_in(&sys.0).unwrap_err();
        assert!(err.to_string().contains("has_memory"), "{err}");
        sys.file("devices/system/node/has_memory", "zero\n");
        let err = memory_nodes_fastest_first_in(&sys.0).unwrap_err();
        assert!(
            err.to_string().contains("'zero' is not a node list"),
            "{err}"
        );
    }

    #[test]
    fn this_host_lists_node_0() {
        assert!(memory_nodes_fastest_first().unwrap().contains(&0));
    }
}
