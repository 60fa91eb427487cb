//! What the fault sampler knows between the handler thread, the round
//! thread and `collect()`: the pages zapped in the current round (armed),
//! and per frame the pages observed, seen touched and seen written in the
//! current interval.
//!
//! A page counts once: the first minor fault on an armed page disarms it.
//! A round's close disarms what is left (watched, not touched). A remap
//! of a frame disarms its pages and takes them back out of the observed
//! count: their outcome is unknown (the new mapping is populated, so they
//! will never fault), which is neither a touch nor evidence of none.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use guest_memory::migrate::MinorFaultSink;

const PAGE: u64 = 4096;

/// Per-frame counts of one interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub observed: Vec<u32>,
    pub accessed: Vec<u32>,
    pub dirty: Vec<u32>,
}

/// Totals since the sampler started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SamplerTotals {
    /// Pages zapped.
    pub zapped: u64,
    /// Zapped pages touched within the watch window.
    pub touched: u64,
    /// Zapped pages whose frame moved before the window closed.
    pub voided: u64,
    /// Rounds run.
    pub rounds: u64,
}

#[derive(Debug, Default)]
struct Inner {
    /// Armed page → frame.
    armed: HashMap<u64, u32>,
    counts: Counts,
    totals: SamplerTotals,
}

/// The sampler's shared state; the guard's minor-fault sink.
#[derive(Debug)]
pub(crate) struct SampleState {
    inner: Mutex<Inner>,
}

impl SampleState {
    pub fn new(frames: usize) -> Self {
        SampleState {
            inner: Mutex::new(Inner {
                counts: Counts {
                    observed: vec![0; frames],
                    accessed: vec![0; frames],
                    dirty: vec![0; frames],
                },
                ..Default::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Arms `pages` pages from `start`, of `frame` (call before zapping
    /// them, so a touch right after the zap is counted).
    pub fn arm(&self, frame: usize, start: u64, pages: u32) {
        let mut s = self.lock();
        let Some(observed) = s.counts.observed.get_mut(frame) else {
            return;
        };
        *observed += pages;
        s.totals.zapped += u64::from(pages);
        for p in 0..u64::from(pages) {
            s.armed.insert(start + p * PAGE, frame as u32);
        }
    }

    /// Ends the watch window: pages still armed were not touched in time.
    pub fn close_round(&self) {
        let mut s = self.lock();
        s.armed.clear();
        s.totals.rounds += 1;
    }

    /// The interval's counts (reset for the next one).
    pub fn take(&self, out: &mut Counts) {
        let mut s = self.lock();
        let frames = s.counts.observed.len();
        std::mem::swap(out, &mut s.counts);
        s.counts.observed = vec![0; frames];
        s.counts.accessed = vec![0; frames];
        s.counts.dirty = vec![0; frames];
    }

    pub fn totals(&self) -> SamplerTotals {
        self.lock().totals
    }
}

impl MinorFaultSink for SampleState {
    fn minor_fault(&self, page: u64, write: bool) {
        let mut s = self.lock();
        if let Some(frame) = s.armed.remove(&page) {
            let f = frame as usize;
            s.counts.accessed[f] += 1;
            if write {
                s.counts.dirty[f] += 1;
            }
            s.totals.touched += 1;
        }
    }

    fn remapped(&self, start: u64, len: u64) {
        let mut s = self.lock();
        let inner = &mut *s;
        let mut voided = 0;
        inner.armed.retain(|&page, &mut frame| {
            let inside = start <= page && page < start + len;
            if inside {
                let observed = &mut inner.counts.observed[frame as usize];
                *observed = observed.saturating_sub(1);
                voided += 1;
            }
            !inside
        });
        inner.totals.voided += voided;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_counts_once_and_only_while_armed() {
        let s = SampleState::new(2);
        s.arm(1, 0x10_0000, 4);
        s.minor_fault(0x10_1000, false);
        s.minor_fault(0x10_1000, true);
        s.minor_fault(0x10_2000, true);
        s.minor_fault(0x20_0000, true);
        s.close_round();
        s.minor_fault(0x10_3000, false);
        let mut c = Counts::default();
        s.take(&mut c);
        assert_eq!(c.observed, [0, 4]);
        assert_eq!(c.accessed, [0, 2]);
        assert_eq!(c.dirty, [0, 1]);
        s.take(&mut c);
        assert_eq!(c.observed, [0, 0], "reset after take");
        assert_eq!(s.totals().touched, 2);
    }

    #[test]
    fn a_remap_voids_untouched_pages_and_keeps_touched_ones() {
        let s = SampleState::new(2);
        s.arm(0, 0x1000, 3);
        s.arm(1, 0x20_0000, 2);
        s.minor_fault(0x1000, false);
        s.remapped(0, 0x20_0000);
        // The voided pages never fault; late faults are not counted.
        s.minor_fault(0x2000, false);
        s.minor_fault(0x20_0000, false);
        let mut c = Counts::default();
        s.take(&mut c);
        assert_eq!(c.observed, [1, 2], "two pages of frame 0 voided");
        assert_eq!(c.accessed, [1, 1]);
        assert_eq!(s.totals().voided, 2);
    }
}
