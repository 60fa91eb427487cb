//! The Linux side of building a VM: the platform KVM emulates (in-kernel
//! PIC, IOAPIC and local APICs, the PIT), the serial console and i8042 on
//! the port I/O bus, the boot image in guest memory, and each vCPU's CPU
//! state. Guest memory, memslots, migration, trackers and the tiering
//! engine are built by [`crate::vm`] (its tiering side by
//! [`crate::vm_tiering`]) exactly as for payload guests.

use std::sync::Arc;

use kvm_bindings::{
    KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE, KVM_MAX_CPUID_ENTRIES, kvm_irqchip,
    kvm_pit_config,
};
use kvm_ioctls::{Kvm, VcpuFd, VmFd};
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::EventFd;

use crate::acpi::{self, AcpiConfig};
use crate::arch::cpuid::{self, HostQuirks};
use crate::arch::linux_regs::{self, LinuxEntry};
use crate::arch::regs::RegsError;
use crate::devices::console::ConsoleConfig;
use crate::devices::pio_bus::{PioBus, SERIAL_IRQ};
use crate::devices::power_button::PowerButton;
use crate::devices::serial::{InputPump, SerialConsole};
use crate::linux::LinuxPlan;
use crate::linux::layout::BOOT_STACK_GPA;
use crate::vm_error::{VmError, kvm_err};

/// Where the TSS of real-mode emulation goes on Intel hosts: three pages
/// at the top of the 32-bit space, inside the MMIO hole, clear of the
/// IOAPIC and local APIC.
const KVM_TSS_ADDRESS: usize = 0xfffb_d000;
/// `KVM_PIT_SPEAKER_DUMMY`: KVM answers the speaker port (0x61) itself.
const PIT_SPEAKER_DUMMY: u32 = 1;

/// The in-kernel interrupt controllers and PIT. Must come before the
/// vCPUs, whose local APICs KVM creates with them.
pub(crate) fn create_platform(vm_fd: &VmFd) -> Result<(), VmError> {
    vm_fd
        .set_tss_address(KVM_TSS_ADDRESS)
        .map_err(kvm_err("setting the TSS address"))?;
    vm_fd
        .create_irq_chip()
        .map_err(kvm_err("creating the in-kernel irqchip"))?;
    mask_pics(vm_fd)?;
    let pit = kvm_pit_config {
        flags: PIT_SPEAKER_DUMMY,
        ..Default::default()
    };
    vm_fd
        .create_pit2(pit)
        .map_err(kvm_err("creating the in-kernel PIT"))
}

/// Masks every line of both 8259 PICs. The FADT says hardware-reduced
/// ACPI, so Linux never programs the PICs, while KVM's default routing
/// sends ISA IRQs to them as well as to the IOAPIC and the boot CPU's
/// LINT0 accepts them: an unprogrammed PIC (vector base 0) would turn
/// serial IRQ 4 into exception vector 4. Masked, they deliver nothing.
fn mask_pics(vm_fd: &VmFd) -> Result<(), VmError> {
    for chip_id in [KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE] {
        let mut chip = kvm_irqchip {
            chip_id,
            ..Default::default()
        };
        vm_fd
            .get_irqchip(&mut chip)
            .map_err(kvm_err("reading a PIC's state"))?;
        // For the PIC chip ids KVM fills the union's `pic` member.
        chip.chip.pic.imr = 0xff;
        vm_fd.set_irqchip(&chip).map_err(kvm_err("masking a PIC"))?;
    }
    Ok(())
}

/// A Linux guest's devices and console wiring, kept by the VM.
#[derive(Debug)]
pub(crate) struct LinuxDevices {
    /// The port I/O bus the vCPUs' exits go to.
    pub bus: Arc<PioBus>,
    /// Whether stdin feeds the console while the VM runs.
    pub stdin: bool,
    /// The ACPI power button (a graceful stop presses it).
    pub power_button: PowerButton,
}

impl LinuxDevices {
    /// The serial console (COM1, IRQ 4 through an irqfd), the i8042 and
    /// the power button (IRQ 5 through an irqfd).
    pub fn new(vm_fd: &VmFd, console: &ConsoleConfig) -> Result<Self, VmError> {
        let irq = EventFd::new(libc::EFD_NONBLOCK).map_err(VmError::Console)?;
        vm_fd
            .register_irqfd(&irq, SERIAL_IRQ)
            .map_err(kvm_err("registering the serial IRQ"))?;
        let out = console.output.open().map_err(VmError::Console)?;
        Ok(LinuxDevices {
            bus: Arc::new(PioBus::new(SerialConsole::new(irq, out))),
            stdin: console.stdin,
            power_button: PowerButton::new(vm_fd)?,
        })
    }

    /// Starts feeding stdin to the console, if asked to; the pump stops
    /// when dropped.
    pub fn start_input(&self) -> Result<Option<InputPump>, VmError> {
        if !self.stdin {
            return Ok(None);
        }
        InputPump::start(self.bus.serial().clone(), libc::STDIN_FILENO)
            .map(Some)
            .map_err(VmError::Thread)
    }
}

/// Writes the boot image into `mem` and says how the bootstrap vCPU
/// enters it.
pub(crate) fn write_boot(
    plan: &LinuxPlan,
    mem: &GuestMemoryMmap,
    vcpus: u32,
) -> Result<LinuxEntry, VmError> {
    // The RSDP goes to the kernel as `boot_params.acpi_rsdp_addr`
    // (bzImage) or `hvm_start_info.rsdp_paddr` (PVH); its MADT is how an
    // SMP guest finds its CPUs (the Debian cloud kernel has no MP-table
    // parser).
    let rsdp = acpi::write_tables(mem, &AcpiConfig::new(vcpus))?;
    Ok(plan.write(mem, Some(rsdp.0))?)
}

/// Sets up every vCPU's CPU state: vCPU 0 (the bootstrap processor)
/// enters the kernel at `entry`; the others wait for the kernel's
/// INIT/SIPI in KVM.
pub(crate) fn setup_vcpus(kvm: &Kvm, fds: &[VcpuFd], entry: &LinuxEntry) -> Result<(), VmError> {
    let supported = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .map_err(RegsError::SupportedCpuid)?;
    let quirks = HostQuirks::detect();
    let count = fds.len() as u32;
    for (index, fd) in (0..count).zip(fds) {
        let cpuid = cpuid::linux_cpuid(&supported, index, count, quirks)?;
        let bsp_entry = (index == 0).then_some(entry);
        linux_regs::setup_linux_vcpu(fd, &cpuid, bsp_entry, BOOT_STACK_GPA)?;
    }
    Ok(())
}
