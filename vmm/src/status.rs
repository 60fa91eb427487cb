//! The live status line of `tiervisor run`: elapsed time, per-vCPU
//! throughput (from the payload's progress hypercalls) and frames per tier.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use guest_memory::TierUsage;

use crate::guest_state::GuestState;

/// Computes per-vCPU rates between ticks and draws them.
#[derive(Debug)]
pub struct StatusLine {
    bar: ProgressBar,
    last: Vec<(u64, u64)>,
    last_at: Instant,
}

impl StatusLine {
    /// A status line on stderr (hidden when stderr is not a terminal).
    pub fn new(vcpus: usize) -> Self {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        StatusLine {
            bar,
            last: vec![(u64::MAX, 0); vcpus],
            last_at: Instant::now(),
        }
    }

    /// A status line that draws nothing (a Linux guest's console owns the
    /// terminal).
    pub fn hidden(vcpus: usize) -> Self {
        StatusLine {
            bar: ProgressBar::hidden(),
            last: vec![(u64::MAX, 0); vcpus],
            last_at: Instant::now(),
        }
    }

    /// Handle for printing lines above the status line.
    pub fn bar(&self) -> ProgressBar {
        self.bar.clone()
    }

    /// Redraws from the guest's live counters.
    pub fn update(&mut self, state: &GuestState, tiers: &[TierUsage]) {
        let dt = self.last_at.elapsed().as_secs_f64().max(1e-3);
        self.last_at = Instant::now();
        let mut parts = Vec::new();
        for (i, (v, last)) in state.vcpus.iter().zip(&mut self.last).enumerate() {
            let (phase, ops) = (v.phase.load(Relaxed), v.ops.load(Relaxed));
            let rate = if last.0 == phase && ops >= last.1 {
                (ops - last.1) as f64 / dt
            } else {
                0.0
            };
            *last = (phase, ops);
            parts.push(format!("vcpu{i} p{phase} {:.1} Mops/s", rate / 1e6));
        }
        let tiers: Vec<String> = tiers
            .iter()
            .map(|t| format!("{} {}/{}", t.name, t.used_frames, t.capacity_frames))
            .collect();
        self.bar
            .set_message(format!("{} | frames {}", parts.join(" "), tiers.join(" ")));
    }

    /// Removes the status line.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
