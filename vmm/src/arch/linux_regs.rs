//! Register state of a Linux guest's vCPUs. Every vCPU gets its CPUID,
//! the boot MSRs, an initialised FPU and a local APIC with LINT0 as ExtINT
//! (the PIC's output) and LINT1 as NMI. The bootstrap vCPU also gets the
//! kernel's entry state at CPL0: long mode with identity paging for the
//! 64-bit boot protocol, or 32-bit protected mode without paging for PVH.
//! The others stay as KVM created them: with the in-kernel irqchip an
//! application processor waits in `KVM_MP_STATE_UNINITIALIZED` for the
//! kernel's INIT/SIPI.

use kvm_bindings::{CpuId, kvm_fpu, kvm_regs};
use kvm_ioctls::VcpuFd;

use super::linux_tables::{self, BOOT_CS, BOOT_DS, BOOT_TSS, CodeMode};
use super::msrs;
use super::regs::RegsError;

const CR0_PE: u64 = 1;
const CR0_ET: u64 = 1 << 4;
const CR0_PG: u64 = 1 << 31;
const CR4_PAE: u64 = 1 << 5;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;
const RFLAGS_RESERVED: u64 = 1 << 1;
/// x87 control word after `FNINIT`.
const FPU_FCW: u16 = 0x37f;
/// MXCSR after reset: all SIMD exceptions masked.
const MXCSR_DEFAULT: u32 = 0x1f80;
/// Local APIC registers: LVT LINT0 and LINT1.
const APIC_LVT_LINT0: usize = 0x350;
const APIC_LVT_LINT1: usize = 0x360;
/// LVT delivery modes.
const APIC_MODE_NMI: u32 = 0x4;
const APIC_MODE_EXTINT: u32 = 0x7;

/// Where and how the bootstrap vCPU enters the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinuxEntry {
    /// 64-bit boot protocol: long mode, RIP = entry, RSI = the zero page.
    Long64 {
        /// The 64-bit entry point.
        rip: u64,
        /// The zero page.
        zero_page: u64,
        /// The PML4 of the identity tables.
        page_tables: u64,
        /// The boot GDT.
        gdt: u64,
    },
    /// PVH: 32-bit protected mode, paging off, EIP = entry, EBX = the start
    /// info.
    Pvh {
        /// The PVH entry point.
        eip: u64,
        /// The `hvm_start_info`.
        start_info: u64,
        /// The boot GDT.
        gdt: u64,
    },
}

fn set(what: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> RegsError {
    move |source| RegsError::Set { what, source }
}

/// Sets up `vcpu` for a Linux guest: CPUID, MSRs, FPU and local APIC for
/// every vCPU; the entry state too for the bootstrap vCPU (`entry`).
/// KVM's in-kernel irqchip must exist already.
pub fn setup_linux_vcpu(
    vcpu: &VcpuFd,
    cpuid: &CpuId,
    entry: Option<&LinuxEntry>,
    boot_stack: u64,
) -> Result<(), RegsError> {
    vcpu.set_cpuid2(cpuid).map_err(set("CPUID"))?;
    let msrs = msrs::boot_msrs()?;
    let written = vcpu.set_msrs(&msrs).map_err(set("MSRs"))?;
    if let Some(refused) = msrs.as_slice().get(written) {
        return Err(RegsError::MsrRefused(refused.index));
    }
    let fpu = kvm_fpu {
        fcw: FPU_FCW,
        mxcsr: MXCSR_DEFAULT,
        ..Default::default()
    };
    vcpu.set_fpu(&fpu).map_err(set("FPU"))?;
    set_lint_modes(vcpu)?;
    match entry {
        Some(e) => set_entry_state(vcpu, e, boot_stack),
        None => Ok(()),
    }
}

/// LINT0 delivers the PIC's interrupts (ExtINT), LINT1 NMIs, as the BIOS
/// would set them up.
fn set_lint_modes(vcpu: &VcpuFd) -> Result<(), RegsError> {
    let mut lapic = vcpu.get_lapic().map_err(set("local APIC (get)"))?;
    for (reg, mode) in [
        (APIC_LVT_LINT0, APIC_MODE_EXTINT),
        (APIC_LVT_LINT1, APIC_MODE_NMI),
    ] {
        let raw: Vec<u8> = lapic.regs[reg..reg + 4].iter().map(|&b| b as u8).collect();
        let value = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
        let value = (value & !0x700) | (mode << 8);
        for (dst, b) in lapic.regs[reg..reg + 4].iter_mut().zip(value.to_le_bytes()) {
            *dst = b as libc::c_char;
        }
    }
    vcpu.set_lapic(&lapic).map_err(set("local APIC"))
}

fn set_entry_state(vcpu: &VcpuFd, entry: &LinuxEntry, boot_stack: u64) -> Result<(), RegsError> {
    let mut sregs = vcpu.get_sregs().map_err(set("special registers (get)"))?;
    let (mode, gdt_base) = match *entry {
        LinuxEntry::Long64 { gdt, .. } => (CodeMode::Long, gdt),
        LinuxEntry::Pvh { gdt, .. } => (CodeMode::Protected32, gdt),
    };
    let gdt = linux_tables::gdt(mode);
    let data = linux_tables::segment(&gdt, BOOT_DS);
    sregs.cs = linux_tables::segment(&gdt, BOOT_CS);
    sregs.ds = data;
    sregs.es = data;
    sregs.fs = data;
    sregs.gs = data;
    sregs.ss = data;
    sregs.tr = linux_tables::segment(&gdt, BOOT_TSS);
    sregs.gdt.base = gdt_base;
    sregs.gdt.limit = linux_tables::gdt_limit();
    sregs.idt.base = 0;
    sregs.idt.limit = 0;
    let mut regs = kvm_regs {
        rflags: RFLAGS_RESERVED,
        rsp: boot_stack,
        rbp: boot_stack,
        ..Default::default()
    };
    match *entry {
        LinuxEntry::Long64 {
            rip,
            zero_page,
            page_tables,
            ..
        } => {
            sregs.cr3 = page_tables;
            sregs.cr4 |= CR4_PAE;
            sregs.cr0 |= CR0_PE | CR0_ET | CR0_PG;
            sregs.efer |= EFER_LME | EFER_LMA;
            regs.rip = rip;
            regs.rsi = zero_page;
        }
        LinuxEntry::Pvh {
            eip, start_info, ..
        } => {
            sregs.cr0 = (sregs.cr0 | CR0_PE | CR0_ET) & !CR0_PG;
            sregs.cr4 = 0;
            sregs.efer = 0;
            regs.rip = eip;
            regs.rbx = start_info;
        }
    }
    vcpu.set_sregs(&sregs).map_err(set("special registers"))?;
    vcpu.set_regs(&regs).map_err(set("general registers"))
}

#[cfg(test)]
mod tests {
    use kvm_bindings::{KVM_MAX_CPUID_ENTRIES, Msrs, kvm_msr_entry};
    use kvm_ioctls::Kvm;

    use super::*;

    fn lvt(lapic: &kvm_bindings::kvm_lapic_state, reg: usize) -> u32 {
        let b: Vec<u8> = lapic.regs[reg..reg + 4].iter().map(|&b| b as u8).collect();
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// A VM with the in-kernel irqchip and `n` vCPUs, as a Linux guest has.
    fn vcpus(n: u64) -> (kvm_ioctls::VmFd, Vec<VcpuFd>, CpuId) {
        let kvm = Kvm::new().unwrap();
        let vm = kvm.create_vm().unwrap();
        vm.create_irq_chip().unwrap();
        let fds = (0..n).map(|i| vm.create_vcpu(i).unwrap()).collect();
        let cpuid = kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES).unwrap();
        (vm, fds, cpuid)
    }

    #[test]
    fn every_vcpu_gets_msrs_fpu_and_lint_modes_the_bsp_its_entry() {
        let (_vm, fds, cpuid) = vcpus(2);
        let entry = LinuxEntry::Long64 {
            rip: 0x100_0200,
            zero_page: 0x7000,
            page_tables: 0x9000,
            gdt: 0x500,
        };
        setup_linux_vcpu(&fds[0], &cpuid, Some(&entry), 0x8ff0).unwrap();
        setup_linux_vcpu(&fds[1], &cpuid, None, 0x8ff0).unwrap();
        for fd in &fds {
            let lapic = fd.get_lapic().unwrap();
            assert_eq!((lvt(&lapic, APIC_LVT_LINT0) >> 8) & 7, APIC_MODE_EXTINT);
            assert_eq!((lvt(&lapic, APIC_LVT_LINT1) >> 8) & 7, APIC_MODE_NMI);
            assert_eq!(fd.get_fpu().unwrap().fcw, FPU_FCW);
            // KVM_GET_FPU leaves MXCSR out on some hosts (PVM); the XSAVE
            // image's legacy area has it at byte 24.
            let xsave = fd.get_xsave().unwrap();
            assert_eq!(xsave.region[6], MXCSR_DEFAULT);
            let mut misc = Msrs::from_entries(&[kvm_msr_entry {
                index: 0x1a0,
                ..Default::default()
            }])
            .unwrap();
            assert_eq!(fd.get_msrs(&mut misc).unwrap(), 1);
            assert_eq!(misc.as_slice()[0].data & 1, 1, "fast strings");
        }
        let (regs, sregs) = (fds[0].get_regs().unwrap(), fds[0].get_sregs().unwrap());
        assert_eq!((regs.rip, regs.rsi), (0x100_0200, 0x7000));
        assert_eq!(sregs.cs.selector, BOOT_CS);
        assert_eq!((sregs.cs.l, sregs.cs.dpl), (1, 0), "64-bit, CPL0");
        assert_eq!(sregs.cr3, 0x9000);
        assert_ne!(sregs.efer & EFER_LMA, 0);
        assert_ne!(sregs.cr0 & CR0_PG, 0);
        // The application processor waits for INIT/SIPI in KVM.
        let mp = fds[1].get_mp_state().unwrap();
        assert_eq!(mp.mp_state, kvm_bindings::KVM_MP_STATE_UNINITIALIZED);
        assert_ne!(fds[1].get_regs().unwrap().rip, 0x100_0200);
    }

    #[test]
    fn a_pvh_entry_is_32_bit_protected_mode_without_paging() {
        let (_vm, fds, cpuid) = vcpus(1);
        let entry = LinuxEntry::Pvh {
            eip: 0x100_0850,
            start_info: 0x6000,
            gdt: 0x500,
        };
        setup_linux_vcpu(&fds[0], &cpuid, Some(&entry), 0x8ff0).unwrap();
        let (regs, sregs) = (fds[0].get_regs().unwrap(), fds[0].get_sregs().unwrap());
        assert_eq!((regs.rip, regs.rbx), (0x100_0850, 0x6000));
        assert_eq!((sregs.cs.l, sregs.cs.db), (0, 1));
        assert_eq!(sregs.cr0 & (CR0_PE | CR0_PG), CR0_PE);
        assert_eq!((sregs.cr4, sregs.efer), (0, 0));
    }
}
