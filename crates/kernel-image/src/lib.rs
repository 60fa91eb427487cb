//! Linux kernel images for the VMM's Linux boot path: the bzImage setup
//! header ([`SetupHeader`]), the compressed payload in it
//! ([`Compression`], [`decompress`]), the `vmlinux` ELF inside
//! ([`extract_vmlinux`], [`check_vmlinux`]) and its PVH entry point
//! ([`pvh_entry`]), which lets a VMM skip the in-guest decompressor. The
//! ELF64 reader under the `vmlinux` checks ([`elf64`]) is the workspace's
//! one: the VMM's payload loader reads its images with it too.
//!
//! Every input is treated as hostile: each offset is bounds-checked, the
//! decompressed size is capped ([`MAX_VMLINUX_SIZE`]), and garbage gives an
//! error, never a panic.
//!
//! ```
//! use kernel_image::{ExtractError, extract_vmlinux};
//!
//! let err = extract_vmlinux(b"not a kernel").unwrap_err();
//! assert!(matches!(err, ExtractError::Header(_)));
//! ```

mod bytes;
mod compression;
mod decompress;
mod elf;
pub mod elf64;
mod extract;
mod lz4_legacy;
mod setup_header;

pub use compression::Compression;
pub use decompress::{DecompressError, decompress};
pub use elf::{ElfError, ElfInfo, XEN_ELFNOTE_PHYS32_ENTRY, check_vmlinux, pvh_entry};
pub use elf64::EM_X86_64;
pub use extract::{ExtractError, Extracted, MAX_VMLINUX_SIZE, extract, extract_vmlinux};
pub use lz4_legacy::{LZ4_LEGACY_CHUNK_SIZE, LZ4_LEGACY_MAGIC, Lz4LegacyError};
pub use setup_header::{HDRS_MAGIC, HeaderError, MIN_PAYLOAD_PROTOCOL, SetupHeader};
