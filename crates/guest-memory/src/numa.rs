//! Binding memory to a host NUMA node with `mbind(MPOL_BIND)`. For shmem
//! (memfd) the policy is stored with the file, so pages later faulted in
//! through any other mapping of the same range (the guest's) follow it too.

use std::io;

/// Bits in one word of a node mask.
const BITS_PER_WORD: usize = libc::c_ulong::BITS as usize;

/// Binds the mapped range `[addr, addr + len)` to `node` with `MPOL_BIND`.
pub(crate) fn bind_to_node(addr: usize, len: usize, node: u32) -> io::Result<()> {
    let node = node as usize;
    let mut mask: Vec<libc::c_ulong> = vec![0; node / BITS_PER_WORD + 1];
    mask[node / BITS_PER_WORD] |= 1 << (node % BITS_PER_WORD);
    // The kernel reads `maxnode - 1` bits (a historical off-by-one), so pass one more.
    let max_node = mask.len() * BITS_PER_WORD + 1;
    // SAFETY: mbind only changes the memory policy of `[addr, addr + len)`,
    // which the caller maps; `mask` is a live buffer of `max_node - 1` bits
    // that the kernel only reads.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len,
            libc::MPOL_BIND,
            mask.as_ptr(),
            max_node,
            0u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
