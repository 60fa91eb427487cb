//! A debug fault-injection switch that corrupts guest data on purpose, so
//! that tests can show the guests' data checks catch a bad migration:
//! with `TIERVISOR_DEBUG_CORRUPT_PROMOTIONS=N` in the environment, the
//! first N frames promoted to the fastest tier each get 2^40 added to two
//! of their 8-byte words right after the move (as a copy engine that
//! garbled data would leave them). Off unless the variable is set; never
//! set it for a guest whose data matters.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use guest_memory::migrate::FaultInjection;
use guest_memory::{Batch, BatchOutcome, FrameId, Migrator, TierId, TieredMemory};

/// The environment variable that arms the switch.
pub const CORRUPT_PROMOTIONS_ENV: &str = "TIERVISOR_DEBUG_CORRUPT_PROMOTIONS";

/// What is added to each corrupted word: far beyond any counter a
/// workload reaches, and two additions cannot cancel out in a sum.
const CORRUPTION: u64 = 1 << 40;

/// `inner` wrapped so that it corrupts promoted frames when the
/// environment asks for it; `inner` itself otherwise.
pub fn wrap(inner: Arc<dyn Migrator>, memory: &Arc<TieredMemory>) -> Arc<dyn Migrator> {
    let count = std::env::var(CORRUPT_PROMOTIONS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if count == 0 {
        return inner;
    }
    eprintln!(
        "tiervisor: DEBUG: {CORRUPT_PROMOTIONS_ENV}={count}: corrupting the next {count} \
         promoted frame(s) on purpose"
    );
    Arc::new(CorruptPromotions {
        inner,
        memory: memory.clone(),
        remaining: AtomicU64::new(count),
    })
}

/// A migrator that corrupts the frames it promotes while armed.
struct CorruptPromotions {
    inner: Arc<dyn Migrator>,
    memory: Arc<TieredMemory>,
    remaining: AtomicU64,
}

impl fmt::Debug for CorruptPromotions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CorruptPromotions")
            .field("inner", &self.inner)
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl CorruptPromotions {
    /// Adds [`CORRUPTION`] to the first word and the middle word of
    /// `frame` through the VMM's mapping.
    fn corrupt(&self, frame: FrameId) {
        let Some(host) = self.memory.frames().host_addr(frame) else {
            return;
        };
        for offset in [0, self.memory.frame_size() / 2] {
            let addr = (host + offset) as *const AtomicU64;
            // SAFETY: `host` is the start of `frame`'s mapping, which stays
            // mapped for the memory's lifetime (migrations replace it in
            // place with MAP_FIXED); both offsets are 8-byte aligned and
            // inside the frame; the guest writes it concurrently, which an
            // atomic access tolerates.
            unsafe { (*addr).fetch_add(CORRUPTION, Ordering::SeqCst) };
        }
        eprintln!("tiervisor: DEBUG: corrupted promoted frame {frame}");
    }
}

impl Migrator for CorruptPromotions {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn memory(&self) -> &TieredMemory {
        &self.memory
    }

    fn migrate(&self, batch: &Batch) -> BatchOutcome {
        let outcome = self.inner.migrate(batch);
        for m in outcome.moved.iter().filter(|m| m.to_tier == TierId::FAST) {
            let armed = self
                .remaining
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if !armed {
                break;
            }
            self.corrupt(m.frame);
        }
        outcome
    }

    fn faults(&self) -> Option<&Arc<FaultInjection>> {
        self.inner.faults()
    }
}
