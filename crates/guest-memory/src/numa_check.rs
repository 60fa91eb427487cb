//! Where guest pages really are: the NUMA node of each 4 KiB page of a
//! frame, asked of the kernel with `move_pages(2)` in query mode through
//! the guest mapping, and a check of every frame against its tier's node.
//! Read-only: nothing is moved or faulted in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::FrameId;
use crate::move_pages::{self, page_size};
use crate::numa_error::NumaError;
use crate::tiered::TieredMemory;

/// Where the pages of a frame are, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCounts {
    /// Pages per node.
    pub by_node: BTreeMap<i32, usize>,
    /// Pages with nothing mapped at the guest address (`-ENOENT`): never
    /// touched, or unmapped from the guest range while kept in the memfd.
    pub not_present: usize,
    /// Other statuses (negative errno) and how many pages had each.
    pub errors: BTreeMap<i32, usize>,
}

impl NodeCounts {
    /// Counts `move_pages` statuses.
    pub fn from_status(status: &[i32]) -> Self {
        let mut counts = Self::default();
        for &s in status {
            if s >= 0 {
                *counts.by_node.entry(s).or_default() += 1;
            } else if s == -libc::ENOENT {
                counts.not_present += 1;
            } else {
                *counts.errors.entry(s).or_default() += 1;
            }
        }
        counts
    }

    /// Pages found on some node.
    pub fn present(&self) -> usize {
        self.by_node.values().sum()
    }
}

impl TieredMemory {
    /// The `move_pages` status of each host page of `frame`, through the
    /// guest mapping: the node the page is on, or a negative errno
    /// (`-ENOENT`: nothing mapped there yet).
    pub fn frame_nodes(&self, frame: FrameId) -> Result<Vec<i32>, NumaError> {
        let host = self
            .frames()
            .host_addr(frame)
            .ok_or(NumaError::NoSuchFrame(frame))?;
        let ps = page_size();
        let pages: Vec<usize> = (0..self.frame_size() as usize / ps)
            .map(|p| host as usize + p * ps)
            .collect();
        let mut status = vec![0; pages.len()];
        move_pages::query(&pages, &mut status)
            .map_err(|source| NumaError::Query { frame, source })?;
        Ok(status)
    }

    /// [`TieredMemory::frame_nodes`], counted.
    pub fn frame_node_counts(&self, frame: FrameId) -> Result<NodeCounts, NumaError> {
        Ok(NodeCounts::from_status(&self.frame_nodes(frame)?))
    }

    /// Checks that every mapped page of every frame on a tier with a NUMA
    /// node is on that node. Meaningful while no migration runs.
    pub fn verify_numa(&self) -> Result<(), NumaError> {
        let placement = self.placement();
        for (frame, loc) in placement.iter() {
            let tier = &self.tiers()[loc.tier.index()];
            let Some(expected) = tier.numa_node() else {
                continue;
            };
            let status = self.frame_nodes(frame)?;
            let wrong = status
                .iter()
                .position(|s| *s != -libc::ENOENT && i64::from(*s) != i64::from(expected));
            if let Some(page) = wrong {
                return Err(NumaError::Misplaced {
                    frame,
                    page,
                    node: status[page],
                    tier: tier.name().to_owned(),
                    expected,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nodes_absent_pages_and_errors_apart() {
        let counts =
            NodeCounts::from_status(&[0, 1, 0, -libc::ENOENT, -libc::EFAULT, -libc::ENOENT]);
        assert_eq!(counts.by_node, BTreeMap::from([(0, 2), (1, 1)]));
        assert_eq!(counts.not_present, 2);
        assert_eq!(counts.errors, BTreeMap::from([(-libc::EFAULT, 1)]));
        assert_eq!(counts.present(), 3);
    }
}
