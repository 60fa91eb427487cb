//! Dropping the page-table entries of many runs of guest pages at once:
//! what the fault sampler does each round.
//!
//! A zap of a run that has entries costs two cross-CPU flushes: the host
//! TLB shootdown of `MADV_DONTNEED` (the vCPU threads share the mm) and
//! KVM's remote TLB flush from its MMU notifier. Profiles on this PVM
//! host put nearly all of the sampler's time in sending those IPIs.
//! `process_madvise(2)` on the calling process takes a vector of runs and
//! gathers the host TLB flushes of its clean ranges into one (Linux 6.13
//! allows every advice on the caller itself); dirty shared pages still
//! force a flush per range, and KVM still flushes once per run.
//! Where the host refuses it, every run is zapped with its own
//! `madvise(2)`.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Most runs one `process_madvise` takes (`UIO_MAXIOV`).
const MAX_RUNS: usize = 1024;

/// Zaps runs of pages of the calling process.
#[derive(Debug)]
pub(crate) struct Zapper {
    /// A pidfd of this process, while `process_madvise` works.
    pidfd: Option<OwnedFd>,
}

impl Zapper {
    pub fn new() -> Self {
        // SAFETY: pidfd_open takes a pid and flags and returns a new file
        // descriptor or -1; nothing of ours is passed by reference.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
        let pidfd = i32::try_from(fd).ok().filter(|&fd| fd >= 0).map(|fd| {
            // SAFETY: `fd` was just returned by pidfd_open and is owned by
            // nobody else.
            unsafe { OwnedFd::from_raw_fd(fd) }
        });
        // An empty vector tells whether the host takes this advice here:
        // before Linux 6.13 it refuses MADV_DONTNEED whatever the ranges.
        let pidfd = pidfd.filter(|fd| process_madvise(fd, &[]) == 0);
        Zapper { pidfd }
    }

    /// Whether runs are zapped in batches (`process_madvise`).
    #[cfg(test)]
    pub fn batched(&self) -> bool {
        self.pidfd.is_some()
    }

    /// Drops the page-table entries of every run `(start, len)` in `runs`
    /// and returns how many runs, from the first, were zapped: the rest
    /// failed (their pages keep their entries).
    ///
    /// The runs must be page-aligned parts of shared shmem mappings of
    /// guest RAM that stay mapped for the zapper's use; see [`zap_one`].
    pub fn zap(&self, runs: &[(u64, u64)]) -> usize {
        let mut done = 0;
        while done < runs.len() {
            let batch = &runs[done..runs.len().min(done + MAX_RUNS)];
            let zapped = match self.zap_batch(batch) {
                Some(n) => n,
                None => batch
                    .iter()
                    .take_while(|&&(start, len)| zap_one(start, len).is_ok())
                    .count(),
            };
            done += zapped;
            if zapped < batch.len() {
                break;
            }
        }
        done
    }

    /// One `process_madvise` over `batch`: the runs zapped, from the first,
    /// or `None` without batching.
    fn zap_batch(&self, batch: &[(u64, u64)]) -> Option<usize> {
        let pidfd = self.pidfd.as_ref()?;
        let iov: Vec<libc::iovec> = batch
            .iter()
            .map(|&(start, len)| libc::iovec {
                iov_base: start as *mut libc::c_void,
                iov_len: len as usize,
            })
            .collect();
        // The call advises whole runs in order and returns the bytes done
        // (or an error if the first run failed).
        let mut left = u64::try_from(process_madvise(pidfd, &iov)).unwrap_or(0);
        Some(
            batch
                .iter()
                .take_while(|&&(_, len)| {
                    let whole = left >= len;
                    left = left.saturating_sub(len);
                    whole
                })
                .count(),
        )
    }
}

/// `process_madvise(pidfd, iov, MADV_DONTNEED)` on this process; the
/// bytes advised, or -1.
///
/// Every range of `iov` must be a page-aligned part of a shared shmem
/// mapping of guest RAM that stays mapped during the call.
fn process_madvise(pidfd: &OwnedFd, iov: &[libc::iovec]) -> i64 {
    use std::os::fd::AsRawFd;

    // SAFETY: `iov` is a valid array of `iov.len()` iovecs that outlives
    // the call; the kernel only reads it. Per the contract above,
    // MADV_DONTNEED there removes page-table entries only: the pages stay
    // in the page cache with their data, and no Rust reference to guest
    // memory is affected.
    unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd.as_raw_fd(),
            iov.as_ptr(),
            iov.len(),
            libc::MADV_DONTNEED,
            0,
        )
    }
}

/// Drops the page-table entries of `[start, start + len)`.
///
/// `[start, start + len)` must be a page-aligned part of a shared shmem
/// mapping of guest RAM that stays mapped during the call.
fn zap_one(start: u64, len: u64) -> io::Result<()> {
    // SAFETY: per the contract above, MADV_DONTNEED on a shared shmem
    // mapping only removes page-table entries: the pages stay in the page
    // cache with their data, and the next touch maps them again (through
    // the guard's minor-fault handler). No Rust reference to guest memory
    // is affected.
    let rc = unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            len as usize,
            libc::MADV_DONTNEED,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    /// A shared shmem mapping of `pages` pages, every page written.
    fn shmem(pages: u64) -> (u64, OwnedFd) {
        // SAFETY: memfd_create with a valid C string and no flags.
        let fd = unsafe { libc::memfd_create(c"zap-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: `fd` was just created and is owned here only.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        use std::os::fd::AsRawFd;
        let len = pages * PAGE;
        // SAFETY: ftruncate on our own memfd.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len as i64) }, 0);
        // SAFETY: a fresh shared mapping of the memfd, nowhere else used.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        // SAFETY: the mapping is `len` bytes, writable, and ours alone.
        unsafe { std::ptr::write_bytes(addr.cast::<u8>(), 0x5a, len as usize) };
        (addr as u64, fd)
    }

    /// Whether `page`'s entry is present (`/proc/self/pagemap` bit 63).
    fn present(page: u64) -> bool {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut entry = [0u8; 8];
        file.read_exact_at(&mut entry, page / PAGE * 8).unwrap();
        u64::from_le_bytes(entry) >> 63 == 1
    }

    #[test]
    fn zaps_exactly_the_runs_and_keeps_the_data() {
        let (base, _fd) = shmem(64);
        let runs = [(base + 2 * PAGE, 3 * PAGE), (base + 40 * PAGE, PAGE)];
        let zapper = Zapper::new();
        assert!(zapper.batched(), "this host has process_madvise(DONTNEED)");
        assert_eq!(zapper.zap(&runs), 2);
        let zapped: Vec<u64> = (0..64).filter(|&p| !present(base + p * PAGE)).collect();
        assert_eq!(zapped, [2, 3, 4, 40]);
        // SAFETY: page 3 is inside the mapping, which is still ours.
        let byte = unsafe { *((base + 3 * PAGE) as *const u8) };
        assert_eq!(byte, 0x5a, "the page cache keeps the data");
    }

    #[test]
    fn stops_at_the_first_run_it_cannot_zap() {
        let (base, _fd) = shmem(8);
        // A run that is not page-aligned is refused (EINVAL), batched or
        // not.
        let runs = [(base, PAGE), (base + 1, PAGE), (base + 4 * PAGE, PAGE)];
        let zapper = Zapper::new();
        let zapped = zapper.zap(&runs);
        assert!(zapped <= 1, "{zapped}");
        assert!(present(base + 4 * PAGE), "runs after the failure kept");
    }
}
