//! Where the VMM puts a Linux guest's boot structures in low guest memory
//! (the usual places, as in Firecracker and Cloud Hypervisor), and the
//! ranges of the first megabyte that are not RAM for the guest.

/// The boot GDT (`__BOOT_CS` 0x10, `__BOOT_DS` 0x18).
pub const GDT_GPA: u64 = 0x500;
/// PVH `hvm_start_info`.
pub const START_INFO_GPA: u64 = 0x6000;
/// PVH memory map (`hvm_memmap_table_entry` array), after the start info.
pub const PVH_MEMMAP_GPA: u64 = 0x6040;
/// Most PVH memory map entries (they end before [`PVH_MODLIST_GPA`]).
pub const PVH_MEMMAP_MAX: usize = 64;
/// PVH module list (the initramfs).
pub const PVH_MODLIST_GPA: u64 = 0x6800;
/// The zero page (`struct boot_params`) of a bzImage boot.
pub const ZERO_PAGE_GPA: u64 = 0x7000;
/// Initial stack pointer (the kernel sets up its own stack at once).
pub const BOOT_STACK_GPA: u64 = 0x8ff0;
/// Identity page tables of the 64-bit entry: the PML4, a PDPT, then one
/// page directory per GiB.
pub const PAGE_TABLES_GPA: u64 = 0x9000;
/// The kernel command line.
pub const CMDLINE_GPA: u64 = 0x2_0000;
/// Room for the command line, terminating NUL included.
pub const CMDLINE_MAX: usize = 0x1_0000;
/// Start of the BIOS area that is not RAM for the guest: the extended
/// BIOS data area, VGA, option ROMs, ACPI tables and the BIOS.
pub const BIOS_HOLE_START: u64 = 0x9_fc00;
/// Start of the ACPI area (RSDP at its start, found by the legacy scan of
/// 0xE0000..0x100000), inside the BIOS hole.
pub const ACPI_START: u64 = 0xe_0000;
/// End of the BIOS hole: RAM resumes at 1 MiB.
pub const HIMEM_START: u64 = 0x10_0000;

const _: () = assert!(PVH_MEMMAP_GPA + 24 * PVH_MEMMAP_MAX as u64 <= PVH_MODLIST_GPA);
const _: () = assert!(PVH_MODLIST_GPA + 32 <= ZERO_PAGE_GPA);
const _: () = assert!(ZERO_PAGE_GPA + 4096 <= BOOT_STACK_GPA);
const _: () = assert!(BOOT_STACK_GPA < PAGE_TABLES_GPA);
// PML4 + PDPT + 4 page directories (identity map of the first 4 GiB).
const _: () = assert!(PAGE_TABLES_GPA + 6 * 4096 <= CMDLINE_GPA);
const _: () = assert!(CMDLINE_GPA + CMDLINE_MAX as u64 <= BIOS_HOLE_START);
const _: () = assert!(BIOS_HOLE_START < ACPI_START && ACPI_START < HIMEM_START);
