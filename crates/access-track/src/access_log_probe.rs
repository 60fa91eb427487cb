//! The KVM access log as a [`PageProbe`]: arming a page clears its
//! accessed bit, and reading it back tests and clears the bit again. A
//! page found touched is not asked about again until it is re-armed, so
//! clearing on the peek loses nothing; neither costs the guest an exit.
//!
//! Pages are asked about in runs: sampled pages close together in guest-
//! physical order share one ioctl (one bitmap word), and isolated ones get
//! a call each, so the kernel never walks many pages nobody asked about.

use std::sync::Arc;

use guest_memory::{FrameId, TieredMemory};

use crate::kvm_access_log::{AccessLogError, KvmAccessLog};
use crate::window_sampler::PageProbe;

const PAGE: u64 = 4096;
/// Most pages one run covers: one bitmap word.
const RUN_PAGES: u64 = 64;
/// Largest gap between two sampled pages that still share a run: walking
/// a few pages nobody asked about costs less than another ioctl.
const RUN_GAP: u64 = 8;

/// Arms and reads sampled pages through the VM's access log.
#[derive(Debug)]
pub(crate) struct AccessLogProbe {
    log: KvmAccessLog,
    memory: Arc<TieredMemory>,
    pages_per_frame: u64,
    /// (guest frame number, index in the caller's pages), sorted.
    gfns: Vec<(u64, usize)>,
}

impl AccessLogProbe {
    pub fn new(log: KvmAccessLog, memory: Arc<TieredMemory>) -> Self {
        let pages_per_frame = (memory.frame_size() / PAGE).max(1);
        AccessLogProbe {
            log,
            memory,
            pages_per_frame,
            gfns: Vec::new(),
        }
    }

    /// Tests and clears the accessed bits of `pages` (`frame × pages per
    /// frame + page`), calling `seen(i)` for each `pages[i]` found
    /// accessed; pages of frames the table does not know are skipped.
    fn harvest(
        &mut self,
        pages: &[u64],
        mut seen: impl FnMut(usize),
    ) -> Result<(), AccessLogError> {
        let frames = self.memory.frames();
        self.gfns.clear();
        self.gfns
            .extend(pages.iter().enumerate().filter_map(|(i, &p)| {
                let frame = usize::try_from(p / self.pages_per_frame).ok()?;
                let gpa = frames.gpa(FrameId(frame))?;
                Some((gpa / PAGE + p % self.pages_per_frame, i))
            }));
        self.gfns.sort_unstable();
        let mut start = 0;
        while start < self.gfns.len() {
            let first = self.gfns[start].0;
            let mut end = start + 1;
            while end < self.gfns.len()
                && self.gfns[end].0 - self.gfns[end - 1].0 <= RUN_GAP
                && self.gfns[end].0 - first < RUN_PAGES
            {
                end += 1;
            }
            let npages = self.gfns[end - 1].0 - first + 1;
            let mut word = [0u64; 1];
            if self.log.harvest(first, npages, &mut word, true)? > 0 {
                for &(gfn, i) in &self.gfns[start..end] {
                    if word[0] & (1 << (gfn - first)) != 0 {
                        seen(i);
                    }
                }
            }
            start = end;
        }
        Ok(())
    }
}

impl PageProbe for AccessLogProbe {
    type Error = AccessLogError;

    fn arm(&mut self, pages: &[u64]) -> Result<(), AccessLogError> {
        self.harvest(pages, |_| {})
    }

    fn touched(&mut self, pages: &[u64], touched: &mut [bool]) -> Result<(), AccessLogError> {
        touched.fill(false);
        self.harvest(pages, |i| touched[i] = true)
    }
}
