//! Helpers shared by the integration tests.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use guest_memory::{Error, Location, MemoryConfig, Placement, TierId, TierSpec, TieredMemory};

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// Slot `slot` of tier `tier`.
pub fn at(tier: usize, slot: usize) -> Location {
    Location {
        tier: TierId(tier),
        slot,
    }
}

/// A memfd tier spec.
pub fn memfd(name: &str, size: &str) -> TierSpec {
    format!("name={name},backend=memfd,size={size}")
        .parse()
        .unwrap()
}

/// A configuration from parts.
pub fn config(
    size: u64,
    frame_size: u64,
    tiers: Vec<TierSpec>,
    placement: Placement,
) -> MemoryConfig {
    MemoryConfig {
        size,
        frame_size,
        tiers,
        placement,
        ..MemoryConfig::default()
    }
}

/// Builds memory that must fail validation; returns the message.
pub fn config_error(cfg: &MemoryConfig) -> String {
    match TieredMemory::new(cfg) {
        Err(err @ Error::Config(_)) => err.to_string(),
        Err(other) => panic!("expected a configuration error, got {other:?}"),
        Ok(_) => panic!("expected a configuration error, got memory"),
    }
}

/// Number of mappings in this process of the memfd named after `tier`.
pub fn memfd_mappings(tier: &str) -> usize {
    let needle = format!("/memfd:tiervisor-{tier} ");
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&needle))
        .count()
}

/// Device and inode of an open file.
pub fn file_id(fd: BorrowedFd<'_>) -> (u64, u64) {
    // SAFETY: a plain C struct of integers, for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live fd and a live buffer of the right type.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    assert_eq!(rc, 0);
    (st.st_dev, st.st_ino)
}

/// Mappings in this process of the backing file of `mem`'s tier `tier`
/// (`/proc/self/maps` lines with its inode): its guest range pieces and its
/// view. Unlike [`memfd_mappings`], blind to other tests' tiers of the same
/// name, which run at the same time.
pub fn tier_mappings(mem: &TieredMemory, tier: usize) -> usize {
    let inode = file_id(mem.tiers()[tier].fd()).1.to_string();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.split_ascii_whitespace().nth(4) == Some(inode.as_str()))
        .count()
}

/// Reads a u64 at a host address.
pub fn read_host_u64(addr: u64) -> u64 {
    // SAFETY: callers pass addresses inside a live view or guest mapping of
    // the memory under test, 8-byte aligned.
    unsafe { std::ptr::read_volatile(addr as *const u64) }
}

/// Writes a u64 at a host address.
pub fn write_host_u64(addr: u64, value: u64) {
    // SAFETY: callers pass addresses inside a live view or guest mapping of
    // the memory under test, 8-byte aligned.
    unsafe { std::ptr::write_volatile(addr as *mut u64, value) }
}

/// A file path unique to this test run, removed on drop.
pub struct ScratchFile {
    pub path: PathBuf,
}

impl ScratchFile {
    /// A fresh file of `len` bytes under `dir`.
    pub fn new(dir: &Path, len: u64) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("guestmem-test-{}-{n}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(len).unwrap();
        Self { path }
    }

    /// The file's current length.
    pub fn len(&self) -> u64 {
        std::fs::metadata(&self.path).unwrap().len()
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The policy mode and node mask (first word) governing `addr`.
pub fn policy_at(addr: u64) -> (i32, libc::c_ulong) {
    const MPOL_F_ADDR: libc::c_ulong = 1 << 1;
    let mut mode: libc::c_int = -1;
    let mut mask: [libc::c_ulong; 16] = [0; 16];
    let max_node = mask.len() * libc::c_ulong::BITS as usize;
    // SAFETY: `mode` and `mask` are live buffers of the sizes passed; the
    // kernel only writes them and only reads the policy of `addr`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            max_node,
            addr as *mut libc::c_void,
            MPOL_F_ADDR,
        )
    };
    assert_eq!(rc, 0, "get_mempolicy: {}", std::io::Error::last_os_error());
    (mode, mask[0])
}

/// The `VmFlags` of the mapping holding `addr`, from `/proc/self/smaps`
/// (`ui`: registered for userfaultfd minor faults, `uw`: write-protect).
pub fn vm_flags(addr: u64) -> Vec<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            inside = start <= addr && addr < end;
        } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
            return flags.split_whitespace().map(str::to_owned).collect();
        }
    }
    panic!("no mapping holds {addr:#x}");
}
