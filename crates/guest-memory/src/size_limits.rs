//! The sizes a memory configuration is held to: the default and the
//! smallest frame, and the largest guest RAM and tier.

use crate::size::{MIB, TIB};

/// Frame size used when none is given.
pub const DEFAULT_FRAME_SIZE: u64 = 2 * MIB;
/// Smallest frame size.
pub const MIN_FRAME_SIZE: u64 = 4096;
/// Largest guest RAM and largest tier accepted.
pub const MAX_SIZE: u64 = 64 * TIB;
