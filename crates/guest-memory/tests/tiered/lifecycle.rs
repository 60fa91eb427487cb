//! What `TieredMemory` leaves behind when dropped.

use guest_memory::{MemoryConfig, TieredMemory};
use vm_memory::{Bytes, GuestAddress};

use crate::common::{MIB, memfd, memfd_mappings};

#[test]
fn drop_unmaps_views_and_guest_ranges() {
    let mem =
        TieredMemory::new(&MemoryConfig::new(4 * MIB, vec![memfd("dropcheck", "4M")])).unwrap();
    // The view plus the guest range (one coalesced mapping).
    assert_eq!(memfd_mappings("dropcheck"), 2);
    drop(mem);
    assert_eq!(memfd_mappings("dropcheck"), 0);
}

#[test]
fn a_surviving_guest_memory_clone_keeps_its_memory() {
    let mem =
        TieredMemory::new(&MemoryConfig::new(4 * MIB, vec![memfd("leakcheck", "4M")])).unwrap();
    let clone = mem.guest_memory().clone();
    drop(mem);
    // The guest range is kept (leaked) instead of dangling under the clone.
    assert_eq!(memfd_mappings("leakcheck"), 1);
    clone.write_obj(42u64, GuestAddress(MIB)).unwrap();
    assert_eq!(clone.read_obj::<u64>(GuestAddress(MIB)).unwrap(), 42);
}

#[test]
fn tiered_memory_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<TieredMemory>();
}

#[test]
fn one_speed_measurement_runs_at_a_time() {
    let mem =
        TieredMemory::new(&MemoryConfig::new(4 * MIB, vec![memfd("speedcheck", "4M")])).unwrap();
    assert!(!mem.measuring_speeds());
    assert!(mem.begin_measuring_speeds());
    assert!(mem.measuring_speeds());
    assert!(!mem.begin_measuring_speeds(), "a second one is refused");
    mem.measure_speeds();
    assert!(!mem.measuring_speeds(), "measuring ends it");
    assert!(matches!(
        mem.tier_usage()[0].speed,
        guest_memory::TierSpeed::Measured { .. }
    ));
    assert!(mem.begin_measuring_speeds(), "and the next may start");
    mem.measure_speeds();
}
