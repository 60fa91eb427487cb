//! Exchanges of the remap migrator: two frames on different tiers swap
//! slots through a bounce area, when neither tier has a free slot.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use super::{Failure, Held, Hold, RemapMigrator};
use crate::ids::{FrameId, TierId};
use crate::migrate::batch::Batch;
use crate::migrate::bounce::BounceArea;
use crate::migrate::faults::Step;
use crate::migrate::outcome::{BatchOutcome, MoveError, MoveStep, StepError};
use crate::migrate::urgent::Urgent;
use crate::placement::Location;

/// Two frames swapping slots.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pair {
    a: FrameId,
    a_at: Location,
    b: FrameId,
    b_at: Location,
}

impl RemapMigrator {
    /// Swaps each pair of `pairs` ([`exchange`](Self::exchange)) through
    /// the bounce area, made on first use; without one, every pair fails.
    pub(super) fn exchange_all(
        &self,
        pairs: Vec<Pair>,
        bounce: &mut Option<BounceArea>,
        out: &mut BatchOutcome,
    ) {
        if pairs.is_empty() {
            return;
        }
        if bounce.is_none() {
            match BounceArea::new(self.frame_size()) {
                Ok(area) => *bounce = Some(area),
                Err(e) => {
                    let e = StepError::Bounce(Arc::new(e));
                    for p in &pairs {
                        for (f, to) in [(p.a, p.b_at.tier), (p.b, p.a_at.tier)] {
                            let e = MoveError::frame(f, to, MoveStep::Reserve, e.clone());
                            out.record_failed(e);
                        }
                    }
                }
            }
        }
        if let Some(area) = bounce.as_ref() {
            for p in pairs {
                self.exchange(p, area, out);
            }
        }
    }

    /// The batch's exchanges whose frames exist, are on different tiers
    /// and are not named before; the others are refused or skipped.
    pub(super) fn check_exchanges(
        &self,
        batch: &Batch,
        seen: &mut HashSet<FrameId>,
        out: &mut BatchOutcome,
    ) -> Vec<Pair> {
        let mut pairs = Vec::new();
        for x in batch.exchanges() {
            let (a_at, b_at) = match (self.memory.location(x.a), self.memory.location(x.b)) {
                (Some(a_at), Some(b_at)) => (a_at, b_at),
                (a_at, b_at) => {
                    let frames = self.memory.frame_count();
                    for (f, other) in [(x.a, b_at), (x.b, a_at)] {
                        let to = other.map_or(TierId::FAST, |l| l.tier);
                        let why = StepError::NoSuchFrame { frames };
                        out.record_failed(MoveError::frame(f, to, MoveStep::Check, why));
                    }
                    continue;
                }
            };
            if a_at.tier == b_at.tier {
                let same = StepError::SameTier {
                    a: x.a,
                    b: x.b,
                    tier: self.memory.tiers()[a_at.tier.index()].name().to_owned(),
                };
                for f in [x.a, x.b] {
                    let e = MoveError::frame(f, a_at.tier, MoveStep::Check, same.clone());
                    out.record_failed(e);
                }
                continue;
            }
            if !seen.insert(x.a) | !seen.insert(x.b) {
                out.record_skipped();
                out.record_skipped();
                continue;
            }
            pairs.push(Pair {
                a: x.a,
                a_at,
                b: x.b,
                b_at,
            });
        }
        pairs
    }

    /// Swaps the slots of a pair's frames. Both frames are write-protected,
    /// copied into the bounce area, and parked on it (mapped over their host
    /// ranges, protected again) so readers keep seeing their data while the
    /// slots are overwritten; then each frame is mapped onto the other's
    /// old slot. Until that final remap the bounce area holds every frame's
    /// latest data, and each rollback restores the slots from it.
    fn exchange(&self, p: Pair, bounce: &BounceArea, out: &mut BatchOutcome) {
        let _urgent = Urgent::new();
        let fs = self.frame_size();
        let (va, vb) = (self.view(p.a_at), self.view(p.b_at));
        let (ka, kb) = (bounce.view(0), bounce.view(1));
        let frames = [p.a, p.b];
        let hold = self.hold_for(&[p.a_at, p.b_at]);
        let started = Instant::now();
        let (held, result) = self.hold_writers(hold, &frames);
        out.report.protect += started.elapsed();
        // Stage 1 only reads the slots: a failure needs no repair.
        if let Err(e) = result.and_then(|()| self.copy(&[(va, ka, fs), (vb, kb, fs)], out)) {
            self.abort_pair(p, hold, held, e, out);
            return;
        }
        // Stage 2: park both frames on the bounce area. A write that slips
        // in before the new mapping is protected lands in the bounce area,
        // which is what gets copied next. (Under the stop, nothing writes.)
        let mut parked = Vec::new();
        for (k, f) in [(0, p.a), (1, p.b)] {
            let host = self.host(f);
            let park = self
                .memory
                .map_frame_from(f, bounce.fd(), bounce.offset(k))
                .map_err(|e| (MoveStep::Remap, StepError::memory(e)))
                .and_then(|()| {
                    parked.push(f);
                    if hold == Hold::Stop {
                        return Ok(());
                    }
                    let uffd = |e| (MoveStep::Hold, StepError::uffd(e));
                    self.guard.reregister(host, fs).map_err(uffd)?;
                    self.guard.uffd().protect(host, fs).map_err(uffd)
                });
            if let Err(e) = park {
                self.unpark(p, &parked, bounce);
                self.abort_pair(p, hold, held, e, out);
                return;
            }
        }
        // Stage 3 overwrites the slots.
        let remap_failed = if let Err(e) = self.copy(&[(kb, va, fs), (ka, vb, fs)], out) {
            Some(e)
        } else if self.faults.should_fail(Step::Remap) {
            Some((MoveStep::Remap, StepError::Injected))
        } else {
            None
        };
        if let Some(e) = remap_failed {
            self.unpark(p, &parked, bounce);
            self.abort_pair(p, hold, held, e, out);
            return;
        }
        // Stage 4: each frame onto the other's old slot.
        let remap_started = Instant::now();
        let mapped = self
            .memory
            .map_frames(p.a, 1, p.b_at)
            .map_err(|e| (MoveStep::Remap, StepError::memory(e)));
        if let Err(e) = mapped {
            self.unpark(p, &parked, bounce);
            self.abort_pair(p, hold, held, e, out);
            return;
        }
        // `a` is live on its new slot now; `b` must follow. Mapping a slot
        // over a range only fails on exhaustion, so try more than once.
        let b_mapped = (0..3).any(|_| self.memory.map_frames(p.b, 1, p.a_at).is_ok());
        let _ = self.register(self.host(p.a), fs, p.b_at.tier);
        if b_mapped {
            let _ = self.register(self.host(p.b), fs, p.a_at.tier);
        } else {
            // Still on the bounce memfd, which can be registered.
            let _ = self.guard.reregister(self.host(p.b), fs);
        }
        for f in frames {
            let _ = self.guard.uffd().wake(self.host(f), fs);
        }
        out.report.remap += remap_started.elapsed();
        self.release(held, out);
        if !b_mapped {
            // Frame b stays on the bounce memfd with all its data; the
            // placement map cannot describe that, so say so loudly.
            out.warnings.push(MoveError::frame(
                p.b,
                p.a_at.tier,
                MoveStep::Remap,
                StepError::LeftOnBounce,
            ));
            return;
        }
        let started = Instant::now();
        let committed = self.memory.commit_exchange(p.a, p.a_at, p.b, p.b_at);
        out.report.commit += started.elapsed();
        match committed {
            Ok(()) => {
                out.record_moved(p.a, p.a_at.tier, p.b_at.tier, true);
                out.record_moved(p.b, p.b_at.tier, p.a_at.tier, true);
            }
            Err(e) => {
                let e = MoveError::frame(p.a, p.b_at.tier, MoveStep::Commit, StepError::memory(e));
                out.warnings.push(e);
            }
        }
    }

    /// Undoes parking: the bounce area holds the parked frames' latest
    /// data; put it back in their own slots and map the slots back.
    fn unpark(&self, p: Pair, parked: &[FrameId], bounce: &BounceArea) {
        let fs = self.frame_size() as usize;
        for (k, f, at) in [(0, p.a, p.a_at), (1, p.b, p.b_at)] {
            if parked.contains(&f) {
                // SAFETY: bounce half k and the frame's own slot are whole,
                // distinct frames of live mappings; the frame is parked on
                // the bounce (write-protected), so nothing else writes either.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bounce.view(k) as *const u8,
                        self.view(at) as *mut u8,
                        fs,
                    )
                };
                self.restore_mapping(f, at);
            }
        }
    }

    fn abort_pair(&self, p: Pair, hold: Hold, held: Held, why: Failure, out: &mut BatchOutcome) {
        if hold == Hold::Protect {
            self.unprotect(&[p.a, p.b]);
        }
        let (step, source) = why;
        out.record_failed(MoveError::frame(p.a, p.b_at.tier, step, source.clone()));
        out.record_failed(MoveError::frame(p.b, p.a_at.tier, step, source));
        self.release(held, out);
    }
}
