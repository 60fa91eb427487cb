//! The fault sampler's round thread: each round zaps one run of 4 KiB
//! pages in each of the round's frames, in one batch (`MADV_DONTNEED` on
//! the guest's host mapping, see [`Zapper`]: shmem keeps the pages, only
//! the page-table entries go, and KVM's MMU notifier drops its own
//! mappings of them), waits the watch window while the guard's handler
//! counts the touched pages, then maps the untouched ones back with one
//! `UFFDIO_CONTINUE` per run.
//!
//! Frames inside a migration window are skipped: zapping happens under the
//! guard's window lock, and a frame being moved is never zapped. The
//! thread never touches guest memory and never waits on the guest.

use std::sync::Arc;
use std::time::Instant;

use guest_memory::FrameId;
use guest_memory::TieredMemory;
use guest_memory::migrate::{MinorFaultSink, WriteGuard};

use crate::fault_config::FaultSampleConfig;
use crate::fault_state::SampleState;
use crate::stoppable::{StopFlag, StoppableThread};
use crate::xorshift::XorShift;
use crate::zap::Zapper;

const PAGE: u64 = 4096;

/// The running round thread; stops and restores every zapped page on drop.
#[derive(Debug)]
pub(crate) struct Rounds {
    _thread: StoppableThread,
}

struct Job {
    memory: Arc<TieredMemory>,
    guard: Arc<WriteGuard>,
    state: Arc<SampleState>,
    config: FaultSampleConfig,
    stop: StopFlag,
}

impl Rounds {
    pub fn start(
        memory: Arc<TieredMemory>,
        guard: Arc<WriteGuard>,
        state: Arc<SampleState>,
        config: FaultSampleConfig,
    ) -> std::io::Result<Self> {
        let thread = StoppableThread::spawn("fault-sampler", move |stop| {
            Job {
                memory,
                guard,
                state,
                config,
                stop,
            }
            .run()
        })?;
        Ok(Rounds { _thread: thread })
    }
}

impl Job {
    fn run(self) {
        let frames = self.memory.frames();
        let count = frames.len();
        let frame_size = frames.frame_size();
        let pages_per_frame = (frame_size / PAGE).max(1) as u32;
        let (visit, per_round) = self.config.plan(count, pages_per_frame);
        let mut rng = XorShift::new(self.config.seed);
        let mut cursor = 0;
        let mut runs = Vec::with_capacity(per_round);
        let zapper = Zapper::new();
        while !self.stop.stopping() && count > 0 {
            let started = Instant::now();
            // The whole round is armed and zapped under one hold of the
            // window lock, in one batch (one host TLB flush).
            let window = self.guard.lock_window();
            for _ in 0..per_round.min(count) {
                let frame = cursor;
                cursor = (cursor + 1) % count;
                let Some(host) = frames.host_addr(FrameId(frame)) else {
                    continue;
                };
                let offset = rng.below(u64::from(pages_per_frame - visit + 1));
                if window.overlaps(host, frame_size) {
                    continue;
                }
                let start = host + offset * PAGE;
                self.state.arm(frame, start, visit);
                runs.push((start, u64::from(visit) * PAGE));
            }
            let zapped = zapper.zap(&runs);
            for (start, len) in runs.drain(zapped..) {
                // Not zapped: the pages will not fault.
                MinorFaultSink::remapped(&*self.state, start, len);
            }
            drop(window);
            self.sleep_until(started + self.config.window);
            self.state.close_round();
            for (start, len) in runs.drain(..) {
                // A failure means the range was remapped meanwhile (and
                // populated by the guard) or is unregistered for a moment:
                // nothing is left to map back.
                let _ = self.guard.lock_window().restore(start, len);
            }
            self.sleep_until(started + self.config.round);
        }
    }

    fn sleep_until(&self, deadline: Instant) {
        self.stop.sleep_until(deadline);
    }
}
