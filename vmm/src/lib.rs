//! tiervisor's VMM: KVM VMs whose guest RAM lives on tiered host memory.
//!
//! This crate owns the VM lifecycle: CPU state ([`arch`]), payload images
//! and boot ([`payload`]), Linux kernels and their boot ([`linux`],
//! [`vm_linux`]), devices ([`devices`]), vCPU threads ([`vcpu`]),
//! pausing and stopping them ([`pause`], [`vcpu_control`]), the VM
//! ([`vm`], [`vm_engine`]), the operator API's side ([`controller`]), the
//! command line ([`cli`]) and what a run reports ([`guest_state`],
//! [`report`], [`status`]).

pub mod acpi;
pub mod arch;
pub mod cli;
pub mod controller;
pub mod devices;
pub mod guest_state;
pub mod linux;
pub mod migration;
pub mod pause;
pub mod payload;
pub mod report;
pub mod shuffle;
pub mod status;
pub mod vcpu;
pub mod vcpu_control;
pub mod vm;
pub mod vm_engine;
pub mod vm_linux;
pub mod vm_trackers;

/// An error and its causes on one line, for command-line reports.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
