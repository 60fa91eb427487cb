//! Creating memfd backings (shmem, or hugetlbfs with 2 MiB pages).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use crate::backend_error::BackendError;

/// Creates a close-on-exec memfd of `size` bytes named after the tier (the
/// name shows in `/proc/<pid>/maps` as `/memfd:tiervisor-<tier>`).
pub(crate) fn create(tier: &str, size: u64, hugetlb: bool) -> Result<File, BackendError> {
    // Tier names are checked to be letters, digits, '-' and '_' by the parser;
    // a name with a NUL byte (built in code) just gets a generic label.
    let name = CString::new(format!("tiervisor-{tier}"))
        .unwrap_or_else(|_| CString::from(c"tiervisor-tier"));
    let mut flags = libc::MFD_CLOEXEC;
    if hugetlb {
        flags |= libc::MFD_HUGETLB | libc::MFD_HUGE_2MB;
    }
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    if fd < 0 {
        return Err(BackendError::MemfdCreate(io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nothing else.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.set_len(size)
        .map_err(|source| BackendError::Resize { size, source })?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{BackendKind, PlannedTier, TierBackend};
    use crate::host;

    #[test]
    fn creates_a_sized_memfd() {
        let file = create("t", 8 << 20, false).unwrap();
        assert_eq!(file.metadata().unwrap().len(), 8 << 20);
    }

    /// Bypasses validation's pool check to exercise the creation-time check:
    /// with too few free hugepages, creating a hugetlb tier must fail cleanly
    /// (no SIGBUS), naming the shortage.
    #[test]
    fn hugetlb_backend_without_enough_pages_fails_cleanly() {
        let available = host::available_hugepages().unwrap();
        let pages = available + 1;
        let plan = PlannedTier {
            name: "huge".into(),
            capacity: pages * host::HUGEPAGE_SIZE,
            kind: BackendKind::Memfd {
                numa_node: None,
                hugetlb: true,
                prealloc: false,
            },
        };
        let err = TierBackend::create(&plan, host::HUGEPAGE_SIZE).unwrap_err();
        assert!(
            matches!(err, BackendError::Hugepages { needed, .. } if needed == pages),
            "{err:?}"
        );
        assert!(err.to_string().contains("hugepages"), "{err}");
    }
}
