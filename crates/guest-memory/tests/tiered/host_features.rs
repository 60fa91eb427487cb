//! NUMA binding on the host's real node 0.

use guest_memory::{MemoryConfig, TieredMemory};

use crate::common::MIB;

/// `get_mempolicy` flag: report the policy of the given address.
const MPOL_F_ADDR: libc::c_ulong = 1 << 1;

/// The policy mode and node mask (first word) governing `addr`.
fn policy_at(addr: u64) -> (i32, libc::c_ulong) {
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

#[test]
fn numa_node_binds_the_view_and_the_guest_range() {
    let spec = "name=dram,backend=memfd,size=8M,numa-node=0"
        .parse()
        .unwrap();
    let mem = TieredMemory::new(&MemoryConfig::new(8 * MIB, vec![spec])).unwrap();
    let view = mem.tiers()[0].view_base();
    assert_eq!(policy_at(view), (libc::MPOL_BIND, 1));
    // shmem keeps the policy per file: the guest's mapping of it sees it too.
    let guest = mem.frames().host_addr(2).unwrap();
    assert_eq!(policy_at(guest), (libc::MPOL_BIND, 1));
    mem.verify_backing().unwrap();
}

#[test]
fn without_numa_node_the_default_policy_applies() {
    let spec = "name=dram,backend=memfd,size=4M".parse().unwrap();
    let mem = TieredMemory::new(&MemoryConfig::new(4 * MIB, vec![spec])).unwrap();
    assert_eq!(policy_at(mem.tiers()[0].view_base()).0, libc::MPOL_DEFAULT);
}
