//! Sources of "which 4 KiB pages were written since I last asked", used by
//! the pre-copy migrator to find pages the guest dirtied while a frame was
//! being copied.
//!
//! Two writers exist: vCPUs (seen through the KVM dirty log, implemented
//! by the VMM) and host threads writing guest memory through the host
//! mapping (devices, the hypercall handler). Host writers write inside a
//! [`HostWriteLog::write_section`]: the page is marked and written under a
//! shared lock, and `take`/`reset` hold the lock exclusively. A mark can
//! therefore never be taken (and the page copied) before the write it
//! announces has landed: the same guarantee KVM gives by re-protecting a
//! page when its dirty bit is cleared.
//!
//! The log is also where host writers are stopped: [`HostWriteLog::block`]
//! waits for the sections in flight and holds new ones back until
//! [`HostWriteLog::unblock`] (the VM-wide write stop).

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError, RwLock};

use thiserror::Error;

use crate::gpa_range::GpaRange;
use crate::page_bits::{set_pages, word_masks};

/// Size of a dirty-tracking page.
pub const PAGE_SIZE: u64 = 4096;

/// Errors reading a dirty source.
#[derive(Debug, Error)]
#[error("dirty log")]
pub struct DirtyError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

/// Something that knows which pages of guest RAM were written.
pub trait DirtySource: Send + Sync + Debug {
    /// Forgets earlier writes to `spans` and tracks new ones from now on.
    fn reset(&self, spans: &[GpaRange]) -> Result<(), DirtyError>;

    /// Appends to `out` the guest-physical address of every page in
    /// `spans` written since the last `reset`/`take` covering it, and
    /// forgets them.
    fn take(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError>;

    /// Like [`DirtySource::take`], for spans that are write-protected now:
    /// writers into them are blocked (possibly inside a write section), so
    /// this must not wait for writers. Writes still in flight block and
    /// land after the migration, in the destination.
    fn take_final(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError> {
        self.take(spans, out)
    }
}

/// Pages of guest RAM written by host threads, one bit per 4 KiB page.
#[derive(Debug)]
pub struct HostWriteLog {
    bits: Vec<AtomicU64>,
    enabled: AtomicBool,
    /// Shared by writers for mark + write; exclusive for take/reset.
    sections: RwLock<()>,
    /// Mirrors `blocks > 0`, read by writers inside their shared lock.
    blocked: AtomicBool,
    /// Blocks not yet lifted (they nest).
    blocks: Mutex<usize>,
    unblocked: Condvar,
}

impl HostWriteLog {
    /// A log covering guest-physical `[0, end)`; disabled until enabled.
    pub fn new(end: u64) -> Self {
        let pages = end.div_ceil(PAGE_SIZE);
        HostWriteLog {
            bits: (0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            enabled: AtomicBool::new(false),
            sections: RwLock::new(()),
            blocked: AtomicBool::new(false),
            blocks: Mutex::new(0),
            unblocked: Condvar::new(),
        }
    }

    /// Starts recording (pre-copy migration turns it on).
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::SeqCst);
    }

    /// Runs `write`, which writes `len` bytes of guest memory at `gpa`,
    /// with the pages marked written; waits first while writers are
    /// blocked.
    pub fn write_section<R>(&self, gpa: u64, len: u64, write: impl FnOnce() -> R) -> R {
        loop {
            let section = self.sections.read().unwrap_or_else(PoisonError::into_inner);
            // Read under the shared lock: `block` raises it before taking
            // the lock exclusively, so a section either sees it or is one
            // that `block` waits for.
            if !self.blocked.load(Ordering::SeqCst) {
                self.mark(gpa, len);
                return write();
            }
            drop(section);
            let mut blocks = self.blocks.lock().unwrap_or_else(PoisonError::into_inner);
            while *blocks > 0 {
                blocks = self
                    .unblocked
                    .wait(blocks)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }

    /// Holds host writers back: returns once no write section is in
    /// flight, and new ones wait until [`unblock`](Self::unblock). Blocks
    /// nest. Must not be called by a thread inside a write section.
    pub fn block(&self) {
        {
            let mut blocks = self.blocks.lock().unwrap_or_else(PoisonError::into_inner);
            *blocks += 1;
            self.blocked.store(true, Ordering::SeqCst);
        }
        drop(
            self.sections
                .write()
                .unwrap_or_else(PoisonError::into_inner),
        );
    }

    /// Lifts one [`block`](Self::block).
    pub fn unblock(&self) {
        let mut blocks = self.blocks.lock().unwrap_or_else(PoisonError::into_inner);
        *blocks = blocks.saturating_sub(1);
        if *blocks == 0 {
            self.blocked.store(false, Ordering::SeqCst);
            self.unblocked.notify_all();
        }
    }

    fn mark(&self, gpa: u64, len: u64) {
        if len == 0 || !self.enabled.load(Ordering::SeqCst) {
            return;
        }
        let first = gpa / PAGE_SIZE;
        let last = gpa.saturating_add(len - 1) / PAGE_SIZE;
        for (w, mask) in word_masks(first, last + 1) {
            if let Some(word) = self.bits.get(w) {
                word.fetch_or(mask, Ordering::SeqCst);
            }
        }
    }

    /// The bitmap words `spans` cover, with the mask of their pages.
    fn words(spans: &[GpaRange]) -> impl Iterator<Item = (usize, u64)> + '_ {
        spans.iter().flat_map(|&GpaRange { gpa, len }| {
            word_masks(gpa / PAGE_SIZE, (gpa + len).div_ceil(PAGE_SIZE))
        })
    }
}

impl DirtySource for HostWriteLog {
    fn reset(&self, spans: &[GpaRange]) -> Result<(), DirtyError> {
        let _exclusive = self
            .sections
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for (w, mask) in Self::words(spans) {
            if let Some(word) = self.bits.get(w) {
                word.fetch_and(!mask, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    fn take(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError> {
        let _exclusive = self
            .sections
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        self.collect(spans, out);
        Ok(())
    }

    /// Without the lock: a writer blocked on write-protection inside its
    /// section would otherwise deadlock with us. Every write that landed
    /// before protection was marked after the previous (exclusive) take.
    fn take_final(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError> {
        self.collect(spans, out);
        Ok(())
    }
}

impl HostWriteLog {
    fn collect(&self, spans: &[GpaRange], out: &mut Vec<u64>) {
        for (w, mask) in Self::words(spans) {
            if let Some(word) = self.bits.get(w) {
                let taken = word.fetch_and(!mask, Ordering::SeqCst) & mask;
                out.extend(set_pages(w, taken).map(|page| page * PAGE_SIZE));
            }
        }
    }
}

/// Several sources read as one (e.g. the KVM dirty log and the host log).
#[derive(Debug)]
pub struct CombinedDirty(pub Vec<std::sync::Arc<dyn DirtySource>>);

impl DirtySource for CombinedDirty {
    fn reset(&self, spans: &[GpaRange]) -> Result<(), DirtyError> {
        self.0.iter().try_for_each(|s| s.reset(spans))
    }

    fn take(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError> {
        self.merge(out, |s, out| s.take(spans, out))
    }

    fn take_final(&self, spans: &[GpaRange], out: &mut Vec<u64>) -> Result<(), DirtyError> {
        self.merge(out, |s, out| s.take_final(spans, out))
    }
}

impl CombinedDirty {
    fn merge(
        &self,
        out: &mut Vec<u64>,
        take: impl Fn(&dyn DirtySource, &mut Vec<u64>) -> Result<(), DirtyError>,
    ) -> Result<(), DirtyError> {
        let start = out.len();
        for s in &self.0 {
            take(s.as_ref(), out)?;
        }
        let mut unique = out.split_off(start);
        unique.sort_unstable();
        unique.dedup();
        out.extend(unique);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_waits_for_sections_in_flight_and_holds_new_ones() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicU64;
        use std::time::Duration;

        let log = Arc::new(HostWriteLog::new(1 << 20));
        let written = Arc::new(AtomicU64::new(0));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let slow = {
            let (log, written) = (log.clone(), written.clone());
            std::thread::spawn(move || {
                log.write_section(0, 8, || {
                    entered_tx.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(50));
                    written.fetch_add(1, Ordering::SeqCst);
                });
            })
        };
        entered_rx.recv().unwrap();
        log.block();
        assert_eq!(written.load(Ordering::SeqCst), 1, "block waited");
        let late = {
            let (log, written) = (log.clone(), written.clone());
            std::thread::spawn(move || {
                log.write_section(0, 8, || written.fetch_add(1, Ordering::SeqCst));
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(written.load(Ordering::SeqCst), 1, "held back");
        log.unblock();
        late.join().unwrap();
        slow.join().unwrap();
        assert_eq!(written.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn host_log_reports_written_pages_once() {
        let log = HostWriteLog::new(1 << 20);
        let note = |gpa, len| log.write_section(gpa, len, || ());
        note(0x1000, 8);
        let mut none = Vec::new();
        log.take(&[GpaRange::new(0, 1 << 20)], &mut none).unwrap();
        assert!(none.is_empty(), "disabled log records nothing");
        log.enable();
        note(0x1ff8, 16); // straddles pages 1 and 2
        note(0x8_0000, 1);
        let mut out = Vec::new();
        log.take(&[GpaRange::new(0, 0x4000)], &mut out).unwrap();
        assert_eq!(out, [0x1000, 0x2000]);
        out.clear();
        log.take(&[GpaRange::new(0, 1 << 20)], &mut out).unwrap();
        assert_eq!(out, [0x8_0000], "taken pages are forgotten; others stay");
        note(0x3000, 1);
        log.reset(&[GpaRange::new(0x3000, 0x1000)]).unwrap();
        out.clear();
        log.take(&[GpaRange::new(0, 1 << 20)], &mut out).unwrap();
        assert!(out.is_empty());
        // Across a word of the bitmap (pages 63, 64, 65): only the asked
        // pages are taken, whole words at a time.
        note(0x3_f000, 0x3000);
        log.take(&[GpaRange::new(0x4_0000, 0x1000)], &mut out)
            .unwrap();
        assert_eq!(out, [0x4_0000]);
        out.clear();
        log.reset(&[GpaRange::new(0x4_1000, 0x1000)]).unwrap();
        log.take(&[GpaRange::new(0, 1 << 20)], &mut out).unwrap();
        assert_eq!(out, [0x3_f000], "page 65 was reset, 63 stays");
    }
}
