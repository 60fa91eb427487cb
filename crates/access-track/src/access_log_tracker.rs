//! The `access-log` tracker: how often the guest touches (reads or writes)
//! each frame's sampled pages, from the accessed bits of KVM's secondary
//! MMU, read and cleared through the KVM access log
//! ([`KvmAccessLog`], `host-kernel/kvm-access-log`). The guest takes no
//! exit and no fault for it, and reads count like writes.
//!
//! It samples like the dirty-log tracker: a [`WindowSampler`] thread arms
//! a fixed budget of pages per second ([`SamplingSettings`]) in short
//! windows over adaptive regions and counts per frame the window-long
//! stretches until a page's first touch and how many ended in one (a
//! frequency, not one bit per interval). Its cost is the host's: one
//! ioctl per run of nearby sampled pages per peek.
//!
//! A huge mapping in KVM's page tables (a 2 MiB NPT/EPT entry) has one
//! accessed bit for all of its pages, so a frame backed that way reads
//! alike in all its pages; the tiers' memfd pages are mapped 4 KiB.

use std::sync::Arc;
use std::time::Instant;

use kvm_ioctls::VmFd;

use guest_memory::TieredMemory;

use crate::access_log_probe::AccessLogProbe;
use crate::kvm_access_log::{AccessLogError, KvmAccessLog};
use crate::sample::{AccessSample, AccessTracker, TrackerError, TrackerStatus};
use crate::sampler_thread::SamplerThread;
use crate::sampling_settings::SamplingSettings;
use crate::window_sampler::{SamplerReport, WindowSampler};

const PAGE: u64 = 4096;

/// Why the `access-log` tracker could not start.
#[derive(Debug, thiserror::Error)]
pub enum AccessLogTrackerError {
    /// The host's KVM has no access log.
    #[error("access-log")]
    Unsupported(#[from] AccessLogError),
    /// The sampler thread could not be started.
    #[error("access-log: starting the sampler thread")]
    Thread(#[source] std::io::Error),
}

/// The access-log tracker of one VM.
#[derive(Debug)]
pub struct AccessLogTracker {
    memory: Arc<TieredMemory>,
    settings: SamplingSettings,
    thread: SamplerThread,
    last: Instant,
}

impl AccessLogTracker {
    /// A tracker over `vm`'s access log for the RAM of `memory`, sampling
    /// at `settings` (valid: see [`SamplingSettings::validate`]); refused
    /// when the host's KVM lacks the access log.
    pub fn new(
        vm: Arc<VmFd>,
        memory: Arc<TieredMemory>,
        settings: SamplingSettings,
    ) -> Result<Self, AccessLogTrackerError> {
        let log = KvmAccessLog::new(vm)?;
        let pages_per_frame = (memory.frame_size() / PAGE).max(1);
        let seed = Instant::now().elapsed().as_nanos() as u64 ^ memory.frame_count() as u64;
        let sampler = WindowSampler::new(memory.frame_count(), pages_per_frame, settings, seed);
        let probe = AccessLogProbe::new(log, memory.clone());
        let thread = SamplerThread::start("access-sampler", sampler, probe)
            .map_err(AccessLogTrackerError::Thread)?;
        Ok(AccessLogTracker {
            memory,
            settings,
            thread,
            last: Instant::now(),
        })
    }
}

impl AccessTracker for AccessLogTracker {
    fn name(&self) -> &str {
        "access-log"
    }

    fn collect(&mut self) -> Result<AccessSample, TrackerError> {
        let now = Instant::now();
        let mut sample = AccessSample::for_memory(&self.memory, now - self.last)?;
        self.thread.fill(self.name(), &mut sample, false)?;
        self.last = now;
        Ok(sample)
    }

    fn status(&self) -> TrackerStatus {
        TrackerStatus {
            sees_reads: true,
            sees_writes: true,
            limitations: vec![
                format!(
                    "access-log: samples {} pages/s in windows every {} us",
                    self.settings.budget_pages_per_sec, self.settings.window_period_us
                ),
                "access-log: cannot tell reads from writes".into(),
            ],
        }
    }

    fn sampler_report(&self) -> Option<SamplerReport> {
        Some(self.thread.report())
    }
}
