//! The end-of-run check that the placement map tells the truth: every
//! frame's host range is mapped from the tier and slot the map names, no
//! memfd slot holds memory nothing owns, and on tiers that are NUMA nodes
//! every page sits on its tier's node (asked of the kernel with
//! `move_pages(2)`). The tiered-host scenarios read it from the JSON
//! report; the pages counted per node are independent evidence of where
//! the kernel migrator put the guest.

use std::collections::BTreeMap;

use serde::Serialize;

use guest_memory::TieredMemory;

/// What the check found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlacementCheck {
    /// Why the backing check failed; `None` when every frame is mapped
    /// from where the map says.
    pub backing_error: Option<String>,
    /// Memfd slots that hold memory but back no frame.
    pub leaked_slots: usize,
    /// Per tier with a NUMA node: where its frames' pages really are.
    pub numa: Vec<TierNodes>,
}

/// Where one NUMA tier's frames' pages are.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TierNodes {
    /// The tier.
    pub tier: String,
    /// Its NUMA node.
    pub node: u32,
    /// Frames the map places on it.
    pub frames: usize,
    /// Their present pages, per node the kernel reports.
    pub pages_by_node: BTreeMap<i32, usize>,
    /// Their pages not present (never touched).
    pub not_present: usize,
    /// Present pages on another node than the tier's.
    pub misplaced_pages: usize,
    /// Why a frame could not be queried, if one could not.
    pub query_error: Option<String>,
}

impl PlacementCheck {
    /// Checks `memory`; meaningful once no migration runs any more.
    pub fn run(memory: &TieredMemory) -> Self {
        let backing_error = memory.verify_backing().err().map(|e| e.to_string());
        let leaked_slots = memory.leaked_slots().map_or(0, |l| l.len());
        let mut numa: Vec<TierNodes> = memory
            .tiers()
            .iter()
            .filter_map(|t| {
                t.numa_node().map(|node| TierNodes {
                    tier: t.name().to_owned(),
                    node,
                    ..TierNodes::default()
                })
            })
            .collect();
        if !numa.is_empty() {
            for (frame, loc) in memory.placement().iter() {
                let tier = &memory.tiers()[loc.tier.index()];
                let Some(entry) = numa.iter_mut().find(|n| n.tier == tier.name()) else {
                    continue;
                };
                entry.frames += 1;
                match memory.frame_node_counts(frame) {
                    Ok(counts) => {
                        for (node, pages) in counts.by_node {
                            *entry.pages_by_node.entry(node).or_default() += pages;
                            if i64::from(node) != i64::from(entry.node) {
                                entry.misplaced_pages += pages;
                            }
                        }
                        entry.not_present += counts.not_present;
                    }
                    Err(e) => {
                        entry.query_error.get_or_insert_with(|| e.to_string());
                    }
                }
            }
        }
        PlacementCheck {
            backing_error,
            leaked_slots,
            numa,
        }
    }

    /// One line for people: `ok`, or what disagreed; with the NUMA tiers'
    /// pages per node.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(e) = &self.backing_error {
            parts.push(format!("backing mismatch: {e}"));
        }
        if self.leaked_slots > 0 {
            parts.push(format!("{} leaked slots", self.leaked_slots));
        }
        for n in &self.numa {
            let nodes: Vec<String> = n
                .pages_by_node
                .iter()
                .map(|(node, pages)| format!("node {node}: {pages}"))
                .collect();
            parts.push(format!(
                "tier {} (node {}): {} frames, pages [{}], {} misplaced{}",
                n.tier,
                n.node,
                n.frames,
                nodes.join(", "),
                n.misplaced_pages,
                n.query_error
                    .as_ref()
                    .map_or_else(String::new, |e| format!(", query failed: {e}"))
            ));
        }
        let verdict = if self.passed() { "ok" } else { "FAILED" };
        if parts.is_empty() {
            verdict.to_owned()
        } else {
            format!("{verdict}; {}", parts.join("; "))
        }
    }

    /// Whether everything agreed.
    pub fn passed(&self) -> bool {
        self.backing_error.is_none()
            && self.leaked_slots == 0
            && self
                .numa
                .iter()
                .all(|n| n.misplaced_pages == 0 && n.query_error.is_none())
    }
}
