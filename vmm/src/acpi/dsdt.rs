//! The Differentiated System Description Table: AML naming the ISA devices
//! the guest cannot discover by itself, with the ports and IRQs they use.
//!
//! Hardware-reduced Linux has no legacy PIC and so does not pre-map ISA
//! IRQs 0-15 onto I/O APIC pins (`nr_legacy_irqs()` is 0): a device's
//! interrupt is mapped when the ACPI PnP layer reads its `_CRS`. So the
//! 16550 (8250_pnp takes over the probed ttyS0 and gets IRQ 4) and the
//! i8042 (found by its PnP ID, its AUX port left alone because no PS/2
//! mouse is listed) are both here. So is `\_S5_`, the one sleep state
//! offered: with the FADT's sleep registers it lets the guest power off.
//! And the power button, the way a hardware-reduced platform signals it:
//! a control-method button device and a Generic Event Device whose
//! interrupt runs `_EVT`, which notifies the button
//! ([`crate::devices::power_button`]).

use super::AcpiError;
use super::aml::{
    ResourceTemplate, device, eisa_id, eisa_id_object, integer, method, name, notify, package,
    root_scope, string,
};
use super::sdt::Sdt;
use crate::devices::acpi_sleep::S5_SLEEP_TYPE;
use crate::devices::power_button::POWER_BUTTON_IRQ;

/// DSDT revision 2: AML integers are 64 bits.
const REVISION: u8 = 2;

/// COM1's I/O base.
pub const COM1_PORT: u16 = 0x3f8;
/// COM1's ports: a 16550 decodes 8.
pub const COM1_PORTS: u8 = 8;
/// COM1's ISA IRQ.
pub const COM1_IRQ: u8 = 4;
/// The i8042 data port.
pub const I8042_DATA_PORT: u16 = 0x60;
/// The i8042 status/command port.
pub const I8042_COMMAND_PORT: u16 = 0x64;
/// The i8042 keyboard's ISA IRQ.
pub const I8042_KBD_IRQ: u8 = 1;

/// PnP ID of a 16550A-compatible serial port.
pub const COM_HID: u32 = eisa_id(*b"PNP0501");
/// PnP ID of a PS/2 (i8042) keyboard controller.
pub const KBD_HID: u32 = eisa_id(*b"PNP0303");
/// PnP ID of a control-method power button.
pub const POWER_BUTTON_HID: u32 = eisa_id(*b"PNP0C0C");
/// ACPI ID of the Generic Event Device.
pub const GED_HID: &str = "ACPI0013";
/// Notify value of a power button press (ACPI 6.5 table 5.169).
pub const BUTTON_PRESSED: u8 = 0x80;

/// A DSDT offering S5 and describing COM1, the i8042 keyboard controller
/// and the power button under `\_SB`:
///
/// ```text
/// Name (\_S5, Package (0x04) { 0x05, Zero, Zero, Zero })
/// Scope (\_SB) {
///     Device (COM1) {
///         Name (_HID, EisaId ("PNP0501"))
///         Name (_UID, Zero)
///         Name (_CRS, ResourceTemplate () {
///             IO (Decode16, 0x03F8, 0x03F8, 0x01, 0x08)
///             IRQNoFlags () {4}
///         })
///     }
///     Device (PS2K) {
///         Name (_HID, EisaId ("PNP0303"))
///         Name (_CRS, ResourceTemplate () {
///             IO (Decode16, 0x0060, 0x0060, 0x01, 0x01)
///             IO (Decode16, 0x0064, 0x0064, 0x01, 0x01)
///             IRQNoFlags () {1}
///         })
///     }
///     Device (PWRB) {
///         Name (_HID, EisaId ("PNP0C0C"))
///         Name (_UID, Zero)
///     }
///     Device (GED0) {
///         Name (_HID, "ACPI0013")
///         Name (_UID, Zero)
///         Name (_CRS, ResourceTemplate () {
///             IRQNoFlags () {5}
///         })
///         Method (_EVT, 1, NotSerialized) {
///             Notify (\_SB.PWRB, 0x80)
///         }
///     }
/// }
/// ```
pub fn dsdt() -> Result<Vec<u8>, AcpiError> {
    let com1 = device(
        *b"COM1",
        &[
            name(*b"_HID", &eisa_id_object(COM_HID)),
            name(*b"_UID", &integer(0)),
            name(
                *b"_CRS",
                &ResourceTemplate::new()
                    .io(COM1_PORT, COM1_PORTS)
                    .irq_no_flags(COM1_IRQ)
                    .finish()?,
            ),
        ]
        .concat(),
    )?;
    let kbd = device(
        *b"PS2K",
        &[
            name(*b"_HID", &eisa_id_object(KBD_HID)),
            name(
                *b"_CRS",
                &ResourceTemplate::new()
                    .io(I8042_DATA_PORT, 1)
                    .io(I8042_COMMAND_PORT, 1)
                    .irq_no_flags(I8042_KBD_IRQ)
                    .finish()?,
            ),
        ]
        .concat(),
    )?;
    let button = device(
        *b"PWRB",
        &[
            name(*b"_HID", &eisa_id_object(POWER_BUTTON_HID)),
            name(*b"_UID", &integer(0)),
        ]
        .concat(),
    )?;
    // The GED has one event, so `_EVT` need not look at its argument (the
    // GSI that fired).
    let ged = device(
        *b"GED0",
        &[
            name(*b"_HID", &string(GED_HID)),
            name(*b"_UID", &integer(0)),
            name(
                *b"_CRS",
                &ResourceTemplate::new()
                    .irq_no_flags(POWER_BUTTON_IRQ)
                    .finish()?,
            ),
            method(*b"_EVT", 1, &notify(*b"_SB_", *b"PWRB", BUTTON_PRESSED))?,
        ]
        .concat(),
    )?;
    // SLP_TYPa, SLP_TYPb and two reserved values, as firmware writes it;
    // hardware-reduced ACPI only uses SLP_TYPa.
    let s5 = package(&[
        integer(u64::from(S5_SLEEP_TYPE)),
        integer(0),
        integer(0),
        integer(0),
    ])?;
    let mut t = Sdt::new(*b"DSDT", REVISION);
    t.bytes(&name(*b"_S5_", &s5));
    t.bytes(&root_scope(*b"_SB_", &[com1, kbd, button, ged].concat())?);
    t.finish()
}
