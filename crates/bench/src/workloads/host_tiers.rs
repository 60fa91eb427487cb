//! Which memory the workloads suite's two tiers live on: on a host with
//! two NUMA nodes that hold memory, the fast tier is bound to the first
//! and the slow tier to the second, and the runs measure real tiers;
//! otherwise both tiers are the one node's DRAM and slower memory is only
//! modeled.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where the host's NUMA nodes are described.
pub const NODE_DIR: &str = "/sys/devices/system/node";

/// Where the two tiers' memory comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum HostTiers {
    /// One node with memory: both tiers run at its DRAM's speed.
    #[default]
    OneNode,
    /// Two nodes with memory: the fast tier on `fast`, the slow on `slow`.
    Numa {
        /// The fast tier's node.
        fast: u32,
        /// The slow tier's node.
        slow: u32,
    },
}

impl HostTiers {
    /// The tiers of this host (from [`NODE_DIR`]).
    pub fn detect() -> Self {
        Self::from_node_dir(Path::new(NODE_DIR))
    }

    /// The tiers described by `dir`, laid out as [`NODE_DIR`]: the first
    /// two `nodeN` directories (lowest `N` first) whose `meminfo` shows
    /// memory; [`HostTiers::OneNode`] when there are fewer, or the
    /// directory cannot be read.
    pub fn from_node_dir(dir: &Path) -> Self {
        let Ok(entries) = fs::read_dir(dir) else {
            return Self::OneNode;
        };
        let mut nodes: Vec<u32> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name();
                let node = name.to_str()?.strip_prefix("node")?.parse::<u32>().ok()?;
                let meminfo = fs::read_to_string(e.path().join("meminfo")).ok()?;
                (mem_total_kib(&meminfo)? > 0).then_some(node)
            })
            .collect();
        nodes.sort_unstable();
        match nodes.as_slice() {
            [fast, slow, ..] => Self::Numa {
                fast: *fast,
                slow: *slow,
            },
            _ => Self::OneNode,
        }
    }

    /// The nodes of the fast and the slow tier, when bound.
    pub fn nodes(self) -> Option<[u32; 2]> {
        match self {
            Self::OneNode => None,
            Self::Numa { fast, slow } => Some([fast, slow]),
        }
    }

    /// How results label the tiers.
    pub fn label(self) -> String {
        match self {
            Self::OneNode => "modeled tiers (one NUMA node: both tiers are its DRAM)".to_owned(),
            Self::Numa { fast, slow } => {
                format!("measured on real tiers (fast = NUMA node {fast}, slow = node {slow})")
            }
        }
    }
}

/// `MemTotal` of a node's `meminfo` (`Node 0 MemTotal:  15296724 kB`), KiB.
fn mem_total_kib(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.contains("MemTotal:"))?;
    let (_, rest) = line.split_once("MemTotal:")?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node directory with the given nodes' `MemTotal`s.
    fn node_dir(name: &str, nodes: &[(u32, u64)]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("bench-nodes-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("power")).unwrap();
        fs::write(dir.join("online"), "0-3\n").unwrap();
        for &(node, kib) in nodes {
            let d = dir.join(format!("node{node}"));
            fs::create_dir_all(&d).unwrap();
            fs::write(
                d.join("meminfo"),
                format!("Node {node} MemTotal: {kib:>16} kB\nNode {node} MemFree: 1 kB\n"),
            )
            .unwrap();
        }
        dir
    }

    #[test]
    fn two_nodes_with_memory_are_real_tiers() {
        let dir = node_dir("two", &[(2, 1024), (0, 4096), (1, 0), (10, 8)]);
        assert_eq!(
            HostTiers::from_node_dir(&dir),
            HostTiers::Numa { fast: 0, slow: 2 },
            "the memoryless node 1 is skipped"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_node_or_none_falls_back_to_modeled_tiers() {
        let dir = node_dir("one", &[(0, 4096), (1, 0)]);
        assert_eq!(HostTiers::from_node_dir(&dir), HostTiers::OneNode);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            HostTiers::from_node_dir(Path::new("/nonexistent-node-dir")),
            HostTiers::OneNode
        );
        assert_eq!(HostTiers::OneNode.nodes(), None);
        assert!(HostTiers::OneNode.label().starts_with("modeled"));
        let numa = HostTiers::Numa { fast: 0, slow: 1 };
        assert_eq!(numa.nodes(), Some([0, 1]));
        assert!(numa.label().starts_with("measured on real tiers"));
    }

    #[test]
    fn this_host_agrees_with_its_node_files() {
        // Whatever the machine: real tiers exactly when two nodes exist,
        // each one guest_memory accepts.
        match HostTiers::detect() {
            HostTiers::OneNode => assert!(
                !(guest_memory::numa_node_exists(0) && guest_memory::numa_node_exists(1))
                    || fs::read_to_string(Path::new(NODE_DIR).join("node1/meminfo"))
                        .ok()
                        .and_then(|m| mem_total_kib(&m))
                        == Some(0)
            ),
            HostTiers::Numa { fast, slow } => {
                assert!(fast < slow);
                assert!(guest_memory::numa_node_exists(fast));
                assert!(guest_memory::numa_node_exists(slow));
            }
        }
    }

    #[test]
    fn mem_total_is_read_from_the_node_format() {
        assert_eq!(
            mem_total_kib("Node 0 MemTotal:       15296724 kB\nNode 0 MemFree: 3 kB"),
            Some(15_296_724)
        );
        assert_eq!(mem_total_kib("Node 0 MemFree: 3 kB"), None);
    }
}
