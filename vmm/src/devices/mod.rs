//! Devices the VMM emulates for its guests: the hypercall port of payload
//! guests, and for Linux guests a serial console, an i8042 (for its reset
//! line), the ACPI sleep registers (for poweroff), the ACPI power button
//! (for a graceful stop) and the port I/O bus that routes their exits.

pub mod acpi_sleep;
pub mod console;
pub mod hypercall;
pub mod i8042;
pub mod pio_bus;
pub mod power_button;
pub mod serial;
