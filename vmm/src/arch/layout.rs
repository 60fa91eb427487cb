//! Where the VMM puts its structures in low guest memory (below
//! [`guest_abi::PAYLOAD_MIN_LOAD_ADDR`]) for payload guests.

/// Global descriptor table.
pub const GDT_GPA: u64 = 0x1000;
/// Boot information block ([`guest_abi::BootInfo`]).
pub const BOOT_INFO_GPA: u64 = 0x2000;
/// The stop word ([`guest_abi::BootInfo::stop_gpa`]): the VMM sets it to
/// ask the payload to finish gracefully.
pub const STOP_FLAG_GPA: u64 = 0x2800;
/// Argument string, up to [`guest_abi::MAX_ARGS_LEN`] bytes.
pub const ARGS_GPA: u64 = 0x3000;
/// 64-bit task-state segment with an I/O permission bitmap. Under PVM,
/// guest CPL3 runs in host ring 3 and `out` is checked against the TSS
/// bitmap, not the guest's RFLAGS.IOPL: without the bitmap every hypercall
/// would fault.
pub const TSS_GPA: u64 = 0x5000;
/// First page-table page (the PML4); the rest follow it.
pub const PAGE_TABLES_GPA: u64 = 0x10000;
/// End of the page-table area.
pub const PAGE_TABLES_END: u64 = guest_abi::PAYLOAD_MIN_LOAD_ADDR;
/// Stack size of each vCPU.
pub const VCPU_STACK_SIZE: u64 = 256 << 10;

const _: () = assert!(ARGS_GPA + guest_abi::MAX_ARGS_LEN as u64 <= TSS_GPA);
const _: () = assert!(ARGS_GPA + guest_abi::MAX_ARGS_LEN as u64 <= PAGE_TABLES_GPA);
const _: () = assert!(BOOT_INFO_GPA + guest_abi::BootInfo::SIZE as u64 <= STOP_FLAG_GPA);
const _: () = assert!(STOP_FLAG_GPA + 8 <= ARGS_GPA);
