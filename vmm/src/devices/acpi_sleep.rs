//! The hardware-reduced ACPI sleep registers (ACPI 6.5 section 4.8.3.7):
//! a sleep control register the guest writes `SLP_TYPx` and `SLP_EN` to,
//! and a sleep status register it clears before. tiervisor offers one
//! sleep state, S5 (soft off), so that a Linux guest's `poweroff` ends the
//! VM instead of halting its CPUs forever.

/// Port of the sleep control register (FADT `SLEEP_CONTROL_REG`).
pub const SLEEP_CONTROL_PORT: u16 = 0x600;
/// Port of the sleep status register (FADT `SLEEP_STATUS_REG`).
pub const SLEEP_STATUS_PORT: u16 = 0x601;
/// The `SLP_TYP` value of S5 in the DSDT's `\_S5_` package.
pub const S5_SLEEP_TYPE: u8 = 5;

/// `SLP_EN`: bit 5 of the sleep control register.
const SLEEP_ENABLE: u8 = 1 << 5;
/// `SLP_TYPx`: bits 2..=4 of the sleep control register.
const SLEEP_TYPE_SHIFT: u8 = 2;
const SLEEP_TYPE_MASK: u8 = 0b111 << SLEEP_TYPE_SHIFT;

/// Whether a byte written to the sleep control register asks for S5:
/// `SLP_EN` set with the S5 sleep type. Any other sleep type is ignored,
/// as the DSDT offers no other state.
pub fn is_power_off(control: u8) -> bool {
    control & SLEEP_ENABLE != 0 && (control & SLEEP_TYPE_MASK) >> SLEEP_TYPE_SHIFT == S5_SLEEP_TYPE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_slp_en_with_the_s5_type_powers_off() {
        // What ACPICA's acpi_hw_extended_sleep writes for S5.
        assert!(is_power_off((S5_SLEEP_TYPE << 2) | 0x20));
        // The type without SLP_EN, SLP_EN with another type, WAK_STS.
        assert!(!is_power_off(S5_SLEEP_TYPE << 2));
        assert!(!is_power_off((3 << 2) | 0x20));
        assert!(!is_power_off(0x80));
        assert!(!is_power_off(0));
    }
}
