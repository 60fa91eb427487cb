//! The kernel command line: checked against the kernel's limit and written
//! NUL-terminated. It is passed as given; the VMM adds nothing to it.

use super::error::LinuxError;
use super::layout::CMDLINE_MAX;

/// `COMMAND_LINE_SIZE` of x86 Linux, terminating NUL included: the limit
/// for PVH boots, which carry no `cmdline_size`.
pub const PVH_CMDLINE_SIZE: usize = 2048;

/// The command line as the guest gets it: `cmdline` and a NUL. `max_len`
/// is the longest line the kernel accepts, NUL excluded (a bzImage's
/// `cmdline_size`).
pub fn encode(cmdline: &str, max_len: usize) -> Result<Vec<u8>, LinuxError> {
    if cmdline.as_bytes().contains(&0) {
        return Err(LinuxError::CmdlineNul);
    }
    // The VMM's own room for it bounds what a kernel header may claim.
    let max = max_len.min(CMDLINE_MAX - 1);
    if cmdline.len() > max {
        return Err(LinuxError::CmdlineTooLong {
            len: cmdline.len(),
            max,
        });
    }
    let mut bytes = Vec::with_capacity(cmdline.len() + 1);
    bytes.extend_from_slice(cmdline.as_bytes());
    bytes.push(0);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_nul_terminated() {
        assert_eq!(encode("console=ttyS0", 2047).unwrap(), b"console=ttyS0\0");
        assert_eq!(encode("", 2047).unwrap(), b"\0");
    }

    #[test]
    fn the_kernels_limit_is_enforced_to_the_byte() {
        assert!(encode(&"x".repeat(2047), 2047).is_ok());
        let err = encode(&"x".repeat(2048), 2047).unwrap_err();
        assert!(
            matches!(
                err,
                LinuxError::CmdlineTooLong {
                    len: 2048,
                    max: 2047
                }
            ),
            "{err:?}"
        );
        // A header claiming more than the VMM has room for is capped.
        assert!(matches!(
            encode(&"x".repeat(CMDLINE_MAX), u32::MAX as usize),
            Err(LinuxError::CmdlineTooLong { .. })
        ));
    }

    #[test]
    fn nul_bytes_are_refused() {
        assert!(matches!(encode("a\0b", 2047), Err(LinuxError::CmdlineNul)));
    }
}
