//! The shared-numa backing (`Backing::SharedNuma`): one memfd holds all of
//! guest RAM, frame `f` at offset `f * frame_size`, and a frame's tier is
//! the host NUMA node its pages live on. Every tier is that memfd, with one
//! slot per frame and the frame's own index as its slot (so guest-physical
//! → host-virtual → memfd offset never changes); a tier's size is its quota.
//!
//! Where new pages of a frame are allocated is the memfd's NUMA policy for
//! the frame's file range: shmem keeps one policy per file range, set with
//! `mbind(MPOL_BIND)` through any mapping of it. Each range is bound through
//! a window mapping exactly that range ([`bind_range`]), never through the
//! guest mapping or the view: a policy on part of a mapping splits its VMA,
//! and such splits would pile up towards `vm.max_map_count`.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use crate::backend::{FileId, TierBackend};
use crate::backend_error::BackendError;
use crate::config::{MemoryConfig, Plan};
use crate::config_error::ConfigError;
use crate::error::Error;
use crate::ledger::Ledger;
use crate::mapping::HostMapping;
use crate::memfd;
use crate::numa;
use crate::numa_error::NumaError;

/// A temporary shared mapping of `[offset, offset + len)` of a memfd,
/// unmapped on drop. Policies set through it stay with the file.
#[derive(Debug)]
pub(crate) struct FileWindow {
    map: HostMapping,
    offset: u64,
}

impl FileWindow {
    /// Maps `len` bytes of `fd` from `offset` (page-aligned).
    pub(crate) fn open(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<Self, NumaError> {
        let len = usize::try_from(len)
            .map_err(|_| NumaError::Window(io::Error::from_raw_os_error(libc::ENOMEM)))?;
        let map = HostMapping::map_shared(fd, len, offset).map_err(NumaError::Window)?;
        Ok(Self { map, offset })
    }

    /// The window address of file offset `offset`, if inside the window.
    pub(crate) fn addr_of(&self, offset: u64) -> Option<usize> {
        let delta = usize::try_from(offset.checked_sub(self.offset)?).ok()?;
        (delta < self.map.len()).then(|| self.map.addr() + delta)
    }

    /// Sets the policy of `[offset, offset + len)` of the file to
    /// `MPOL_BIND(node)` (pages already there stay where they are).
    pub(crate) fn bind(&self, offset: u64, len: u64, node: u32) -> io::Result<()> {
        let end = offset
            .checked_add(len)
            .and_then(|end| end.checked_sub(1))
            .and_then(|last| self.addr_of(last));
        let (Some(addr), Some(_)) = (self.addr_of(offset), end) else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        numa::bind_to_node(addr, len as usize, node)
    }
}

/// Sets the policy of `[offset, offset + len)` of the memfd `fd` to
/// `MPOL_BIND(node)` through a window of exactly that range (no VMA split
/// anywhere; the policy stays with the file when the window goes).
pub(crate) fn bind_range(fd: BorrowedFd<'_>, offset: u64, len: u64, node: u32) -> io::Result<()> {
    let window = FileWindow::open(fd, offset, len).map_err(|err| match err {
        NumaError::Window(source) => source,
        other => io::Error::other(other.to_string()),
    })?;
    window.bind(offset, len, node)
}

/// Creates the one memfd of guest RAM, a tier backend per configured tier
/// over it, places the frames per `cfg.placement` within the tiers' quotas
/// and sets each frame range's NUMA policy to its tier's node — before
/// anything touches the memory, so pages are born on the right node.
pub(crate) fn build(plan: &Plan, cfg: &MemoryConfig) -> Result<(Vec<TierBackend>, Ledger), Error> {
    let frame_size = plan.frame_size;
    let size = plan.frame_count as u64 * frame_size;
    let file = memfd::create("ram", size, false).map_err(Error::SharedBacking)?;
    let map_err = |source| Error::SharedBacking(BackendError::MapView { len: size, source });
    let len =
        usize::try_from(size).map_err(|_| map_err(io::Error::from_raw_os_error(libc::ENOMEM)))?;
    let view = Arc::new(HostMapping::map_shared(file.as_fd(), len, 0).map_err(map_err)?);
    let id = FileId::of(&file).map_err(Error::SharedBacking)?;
    let file = Arc::new(file);
    let tiers: Vec<TierBackend> = plan
        .tiers
        .iter()
        .map(|t| {
            TierBackend::on_shared(
                t,
                frame_size,
                plan.frame_count,
                Arc::clone(&file),
                Arc::clone(&view),
                id,
            )
        })
        .collect();
    let quotas: Vec<usize> = tiers.iter().map(TierBackend::capacity_frames).collect();
    let tier_of_frame =
        cfg.placement
            .assign(plan.frame_count, &quotas)
            .ok_or(ConfigError::TiersTooSmall {
                memory: cfg.size,
                capacity: tiers.iter().map(TierBackend::capacity).sum(),
            })?;
    let ledger = Ledger::fixed(&quotas, &tier_of_frame)?;
    bind_initial(file.as_fd(), frame_size, &tier_of_frame, &tiers)?;
    Ok((tiers, ledger))
}

/// Binds each run of consecutive frames on one tier to the tier's node.
fn bind_initial(
    fd: BorrowedFd<'_>,
    frame_size: u64,
    tier_of_frame: &[usize],
    tiers: &[TierBackend],
) -> Result<(), NumaError> {
    let mut first = 0;
    while first < tier_of_frame.len() {
        let tier = tier_of_frame[first];
        let count = tier_of_frame[first..]
            .iter()
            .take_while(|t| **t == tier)
            .count();
        if let Some(node) = tiers.get(tier).and_then(TierBackend::numa_node) {
            let (offset, len) = (first as u64 * frame_size, count as u64 * frame_size);
            bind_range(fd, offset, len, node).map_err(|source| NumaError::Bind {
                first,
                count,
                node,
                source,
            })?;
        }
        first += count;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_addresses_stay_inside_the_window() {
        let ps = crate::move_pages::page_size() as u64;
        let file = memfd::create("window-test", 8 * ps, false).unwrap();
        let window = FileWindow::open(file.as_fd(), 2 * ps, 4 * ps).unwrap();
        let base = window.addr_of(2 * ps).unwrap();
        assert_eq!(window.addr_of(5 * ps + 7), Some(base + 3 * ps as usize + 7));
        assert_eq!(window.addr_of(6 * ps), None);
        assert_eq!(window.addr_of(ps), None);
        window.bind(3 * ps, 2 * ps, 0).unwrap();
        let err = window.bind(5 * ps, 2 * ps, 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        // A node the host does not have is refused by the kernel.
        assert!(window.bind(2 * ps, ps, 4000).is_err());
        bind_range(file.as_fd(), 7 * ps, ps, 0).unwrap();
        assert!(bind_range(file.as_fd(), 7 * ps, ps, 4000).is_err());
    }
}
