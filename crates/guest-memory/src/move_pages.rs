//! The page-level system calls behind NUMA tiers: `move_pages(2)` to move
//! pages of this process to nodes or ask where they are, `mincore(2)` to
//! see which pages of a file mapping are in memory, and `MADV_POPULATE_READ`
//! to map such pages without allocating others.
//!
//! `move_pages` reports per page: the node the page is (now) on, or a
//! negative errno: `-ENOENT` when nothing is mapped at that address (never
//! touched — or touched through another mapping, or unmapped by
//! `MADV_DONTNEED`: check `mincore`), `-EACCES` for a page mapped more than
//! once without `MPOL_MF_MOVE_ALL`, `-EBUSY`/`-ENOMEM`/`-EAGAIN` for a page
//! the kernel could not migrate. A call that fails as a whole (bad node,
//! `EPERM` for `MPOL_MF_MOVE_ALL` without `CAP_SYS_NICE`) or that returns a
//! count of pages it could not migrate leaves the statuses of the pages it
//! did not get to unwritten: they keep [`NOT_ATTEMPTED`].

use std::io;

/// Status of a page `move_pages` did not get to (never written by the kernel).
pub(crate) const NOT_ATTEMPTED: i32 = i32::MIN;

/// `MPOL_MF_MOVE`: move pages mapped only by this process.
pub(crate) const MPOL_MF_MOVE: libc::c_int = 1 << 1;
/// `MPOL_MF_MOVE_ALL`: move pages however shared (needs `CAP_SYS_NICE`).
pub(crate) const MPOL_MF_MOVE_ALL: libc::c_int = 1 << 2;

/// Moves the pages at `pages` (page-aligned addresses in this process) to
/// `nodes[i]` each, with `flags` ([`MPOL_MF_MOVE`] or [`MPOL_MF_MOVE_ALL`]),
/// writing each page's outcome into `status` (first filled with
/// [`NOT_ATTEMPTED`]). Returns how many pages the kernel failed to migrate
/// (it stops at the first batch that failed), or the error of the call.
pub(crate) fn move_to(
    pages: &[usize],
    nodes: &[i32],
    status: &mut [i32],
    flags: libc::c_int,
) -> io::Result<usize> {
    if nodes.len() != pages.len() || status.len() != pages.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    status.fill(NOT_ATTEMPTED);
    if pages.is_empty() {
        return Ok(0);
    }
    // SAFETY: the three arrays hold `pages.len()` elements each and live
    // across the call; the kernel reads `pages` and `nodes` and writes only
    // `status`. Moving a page keeps its contents (the kernel copies it and
    // remaps it atomically), so no memory of ours changes meaning.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            pages.len(),
            pages.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            flags,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(rc).unwrap_or(0))
}

/// Asks where the pages at `pages` are: a node, or a negative errno
/// (`-ENOENT`: nothing mapped there), into `status`.
pub(crate) fn query(pages: &[usize], status: &mut [i32]) -> io::Result<()> {
    if status.len() != pages.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    status.fill(NOT_ATTEMPTED);
    if pages.is_empty() {
        return Ok(());
    }
    // SAFETY: `pages` and `status` hold `pages.len()` elements and live
    // across the call; with a null node list the kernel only reads `pages`
    // and writes `status`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            pages.len(),
            pages.as_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Which pages of the mapped range `[addr, addr + len)` are in memory:
/// one flag per page into `resident`. For a shared file mapping this is
/// the file's page cache, whether or not this mapping maps the page.
pub(crate) fn resident(addr: usize, len: usize, resident: &mut [bool]) -> io::Result<()> {
    let mut vec = vec![0u8; resident.len()];
    if len.div_ceil(page_size()) != vec.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: mincore only reads the page tables and page cache of the
    // range and writes one byte per page of it into `vec`, which is sized
    // for exactly that many pages.
    let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    for (flag, byte) in resident.iter_mut().zip(vec) {
        *flag = byte & 1 != 0;
    }
    Ok(())
}

/// Maps the pages of `[addr, addr + len)` for reading
/// (`MADV_POPULATE_READ`); on a file mapping, pages already in memory are
/// only mapped, nothing is written.
pub(crate) fn populate_read(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: MADV_POPULATE_READ faults pages of the range in for reading;
    // it changes no contents and no mapping outside the range.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_READ) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The host's base page size.
pub(crate) fn page_size() -> usize {
    usize::try_from(crate::config::host_page_size()).unwrap_or(4096)
}

/// A short name for a negative `move_pages` status (`-ENOENT` → "ENOENT").
pub(crate) fn status_name(status: i32) -> String {
    if status == NOT_ATTEMPTED {
        return "not attempted".into();
    }
    let name = match status.checked_neg().unwrap_or(0) {
        libc::ENOENT => "ENOENT",
        libc::EBUSY => "EBUSY",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EAGAIN => "EAGAIN",
        libc::EIO => "EIO",
        libc::EINVAL => "EINVAL",
        libc::ENODEV => "ENODEV",
        libc::EPERM => "EPERM",
        libc::E2BIG => "E2BIG",
        _ if status >= 0 => return format!("node {status}"),
        _ => return format!("errno {}", -i64::from(status)),
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::HostMapping;
    use crate::memfd;

    /// A memfd of `pages` pages mapped shared, the first `touched` written.
    fn mapped(pages: usize, touched: usize) -> (std::fs::File, HostMapping) {
        let ps = page_size();
        let file = memfd::create("move-pages-test", (pages * ps) as u64, false).unwrap();
        let map = HostMapping::map_shared(std::os::fd::AsFd::as_fd(&file), pages * ps, 0).unwrap();
        for page in 0..touched {
            // SAFETY: inside the mapping just made, which nothing else uses.
            unsafe { std::ptr::write_volatile((map.addr() + page * ps) as *mut u8, 1) };
        }
        (file, map)
    }

    fn addrs(map: &HostMapping, pages: usize) -> Vec<usize> {
        (0..pages).map(|p| map.addr() + p * page_size()).collect()
    }

    #[test]
    fn query_reports_node_zero_or_not_present() {
        let (_file, map) = mapped(4, 2);
        let pages = addrs(&map, 4);
        let mut status = vec![0; 4];
        query(&pages, &mut status).unwrap();
        assert_eq!(status, vec![0, 0, -libc::ENOENT, -libc::ENOENT]);
    }

    #[test]
    fn moving_to_node_zero_reports_node_zero_and_skips_untouched_pages() {
        let (_file, map) = mapped(4, 3);
        let pages = addrs(&map, 4);
        let mut status = vec![0; 4];
        let failed = move_to(&pages, &[0; 4], &mut status, MPOL_MF_MOVE_ALL).unwrap();
        assert_eq!(failed, 0);
        assert_eq!(status, vec![0, 0, 0, -libc::ENOENT]);
    }

    #[test]
    fn a_node_that_does_not_exist_fails_the_call_and_leaves_later_pages_unattempted() {
        let (_file, map) = mapped(4, 4);
        let pages = addrs(&map, 4);
        let mut status = vec![0; 4];
        let err = move_to(&pages, &[0, 0, 4000, 4000], &mut status, MPOL_MF_MOVE_ALL).unwrap_err();
        assert!(
            matches!(err.raw_os_error(), Some(libc::ENODEV) | Some(libc::EINVAL)),
            "{err}"
        );
        assert_eq!(&status[..2], &[0, 0]);
        assert_eq!(&status[2..], &[NOT_ATTEMPTED, NOT_ATTEMPTED]);
    }

    #[test]
    fn unmapped_pages_stay_resident_in_the_page_cache() {
        let (_file, map) = mapped(4, 3);
        let ps = page_size();
        // SAFETY: drops this mapping's page table entry for page 1; the
        // memfd keeps the page.
        let rc = unsafe {
            libc::madvise(
                (map.addr() + ps) as *mut libc::c_void,
                ps,
                libc::MADV_DONTNEED,
            )
        };
        assert_eq!(rc, 0);
        let pages = addrs(&map, 4);
        let mut status = vec![0; 4];
        query(&pages, &mut status).unwrap();
        assert_eq!(status, vec![0, -libc::ENOENT, 0, -libc::ENOENT]);
        let mut flags = vec![false; 4];
        resident(map.addr(), 4 * ps, &mut flags).unwrap();
        assert_eq!(flags, vec![true, true, true, false]);
        populate_read(map.addr() + ps, ps).unwrap();
        query(&pages, &mut status).unwrap();
        assert_eq!(status, vec![0, 0, 0, -libc::ENOENT]);
        // Populating read did not allocate the untouched page.
        resident(map.addr(), 4 * ps, &mut flags).unwrap();
        assert_eq!(flags, vec![true, true, true, false]);
    }

    #[test]
    fn mismatched_lengths_are_refused() {
        let mut status = vec![0; 1];
        assert!(move_to(&[0, 4096], &[0, 0], &mut status, MPOL_MF_MOVE).is_err());
        assert!(query(&[0, 4096], &mut status).is_err());
        assert!(resident(0, 3 * page_size(), &mut [false; 2]).is_err());
    }

    #[test]
    fn status_names() {
        assert_eq!(status_name(-libc::EBUSY), "EBUSY");
        assert_eq!(status_name(-libc::ENOENT), "ENOENT");
        assert_eq!(status_name(NOT_ATTEMPTED), "not attempted");
        assert_eq!(status_name(-200), "errno 200");
        assert_eq!(status_name(1), "node 1");
    }
}
