//! The payload's [`Platform`] and [`GuestMemory`]: `rdtsc` for the clock,
//! `out` to the hypercall port, a spinning barrier in the image's `.bss`,
//! and guest-physical addresses used directly as pointers (the VMM
//! identity-maps all RAM).

use core::arch::asm;
use core::ptr;
use core::sync::atomic::AtomicU64;

use guest_abi::{BootInfo, HYPERCALL_PORT, MAX_LOG_LEN, Op, Request};
use workloads::{GuestMemory, Platform, SpinBarrier};

/// The start barrier shared by all vCPUs (zeroed `.bss`).
static BARRIER: SpinBarrier = SpinBarrier::new();

/// Guest RAM through the identity mapping.
#[derive(Debug)]
pub struct IdentityMemory;

impl IdentityMemory {
    /// Whether `[gpa, gpa + len)` can be a Rust slice at all.
    fn plausible(gpa: u64, len: u64) -> bool {
        gpa != 0 && len <= isize::MAX as u64 && gpa.checked_add(len).is_some()
    }
}

impl GuestMemory for IdentityMemory {
    fn bytes(&self, gpa: u64, len: u64) -> Option<&[u8]> {
        if !Self::plausible(gpa, len) {
            return None;
        }
        // SAFETY: the VMM identity-maps all guest RAM, so the GPA is a valid
        // pointer; the boot info and argument string it points the payload
        // at lie in RAM and nothing writes them while the payload runs.
        Some(unsafe { core::slice::from_raw_parts(gpa as *const u8, len as usize) })
    }

    fn words(&self, gpa: u64, len: u64) -> Option<&[AtomicU64]> {
        if !Self::plausible(gpa, len) || gpa % 8 != 0 || len % 8 != 0 {
            return None;
        }
        // SAFETY: identity-mapped RAM, 8-byte aligned. The library only asks
        // for ranges inside the first free range, which holds neither the
        // image, the stacks nor the boot data, and every vCPU accesses it
        // only through these atomics.
        Some(unsafe { core::slice::from_raw_parts(gpa as *const AtomicU64, (len / 8) as usize) })
    }
}

/// The machine one vCPU runs on.
#[derive(Debug)]
pub struct GuestPlatform {
    /// Nanoseconds per TSC tick in 32.32 fixed point; 0 without a clock.
    ns_per_tick_q32: u64,
    vcpus: u32,
    /// The VMM's stop word (0: none offered).
    stop_gpa: u64,
}

impl GuestPlatform {
    /// The platform for a run of `vcpus` vCPUs; the clock rate comes from
    /// the boot info (no clock if it is unreadable or says 0 kHz).
    pub fn new(memory: &IdentityMemory, vcpus: u64, boot_info_gpa: u64) -> Self {
        let info = memory
            .bytes(boot_info_gpa, BootInfo::SIZE as u64)
            .and_then(|b| b.try_into().ok())
            .and_then(BootInfo::decode);
        let tsc_khz = info.map_or(0, |i| i.tsc_khz);
        let stop_gpa = info.map_or(0, |i| i.stop_gpa);
        GuestPlatform {
            // 10^6 ns per ms over ticks per ms.
            ns_per_tick_q32: (1_000_000u64 << 32).checked_div(tsc_khz).unwrap_or(0),
            vcpus: u32::try_from(vcpus).unwrap_or(u32::MAX),
            // Only an aligned word can be read atomically.
            stop_gpa: if stop_gpa % 8 == 0 { stop_gpa } else { 0 },
        }
    }

    /// A platform for the panic handler: hypercalls only.
    pub fn without_clock() -> Self {
        GuestPlatform {
            ns_per_tick_q32: 0,
            vcpus: 1,
            stop_gpa: 0,
        }
    }

    /// Sends `Exit(code)`.
    pub fn exit(&self, code: u64) {
        self.hypercall(&mut Request::new(Op::Exit, [code, 0, 0, 0]));
    }
}

fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: rdtsc only reads the time-stamp counter into edx:eax; the VMM
    // leaves CR4.TSD clear so it is allowed at CPL3.
    unsafe {
        asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags));
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

impl Platform for GuestPlatform {
    fn now_ns(&self) -> Option<u64> {
        if self.ns_per_tick_q32 == 0 {
            return None;
        }
        let ns = (u128::from(rdtsc()) * u128::from(self.ns_per_tick_q32)) >> 32;
        Some(ns as u64)
    }

    fn hypercall(&self, request: &mut Request) {
        let gpa = ptr::from_mut(request) as u64;
        if gpa > u64::from(u32::MAX) {
            // The port takes a 32-bit address; stacks are below 4 GiB, so
            // this cannot happen unless the VMM broke its side of the ABI.
            // SAFETY: ud2 raises #UD, which ends the VM (no IDT).
            unsafe { asm!("ud2", options(nomem, nostack, noreturn)) }
        }
        // SAFETY: `out` traps to the VMM, which reads the request at `gpa`
        // (identity-mapped, 8-byte aligned, alive for this call) and writes
        // only its status field. No `nomem`: the asm may read and write the
        // exposed request memory.
        unsafe {
            asm!("out dx, eax", in("dx") HYPERCALL_PORT, in("eax") gpa as u32, options(nostack, preserves_flags));
        }
        // SAFETY: `request` is a valid, aligned reference; the volatile read
        // picks up the status the VMM wrote behind the compiler's back.
        request.status = unsafe { ptr::read_volatile(&raw const request.status) };
    }

    fn log(&self, message: &[u8]) {
        let len = (message.len() as u64).min(MAX_LOG_LEN);
        self.hypercall(&mut Request::new(
            Op::Log,
            [message.as_ptr() as u64, len, 0, 0],
        ));
    }

    fn barrier(&self) {
        BARRIER.wait(self.vcpus);
    }

    fn barrier_vote(&self, vote: bool) -> bool {
        BARRIER.wait_vote(self.vcpus, vote)
    }

    fn stop_requested(&self) -> bool {
        if self.stop_gpa == 0 {
            return false;
        }
        // SAFETY: the VMM identity-maps RAM and put an aligned u64 at
        // `stop_gpa` (below the image); a volatile read sees the VMM's
        // write, which happens behind the compiler's back.
        unsafe { ptr::read_volatile(self.stop_gpa as *const u64) != 0 }
    }
}
