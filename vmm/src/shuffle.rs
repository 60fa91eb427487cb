//! `--shuffle RATE`: a background mover that migrates random frames to a
//! random other tier at a fixed rate while the guest runs. It exercises
//! live migration from the command line (and soaks it) until the tiering
//! engine decides moves by itself.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use guest_memory::{BatchReport, FrameId, Migrator, Move, TierId, TieredMemory};

const TICK: Duration = Duration::from_millis(100);

/// A running shuffler.
#[derive(Debug)]
pub struct Shuffler {
    stop: Arc<AtomicBool>,
    total: Arc<Mutex<BatchReport>>,
    thread: Option<JoinHandle<()>>,
}

impl Shuffler {
    /// Starts moving `per_second` random frames per second.
    pub fn start(
        migrator: Arc<dyn Migrator>,
        memory: Arc<TieredMemory>,
        per_second: u32,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let total = Arc::new(Mutex::new(BatchReport::default()));
        let (thread_stop, thread_total) = (stop.clone(), total.clone());
        let per_tick = (per_second as usize).div_ceil(10).max(1);
        let thread = std::thread::Builder::new()
            .name("shuffle".into())
            .spawn(move || {
                let tiers = memory.tiers().len();
                let frames = memory.frame_count();
                let mut rng = 0x9e37_79b9_7f4a_7c15u64;
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                while !thread_stop.load(Ordering::Relaxed) && tiers > 1 && frames > 0 {
                    // Pairs: a frame into tier y and one out of y, so that full
                    // tiers exchange instead of refusing the move. No frame
                    // twice in a batch: a repeat is skipped and would leave
                    // its partner without one.
                    let mut batch = Vec::with_capacity(per_tick + 1);
                    let mut taken = HashSet::new();
                    for _ in 0..per_tick.div_ceil(2) {
                        let a = (next() % frames as u64) as usize;
                        let Some(x) = memory.location(FrameId(a)).map(|l| l.tier) else {
                            continue;
                        };
                        if !taken.insert(a) {
                            continue;
                        }
                        let y = TierId(
                            (x.index() + 1 + (next() % (tiers as u64 - 1)) as usize) % tiers,
                        );
                        let partner =
                            (0..64)
                                .map(|_| (next() % frames as u64) as usize)
                                .find(|&b| {
                                    !taken.contains(&b)
                                        && memory.location(FrameId(b)).is_some_and(|l| l.tier == y)
                                });
                        batch.push(Move {
                            frame: FrameId(a),
                            to_tier: y,
                        });
                        if let Some(b) = partner {
                            taken.insert(b);
                            batch.push(Move {
                                frame: FrameId(b),
                                to_tier: x,
                            });
                        }
                    }
                    let outcome = migrator.migrate_moves(&batch);
                    thread_total
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .absorb(&outcome.report);
                    std::thread::sleep(TICK.saturating_sub(outcome.report.total));
                }
            })?;
        Ok(Shuffler {
            stop,
            total,
            thread: Some(thread),
        })
    }

    /// Stops and returns what was moved.
    pub fn stop(mut self) -> BatchReport {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // The thread only loops over migrate(); nothing to recover.
            let _ = t.join();
        }
        let mut total =
            std::mem::take(&mut *self.total.lock().unwrap_or_else(PoisonError::into_inner));
        // Stall samples can be many; the report keeps the summary.
        total.stalls.clear();
        total
    }
}
