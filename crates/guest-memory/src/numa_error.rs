//! [`NumaError`]: why a NUMA policy could not be set on the shared backing
//! or where a frame's pages are could not be said.

use std::io;

use thiserror::Error;

/// Why a NUMA policy could not be set or pages could not be located.
#[derive(Debug, Error)]
pub enum NumaError {
    /// The temporary mapping of the backing could not be made.
    #[error("cannot map the shared backing to set numa policies")]
    Window(#[source] io::Error),
    /// `mbind` refused a range.
    #[error("cannot bind frames {first}..{} to numa node {node}", .first + .count)]
    Bind {
        /// First frame.
        first: usize,
        /// Number of frames.
        count: usize,
        /// Node.
        node: u32,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// No such frame.
    #[error("frame {0} out of range")]
    NoSuchFrame(crate::ids::FrameId),
    /// `move_pages` could not say where a frame's pages are.
    #[error("cannot ask where the pages of frame {frame} are")]
    Query {
        /// Frame.
        frame: crate::ids::FrameId,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A page on another node than its frame's tier.
    #[error("frame {frame} page {page} is on node {node}, but tier '{tier}' is node {expected}")]
    Misplaced {
        /// Frame.
        frame: crate::ids::FrameId,
        /// 4 KiB page within the frame.
        page: usize,
        /// Node the page is on.
        node: i32,
        /// The frame's tier.
        tier: String,
        /// The tier's node.
        expected: u32,
    },
}
