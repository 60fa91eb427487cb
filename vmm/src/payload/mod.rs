//! Workload payloads: the ELF images (embedded or from a file), their
//! validation and loading, and the boot-time guest memory they need.

pub mod boot;
pub mod elf;
pub mod embedded;
