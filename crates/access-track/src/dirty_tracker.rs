//! The `dirty-log` tracker: per interval, the 4 KiB pages of each frame
//! that KVM saw written (EPT/NPT dirty bits; shadow-page-table write
//! faults under PVM), read through the dirty log's single owner so the
//! pre-copy migrator's bits are not stolen. Writes only: a frame that is
//! only read leaves no evidence here (fault sampling sees reads).

use std::sync::Arc;
use std::time::Instant;

use guest_memory::TieredMemory;
use guest_memory::migrate::DirtySource;

use crate::dirty_log::{DirtyConsumer, KvmDirtyLog};
use crate::sample::{AccessSample, AccessTracker, Coverage, TrackerError, TrackerStatus};

const PAGE: u64 = 4096;

/// The dirty-log tracker of one VM.
#[derive(Debug)]
pub struct DirtyLogTracker {
    consumer: DirtyConsumer,
    memory: Arc<TieredMemory>,
    spans: Vec<(u64, u64)>,
    last: Instant,
    pages: Vec<u64>,
}

impl DirtyLogTracker {
    /// A tracker reading `log` for the RAM of `memory`.
    pub fn new(log: &KvmDirtyLog, memory: Arc<TieredMemory>) -> Self {
        let spans = memory.regions().iter().map(|r| (r.gpa, r.len)).collect();
        DirtyLogTracker {
            consumer: log.subscribe(),
            memory,
            spans,
            last: Instant::now(),
            pages: Vec::new(),
        }
    }
}

impl AccessTracker for DirtyLogTracker {
    fn name(&self) -> &str {
        "dirty-log"
    }

    fn collect(&mut self) -> Result<AccessSample, TrackerError> {
        let now = Instant::now();
        let frames = self.memory.frames();
        let pages_per_frame = (frames.frame_size() / PAGE).max(1) as u32;
        let mut sample = AccessSample::new(frames.len(), pages_per_frame, now - self.last)?;
        self.last = now;
        self.pages.clear();
        self.consumer
            .take(&self.spans, &mut self.pages)
            .map_err(|e| TrackerError::Collect {
                tracker: self.name().to_owned(),
                source: Box::new(e),
            })?;
        for &gpa in &self.pages {
            if let Some(f) = frames.frame_of_gpa(gpa) {
                sample.dirty[f] = sample.dirty[f].saturating_add(1);
                sample.accessed[f] = sample.accessed[f].saturating_add(1);
            }
        }
        sample.coverage = Coverage::Full;
        Ok(sample)
    }

    fn status(&self) -> TrackerStatus {
        TrackerStatus {
            sees_reads: false,
            sees_writes: true,
            limitations: vec![
                "dirty-log: sees writes only; frames the guest only reads look cold".into(),
            ],
        }
    }
}
