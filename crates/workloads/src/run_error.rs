//! Why a vCPU stopped early, and the exit code it reports for it.

use core::fmt;

use guest_abi::Op;

use crate::parse_error::ParseError;

/// Exit code: the workload finished.
pub const EXIT_OK: u64 = 0;
/// Exit code: the workload found wrong data in guest memory.
pub const EXIT_DATA_ERROR: u64 = 1;
/// Exit code: boot info, arguments or memory did not allow a run.
pub const EXIT_SETUP_ERROR: u64 = 2;
/// Exit code: the VMM answered a hypercall with a status other than `Ok`.
pub const EXIT_HYPERCALL_REJECTED: u64 = 3;
/// Exit code: the payload panicked.
pub const EXIT_PANIC: u64 = 101;

/// Why a vCPU stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError {
    /// memcheck read a word that does not hold what was last written.
    Corruption {
        /// The vCPU that found it.
        vcpu: u32,
        /// Guest-physical address of the word.
        gpa: u64,
        /// The value written last.
        expected: u64,
        /// The value read.
        got: u64,
    },
    /// hotset with `verify`: the words of a vCPU's stripe do not add up to
    /// the increments it made, so a write was lost (or a word changed).
    LostWrites {
        /// The vCPU whose stripe it is.
        vcpu: u32,
        /// Sum of the stripe's words (wrapping).
        sum: u64,
        /// Increments the vCPU made over all phases (wrapping).
        increments: u64,
    },
    /// hotset with `verify` needs every vCPU to own a word of each page.
    TooManyVcpusToVerify {
        /// The vCPU count.
        vcpus: u32,
        /// The most vCPUs `verify` supports.
        max: u32,
    },
    /// The VMM did not accept a hypercall.
    Rejected {
        /// The operation.
        op: Op,
        /// The status the VMM wrote.
        status: u32,
    },
    /// The boot info block has a bad magic or count.
    BadBootInfo {
        /// Its guest-physical address.
        gpa: u64,
    },
    /// The vCPU index or count in the registers make no sense.
    BadVcpu {
        /// `rdi` at entry.
        vcpu: u64,
        /// `rsi` at entry.
        vcpus: u64,
        /// The count in the boot info.
        boot_vcpus: u32,
    },
    /// The argument string is too long, unmapped or not UTF-8.
    BadArgs {
        /// Its length in bytes.
        len: u64,
    },
    /// The workload string was rejected.
    Spec(ParseError),
    /// The boot info lists no free memory.
    NoFreeMemory,
    /// A range the layout needs is not addressable.
    Unmapped {
        /// First guest-physical address.
        gpa: u64,
        /// Length in bytes.
        len: u64,
    },
}

impl RunError {
    /// The exit code the vCPU reports for this error.
    pub fn exit_code(&self) -> u64 {
        match self {
            RunError::Corruption { .. } | RunError::LostWrites { .. } => EXIT_DATA_ERROR,
            RunError::Rejected { .. } => EXIT_HYPERCALL_REJECTED,
            _ => EXIT_SETUP_ERROR,
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Corruption {
                vcpu,
                gpa,
                expected,
                got,
            } => write!(
                f,
                "memcheck: vcpu {vcpu} addr {gpa:#x} expected {expected:#x} got {got:#x}"
            ),
            RunError::LostWrites {
                vcpu,
                sum,
                increments,
            } => write!(
                f,
                "hotset: vcpu {vcpu} lost writes: stripe sum {sum}, increments {increments}"
            ),
            RunError::TooManyVcpusToVerify { vcpus, max } => {
                write!(
                    f,
                    "hotset: verify supports at most {max} vcpus, not {vcpus}"
                )
            }
            RunError::Rejected { op, status } => {
                write!(f, "hypercall {op:?} rejected with status {status}")
            }
            RunError::BadBootInfo { gpa } => write!(f, "bad boot info block at {gpa:#x}"),
            RunError::BadVcpu {
                vcpu,
                vcpus,
                boot_vcpus,
            } => write!(
                f,
                "bad vcpu index {vcpu} of {vcpus} (boot info says {boot_vcpus} vcpus)"
            ),
            RunError::BadArgs { len } => {
                write!(
                    f,
                    "argument string of {len} bytes is unreadable or not UTF-8"
                )
            }
            RunError::Spec(e) => write!(f, "workload: {e}"),
            RunError::NoFreeMemory => f.write_str("boot info lists no free memory"),
            RunError::Unmapped { gpa, len } => {
                write!(f, "guest memory {gpa:#x}+{len:#x} is not addressable")
            }
        }
    }
}

impl core::error::Error for RunError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            RunError::Spec(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ParseError> for RunError {
    fn from(e: ParseError) -> Self {
        RunError::Spec(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corruption_message_has_the_documented_form() {
        let e = RunError::Corruption {
            vcpu: 3,
            gpa: 0x40_0000,
            expected: 0xdead,
            got: 0xbeef,
        };
        assert_eq!(
            e.to_string(),
            "memcheck: vcpu 3 addr 0x400000 expected 0xdead got 0xbeef"
        );
        assert_eq!(e.exit_code(), EXIT_DATA_ERROR);
        assert_eq!(RunError::NoFreeMemory.exit_code(), EXIT_SETUP_ERROR);
        let lost = RunError::LostWrites {
            vcpu: 1,
            sum: 41,
            increments: 42,
        };
        assert_eq!(
            lost.to_string(),
            "hotset: vcpu 1 lost writes: stripe sum 41, increments 42"
        );
        assert_eq!(lost.exit_code(), EXIT_DATA_ERROR);
        let many = RunError::TooManyVcpusToVerify {
            vcpus: 600,
            max: 512,
        };
        assert_eq!(many.exit_code(), EXIT_SETUP_ERROR);
        let r = RunError::Rejected {
            op: Op::Report,
            status: 2,
        };
        assert_eq!(r.exit_code(), EXIT_HYPERCALL_REJECTED);
        assert_eq!(r.to_string(), "hypercall Report rejected with status 2");
    }
}
