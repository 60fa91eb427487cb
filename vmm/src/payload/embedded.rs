//! The workload payload compiled into the `tiervisor` binary by `build.rs`.

/// The static ELF holding every workload of `crates/workloads`.
pub static WORKLOADS_ELF: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/workloads-payload.elf"));
