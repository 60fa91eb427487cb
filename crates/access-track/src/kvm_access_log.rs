//! The KVM access log: the ioctl that `host-kernel/kvm-access-log` adds to
//! KVM, which tests (and clears) the accessed bits of KVM's secondary MMU
//! (the EPT/NPT accessed bits, or the shadow MMU's) over a guest-physical
//! range and returns one bit per 4 KiB page. The guest takes no exit and
//! no fault: the bits are read and cleared in the host's page tables.
//!
//! The ABI is `host-kernel/kvm-access-log/include/uapi/linux/kvm_access_log.h`;
//! the constants here are checked against that header by a test.

use std::os::fd::AsRawFd;
use std::sync::Arc;

use kvm_ioctls::VmFd;
use thiserror::Error;

/// `KVM_CAP_TIERVISOR_ACCESS_LOG`: far outside upstream's numbering.
pub const KVM_CAP_TIERVISOR_ACCESS_LOG: u64 = 0x5456_0001;
/// `KVM_ACCESS_LOG_NO_CLEAR`: test only, leave the bits set.
pub const KVM_ACCESS_LOG_NO_CLEAR: u32 = 1;
/// `KVM_ACCESS_LOG_FLUSH_TLB`: flush the VM's TLBs after clearing (every
/// vCPU exits; the tracker never asks for it).
pub const KVM_ACCESS_LOG_FLUSH_TLB: u32 = 1 << 1;
/// `KVM_ACCESS_LOG_MAX_PAGES`: most pages one call covers (1 GiB).
pub const KVM_ACCESS_LOG_MAX_PAGES: u64 = 1 << 18;
/// `KVM_TIERVISOR_ACCESS_LOG`: `_IOWR(KVMIO, 0xf0, struct kvm_access_log)`.
pub const KVM_TIERVISOR_ACCESS_LOG: u64 = ioctl_iowr(0xae, 0xf0, size_of::<KvmAccessLogArgs>());

/// `_IOWR(ty, nr, size)` of the kernel's generic ioctl encoding.
const fn ioctl_iowr(ty: u64, nr: u64, size: usize) -> u64 {
    (3 << 30) | ((size as u64) << 16) | (ty << 8) | nr
}

/// `struct kvm_access_log`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct KvmAccessLogArgs {
    /// `KVM_ACCESS_LOG_*`.
    pub flags: u32,
    /// `sizeof(struct kvm_access_log)`.
    pub size: u32,
    /// First guest frame (4 KiB) of the range.
    pub first_gfn: u64,
    /// Pages in the range, `1..=KVM_ACCESS_LOG_MAX_PAGES`.
    pub npages: u64,
    /// User address of `npages.div_ceil(64)` words of bitmap.
    pub bitmap: u64,
    /// Out: bits set.
    pub accessed: u64,
}

/// Errors of the access log.
#[derive(Debug, Error)]
pub enum AccessLogError {
    /// The host's KVM does not have the extension.
    #[error(
        "host kernel lacks the KVM access log (KVM_CAP_TIERVISOR_ACCESS_LOG): load the kvm.ko \
         and kvm-amd.ko that host-kernel/kvm-access-log builds"
    )]
    Unsupported,
    /// A range the ioctl cannot take (empty, too long, or a bitmap too
    /// short for it).
    #[error("access log range of {npages} pages at gfn {first_gfn:#x} with {words} bitmap words")]
    Range {
        /// First frame.
        first_gfn: u64,
        /// Pages asked for.
        npages: u64,
        /// Bitmap words given.
        words: usize,
    },
    /// The ioctl failed.
    #[error("KVM_TIERVISOR_ACCESS_LOG of {npages} pages at gfn {first_gfn:#x}")]
    Ioctl {
        /// First frame.
        first_gfn: u64,
        /// Pages asked for.
        npages: u64,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
}

/// The access log of one VM.
#[derive(Clone, Debug)]
pub struct KvmAccessLog {
    vm: Arc<VmFd>,
}

impl KvmAccessLog {
    /// The access log of `vm`, after asking KVM whether it has one.
    pub fn new(vm: Arc<VmFd>) -> Result<Self, AccessLogError> {
        if vm.check_extension_raw(KVM_CAP_TIERVISOR_ACCESS_LOG as libc::c_ulong) <= 0 {
            return Err(AccessLogError::Unsupported);
        }
        Ok(KvmAccessLog { vm })
    }

    /// Sets bit `i` of `bitmap` (word `i / 64`, bit `i % 64`) to whether
    /// page `first_gfn + i` was accessed since its bit was last cleared,
    /// and clears the accessed bits unless `clear` is false; returns the
    /// number of bits set. Pages outside the guest's memory read 0. The
    /// TLBs are not flushed: the guest does not exit for it, and an access
    /// through a translation a TLB still holds shows once it is evicted.
    pub fn harvest(
        &self,
        first_gfn: u64,
        npages: u64,
        bitmap: &mut [u64],
        clear: bool,
    ) -> Result<u64, AccessLogError> {
        if npages == 0
            || npages > KVM_ACCESS_LOG_MAX_PAGES
            || (bitmap.len() as u64) < npages.div_ceil(64)
        {
            return Err(AccessLogError::Range {
                first_gfn,
                npages,
                words: bitmap.len(),
            });
        }
        let mut args = KvmAccessLogArgs {
            flags: if clear { 0 } else { KVM_ACCESS_LOG_NO_CLEAR },
            size: size_of::<KvmAccessLogArgs>() as u32,
            first_gfn,
            npages,
            bitmap: bitmap.as_mut_ptr() as u64,
            accessed: 0,
        };
        // SAFETY: the VM fd is open for `self`'s life; `args` is a valid
        // `struct kvm_access_log` the kernel reads and writes back, and its
        // bitmap points at `bitmap`, which holds the `npages.div_ceil(64)`
        // words the kernel writes (checked above) and outlives the call.
        let rc = unsafe {
            libc::ioctl(
                self.vm.as_raw_fd(),
                KVM_TIERVISOR_ACCESS_LOG as libc::c_ulong,
                &mut args,
            )
        };
        if rc < 0 {
            return Err(AccessLogError::Ioctl {
                first_gfn,
                npages,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(args.accessed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::uapi_defines;
    /// The `#define`s of the kernel side's header.
    fn header_defines() -> std::collections::HashMap<String, String> {
        uapi_defines::defines(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../host-kernel/kvm-access-log/include/uapi/linux/kvm_access_log.h"
        ))
    }

    #[test]
    fn constants_match_the_kernel_header() {
        let defines = header_defines();
        let number = |name: &str| uapi_defines::number(&defines, name);
        assert_eq!(
            number("KVM_CAP_TIERVISOR_ACCESS_LOG"),
            KVM_CAP_TIERVISOR_ACCESS_LOG
        );
        assert_eq!(
            number("KVM_ACCESS_LOG_NO_CLEAR"),
            u64::from(KVM_ACCESS_LOG_NO_CLEAR)
        );
        assert_eq!(
            number("KVM_ACCESS_LOG_FLUSH_TLB"),
            u64::from(KVM_ACCESS_LOG_FLUSH_TLB)
        );
        assert_eq!(number("KVM_ACCESS_LOG_MAX_PAGES"), KVM_ACCESS_LOG_MAX_PAGES);
        assert_eq!(
            defines.get("KVM_TIERVISOR_ACCESS_LOG").map(String::as_str),
            Some("_IOWR(KVMIO, 0xf0, struct kvm_access_log)"),
            "{defines:?}"
        );
        assert_eq!(size_of::<KvmAccessLogArgs>(), 40);
        assert_eq!(KVM_TIERVISOR_ACCESS_LOG, 0xc028_aef0);
    }

    #[test]
    fn ranges_the_ioctl_cannot_take_are_refused_before_it() {
        let kvm = kvm_ioctls::Kvm::new();
        let Ok(kvm) = kvm else {
            eprintln!("skipped: no /dev/kvm");
            return;
        };
        let vm = Arc::new(kvm.create_vm().unwrap());
        // Built by hand: the check of the extension is what most hosts fail.
        let log = KvmAccessLog { vm };
        let mut one = [0u64; 1];
        for (gfn, n) in [(0, 0), (0, KVM_ACCESS_LOG_MAX_PAGES + 1), (0, 65)] {
            assert!(matches!(
                log.harvest(gfn, n, &mut one, true),
                Err(AccessLogError::Range { .. })
            ));
        }
    }
}
