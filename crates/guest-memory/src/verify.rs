//! Checking the real backing of guest memory against the placement map.
//!
//! Method: `/proc/self/maps` says, for every host-virtual range, which file
//! (device and inode) and which file offset back it. For each frame, every
//! byte of its host range must be mapped from its tier's backing file at
//! `slot * frame_size` onwards. This reads no guest memory and writes none,
//! so it is safe while the guest runs; it is only meaningful while no
//! migration is between its remap and its placement commit.

use thiserror::Error;

use crate::backend::TierBackend;
use crate::frame_table::FrameTable;
use crate::placement::PlacementMap;
use crate::proc_maps::{MapsEntry, MapsError, read_self_maps};

/// A frame whose backing is not what the placement map says, or a failure to look.
#[derive(Debug, Error)]
pub enum VerifyError {
    /// The process's mappings could not be read.
    #[error("cannot read the process's mappings")]
    Maps(#[source] MapsError),
    /// The frame's host range is backed by something else.
    #[error(
        "frame {frame} (gpa {gpa:#x}) at host {host_addr:#x} should be {expected} but is {found}"
    )]
    Mismatch {
        /// The frame.
        frame: crate::ids::FrameId,
        /// Frame's guest-physical address.
        gpa: u64,
        /// Host address of the first wrong byte.
        host_addr: u64,
        /// What the placement map says, e.g. `tier 'fast' slot 3`.
        expected: String,
        /// What is mapped, e.g. `tier 'slow' slot 5` or `not mapped`.
        found: String,
    },
}

/// Checks every frame's backing against `map`.
pub(crate) fn verify(
    frames: &FrameTable,
    tiers: &[TierBackend],
    map: &PlacementMap,
) -> Result<(), VerifyError> {
    let entries = read_self_maps().map_err(VerifyError::Maps)?;
    let frame_size = frames.frame_size();
    for (frame, loc) in map.iter() {
        let (Some(host), Some(gpa)) = (frames.host_addr(frame), frames.gpa(frame)) else {
            continue;
        };
        let tier = &tiers[loc.tier.index()];
        let expected_offset = loc.slot as u64 * frame_size;
        let mismatch = |addr: u64, found: String| VerifyError::Mismatch {
            frame,
            gpa,
            host_addr: addr,
            expected: format!("tier '{}' slot {}", tier.name(), loc.slot),
            found,
        };
        let end = host + frame_size;
        let mut addr = host;
        let mut index = entries.partition_point(|e| e.end <= addr);
        while addr < end {
            let entry = entries
                .get(index)
                .filter(|e| e.start <= addr)
                .ok_or_else(|| mismatch(addr, "not mapped".into()))?;
            let id = tier.file_id();
            let offset = entry.offset + (addr - entry.start);
            if (entry.dev_major, entry.dev_minor, entry.inode)
                != (id.dev_major, id.dev_minor, id.inode)
                || offset != expected_offset + (addr - host)
            {
                // Report where the frame's start would be in that file.
                let frame_offset = offset.checked_sub(addr - host);
                return Err(mismatch(
                    addr,
                    describe(entry, frame_offset, tiers, frame_size),
                ));
            }
            addr = entry.end.min(end);
            index += 1;
        }
    }
    Ok(())
}

/// Names what backs a byte: a tier slot if the file is a tier's, else the raw file id.
fn describe(
    entry: &MapsEntry,
    offset: Option<u64>,
    tiers: &[TierBackend],
    frame_size: u64,
) -> String {
    let found = tiers.iter().find(|t| {
        let id = t.file_id();
        (id.dev_major, id.dev_minor, id.inode) == (entry.dev_major, entry.dev_minor, entry.inode)
    });
    match (found, offset) {
        (Some(t), Some(off)) if off % frame_size == 0 => {
            format!("tier '{}' slot {}", t.name(), off / frame_size)
        }
        (Some(t), _) => format!("tier '{}' at an unaligned offset", t.name()),
        (None, _) if entry.inode == 0 => "anonymous memory (frame not mapped)".into(),
        (None, _) => format!(
            "file {:x}:{:x} inode {}",
            entry.dev_major, entry.dev_minor, entry.inode
        ),
    }
}
