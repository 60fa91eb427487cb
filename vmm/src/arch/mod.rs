//! x86-64 CPU state: for payload guests, descriptor tables, page tables
//! and the register state of a vCPU entering a payload in 64-bit mode at
//! CPL3; for Linux guests, the CPUID, boot MSRs, boot tables and the
//! register state of a vCPU entering a kernel at CPL0.

pub mod cpuid;
pub mod gdt;
pub mod layout;
pub mod linux_regs;
pub mod linux_tables;
pub mod msrs;
pub mod paging;
pub mod regs;
