//! The VM's KVM memslots: one per guest RAM region, backed by the tiered
//! memory's fixed host mapping, with KVM's dirty logging on when the
//! tiering side reads the dirty log.

use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::VmFd;

use access_track::Memslot;
use guest_memory::TieredMemory;

use crate::vm_error::{VmError, kvm_err};

/// Registers a memslot for every region of `memory`, dirty-logged when
/// `dirty_log` says, and returns them as the dirty log reads them.
pub(crate) fn register(
    vm_fd: &VmFd,
    memory: &TieredMemory,
    dirty_log: bool,
) -> Result<Vec<Memslot>, VmError> {
    let mut memslots = Vec::new();
    for (slot, region) in memory.regions().iter().enumerate() {
        memslots.push(Memslot {
            slot: slot as u32,
            gpa: region.gpa,
            len: region.len,
        });
        let slot_region = kvm_userspace_memory_region {
            slot: slot as u32,
            flags: if dirty_log {
                kvm_bindings::KVM_MEM_LOG_DIRTY_PAGES
            } else {
                0
            },
            guest_phys_addr: region.gpa,
            memory_size: region.len,
            userspace_addr: region.host_addr,
        };
        // SAFETY: the host range is mapped by `memory`, which the Vm
        // keeps alive until after the VM fd (and so the memslot) is gone.
        unsafe { vm_fd.set_user_memory_region(slot_region) }
            .map_err(kvm_err("registering a memory slot"))?;
    }
    Ok(memslots)
}
