//! The guest RAM a benchmark VM is asked for (the suites' defaults or the
//! hidden `--bytes`): whole frames, and enough of them.

use thiserror::Error;

/// Why a guest size was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GuestSizeError {
    /// Guest RAM is not whole frames.
    #[error("guest size {bytes} bytes is not a positive multiple of the {frame} byte frame")]
    NotWholeFrames {
        /// Guest RAM asked for.
        bytes: u64,
        /// Frame size.
        frame: u64,
    },
    /// Guest RAM is too small for what the suite puts in it.
    #[error("guest size {bytes} bytes is below the {min} bytes needed")]
    TooSmall {
        /// Guest RAM asked for.
        bytes: u64,
        /// Smallest accepted.
        min: u64,
    },
}

/// Checks that `bytes` is a positive multiple of `frame` and at least
/// `min`.
pub fn check_guest_size(bytes: u64, frame: u64, min: u64) -> Result<(), GuestSizeError> {
    if bytes == 0 || frame == 0 || bytes % frame != 0 {
        return Err(GuestSizeError::NotWholeFrames { bytes, frame });
    }
    if bytes < min {
        return Err(GuestSizeError::TooSmall { bytes, min });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_frames_and_enough_of_them() {
        assert_eq!(check_guest_size(8 << 20, 2 << 20, 4 << 20), Ok(()));
        assert!(matches!(
            check_guest_size(0, 2 << 20, 0),
            Err(GuestSizeError::NotWholeFrames { .. })
        ));
        assert!(matches!(
            check_guest_size(3 << 20, 2 << 20, 0),
            Err(GuestSizeError::NotWholeFrames { .. })
        ));
        assert_eq!(
            check_guest_size(2 << 20, 2 << 20, 4 << 20),
            Err(GuestSizeError::TooSmall {
                bytes: 2 << 20,
                min: 4 << 20
            })
        );
    }
}
