//! The dirty log as a [`PageProbe`]: arming a page clears its dirty bit
//! (KVM write-protects it again, and the bit it held goes to every other
//! consumer, so the pre-copy migrator loses nothing); reading it back is a
//! peek, which leaves the bits of the pages written in KVM so that a page
//! the guest keeps writing takes one fault per window it is armed in, not
//! another right after.

use std::sync::Arc;

use guest_memory::migrate::{DirtyError, DirtySource};
use guest_memory::{FrameId, GpaRange, TieredMemory};

use crate::dirty_log::{DirtyConsumer, DirtyLogError};
use crate::window_sampler::PageProbe;

const PAGE: u64 = 4096;

/// Errors of the dirty-log probe.
#[derive(Debug, thiserror::Error)]
pub enum DirtyProbeError {
    /// Arming (a harvest of the armed pages) failed.
    #[error("arming sampled pages")]
    Arm(#[source] DirtyError),
    /// Reading the pages back failed.
    #[error("reading sampled pages back")]
    Peek(#[source] DirtyLogError),
}

/// Arms and reads sampled pages through one dirty-log consumer.
#[derive(Debug)]
pub(crate) struct DirtyProbe {
    consumer: DirtyConsumer,
    memory: Arc<TieredMemory>,
    pages_per_frame: u64,
    spans: Vec<GpaRange>,
    written: Vec<u64>,
}

impl DirtyProbe {
    pub fn new(consumer: DirtyConsumer, memory: Arc<TieredMemory>) -> Self {
        let pages_per_frame = (memory.frame_size() / PAGE).max(1);
        DirtyProbe {
            consumer,
            memory,
            pages_per_frame,
            spans: Vec::new(),
            written: Vec::new(),
        }
    }

    /// The guest-physical page of each sampled page (`frame × pages per
    /// frame + page`); pages of frames the table does not know are left out.
    fn spans_of(&mut self, pages: &[u64]) {
        let frames = self.memory.frames();
        self.spans.clear();
        self.spans.extend(pages.iter().filter_map(|&p| {
            let frame = usize::try_from(p / self.pages_per_frame).ok()?;
            let gpa = frames.gpa(FrameId(frame))?;
            Some(GpaRange::new(gpa + (p % self.pages_per_frame) * PAGE, PAGE))
        }));
    }
}

impl PageProbe for DirtyProbe {
    type Error = DirtyProbeError;

    fn arm(&mut self, pages: &[u64]) -> Result<(), DirtyProbeError> {
        self.spans_of(pages);
        self.consumer
            .reset(&self.spans)
            .map_err(DirtyProbeError::Arm)
    }

    fn touched(&mut self, pages: &[u64], touched: &mut [bool]) -> Result<(), DirtyProbeError> {
        self.spans_of(pages);
        self.written.clear();
        self.consumer
            .peek(&self.spans, &mut self.written)
            .map_err(DirtyProbeError::Peek)?;
        self.written.sort_unstable();
        let frames = self.memory.frames();
        for (t, &p) in touched.iter_mut().zip(pages) {
            let gpa = usize::try_from(p / self.pages_per_frame)
                .ok()
                .and_then(|f| frames.gpa(FrameId(f)))
                .map(|g| g + (p % self.pages_per_frame) * PAGE);
            *t = gpa.is_some_and(|g| self.written.binary_search(&g).is_ok());
        }
        Ok(())
    }
}
