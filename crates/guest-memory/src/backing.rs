//! How guest RAM is backed: each tier its own object (per-tier), or one
//! memfd for all of guest RAM whose pages live on the NUMA node of the
//! frame's tier (shared-numa, for the kernel migrator). This module owns the
//! mode and the checks a shared-numa configuration must pass.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config_error::ConfigError;
use crate::host_tiers;
use crate::tier_spec::{BackendSpec, TierSpec};

/// The backing mode of guest RAM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case", tag = "mode", deny_unknown_fields)]
pub enum Backing {
    /// Each tier is its own backing object (memfd, device-DAX or file);
    /// frames move by copying and remapping (the remap migrator).
    #[default]
    PerTier,
    /// One memfd holds all of guest RAM; tiers are host NUMA nodes and a
    /// tier's size is this VM's quota of frames on its node. Every tier
    /// must be `backend=memfd` with a `numa-node`, no hugetlb, and the nodes
    /// distinct. Frames move with `move_pages(2)` (the kernel migrator).
    SharedNuma {
        /// Lets tiers share a node. Only for exercising the mechanics on a
        /// one-node host: such tiers are the same memory.
        #[serde(default)]
        allow_same_node: bool,
    },
}

impl Backing {
    /// Shared-numa with distinct nodes.
    pub const SHARED_NUMA: Backing = Backing::SharedNuma {
        allow_same_node: false,
    };

    /// Whether all tiers share one backing memfd.
    pub fn is_shared(self) -> bool {
        matches!(self, Backing::SharedNuma { .. })
    }
}

/// An unknown backing name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown backing '{0}' (expected per-tier, shared-numa or shared-numa-same-node)")]
pub struct BackingParseError(pub String);

impl FromStr for Backing {
    type Err = BackingParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "per-tier" => Ok(Backing::PerTier),
            "shared-numa" => Ok(Backing::SHARED_NUMA),
            "shared-numa-same-node" => Ok(Backing::SharedNuma {
                allow_same_node: true,
            }),
            other => Err(BackingParseError(other.to_owned())),
        }
    }
}

impl fmt::Display for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backing::PerTier => "per-tier",
            Backing::SharedNuma {
                allow_same_node: false,
            } => "shared-numa",
            Backing::SharedNuma {
                allow_same_node: true,
            } => "shared-numa-same-node",
        })
    }
}

/// `tiers`, where shared-numa memfd tiers that name no NUMA node get the
/// host's memory nodes in order of speed (the first such tier the fastest
/// node not named by another tier, and so on; see [`crate::host_tiers`]).
/// Other configurations come back unchanged.
pub(crate) fn resolve_nodes(
    backing: Backing,
    tiers: &[TierSpec],
) -> Result<Vec<TierSpec>, ConfigError> {
    let mut resolved = tiers.to_vec();
    let unnamed = |spec: &TierSpec| {
        matches!(
            spec.backend,
            BackendSpec::Memfd {
                numa_node: None,
                ..
            }
        )
    };
    let Some(first) = resolved.iter().find(|s| unnamed(s)) else {
        return Ok(resolved);
    };
    if !backing.is_shared() {
        return Ok(resolved);
    }
    let host =
        host_tiers::memory_nodes_fastest_first().map_err(|source| ConfigError::HostNodes {
            tier: first.name.clone(),
            source,
        })?;
    let named: Vec<u32> = tiers
        .iter()
        .filter_map(|s| match s.backend {
            BackendSpec::Memfd { numa_node, .. } => numa_node,
            BackendSpec::File { .. } => None,
        })
        .collect();
    let mut free = host.iter().copied().filter(|n| !named.contains(n));
    for spec in &mut resolved {
        let name = spec.name.clone();
        if let BackendSpec::Memfd { numa_node, .. } = &mut spec.backend {
            if numa_node.is_none() {
                let node = free.next().ok_or_else(|| ConfigError::NoHostNodeLeft {
                    tier: name,
                    nodes: host.clone(),
                })?;
                *numa_node = Some(node);
            }
        }
    }
    Ok(resolved)
}

/// Checks what shared-numa asks of the tiers (syntax only; whether the
/// nodes exist is checked with the other host facts).
pub(crate) fn check(backing: Backing, tiers: &[TierSpec]) -> Result<(), ConfigError> {
    let Backing::SharedNuma { allow_same_node } = backing else {
        return Ok(());
    };
    let mut first_on_node: HashMap<u32, &str> = HashMap::new();
    for spec in tiers {
        let tier = || spec.name.clone();
        let (node, hugetlb) = match &spec.backend {
            BackendSpec::Memfd {
                numa_node, hugetlb, ..
            } => (*numa_node, *hugetlb),
            BackendSpec::File { .. } => return Err(ConfigError::SharedNumaNeedsMemfd(tier())),
        };
        // resolve_nodes gave every memfd tier a node.
        let Some(node) = node else {
            continue;
        };
        if hugetlb {
            return Err(ConfigError::SharedNumaHugetlb(tier()));
        }
        if let Some(first) = first_on_node.insert(node, &spec.name) {
            if !allow_same_node {
                return Err(ConfigError::SharedNumaSameNode {
                    first: first.to_owned(),
                    second: tier(),
                    node,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> TierSpec {
        text.parse().unwrap()
    }

    #[test]
    fn parses_and_prints_names() {
        for (text, backing) in [
            ("per-tier", Backing::PerTier),
            ("shared-numa", Backing::SHARED_NUMA),
            (
                "shared-numa-same-node",
                Backing::SharedNuma {
                    allow_same_node: true,
                },
            ),
        ] {
            assert_eq!(text.parse::<Backing>(), Ok(backing));
            assert_eq!(backing.to_string(), text);
        }
        assert_eq!(
            "numa".parse::<Backing>().unwrap_err().to_string(),
            "unknown backing 'numa' (expected per-tier, shared-numa or shared-numa-same-node)"
        );
        assert_eq!(Backing::default(), Backing::PerTier);
    }

    #[test]
    fn tiers_without_a_node_take_the_hosts_fastest_free_nodes() {
        let host = host_tiers::memory_nodes_fastest_first().unwrap();
        let tiers = [
            spec("name=fast,backend=memfd,size=4M"),
            spec("name=slow,backend=memfd,size=4M"),
        ];
        match resolve_nodes(Backing::SHARED_NUMA, &tiers) {
            Ok(resolved) => {
                let nodes: Vec<Option<u32>> = resolved
                    .iter()
                    .map(|s| match s.backend {
                        BackendSpec::Memfd { numa_node, .. } => numa_node,
                        BackendSpec::File { .. } => None,
                    })
                    .collect();
                assert_eq!(nodes, [Some(host[0]), Some(host[1])]);
            }
            Err(e) => {
                assert_eq!(host.len(), 1, "{e}");
                assert_eq!(
                    e.to_string(),
                    format!(
                        "backing shared-numa: tier 'slow' names no numa-node and no host memory \
                         node is left (host memory nodes, fastest first: [{}])",
                        host[0]
                    )
                );
            }
        }
        // Per-tier backing and named nodes are left alone.
        assert_eq!(resolve_nodes(Backing::PerTier, &tiers).unwrap(), tiers);
        let named = [spec("name=fast,backend=memfd,size=4M,numa-node=0")];
        assert_eq!(resolve_nodes(Backing::SHARED_NUMA, &named).unwrap(), named);
    }

    #[test]
    fn per_tier_takes_anything() {
        let tiers = [spec("name=a,backend=file,path=/x")];
        check(Backing::PerTier, &tiers).unwrap();
    }

    #[test]
    fn shared_numa_rules_name_the_tier() {
        let fast = spec("name=fast,backend=memfd,size=4M,numa-node=0");
        let cases = [
            (
                spec("name=slow,backend=file,path=/dev/dax0.0"),
                "backing shared-numa needs backend=memfd on every tier: tier 'slow' is backend=file",
            ),
            (
                spec("name=slow,backend=memfd,size=4M,numa-node=1,hugetlb=on"),
                "backing shared-numa does not support hugetlb: tier 'slow' has hugetlb=on",
            ),
            (
                spec("name=slow,backend=memfd,size=4M,numa-node=0"),
                "backing shared-numa needs a distinct numa-node per tier: \
                 tiers 'fast' and 'slow' are both on node 0",
            ),
        ];
        for (slow, message) in cases {
            let err = check(Backing::SHARED_NUMA, &[fast.clone(), slow]).unwrap_err();
            assert_eq!(err.to_string(), message);
        }
    }

    #[test]
    fn same_node_only_when_allowed() {
        let tiers = [
            spec("name=fast,backend=memfd,size=4M,numa-node=0"),
            spec("name=slow,backend=memfd,size=4M,numa-node=0"),
        ];
        let allow = Backing::SharedNuma {
            allow_same_node: true,
        };
        check(allow, &tiers).unwrap();
        assert!(check(Backing::SHARED_NUMA, &tiers).is_err());
        let distinct = [
            spec("name=fast,backend=memfd,size=4M,numa-node=0"),
            spec("name=slow,backend=memfd,size=4M,numa-node=1"),
        ];
        check(Backing::SHARED_NUMA, &distinct).unwrap();
    }
}
