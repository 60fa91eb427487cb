//! The ACPI power button of Linux guests, as a hardware-reduced platform
//! has one: a Generic Event Device (GED, `ACPI0013`) whose interrupt is
//! ISA IRQ [`POWER_BUTTON_IRQ`], and a control-method power button
//! device (`PNP0C0C`). The DSDT's `_EVT` method of the GED notifies the
//! button with 0x80 ("pressed"); Linux's `button` driver then reports
//! `KEY_POWER`, and the guest's init shuts down (ACPI 6.5 sections 5.6.9
//! and 4.8.2.2.1.2). Pressing the button pulses the IRQ through an irqfd:
//! the guest sees one edge, nothing to acknowledge.

use std::io;
use std::sync::Arc;

use kvm_ioctls::VmFd;
use thiserror::Error;
use vmm_sys_util::eventfd::EventFd;

/// The GED's ISA IRQ (edge-triggered, active-high): a line nothing else
/// uses (COM1 has 4, the i8042 1, the PIT 0).
pub const POWER_BUTTON_IRQ: u8 = 5;

/// Why the power button could not be wired.
#[derive(Debug, Error)]
pub enum PowerButtonError {
    /// The eventfd behind its IRQ could not be made.
    #[error("creating the power button's eventfd")]
    EventFd(#[source] io::Error),
    /// KVM refused the irqfd.
    #[error("registering the power button's IRQ")]
    Irqfd(#[source] kvm_ioctls::Error),
}

/// A guest's power button; clones press the same button.
#[derive(Clone, Debug)]
pub struct PowerButton {
    irq: Arc<EventFd>,
}

impl PowerButton {
    /// Wires the button's IRQ into `vm_fd`'s in-kernel interrupt
    /// controllers.
    pub fn new(vm_fd: &VmFd) -> Result<Self, PowerButtonError> {
        let irq = EventFd::new(libc::EFD_NONBLOCK).map_err(PowerButtonError::EventFd)?;
        vm_fd
            .register_irqfd(&irq, u32::from(POWER_BUTTON_IRQ))
            .map_err(PowerButtonError::Irqfd)?;
        Ok(PowerButton { irq: Arc::new(irq) })
    }

    /// Presses the button once.
    pub fn press(&self) -> io::Result<()> {
        self.irq.write(1)
    }
}
