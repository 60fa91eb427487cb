//! Linux guests: an unmodified kernel (a bzImage through the 64-bit boot
//! protocol, or an ELF vmlinux through its PVH entry), an optional
//! initramfs and a command line. This module checks and places them
//! ([`plan`], [`loader`], [`cmdline`]), builds the memory map
//! ([`memory_map`]) and the boot structures ([`boot_params`], [`pvh`]) at
//! the addresses of [`layout`]. The CPU side is in `arch::linux_regs`, the
//! devices in `devices`. A Linux guest never learns that its memory is
//! tiered: its RAM is one node of plain RAM.

pub mod boot_params;
pub mod cmdline;
pub mod error;
pub mod layout;
pub mod loader;
pub mod memory_map;
pub mod plan;
pub mod pvh;

use std::path::PathBuf;

pub use error::LinuxError;
pub use plan::LinuxPlan;

/// The command line `tiervisor run --kernel` uses when none is given.
pub const DEFAULT_CMDLINE: &str = "console=ttyS0";

/// What a Linux guest boots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinuxBoot {
    /// The kernel: a bzImage or an ELF vmlinux with a PVH entry note.
    pub kernel: PathBuf,
    /// An initramfs (any format the kernel unpacks).
    pub initramfs: Option<PathBuf>,
    /// The kernel command line, passed as given.
    pub cmdline: String,
}
