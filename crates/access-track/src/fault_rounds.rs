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
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use guest_memory::FrameId;
use guest_memory::TieredMemory;
use guest_memory::migrate::{MinorFaultSink, WriteGuard};

use crate::fault_config::FaultSampleConfig;
use crate::fault_state::SampleState;
use crate::xorshift::XorShift;
use crate::zap::Zapper;

const PAGE: u64 = 4096;

/// The running round thread; stops and restores every zapped page on drop.
#[derive(Debug)]
pub(crate) struct Rounds {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

struct Job {
    memory: Arc<TieredMemory>,
    guard: Arc<WriteGuard>,
    state: Arc<SampleState>,
    config: FaultSampleConfig,
    stop: Arc<AtomicBool>,
}

impl Rounds {
    pub fn start(
        memory: Arc<TieredMemory>,
        guard: Arc<WriteGuard>,
        state: Arc<SampleState>,
        config: FaultSampleConfig,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let job = Job {
            memory,
            guard,
            state,
            config,
            stop: stop.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("fault-sampler".into())
            .spawn(move || job.run())?;
        Ok(Rounds {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for Rounds {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            // The thread restores its pages before it returns; a panic in
            // it has nothing left to clean.
            let _ = h.join();
        }
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
        while !self.stop.load(Ordering::SeqCst) && count > 0 {
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
        loop {
            let now = Instant::now();
            if now >= deadline || self.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::park_timeout(deadline - now);
        }
    }
}
