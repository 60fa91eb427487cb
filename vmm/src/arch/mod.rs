//! x86-64 CPU state for payload guests: descriptor tables, page tables and
//! the register state of a vCPU entering a payload in 64-bit mode at CPL3.

pub mod gdt;
pub mod layout;
pub mod paging;
pub mod regs;
