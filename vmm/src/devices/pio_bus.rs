//! The port I/O a Linux guest's vCPU exits bring to the VMM: COM1
//! (0x3f8..=0x3ff), the i8042 (0x60, 0x64) and the ACPI sleep control and
//! status registers (0x600, 0x601). The PIC, PIT and speaker
//! port live in KVM. Every other port reads as all ones (nothing there)
//! and ignores writes, as on a PC with the slot empty; an access of an
//! unusual width to a device port is treated the same. Nothing a guest
//! does here can fail the VMM.

use std::sync::{Mutex, PoisonError};

use super::acpi_sleep::{self, SLEEP_CONTROL_PORT, SLEEP_STATUS_PORT};
use super::i8042::I8042;
use super::serial::SerialConsole;

/// COM1's first port.
pub const SERIAL_BASE: u16 = 0x3f8;
/// COM1's ports.
pub const SERIAL_PORTS: u16 = 8;
/// The i8042's data port.
pub const I8042_DATA: u16 = 0x60;
/// The i8042's command/status port.
pub const I8042_COMMAND: u16 = 0x64;
/// IRQ line of COM1.
pub const SERIAL_IRQ: u32 = 4;

/// What the vCPU does after a port write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PioOutcome {
    /// Resume the guest.
    Continue,
    /// The guest asked for a CPU reset: end the VM.
    Reset,
    /// The guest entered ACPI S5: end the VM.
    PowerOff,
}

/// The Linux guest's port devices.
#[derive(Debug)]
pub struct PioBus {
    serial: SerialConsole,
    i8042: Mutex<I8042>,
}

enum Device {
    Serial(u8),
    I8042(u8),
    SleepControl,
    SleepStatus,
    None,
}

fn device(port: u16, width: usize) -> Device {
    if width != 1 {
        return Device::None;
    }
    match port {
        p if (SERIAL_BASE..SERIAL_BASE + SERIAL_PORTS).contains(&p) => {
            Device::Serial((p - SERIAL_BASE) as u8)
        }
        I8042_DATA | I8042_COMMAND => Device::I8042((port - I8042_DATA) as u8),
        SLEEP_CONTROL_PORT => Device::SleepControl,
        SLEEP_STATUS_PORT => Device::SleepStatus,
        _ => Device::None,
    }
}

impl PioBus {
    /// A bus with `serial` at COM1 and a fresh i8042.
    pub fn new(serial: SerialConsole) -> Self {
        PioBus {
            serial,
            i8042: Mutex::new(I8042::new()),
        }
    }

    /// The serial console.
    pub fn serial(&self) -> &SerialConsole {
        &self.serial
    }

    fn i8042(&self) -> std::sync::MutexGuard<'_, I8042> {
        self.i8042.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A guest `in` of `data.len()` bytes from `port`.
    pub fn read(&self, port: u16, data: &mut [u8]) {
        let value = match device(port, data.len()) {
            Device::Serial(offset) => self.serial.read(offset),
            Device::I8042(offset) => self.i8042().read(offset),
            // Nothing to report: the guest never sleeps, so never wakes.
            Device::SleepControl | Device::SleepStatus => 0,
            Device::None => {
                data.fill(0xff);
                return;
            }
        };
        data[0] = value;
    }

    /// A guest `out` of `data` to `port`.
    pub fn write(&self, port: u16, data: &[u8]) -> PioOutcome {
        match device(port, data.len()) {
            Device::Serial(offset) => self.serial.write(offset, data[0]),
            Device::I8042(offset) => {
                if self.i8042().write(offset, data[0]) {
                    return PioOutcome::Reset;
                }
            }
            Device::SleepControl if acpi_sleep::is_power_off(data[0]) => {
                return PioOutcome::PowerOff;
            }
            // Clearing WAK_STS, or a sleep state the DSDT does not offer.
            Device::SleepControl | Device::SleepStatus | Device::None => {}
        }
        PioOutcome::Continue
    }
}

#[cfg(test)]
mod tests {
    use vmm_sys_util::eventfd::EventFd;

    use super::*;
    use crate::devices::console::{ConsoleBuffer, ConsoleOutput};

    fn bus() -> (PioBus, ConsoleBuffer) {
        let buffer = ConsoleBuffer::new();
        let out = ConsoleOutput::Buffer(buffer.clone()).open().unwrap();
        let irq = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        (PioBus::new(SerialConsole::new(irq, out)), buffer)
    }

    #[test]
    fn com1_writes_reach_the_console() {
        let (bus, buffer) = bus();
        for b in b"ok\n" {
            assert_eq!(bus.write(0x3f8, &[*b]), PioOutcome::Continue);
        }
        assert_eq!(buffer.text(), "ok\n");
        // LSR: transmitter empty.
        let mut lsr = [0];
        bus.read(0x3fd, &mut lsr);
        assert_ne!(lsr[0] & 0x20, 0);
    }

    #[test]
    fn unclaimed_ports_read_all_ones_and_ignore_writes() {
        let (bus, buffer) = bus();
        for port in [0x0, 0x80, 0x2f8, 0x3f7, 0x400, 0xcf8, 0xffff] {
            for width in [1, 2, 4] {
                let mut data = vec![0u8; width];
                bus.read(port, &mut data);
                assert!(data.iter().all(|&b| b == 0xff), "{port:#x}/{width}");
                assert_eq!(bus.write(port, &data), PioOutcome::Continue);
            }
        }
        // A 4-byte access to COM1 is not a UART access.
        let mut wide = [0u8; 4];
        bus.read(0x3f8, &mut wide);
        assert_eq!(wide, [0xff; 4]);
        assert_eq!(bus.write(0x3f8, b"abcd"), PioOutcome::Continue);
        assert!(buffer.contents().is_empty());
        // Empty accesses (KVM never sends them) are harmless too.
        bus.read(0x3f8, &mut []);
        assert_eq!(bus.write(0x64, &[]), PioOutcome::Continue);
    }

    #[test]
    fn acpi_s5_powers_off_and_other_sleep_writes_do_not() {
        let (bus, _) = bus();
        // ACPICA clears WAK_STS first, then writes SLP_TYP(5) | SLP_EN.
        assert_eq!(bus.write(0x601, &[0x80]), PioOutcome::Continue);
        assert_eq!(bus.write(0x600, &[5 << 2]), PioOutcome::Continue);
        assert_eq!(bus.write(0x600, &[(3 << 2) | 0x20]), PioOutcome::Continue);
        assert_eq!(bus.write(0x600, &[0x34, 0, 0, 0]), PioOutcome::Continue);
        assert_eq!(bus.write(0x600, &[0x34]), PioOutcome::PowerOff);
        let mut status = [0xff];
        bus.read(0x601, &mut status);
        assert_eq!(status, [0]);
    }

    #[test]
    fn the_i8042_reset_command_ends_the_vm() {
        let (bus, _) = bus();
        assert_eq!(bus.write(0x60, &[0xfe]), PioOutcome::Continue);
        assert_eq!(bus.write(0x64, &[0xfe]), PioOutcome::Reset);
    }
}
