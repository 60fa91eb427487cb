//! A userfaultfd over guest RAM: registration (write-protect, minor
//! faults), write-protecting and unprotecting ranges, waking waiters,
//! `UFFDIO_CONTINUE`, and reading fault events.
//!
//! Written against the kernel UAPI (`linux/userfaultfd.h`) rather than the
//! `userfaultfd` crate because tiervisor needs features that crate does not
//! know: write-protection of shmem (`UFFD_FEATURE_WP_HUGETLBFS_SHMEM`,
//! Linux 5.19) and minor faults on shmem (`UFFD_FEATURE_MINOR_SHMEM`).
//! The descriptor is created without `UFFD_USER_MODE_ONLY` because the
//! faults that matter come from the kernel: KVM resolving a guest access.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use thiserror::Error;

const UFFD_API: u64 = 0xaa;
const UFFDIO: u64 = 0xaa;

const fn iowr(nr: u64, size: u64) -> u64 {
    (3 << 30) | (size << 16) | (UFFDIO << 8) | nr
}

const fn ior(nr: u64, size: u64) -> u64 {
    (2 << 30) | (size << 16) | (UFFDIO << 8) | nr
}

const UFFDIO_API_IOCTL: u64 = iowr(0x3f, 24);
const UFFDIO_REGISTER_IOCTL: u64 = iowr(0x00, 32);
const UFFDIO_UNREGISTER_IOCTL: u64 = ior(0x01, 16);
const UFFDIO_WAKE_IOCTL: u64 = ior(0x02, 16);
const UFFDIO_WRITEPROTECT_IOCTL: u64 = iowr(0x06, 24);
const UFFDIO_CONTINUE_IOCTL: u64 = iowr(0x07, 32);

const FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
const FEATURE_THREAD_ID: u64 = 1 << 8;
const FEATURE_MINOR_HUGETLBFS: u64 = 1 << 9;
const FEATURE_MINOR_SHMEM: u64 = 1 << 10;
const FEATURE_WP_HUGETLBFS_SHMEM: u64 = 1 << 12;

const WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const WRITEPROTECT_MODE_DONTWAKE: u64 = 1 << 1;

const CONTINUE_MODE_WP: u64 = 1 << 1;

const EVENT_PAGEFAULT: u8 = 0x12;
const PAGEFAULT_FLAG_WRITE: u64 = 1 << 0;
const PAGEFAULT_FLAG_WP: u64 = 1 << 1;
const PAGEFAULT_FLAG_MINOR: u64 = 1 << 2;

/// Registration modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Modes {
    /// Write-protect faults (live migration).
    pub write_protect: bool,
    /// Minor faults: page in the page cache but not mapped (fault sampling).
    pub minor: bool,
}

impl Modes {
    fn bits(self) -> u64 {
        (if self.write_protect { 2 } else { 0 }) | (if self.minor { 4 } else { 0 })
    }
}

/// Errors from userfaultfd operations.
#[derive(Debug, Error)]
pub enum UffdError {
    /// The userfaultfd syscall failed.
    #[error("userfaultfd() failed (is vm.unprivileged_userfaultfd 0 and are we unprivileged?)")]
    Create(#[source] io::Error),
    /// The kernel lacks a needed feature.
    #[error("host kernel lacks userfaultfd feature {0}")]
    MissingFeature(&'static str),
    /// An ioctl failed.
    #[error("{op} on {start:#x}+{len:#x}")]
    Ioctl {
        /// The operation.
        op: &'static str,
        /// Range start.
        start: u64,
        /// Range length.
        len: u64,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Reading an event failed.
    #[error("reading a userfaultfd event")]
    Read(#[source] io::Error),
}

/// A page fault reported by the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Faulting address (page aligned by the kernel unless EXACT_ADDRESS).
    pub address: u64,
    /// The access was a write.
    pub write: bool,
    /// Write-protect fault.
    pub wp: bool,
    /// Minor fault.
    pub minor: bool,
    /// Faulting thread id.
    pub tid: u32,
}

/// A userfaultfd with the features tiervisor uses.
#[derive(Debug)]
pub struct Userfault {
    fd: OwnedFd,
    features: u64,
}

#[repr(C)]
#[derive(Default)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct Range {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct WriteProtect {
    range: Range,
    mode: u64,
}

#[repr(C)]
#[derive(Default)]
struct Continue {
    range: Range,
    mode: u64,
    mapped: i64,
}

impl Userfault {
    /// Opens a blocking-read userfaultfd and negotiates the API, asking for
    /// shmem write-protection and (if the kernel has it) shmem minor faults.
    pub fn new(nonblocking: bool) -> Result<Self, UffdError> {
        let flags = libc::O_CLOEXEC | if nonblocking { libc::O_NONBLOCK } else { 0 };
        // SAFETY: plain syscall with integer flags; the result is checked.
        let raw = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if raw < 0 {
            return Err(UffdError::Create(io::Error::last_os_error()));
        }
        // SAFETY: the syscall returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
        // Probe what the kernel offers: features = 0 returns them all.
        let mut probe = Api {
            api: UFFD_API,
            ..Default::default()
        };
        let probe_fd = {
            // SAFETY: as above; a second descriptor just for the probe, as
            // UFFDIO_API may be called only once per descriptor.
            let r = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) };
            if r < 0 {
                return Err(UffdError::Create(io::Error::last_os_error()));
            }
            // SAFETY: new descriptor owned here.
            unsafe { OwnedFd::from_raw_fd(r as RawFd) }
        };
        ioctl(
            probe_fd.as_raw_fd(),
            UFFDIO_API_IOCTL,
            &mut probe,
            "UFFDIO_API",
            0,
            0,
        )?;
        if probe.features & FEATURE_WP_HUGETLBFS_SHMEM == 0 {
            return Err(UffdError::MissingFeature("WP_HUGETLBFS_SHMEM"));
        }
        let wanted = FEATURE_PAGEFAULT_FLAG_WP
            | FEATURE_THREAD_ID
            | FEATURE_WP_HUGETLBFS_SHMEM
            | FEATURE_MINOR_SHMEM
            | FEATURE_MINOR_HUGETLBFS;
        let mut api = Api {
            api: UFFD_API,
            features: probe.features & wanted,
            ioctls: 0,
        };
        ioctl(
            fd.as_raw_fd(),
            UFFDIO_API_IOCTL,
            &mut api,
            "UFFDIO_API",
            0,
            0,
        )?;
        Ok(Userfault {
            fd,
            features: api.features,
        })
    }

    /// Whether minor faults on shmem can be registered.
    pub fn supports_minor(&self) -> bool {
        self.features & FEATURE_MINOR_SHMEM != 0
    }

    /// Whether minor faults on hugetlbfs can be registered.
    pub fn supports_minor_hugetlbfs(&self) -> bool {
        self.features & FEATURE_MINOR_HUGETLBFS != 0
    }

    /// Registers `[start, start+len)` for `modes`.
    pub fn register(&self, start: u64, len: u64, modes: Modes) -> Result<(), UffdError> {
        let mut reg = Register {
            range: Range { start, len },
            mode: modes.bits(),
            ioctls: 0,
        };
        ioctl(
            self.fd.as_raw_fd(),
            UFFDIO_REGISTER_IOCTL,
            &mut reg,
            "UFFDIO_REGISTER",
            start,
            len,
        )
    }

    /// Unregisters a range.
    pub fn unregister(&self, start: u64, len: u64) -> Result<(), UffdError> {
        let mut range = Range { start, len };
        ioctl(
            self.fd.as_raw_fd(),
            UFFDIO_UNREGISTER_IOCTL,
            &mut range,
            "UFFDIO_UNREGISTER",
            start,
            len,
        )
    }

    /// Write-protects a registered range: writes to it block until
    /// unprotected or woken.
    pub fn protect(&self, start: u64, len: u64) -> Result<(), UffdError> {
        self.writeprotect(start, len, WRITEPROTECT_MODE_WP)
    }

    /// Removes write-protection and wakes waiters (unless `dont_wake`).
    pub fn unprotect(&self, start: u64, len: u64, dont_wake: bool) -> Result<(), UffdError> {
        self.writeprotect(
            start,
            len,
            if dont_wake {
                WRITEPROTECT_MODE_DONTWAKE
            } else {
                0
            },
        )
    }

    fn writeprotect(&self, start: u64, len: u64, mode: u64) -> Result<(), UffdError> {
        let mut wp = WriteProtect {
            range: Range { start, len },
            mode,
        };
        ioctl(
            self.fd.as_raw_fd(),
            UFFDIO_WRITEPROTECT_IOCTL,
            &mut wp,
            "UFFDIO_WRITEPROTECT",
            start,
            len,
        )
    }

    /// Wakes threads waiting on faults in a range.
    pub fn wake(&self, start: u64, len: u64) -> Result<(), UffdError> {
        let mut range = Range { start, len };
        ioctl(
            self.fd.as_raw_fd(),
            UFFDIO_WAKE_IOCTL,
            &mut range,
            "UFFDIO_WAKE",
            start,
            len,
        )
    }

    /// Maps every unmapped page-cache page of `[start, start + len)`,
    /// skipping pages already mapped and holes, with one `UFFDIO_CONTINUE` per run
    /// of unmapped pages. With `write_protect` the new entries keep
    /// userfaultfd write-protection (`UFFDIO_CONTINUE_MODE_WP`), so a
    /// writer into a range under migration still waits for the migrator.
    /// Wakes threads waiting anywhere in the range, skipped pages included:
    /// the kernel wakes only what a successful call mapped, and a thread
    /// can wait on a page that was mapped without a wake (two first
    /// touches of a fresh shmem page race: one allocates and maps it, the
    /// other finds it in the page cache and takes a minor fault; the
    /// handler's `UFFDIO_CONTINUE` then meets `EEXIST`). Returns the pages
    /// mapped.
    pub fn continue_pages(
        &self,
        start: u64,
        len: u64,
        write_protect: bool,
    ) -> Result<u64, UffdError> {
        const PAGE: u64 = 4096;
        let end = start + len;
        let mut at = start;
        let mut mapped_pages = 0;
        let mut retries = 0;
        let mut skipped = false;
        while at < end {
            let mut c = Continue {
                range: Range {
                    start: at,
                    len: end - at,
                },
                mode: if write_protect { CONTINUE_MODE_WP } else { 0 },
                mapped: 0,
            };
            let result = ioctl(
                self.fd.as_raw_fd(),
                UFFDIO_CONTINUE_IOCTL,
                &mut c,
                "UFFDIO_CONTINUE",
                at,
                end - at,
            );
            // `mapped` is the bytes mapped before a failure (or a negative
            // errno when none were).
            let done = u64::try_from(c.mapped).unwrap_or(0).min(end - at) & !(PAGE - 1);
            mapped_pages += done / PAGE;
            match result {
                Ok(()) => break,
                // The page after the mapped ones already has an entry
                // (EEXIST), or is a hole with nothing to map (EFAULT: a
                // page never touched): skip it.
                Err(UffdError::Ioctl { source, .. })
                    if matches!(source.raw_os_error(), Some(libc::EEXIST | libc::EFAULT)) =>
                {
                    at += done + PAGE;
                    skipped = true;
                }
                // Interrupted: go on from where it stopped (a bounded
                // number of times without progress).
                Err(UffdError::Ioctl { source, .. })
                    if source.raw_os_error() == Some(libc::EAGAIN) && retries < 64 =>
                {
                    retries = if done == 0 { retries + 1 } else { 0 };
                    at += done;
                }
                Err(e) => return Err(e),
            }
        }
        if skipped {
            self.wake(start, len)?;
        }
        Ok(mapped_pages)
    }

    /// Reads the next event. Returns `None` for events other than page
    /// faults, and on `EAGAIN` for a non-blocking descriptor.
    pub fn read_fault(&self) -> Result<Option<Fault>, UffdError> {
        let mut msg = [0u8; 32];
        // SAFETY: reads at most 32 bytes into a 32-byte buffer.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), msg.as_mut_ptr().cast(), msg.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(UffdError::Read(e)),
            };
        }
        if n as usize != msg.len() || msg[0] != EVENT_PAGEFAULT {
            return Ok(None);
        }
        let word = |at: usize| u64::from_le_bytes(msg[at..at + 8].try_into().unwrap_or_default());
        let flags = word(8);
        Ok(Some(Fault {
            address: word(16),
            write: flags & PAGEFAULT_FLAG_WRITE != 0,
            wp: flags & PAGEFAULT_FLAG_WP != 0,
            minor: flags & PAGEFAULT_FLAG_MINOR != 0,
            tid: u32::from_le_bytes(msg[24..28].try_into().unwrap_or_default()),
        }))
    }

    /// The descriptor, for poll().
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn ioctl<T>(
    fd: RawFd,
    request: u64,
    arg: &mut T,
    op: &'static str,
    start: u64,
    len: u64,
) -> Result<(), UffdError> {
    // SAFETY: `arg` is a live, properly sized #[repr(C)] struct matching the
    // ioctl's UAPI layout (the size is encoded in `request`).
    let r = unsafe { libc::ioctl(fd, request as libc::c_ulong, arg as *mut T) };
    if r < 0 {
        return Err(UffdError::Ioctl {
            op,
            start,
            len,
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_uapi() {
        // Values from linux/userfaultfd.h as compiled for x86-64.
        assert_eq!(UFFDIO_API_IOCTL, 0xc018_aa3f);
        assert_eq!(UFFDIO_REGISTER_IOCTL, 0xc020_aa00);
        assert_eq!(UFFDIO_UNREGISTER_IOCTL, 0x8010_aa01);
        assert_eq!(UFFDIO_WAKE_IOCTL, 0x8010_aa02);
        assert_eq!(UFFDIO_WRITEPROTECT_IOCTL, 0xc018_aa06);
        assert_eq!(UFFDIO_CONTINUE_IOCTL, 0xc020_aa07);
        assert_eq!(std::mem::size_of::<Continue>(), 32);
    }

    #[test]
    fn opens_with_shmem_write_protect() {
        let uffd = Userfault::new(true).unwrap();
        assert!(uffd.read_fault().unwrap().is_none(), "no events yet");
    }
}
