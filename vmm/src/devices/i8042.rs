//! The i8042 keyboard controller, only for what Linux uses it for here:
//! the CPU reset command (0xfe to port 0x64), its reboot fallback. A reset
//! ends the VM (tiervisor does not reboot guests).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use vm_superio::{I8042Device, Trigger};

/// Raised by the controller's reset command.
#[derive(Debug, Default)]
pub struct ResetFlag(Arc<AtomicBool>);

impl Trigger for ResetFlag {
    type E = Infallible;

    fn trigger(&self) -> Result<(), Infallible> {
        self.0.store(true, Ordering::Release);
        Ok(())
    }
}

/// The controller and whether the guest asked for a reset.
#[derive(Debug)]
pub struct I8042 {
    device: I8042Device<ResetFlag>,
    reset: Arc<AtomicBool>,
}

impl Default for I8042 {
    fn default() -> Self {
        Self::new()
    }
}

impl I8042 {
    /// A controller with no reset requested.
    pub fn new() -> Self {
        let reset = Arc::new(AtomicBool::new(false));
        I8042 {
            device: I8042Device::new(ResetFlag(reset.clone())),
            reset,
        }
    }

    /// The guest reads the register at `offset` from port 0x60.
    pub fn read(&mut self, offset: u8) -> u8 {
        self.device.read(offset)
    }

    /// The guest writes `value` at `offset` from port 0x60; returns whether
    /// the guest has asked for a CPU reset.
    pub fn write(&mut self, offset: u8, value: u8) -> bool {
        let _ = self.device.write(offset, value);
        self.reset.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reset_command_on_the_command_port_resets() {
        let mut kbd = I8042::new();
        assert!(!kbd.write(0, 0xfe), "0xfe on the data port is data");
        assert!(!kbd.write(4, 0xaa), "another command");
        assert!(kbd.write(4, 0xfe));
        assert_eq!(kbd.read(4), 0);
    }
}
