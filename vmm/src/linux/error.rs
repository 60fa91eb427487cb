//! Why a Linux guest cannot boot: every check on the kernel, the
//! initramfs and the command line that can fail before the VM starts, and
//! the writes that load them.

use std::path::PathBuf;

use thiserror::Error;

/// Errors preparing or loading a Linux guest.
#[derive(Debug, Error)]
pub enum LinuxError {
    /// The kernel or initramfs file could not be read.
    #[error("reading {what} {path}")]
    Read {
        /// "kernel" or "initramfs".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The kernel is neither a bzImage nor an ELF vmlinux.
    #[error("kernel is neither a bzImage (no 'HdrS' setup header) nor an ELF vmlinux")]
    NotAKernel,
    /// A bzImage the 64-bit boot protocol cannot start.
    #[error("bzImage: {0}")]
    BadBzImage(String),
    /// An ELF vmlinux that cannot be loaded or has no PVH entry.
    #[error("ELF kernel: {0}")]
    BadElf(String),
    /// The kernel does not fit in guest RAM.
    #[error(
        "kernel needs guest RAM {start:#x}..{end:#x} but RAM below 4 GiB is {ram_start:#x}..{ram_end:#x}; give more --memory"
    )]
    KernelTooBig {
        /// Where the kernel's memory starts.
        start: u64,
        /// Where the kernel's memory ends (load address + the memory it
        /// needs to decompress and run, `init_size`).
        end: u64,
        /// Start of the RAM it must lie in.
        ram_start: u64,
        /// End of that RAM.
        ram_end: u64,
    },
    /// The initramfs does not fit between the kernel and its highest
    /// allowed address.
    #[error(
        "initramfs of {size} bytes does not fit in guest RAM between the kernel (ends at {low:#x}) and {high:#x}; give more --memory"
    )]
    InitramfsTooBig {
        /// Its size.
        size: u64,
        /// Lowest address it may use.
        low: u64,
        /// Highest address it may end at.
        high: u64,
    },
    /// An empty initramfs file.
    #[error("initramfs {0} is empty")]
    EmptyInitramfs(PathBuf),
    /// The command line is longer than the kernel accepts.
    #[error("kernel command line is {len} bytes; this kernel accepts at most {max}")]
    CmdlineTooLong {
        /// Its length.
        len: usize,
        /// The kernel's limit.
        max: usize,
    },
    /// The command line contains a NUL byte.
    #[error("kernel command line contains a NUL byte")]
    CmdlineNul,
    /// Guest RAM lacks the low megabyte Linux boots from.
    #[error("guest RAM of {0} bytes is too small to boot Linux")]
    RamTooSmall(u64),
    /// More memory-map entries than the boot structures hold.
    #[error("memory map has {0} entries; the boot structures hold at most {1}")]
    TooManyMemoryMapEntries(usize, usize),
    /// linux-loader refused the image while loading it.
    #[error("loading the kernel")]
    Load(#[source] linux_loader::loader::Error),
    /// Writing a boot structure to guest memory failed.
    #[error("writing {what} to guest memory")]
    Write {
        /// What was being written.
        what: &'static str,
        /// The error.
        #[source]
        source: vm_memory::GuestMemoryError,
    },
}
