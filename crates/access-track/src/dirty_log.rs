//! The single owner of a VM's KVM dirty log.
//!
//! Memslots are registered with `KVM_MEM_LOG_DIRTY_PAGES` and the VM with
//! `KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2` (bits initially set, so enabling
//! logging costs nothing until a range is first cleared). A *harvest* reads
//! a slot's bitmap (`KVM_GET_DIRTY_LOG`, which does not clear with manual
//! protection), clears the set bits of the harvested range in KVM
//! (`KVM_CLEAR_DIRTY_LOG`, which write-protects those pages again so the
//! next write re-marks them) and ORs them into every consumer's pending
//! bitmap. Each consumer then takes its own pending bits, or *peeks* at
//! them and KVM's without harvesting (the sampled tracker's read after its
//! window, which leaves the pages written there writable).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kvm_bindings::{
    KVM_DIRTY_LOG_INITIALLY_SET, KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE, kvm_clear_dirty_log,
    kvm_enable_cap,
};
use kvm_ioctls::VmFd;
use thiserror::Error;

use guest_memory::GpaRange;
use guest_memory::migrate::{DirtyError, DirtySource};
use guest_memory::page_bits::{set_pages, word_masks};

const PAGE: u64 = 4096;
const KVMIO: u64 = 0xae;
/// `_IOWR(KVMIO, 0xc0, struct kvm_clear_dirty_log)`.
const KVM_CLEAR_DIRTY_LOG: u64 =
    (3 << 30) | ((std::mem::size_of::<kvm_clear_dirty_log>() as u64) << 16) | (KVMIO << 8) | 0xc0;

/// Errors of the dirty log.
#[derive(Debug, Error)]
pub enum DirtyLogError {
    /// The host KVM lacks manual dirty-log protection.
    #[error("host KVM lacks KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2")]
    NoManualProtect,
    /// Enabling the capability failed.
    #[error("enabling manual dirty-log protection")]
    Enable(#[source] kvm_ioctls::Error),
    /// Reading the log failed.
    #[error("KVM_GET_DIRTY_LOG on slot {slot}")]
    Get {
        /// The memslot.
        slot: u32,
        /// The error.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// Clearing the log failed.
    #[error("KVM_CLEAR_DIRTY_LOG on slot {slot}")]
    Clear {
        /// The memslot.
        slot: u32,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Turns on manual dirty-log protection (bits initially set). Call before
/// registering memslots with `KVM_MEM_LOG_DIRTY_PAGES`.
pub fn enable_manual_protect(vm: &VmFd) -> Result<(), DirtyLogError> {
    if vm.check_extension_raw(u64::from(kvm_bindings::KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2)) <= 0 {
        return Err(DirtyLogError::NoManualProtect);
    }
    let cap = kvm_enable_cap {
        cap: kvm_bindings::KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2,
        args: [
            u64::from(KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE | KVM_DIRTY_LOG_INITIALLY_SET),
            0,
            0,
            0,
        ],
        ..Default::default()
    };
    vm.enable_cap(&cap).map_err(DirtyLogError::Enable)
}

/// A memslot with dirty logging on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memslot {
    /// Slot number.
    pub slot: u32,
    /// First guest-physical address.
    pub gpa: u64,
    /// Length in bytes (a multiple of 4 KiB).
    pub len: u64,
}

impl Memslot {
    fn pages(&self) -> u64 {
        self.len / PAGE
    }
}

/// Pending bits of one consumer, one per 4 KiB page of each memslot.
#[derive(Debug)]
struct Pending {
    slots: Vec<Vec<AtomicU64>>,
}

#[derive(Debug)]
struct Shared {
    vm: Arc<VmFd>,
    slots: Vec<Memslot>,
    consumers: Mutex<Vec<Arc<Pending>>>,
    /// Serializes harvests (one GET+CLEAR at a time).
    harvest: Mutex<()>,
}

/// The owner of a VM's dirty log.
#[derive(Clone, Debug)]
pub struct KvmDirtyLog {
    shared: Arc<Shared>,
}

/// One consumer's view of the dirty log.
#[derive(Debug)]
pub struct DirtyConsumer {
    log: KvmDirtyLog,
    pending: Arc<Pending>,
}

impl KvmDirtyLog {
    /// The log of `vm`, whose `slots` have dirty logging on.
    pub fn new(vm: Arc<VmFd>, slots: Vec<Memslot>) -> Self {
        KvmDirtyLog {
            shared: Arc::new(Shared {
                vm,
                slots,
                consumers: Mutex::default(),
                harvest: Mutex::default(),
            }),
        }
    }

    /// A new consumer; it sees writes from the next harvest on.
    pub fn subscribe(&self) -> DirtyConsumer {
        let pending = Arc::new(Pending {
            slots: self
                .shared
                .slots
                .iter()
                .map(|s| {
                    (0..s.pages().div_ceil(64))
                        .map(|_| AtomicU64::new(0))
                        .collect()
                })
                .collect(),
        });
        self.shared
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pending.clone());
        DirtyConsumer {
            log: self.clone(),
            pending,
        }
    }

    /// The slot index and page range `[first, end)` of `span` in it.
    fn locate(&self, span: GpaRange) -> Option<(usize, u64, u64)> {
        let GpaRange { gpa, len } = span;
        let i = self
            .shared
            .slots
            .iter()
            .position(|s| s.gpa <= gpa && gpa < s.gpa + s.len)?;
        let s = self.shared.slots[i];
        let first = (gpa - s.gpa) / PAGE;
        let end = ((gpa + len).min(s.gpa + s.len) - s.gpa).div_ceil(PAGE);
        Some((i, first, end))
    }

    /// The page ranges of `spans`, grouped by the index of their slot;
    /// slots without a range are left out.
    fn ranges_by_slot(&self, spans: &[GpaRange]) -> Vec<(usize, Vec<(u64, u64)>)> {
        let mut by_slot: Vec<Vec<(u64, u64)>> = vec![Vec::new(); self.shared.slots.len()];
        for &span in spans {
            if let Some((i, first, end)) = self.locate(span) {
                by_slot[i].push((first, end));
            }
        }
        by_slot
            .into_iter()
            .enumerate()
            .filter(|(_, r)| !r.is_empty())
            .collect()
    }

    /// KVM's dirty bitmap of `slot` (with manual protection, reading it
    /// neither clears nor re-protects anything).
    fn get(&self, slot: Memslot) -> Result<Vec<u64>, DirtyLogError> {
        self.shared
            .vm
            .get_dirty_log(slot.slot, slot.len as usize)
            .map_err(|source| DirtyLogError::Get {
                slot: slot.slot,
                source,
            })
    }

    /// Moves KVM's dirty bits of `spans` into every consumer's pending
    /// bitmap and clears (re-protects) them in KVM.
    fn harvest(&self, spans: &[GpaRange]) -> Result<(), DirtyLogError> {
        let _one = self
            .shared
            .harvest
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let consumers = self
            .shared
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (i, ranges) in self.ranges_by_slot(spans) {
            let slot = self.shared.slots[i];
            let bitmap = self.get(slot)?;
            // Only the requested ranges are harvested: other pages keep
            // their bits in KVM for a later harvest. `mine` covers the
            // words from the ranges' first to their last, from word
            // `base`: a pre-copy group asks for a frame or two of a slot
            // of many GiB, many times a batch.
            let base = ranges.iter().map(|&(first, _)| first / 64).min();
            let end = ranges.iter().map(|&(_, end)| end.div_ceil(64)).max();
            let (Some(base), Some(end)) = (base, end) else {
                continue;
            };
            let (base, end) = (base as usize, (end as usize).min(bitmap.len()));
            let mut mine = vec![0u64; end.saturating_sub(base)];
            for (first, end) in ranges {
                for (w, mask) in word_masks(first, end) {
                    if let (Some(word), Some(into)) = (bitmap.get(w), mine.get_mut(w - base)) {
                        *into |= word & mask;
                    }
                }
            }
            self.clear(slot, base, &mine)?;
            for c in &consumers {
                for (w, bits) in mine.iter().enumerate().filter(|(_, b)| **b != 0) {
                    c.slots[i][base + w].fetch_or(*bits, Ordering::SeqCst);
                }
            }
        }
        Ok(())
    }

    /// `KVM_CLEAR_DIRTY_LOG` for the set bits of `bits` (the slot's
    /// bitmap from word `base` on), in 64-page aligned windows as the API
    /// requires ([`clear_windows`]).
    fn clear(&self, slot: Memslot, base: usize, bits: &[u64]) -> Result<(), DirtyLogError> {
        for (first_page, num_pages, mut window) in clear_calls(base, bits, slot.pages()) {
            let mut arg = kvm_clear_dirty_log {
                slot: slot.slot,
                num_pages: num_pages as u32,
                first_page,
                ..Default::default()
            };
            arg.__bindgen_anon_1.dirty_bitmap = window.as_mut_ptr().cast();
            // SAFETY: `arg` is a valid kvm_clear_dirty_log whose bitmap
            // points to `window`, which covers `num_pages` bits and lives
            // across the call; KVM only reads it.
            let rc = unsafe {
                libc::ioctl(
                    std::os::fd::AsRawFd::as_raw_fd(&*self.shared.vm),
                    KVM_CLEAR_DIRTY_LOG as libc::c_ulong,
                    &arg,
                )
            };
            if rc < 0 {
                return Err(DirtyLogError::Clear {
                    slot: slot.slot,
                    source: std::io::Error::last_os_error(),
                });
            }
        }
        Ok(())
    }
}

impl DirtyConsumer {
    fn take_pending(&self, spans: &[GpaRange], out: Option<&mut Vec<u64>>) {
        let mut out = out;
        for &span in spans {
            let Some((i, first, end)) = self.log.locate(span) else {
                continue;
            };
            let base = self.log.shared.slots[i].gpa;
            for (w, mask) in word_masks(first, end) {
                let taken = self.pending.slots[i][w].fetch_and(!mask, Ordering::SeqCst) & mask;
                if let Some(out) = out.as_deref_mut() {
                    out.extend(set_pages(w, taken).map(|page| base + page * PAGE));
                }
            }
        }
    }

    /// Appends to `out` the pages of `spans` written since their last
    /// harvest (this consumer's pending bits and KVM's bits) without
    /// harvesting them: KVM keeps its bits and the pages stay writable, so
    /// a page the guest goes on writing takes no second fault. For a
    /// consumer that arms its pages with
    /// [`DirtySource::reset`] before each look (the sampled tracker);
    /// every other consumer still gets these bits at its next harvest.
    pub fn peek(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyLogError> {
        // Under the harvest lock, so no harvest moves a bit from KVM into
        // the pending bitmap between the two reads below.
        let _one = self
            .log
            .shared
            .harvest
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (i, ranges) in self.log.ranges_by_slot(spans) {
            let slot = self.log.shared.slots[i];
            let bitmap = self.log.get(slot)?;
            for (first, end) in ranges {
                for (w, mask) in word_masks(first, end) {
                    let pending =
                        self.pending.slots[i][w].fetch_and(!mask, Ordering::SeqCst) & mask;
                    let kvm = bitmap.get(w).map_or(0, |word| word & mask);
                    out.extend(set_pages(w, pending | kvm).map(|page| slot.gpa + page * PAGE));
                }
            }
        }
        Ok(())
    }
}

impl Drop for DirtyConsumer {
    /// Unsubscribes: later harvests no longer fan out to this consumer.
    fn drop(&mut self) {
        self.log
            .shared
            .consumers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|p| !Arc::ptr_eq(p, &self.pending));
    }
}

impl DirtySource for DirtyConsumer {
    fn reset(&self, spans: &[GpaRange]) -> Result<(), DirtyError> {
        self.log
            .harvest(spans)
            .map_err(|e| DirtyError(Box::new(e)))?;
        self.take_pending(spans, None);
        Ok(())
    }

    fn take(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError> {
        self.log
            .harvest(spans)
            .map_err(|e| DirtyError(Box::new(e)))?;
        self.take_pending(spans, Some(out));
        Ok(())
    }
}

/// Most set bits one `KVM_CLEAR_DIRTY_LOG` clears. KVM holds the MMU lock
/// for a whole call, write-protecting one page per set bit, so the bound
/// keeps vCPU faults from waiting long behind a clear (16 Ki bits took
/// about 0.7 ms here). Words without set bits cost KVM a test each, and
/// every call ends in a TLB flush that kicks every vCPU out of the guest:
/// so scattered samples (a few hundred pages per window) go in one call
/// per memslot, not one per run of set bits.
const MAX_CLEAR_BITS: u32 = 4096;

/// The `KVM_CLEAR_DIRTY_LOG` calls for the set bits of `bits`, the
/// bitmap of a slot of `pages` pages from word `base` on: each call's
/// first page, page count and bitmap ([`clear_windows`]).
fn clear_calls(base: usize, bits: &[u64], pages: u64) -> Vec<(u64, u64, Vec<u64>)> {
    clear_windows(bits)
        .into_iter()
        .map(|(start, end)| {
            let first_page = (base + start) as u64 * 64;
            let num_pages = ((end - start) as u64 * 64).min(pages - first_page);
            (first_page, num_pages, bits[start..end].to_vec())
        })
        .collect()
}

/// The word ranges `[start, end)` of `bits` to clear, one call each: from
/// a word with set bits on, over gaps, until [`MAX_CLEAR_BITS`] set bits,
/// so every range starts and ends with set bits.
fn clear_windows(bits: &[u64]) -> Vec<(usize, usize)> {
    let mut windows = Vec::new();
    let mut w = 0;
    while w < bits.len() {
        if bits[w] == 0 {
            w += 1;
            continue;
        }
        let start = w;
        let mut set = 0;
        let mut end = start;
        while end < bits.len() && set + bits[end].count_ones() <= MAX_CLEAR_BITS {
            set += bits[end].count_ones();
            end += 1;
        }
        // Back to the last word with set bits.
        while end > start + 1 && bits[end - 1] == 0 {
            end -= 1;
        }
        windows.push((start, end));
        w = end;
    }
    windows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_calls_are_placed_from_the_base_word() {
        // Words 10 and 12 of a 1000-page slot, given from word 10 on.
        let calls = clear_calls(10, &[0b1, 0, 1 << 5], 1000);
        assert_eq!(calls, [(640, 192, vec![0b1, 0, 1 << 5])]);
        // The slot's last, partial word: the count stops at its end.
        assert_eq!(clear_calls(15, &[0b11], 1000), [(960, 40, vec![0b11])]);
        assert!(clear_calls(3, &[0, 0], 1000).is_empty());
    }

    #[test]
    fn clears_span_gaps_up_to_a_bound_and_start_and_end_on_set_bits() {
        let mut bits = vec![0u64; 8192];
        for w in [3, 4, 10, 600, 8000] {
            bits[w] = 1;
        }
        // Scattered bits: one call over the gaps.
        assert_eq!(clear_windows(&bits), vec![(3, 8001)]);
        assert!(clear_windows(&[0; 8]).is_empty());
        // Dense bits: 4096 per call (64 full words).
        let all = vec![u64::MAX; 150];
        assert_eq!(clear_windows(&all), vec![(0, 64), (64, 128), (128, 150)]);
        let mut gap = vec![0u64; 200];
        gap[0] = u64::MAX;
        gap[199] = 1;
        assert_eq!(clear_windows(&gap), vec![(0, 200)]);
    }

    #[test]
    fn clear_ioctl_number_matches_the_uapi() {
        // linux/kvm.h: _IOWR(KVMIO, 0xc0, struct kvm_clear_dirty_log), 24 bytes.
        assert_eq!(KVM_CLEAR_DIRTY_LOG, 0xc018_aec0);
    }
}
