//! The workload payload: a static x86-64 ELF the VMM starts on every vCPU
//! at CPL3 with identity-mapped RAM (see `docs/payload-abi.md`). This file
//! holds only what needs the bare machine: the entry point, the panic
//! handler, and (in submodules) the hypercall, clock and memory functions;
//! everything else is the `workloads` library.

#![no_std]
#![no_main]

// Beside this file in `payload/`: a file directly in `src/bin/` would be
// taken for another binary.
#[path = "payload/guest.rs"]
mod guest;
#[path = "payload/mem.rs"]
mod mem;

use core::fmt::Write;
use core::hint::spin_loop;
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, Ordering};

use workloads::{EXIT_PANIC, MessageBuf, Platform, guest_main};

use crate::guest::{GuestPlatform, IdentityMemory};

/// Set by the first panic on any vCPU, so a panic while reporting a panic
/// does not recurse.
static PANICKING: AtomicBool = AtomicBool::new(false);

/// Entry point on every vCPU. The System V argument registers are the entry
/// registers: `rdi` = vCPU index, `rsi` = vCPU count, `rdx` = boot info GPA.
#[unsafe(no_mangle)]
pub extern "C" fn _start(vcpu: u64, vcpus: u64, boot_info_gpa: u64) -> ! {
    let memory = IdentityMemory;
    let platform = GuestPlatform::new(&memory, vcpus, boot_info_gpa);
    guest_main(&platform, &memory, vcpu, vcpus, boot_info_gpa);
    // guest_main sent Exit; the VMM does not run this vCPU again.
    park()
}

/// Spins forever (`hlt` would fault at CPL3).
fn park() -> ! {
    loop {
        spin_loop();
    }
}

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    let platform = GuestPlatform::without_clock();
    if !PANICKING.swap(true, Ordering::Relaxed) {
        let mut msg = MessageBuf::<512>::new();
        write!(msg, "payload panic: {info}").ok();
        platform.log(msg.as_bytes());
    }
    platform.exit(EXIT_PANIC);
    park()
}

/// Referenced by `core` even with `panic = "abort"`; never called.
#[unsafe(no_mangle)]
pub extern "C" fn rust_eh_personality() {}
