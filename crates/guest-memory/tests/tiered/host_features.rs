//! NUMA binding on the host's real node 0.

use guest_memory::FrameId;
use guest_memory::{MemoryConfig, TieredMemory};

use crate::common::{MIB, policy_at};

#[test]
fn numa_node_binds_the_view_and_the_guest_range() {
    let spec = "name=dram,backend=memfd,size=8M,numa-node=0"
        .parse()
        .unwrap();
    let mem = TieredMemory::new(&MemoryConfig::new(8 * MIB, vec![spec])).unwrap();
    let view = mem.tiers()[0].view_base();
    assert_eq!(policy_at(view), (libc::MPOL_BIND, 1));
    // shmem keeps the policy per file: the guest's mapping of it sees it too.
    let guest = mem.frames().host_addr(FrameId(2)).unwrap();
    assert_eq!(policy_at(guest), (libc::MPOL_BIND, 1));
    mem.verify_backing().unwrap();
}

#[test]
fn without_numa_node_the_default_policy_applies() {
    let spec = "name=dram,backend=memfd,size=4M".parse().unwrap();
    let mem = TieredMemory::new(&MemoryConfig::new(4 * MIB, vec![spec])).unwrap();
    assert_eq!(policy_at(mem.tiers()[0].view_base()).0, libc::MPOL_DEFAULT);
}
