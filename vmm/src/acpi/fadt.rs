//! The Fixed ACPI Description Table: which ACPI hardware model the guest
//! has (here: hardware-reduced), its legacy devices, how to reset it, and
//! where the DSDT is.
//!
//! Why hardware-reduced: a full ("PC") ACPI platform must have PM1 event
//! and control blocks and an SCI (ACPI 6.5 section 4.8); tiervisor
//! emulates none of them, so a full FADT would send ACPICA to registers
//! that are not there. With
//! HW_REDUCED_ACPI set, Linux (like under Cloud Hypervisor and Firecracker)
//! expects no PM registers, PM timer, GPEs or SCI, so every field about
//! them is 0. The price, on x86 Linux (`acpi_generic_reduced_hw_init`): it
//! swaps the 8259 PIC driver for a null one, never initialises or masks
//! the PIC, and does not set up the PIT as its tick (LAPIC timer and TSC
//! or kvm-clock instead; TSC calibration may still poll the PIT). Device
//! interrupts then go through the I/O APIC only, which is why the MADT
//! and the DSDT's `_CRS` must describe them.

use vm_memory::GuestAddress;

use super::AcpiError;
use super::sdt::Sdt;
use crate::devices::acpi_sleep::{SLEEP_CONTROL_PORT, SLEEP_STATUS_PORT};

/// Bytes in an ACPI 6.x FADT (through the hypervisor vendor identity).
pub const FADT_LEN: usize = 276;

/// FADT revision 6 with minor version 5: the ACPI 6.5 layout.
const REVISION: u8 = 6;
const MINOR_REVISION: u8 = 5;

// IA-PC boot architecture flags (ACPI 6.5, table 5.11).
/// ISA-style devices (the 16550 at 0x3f8, the i8042) that are not
/// enumerated by a bus: true. Linux only uses the bit to keep PnP BIOS
/// probing; it costs nothing to be accurate.
pub const IAPC_LEGACY_DEVICES: u16 = 1 << 0;
/// The i8042 exists. Linux otherwise marks it "firmware absent" and the
/// i8042 driver skips it unless the DSDT lists it; we both set the bit and
/// list it, since the guest uses it for the keyboard-controller reset.
pub const IAPC_8042: u16 = 1 << 1;
/// No VGA: nothing is at 0xa0000 or the VGA ports, so the guest must not
/// probe them (Linux sets `legacy.no_vga`).
pub const IAPC_VGA_NOT_PRESENT: u16 = 1 << 2;
/// MSI must not be enabled: there is no PCI bus and no MSI-capable device.
/// Clear this when a PCI device with MSI lands.
pub const IAPC_MSI_NOT_SUPPORTED: u16 = 1 << 3;
/// No CMOS RTC at ports 0x70/0x71: tiervisor emulates none, and the bit
/// keeps Linux from registering the rtc_cmos device. Clear it if an RTC
/// is added.
pub const IAPC_CMOS_RTC_NOT_PRESENT: u16 = 1 << 5;

/// The boot architecture flags tiervisor's Linux platform has.
pub const IAPC_BOOT_ARCH: u16 = IAPC_LEGACY_DEVICES
    | IAPC_8042
    | IAPC_VGA_NOT_PRESENT
    | IAPC_MSI_NOT_SUPPORTED
    | IAPC_CMOS_RTC_NOT_PRESENT;

// Fixed feature flags (ACPI 6.5, table 5.10).
/// WBINVD works: required of every ACPI 2.0+ platform.
pub const FLAG_WBINVD: u32 = 1 << 0;
/// No fixed-feature power button (there is no PM1 block to signal it);
/// otherwise Linux creates an LNXPWRBN device that can never fire.
pub const FLAG_PWR_BUTTON: u32 = 1 << 4;
/// No fixed-feature sleep button, for the same reason.
pub const FLAG_SLP_BUTTON: u32 = 1 << 5;
/// RESET_REG below is valid.
pub const FLAG_RESET_REG_SUP: u32 = 1 << 10;
/// Hardware-reduced ACPI: see the module doc.
pub const FLAG_HW_REDUCED_ACPI: u32 = 1 << 20;

/// The fixed feature flags tiervisor's Linux platform has.
pub const FLAGS: u32 =
    FLAG_WBINVD | FLAG_PWR_BUTTON | FLAG_SLP_BUTTON | FLAG_RESET_REG_SUP | FLAG_HW_REDUCED_ACPI;

/// Reset register: the i8042 command port. There is no 0xcf9 reset
/// control device, and writing 0xfe to port 0x64 (pulse the CPU reset
/// line) is exactly Linux's fallback "kbd" reboot; naming it here makes
/// the default `reboot=acpi` path hit it on the first try.
pub const RESET_PORT: u16 = 0x64;
/// Value written to [`RESET_PORT`] to reset.
pub const RESET_VALUE: u8 = 0xfe;

/// C2/C3 latencies above 100/1000 us mean "not supported"; 0x0fff says so
/// for any OS that reads them (hardware-reduced Linux ignores them).
const C_STATE_UNSUPPORTED_LATENCY: u16 = 0x0fff;

/// Generic Address Structure address space: system I/O.
const GAS_SYSTEM_IO: u8 = 1;
/// Generic Address Structure access size: byte.
const GAS_ACCESS_BYTE: u8 = 1;

// Field offsets, for tests and readers of the table.
/// Offset of the 32-bit DSDT address.
pub const DSDT_OFFSET: usize = 40;
/// Offset of IAPC_BOOT_ARCH.
pub const IAPC_BOOT_ARCH_OFFSET: usize = 109;
/// Offset of the fixed feature flags.
pub const FLAGS_OFFSET: usize = 112;
/// Offset of RESET_REG.
pub const RESET_REG_OFFSET: usize = 116;
/// Offset of X_DSDT.
pub const X_DSDT_OFFSET: usize = 140;
/// Offset of SLEEP_CONTROL_REG (SLEEP_STATUS_REG follows it).
pub const SLEEP_CONTROL_REG_OFFSET: usize = 244;

/// A FADT for a hardware-reduced platform whose DSDT is at `dsdt_addr`.
pub fn fadt(dsdt_addr: GuestAddress) -> Result<Vec<u8>, AcpiError> {
    let mut t = Sdt::new(*b"FACP", REVISION);
    // FIRMWARE_CTRL: no FACS. Optional when hardware-reduced (it holds the
    // global lock and waking vector, neither of which exists here).
    t.u32(0);
    // DSDT: also the 32-bit field when the address fits, so parsers that
    // predate X_DSDT find it; ACPICA accepts both when they agree.
    debug_assert_eq!(t.len(), DSDT_OFFSET);
    t.u32(u32::try_from(dsdt_addr.0).unwrap_or(0));
    t.u8(0); // reserved
    t.u8(0); // preferred PM profile: unspecified
    // SCI_INT: 0. Hardware-reduced platforms have no SCI (the field is
    // ignored), and naming IRQ 9 would claim an interrupt nobody raises.
    t.u16(0);
    t.u32(0); // SMI_CMD: no SMM, so no ACPI enable/disable handshake
    t.u8(0).u8(0).u8(0).u8(0); // ACPI_ENABLE, ACPI_DISABLE, S4BIOS_REQ, PSTATE_CNT
    for _ in 0..8 {
        // PM1a/b event, PM1a/b control, PM2 control, PM timer, GPE0, GPE1
        // blocks: none, see the module doc.
        t.u32(0);
    }
    t.bytes(&[0; 6]); // the lengths of those blocks
    t.u8(0); // GPE1_BASE
    t.u8(0); // CST_CNT: no _CST notification
    t.u16(C_STATE_UNSUPPORTED_LATENCY); // P_LVL2_LAT
    t.u16(C_STATE_UNSUPPORTED_LATENCY); // P_LVL3_LAT
    t.u16(0).u16(0); // FLUSH_SIZE, FLUSH_STRIDE
    t.u8(0).u8(0); // DUTY_OFFSET, DUTY_WIDTH: no throttling
    t.u8(0).u8(0).u8(0); // DAY_ALRM, MON_ALRM, CENTURY: no RTC
    debug_assert_eq!(t.len(), IAPC_BOOT_ARCH_OFFSET);
    t.u16(IAPC_BOOT_ARCH);
    t.u8(0); // reserved
    debug_assert_eq!(t.len(), FLAGS_OFFSET);
    t.u32(FLAGS);
    debug_assert_eq!(t.len(), RESET_REG_OFFSET);
    gas_io_byte(&mut t, RESET_PORT);
    t.u8(RESET_VALUE);
    t.u16(0); // ARM_BOOT_ARCH
    t.u8(MINOR_REVISION);
    t.u64(0); // X_FIRMWARE_CTRL: no FACS
    debug_assert_eq!(t.len(), X_DSDT_OFFSET);
    t.u64(dsdt_addr.0);
    for _ in 0..8 {
        // X_PM1a/b event, X_PM1a/b control, X_PM2 control, X_PM timer,
        // X_GPE0, X_GPE1 blocks: none.
        t.bytes(&[0; 12]);
    }
    // The sleep registers: with them and the DSDT's \_S5_ the guest can
    // power itself off (Linux requires both addresses, not just control).
    debug_assert_eq!(t.len(), SLEEP_CONTROL_REG_OFFSET);
    gas_io_byte(&mut t, SLEEP_CONTROL_PORT);
    gas_io_byte(&mut t, SLEEP_STATUS_PORT);
    t.u64(0); // hypervisor vendor identity: none claimed
    debug_assert_eq!(t.len(), FADT_LEN);
    t.finish()
}

/// Appends a Generic Address Structure for one byte-wide I/O port.
fn gas_io_byte(t: &mut Sdt, port: u16) {
    t.u8(GAS_SYSTEM_IO);
    t.u8(8); // register bit width
    t.u8(0); // register bit offset
    t.u8(GAS_ACCESS_BYTE);
    t.u64(u64::from(port));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acpi::sdt::byte_sum;

    fn u32_at(b: &[u8], off: usize) -> u32 {
        u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
    }

    #[test]
    fn fields_sit_where_acpi_6_puts_them() {
        let b = fadt(GuestAddress(0xe_0200)).unwrap();
        assert_eq!(b.len(), FADT_LEN);
        assert_eq!(u32_at(&b, 4) as usize, FADT_LEN);
        assert_eq!(byte_sum(&b), 0);
        assert_eq!(&b[..4], b"FACP");
        assert_eq!(b[8], 6);
        assert_eq!(b[131], 5, "minor revision");
        assert_eq!(u32_at(&b, DSDT_OFFSET), 0xe_0200);
        assert_eq!(
            u64::from_le_bytes(b[X_DSDT_OFFSET..X_DSDT_OFFSET + 8].try_into().unwrap()),
            0xe_0200
        );
        assert_eq!(u16::from_le_bytes([b[46], b[47]]), 0, "no SCI");
        assert_eq!(
            u16::from_le_bytes([b[IAPC_BOOT_ARCH_OFFSET], b[IAPC_BOOT_ARCH_OFFSET + 1]]),
            IAPC_BOOT_ARCH
        );
        let flags = u32_at(&b, FLAGS_OFFSET);
        assert_ne!(flags & FLAG_HW_REDUCED_ACPI, 0);
        assert_ne!(flags & FLAG_RESET_REG_SUP, 0);
        // RESET_REG: system I/O, 8 bits at offset 0, byte access, port 0x64.
        assert_eq!(
            &b[RESET_REG_OFFSET..RESET_REG_OFFSET + 13],
            &[1, 8, 0, 1, 0x64, 0, 0, 0, 0, 0, 0, 0, 0xfe]
        );
        // Every PM block, 32-bit and extended, is absent.
        assert!(b[56..88].iter().all(|&x| x == 0));
        assert!(b[148..SLEEP_CONTROL_REG_OFFSET].iter().all(|&x| x == 0));
        // The sleep control and status registers: byte ports 0x600, 0x601.
        assert_eq!(
            &b[SLEEP_CONTROL_REG_OFFSET..SLEEP_CONTROL_REG_OFFSET + 24],
            &[
                1, 8, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0, 1, 8, 0, 1, 1, 6, 0, 0, 0, 0, 0, 0
            ]
        );
    }

    #[test]
    fn dsdt_above_4g_leaves_the_32_bit_field_zero() {
        let b = fadt(GuestAddress(0x1_0000_0000)).unwrap();
        assert_eq!(u32_at(&b, DSDT_OFFSET), 0);
        assert_eq!(
            u64::from_le_bytes(b[X_DSDT_OFFSET..X_DSDT_OFFSET + 8].try_into().unwrap()),
            0x1_0000_0000
        );
        assert_eq!(byte_sum(&b), 0);
    }
}
