//! Register state of a vCPU entering a payload: long mode with paging, CPL3,
//! IOPL 3 (so `out` to the hypercall port reaches the VMM), interrupts off,
//! SSE enabled; no IDT, so any exception escalates to a triple fault.

use kvm_bindings::{CpuId, KVM_MAX_CPUID_ENTRIES, kvm_regs};
use kvm_ioctls::{Kvm, VcpuFd};
use thiserror::Error;

use super::gdt;
use super::paging::PageTables;

const CR0_PE: u64 = 1;
const CR0_MP: u64 = 1 << 1;
const CR0_ET: u64 = 1 << 4;
const CR0_NE: u64 = 1 << 5;
const CR0_WP: u64 = 1 << 16;
const CR0_PG: u64 = 1 << 31;
const CR4_PAE: u64 = 1 << 5;
const CR4_OSFXSR: u64 = 1 << 9;
const CR4_OSXMMEXCPT: u64 = 1 << 10;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;
const RFLAGS_RESERVED: u64 = 1 << 1;
const RFLAGS_IOPL3: u64 = 3 << 12;
const CPUID_HYPERVISOR_BIT: u32 = 1 << 31;

/// Errors setting up vCPU registers.
#[derive(Debug, Error)]
pub enum RegsError {
    /// `KVM_GET_SUPPORTED_CPUID` failed.
    #[error("reading supported CPUID")]
    SupportedCpuid(#[source] kvm_ioctls::Error),
    /// A register ioctl failed.
    #[error("setting {what}")]
    Set {
        /// Which register set.
        what: &'static str,
        /// The ioctl error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// A CPUID or MSR list too long for KVM's structures.
    #[error("too many {0} entries")]
    TooManyEntries(&'static str),
    /// KVM refused to set a boot MSR.
    #[error("KVM refused to set MSR {0:#x}")]
    MsrRefused(u32),
}

/// What each vCPU receives at entry.
#[derive(Clone, Copy, Debug)]
pub struct EntryState {
    /// Entry point (guest-virtual = guest-physical).
    pub rip: u64,
    /// Top of this vCPU's stack.
    pub stack_top: u64,
    /// This vCPU's index.
    pub vcpu_index: u64,
    /// Number of vCPUs.
    pub vcpu_count: u64,
    /// Guest-physical address of the boot info block.
    pub boot_info: u64,
}

/// The CPUID the host supports, with the hypervisor bit set, for every vCPU.
pub fn guest_cpuid(kvm: &Kvm) -> Result<CpuId, RegsError> {
    let mut cpuid = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .map_err(RegsError::SupportedCpuid)?;
    for entry in cpuid.as_mut_slice() {
        if entry.function == 1 {
            entry.ecx |= CPUID_HYPERVISOR_BIT;
        }
    }
    Ok(cpuid)
}

/// Puts `vcpu` in the payload entry state.
pub fn setup_payload_vcpu(
    vcpu: &VcpuFd,
    cpuid: &CpuId,
    entry: &EntryState,
) -> Result<(), RegsError> {
    let set = |what| move |source| RegsError::Set { what, source };
    vcpu.set_cpuid2(cpuid).map_err(set("CPUID"))?;

    let mut sregs = vcpu.get_sregs().map_err(set("special registers (get)"))?;
    let data = gdt::user_data();
    sregs.cs = gdt::user_code();
    sregs.ds = data;
    sregs.es = data;
    sregs.fs = data;
    sregs.gs = data;
    sregs.ss = data;
    sregs.tr = gdt::task_register();
    sregs.ldt = gdt::ldt();
    sregs.gdt.base = gdt::base();
    sregs.gdt.limit = gdt::limit();
    sregs.idt.base = 0;
    sregs.idt.limit = 0;
    sregs.cr3 = PageTables::base();
    sregs.cr4 = CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT;
    sregs.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_PG;
    sregs.efer = EFER_LME | EFER_LMA;
    vcpu.set_sregs(&sregs).map_err(set("special registers"))?;

    let regs = kvm_regs {
        rip: entry.rip,
        // As if `call` had pushed a return address: SysV stack alignment.
        rsp: entry.stack_top - 8,
        rdi: entry.vcpu_index,
        rsi: entry.vcpu_count,
        rdx: entry.boot_info,
        rflags: RFLAGS_RESERVED | RFLAGS_IOPL3,
        ..Default::default()
    };
    vcpu.set_regs(&regs).map_err(set("general registers"))?;
    Ok(())
}
