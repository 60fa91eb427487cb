//! The `fault-sample` tracker: per interval, of the 4 KiB pages the fault
//! sampler zapped in each frame, those the guest touched (read or write)
//! within the watch window. Sees reads, which the dirty log cannot.
//!
//! It needs the VM's write guard registered for minor faults (one
//! userfaultfd per VM, shared with the remap migrator). Where it cannot
//! sample (no guard, host kernel without `UFFD_FEATURE_MINOR_SHMEM`, a
//! hugetlb tier), it says so in [`status`](AccessTracker::status) and
//! reports samples with nothing observed, which the heat model ignores.

use std::sync::Arc;
use std::time::Instant;

use thiserror::Error;

use guest_memory::migrate::WriteGuard;
use guest_memory::{BackendKind, TieredMemory};

use crate::fault_config::{FaultConfigError, FaultSampleConfig};
use crate::fault_rounds::Rounds;
use crate::fault_state::{Counts, SampleState, SamplerTotals};
use crate::sample::{AccessSample, AccessTracker, Coverage, TrackerError, TrackerStatus};

/// Errors creating the fault-sample tracker.
#[derive(Debug, Error)]
pub enum FaultSampleError {
    /// The settings are invalid.
    #[error("invalid fault-sample settings")]
    Config(#[from] FaultConfigError),
    /// The round thread could not start.
    #[error("starting the fault-sampler thread")]
    Thread(#[source] std::io::Error),
}

/// The fault-sample tracker of one VM.
#[derive(Debug)]
pub struct FaultSampleTracker {
    memory: Arc<TieredMemory>,
    state: Arc<SampleState>,
    /// Declared before nothing that it needs: dropping it stops the rounds
    /// and maps every zapped page back.
    rounds: Option<Rounds>,
    config: FaultSampleConfig,
    /// Why nothing is sampled, if so.
    off: Option<String>,
    last: Instant,
    counts: Counts,
}

impl FaultSampleTracker {
    /// A tracker over `memory`, sampling through `guard` (the VM's write
    /// guard, built with minor faults on). Without a usable guard the
    /// tracker runs but observes nothing, and its status says why.
    pub fn new(
        memory: Arc<TieredMemory>,
        guard: Option<Arc<WriteGuard>>,
        config: FaultSampleConfig,
    ) -> Result<Self, FaultSampleError> {
        config.validate()?;
        let state = Arc::new(SampleState::new(memory.frame_count()));
        let off = why_off(&memory, guard.as_deref());
        let rounds = match (&off, guard) {
            (None, Some(guard)) => {
                guard.set_minor_sink(state.clone());
                Some(
                    Rounds::start(memory.clone(), guard, state.clone(), config)
                        .map_err(FaultSampleError::Thread)?,
                )
            }
            _ => None,
        };
        Ok(FaultSampleTracker {
            memory,
            state,
            rounds,
            config,
            off,
            last: Instant::now(),
            counts: Counts::default(),
        })
    }

    /// Whether pages are being sampled.
    pub fn is_sampling(&self) -> bool {
        self.rounds.is_some()
    }

    /// The settings in use.
    pub fn config(&self) -> &FaultSampleConfig {
        &self.config
    }

    /// Pages zapped, touched and voided, and rounds run, so far.
    pub fn totals(&self) -> SamplerTotals {
        self.state.totals()
    }
}

/// Why this memory and guard cannot be sampled, if they cannot.
fn why_off(memory: &TieredMemory, guard: Option<&WriteGuard>) -> Option<String> {
    let hugetlb = memory
        .tiers()
        .iter()
        .find(|t| matches!(t.kind(), BackendKind::Memfd { hugetlb: true, .. }));
    if let Some(t) = hugetlb {
        return Some(format!(
            "fault-sample: tier '{}' is on 2 MiB hugetlb pages, whose 4 KiB pages cannot be zapped; nothing is sampled",
            t.name()
        ));
    }
    if let Some(t) = memory
        .tiers()
        .iter()
        .find(|t| !matches!(t.kind(), BackendKind::Memfd { .. }))
    {
        return Some(format!(
            "fault-sample: tier '{}' is not a memfd (minor faults need shmem); nothing is sampled",
            t.name()
        ));
    }
    match guard {
        None => Some(
            "fault-sample: the VM has no userfaultfd guard (built without fault sampling); nothing is sampled"
                .into(),
        ),
        Some(g) if !g.minor_faults_enabled() => Some(if g.host_minor_support().0 {
            "fault-sample: the VM's userfaultfd guard was built without minor faults; nothing is sampled"
                .into()
        } else {
            "fault-sample: host kernel lacks UFFD_FEATURE_MINOR_SHMEM; nothing is sampled".into()
        }),
        Some(_) => None,
    }
}

impl AccessTracker for FaultSampleTracker {
    fn name(&self) -> &str {
        "fault-sample"
    }

    fn collect(&mut self) -> Result<AccessSample, TrackerError> {
        let now = Instant::now();
        let frames = self.memory.frame_count();
        let mut sample = AccessSample::for_memory(&self.memory, now - self.last)?;
        let ppf = sample.pages_per_frame;
        self.last = now;
        self.state.take(&mut self.counts);
        let mut observed = vec![0u16; frames];
        let c = &self.counts;
        for f in 0..frames.min(c.observed.len()) {
            let (o, mut a, mut d) = (c.observed[f], c.accessed[f].min(c.observed[f]), c.dirty[f]);
            let mut o_out = o;
            if o > ppf {
                // More pages watched than the frame has (several visits):
                // keep the touched share, over one frame's worth.
                a = (u64::from(a) * u64::from(ppf) / u64::from(o)) as u32;
                d = (u64::from(d) * u64::from(ppf) / u64::from(o)) as u32;
                o_out = ppf;
            }
            observed[f] = o_out.min(u32::from(u16::MAX)) as u16;
            sample.accessed[f] = a.min(o_out).min(u32::from(u16::MAX)) as u16;
            sample.dirty[f] = d.min(a).min(u32::from(u16::MAX)) as u16;
        }
        sample.coverage = Coverage::PerFrame(observed);
        Ok(sample)
    }

    fn status(&self) -> TrackerStatus {
        let mut limitations = Vec::new();
        match &self.off {
            Some(why) => limitations.push(why.clone()),
            None => limitations.push(
                "fault-sample: sees a sample of pages only, and a page as written only when its first touch after a zap is a write"
                    .into(),
            ),
        }
        TrackerStatus {
            sees_reads: self.off.is_none(),
            sees_writes: self.off.is_none(),
            limitations,
        }
    }
}
