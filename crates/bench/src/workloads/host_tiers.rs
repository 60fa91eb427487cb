//! Which memory the workloads suite's two tiers live on: on a host with
//! two NUMA nodes that hold memory, the fast tier is bound to the first
//! and the slow tier to the second, and the runs measure real tiers;
//! otherwise both tiers are the one node's DRAM and slower memory is only
//! modeled.

use serde::{Deserialize, Serialize};

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
    /// This host's tiers: its two fastest memory nodes, as
    /// `guest_memory::memory_nodes_fastest_first` ranks them (kernel memory
    /// tier, then HMAT latency, then distance), or one node.
    pub fn detect() -> Self {
        Self::from_nodes(&guest_memory::memory_nodes_fastest_first().unwrap_or_default())
    }

    /// The tiers of a host whose memory nodes are `nodes`, fastest first.
    pub fn from_nodes(nodes: &[u32]) -> Self {
        match nodes {
            [fast, slow, ..] => Self::Numa {
                fast: *fast,
                slow: *slow,
            },
            _ => Self::OneNode,
        }
    }

    /// The `[fast, slow]` nodes, when there are two.
    pub fn nodes(self) -> Option<[u32; 2]> {
        match self {
            Self::OneNode => None,
            Self::Numa { fast, slow } => Some([fast, slow]),
        }
    }

    /// How results are labelled.
    pub fn label(self) -> String {
        match self {
            Self::OneNode => "modeled tiers (one NUMA node: both tiers are its DRAM)".to_owned(),
            Self::Numa { fast, slow } => {
                format!("measured on real tiers (fast = NUMA node {fast}, slow = node {slow})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_fastest_memory_nodes_are_the_tiers() {
        assert_eq!(
            HostTiers::from_nodes(&[2, 0, 1]),
            HostTiers::Numa { fast: 2, slow: 0 }
        );
        assert_eq!(HostTiers::from_nodes(&[0]), HostTiers::OneNode);
        assert_eq!(HostTiers::from_nodes(&[]), HostTiers::OneNode);
        assert_eq!(HostTiers::OneNode.nodes(), None);
        assert!(HostTiers::OneNode.label().starts_with("modeled"));
        assert!(
            HostTiers::Numa { fast: 0, slow: 1 }
                .label()
                .starts_with("measured on real tiers")
        );
    }

    #[test]
    fn detection_agrees_with_this_hosts_nodes() {
        let nodes = guest_memory::memory_nodes_fastest_first().unwrap();
        assert_eq!(HostTiers::detect(), HostTiers::from_nodes(&nodes));
    }
}
