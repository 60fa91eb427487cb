//! tiervisor's VMM: KVM VMs whose guest RAM lives on tiered host memory.
//!
//! This crate owns the VM lifecycle: CPU state ([`arch`]), payload images
//! and boot ([`payload`]), Linux kernels and their boot ([`linux`],
//! [`vm_linux`]), devices ([`devices`]), vCPU threads ([`vcpu`]),
//! pausing and stopping them ([`pause`], [`vcpu_control`]), the VM
//! ([`vm`], [`vm_error`]) and its tiering side: dirty log, write guard,
//! migrator, trackers and engine ([`vm_tiering`]), the operator API's
//! side ([`controller`]), the command line ([`cli`]), stopping on the
//! operator's signals ([`stop_signals`], [`graceful_stop`]) and what a
//! run reports ([`guest_state`], [`report`], [`status`]).

pub mod acpi;
pub mod arch;
pub mod cli;
pub mod controller;
pub mod debug_corruption;
pub mod devices;
pub mod graceful_stop;
pub mod guest_state;
pub mod host_limits;
pub mod linux;
pub mod output_check;
pub mod pause;
pub mod payload;
pub mod placement_check;
pub mod report;
pub mod shuffle;
pub mod status;
pub mod stop_signals;
pub mod vcpu;
pub mod vcpu_control;
pub mod vm;
pub mod vm_error;
pub mod vm_linux;
pub mod vm_tiering;

/// Migration settings kept at their old path (`vmm::migration`).
pub use vm_tiering::migration;

/// An error and its causes on one line (lives in `tiering`, which the
/// engine's reports need too).
pub use tiering::error_chain;
