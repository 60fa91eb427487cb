//! What the engine costs and what it estimates it gives, side by side:
//! the tracker's sampling (budget, pages armed, the write faults they
//! caused, its thread's CPU), the engine thread's CPU, the guest's write
//! stalls in migrations and the bytes moved, against the share of the
//! estimated accesses that land on the fast tier.

use serde::{Deserialize, Serialize};

use access_track::SamplerReport;

/// The engine's cost and benefit, totals since it started.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineCost {
    /// The tracker's sampling budget in pages armed per second; `None` for
    /// a tracker without a windowed sampler.
    pub budget_pages_per_sec: Option<u32>,
    /// Pages the sampler armed.
    pub armed_pages: u64,
    /// Armed pages the guest touched in their window: each cost the guest
    /// one fault (a write fault under the dirty log).
    pub armed_hits: u64,
    /// Windows the sampler ran.
    pub windows: u64,
    /// The sampler's window now, in microseconds.
    pub window_us: u64,
    /// The sampler's regions now.
    pub regions: u64,
    /// CPU time of the sampler's thread, in microseconds.
    pub sampler_cpu_us: u64,
    /// Sampler CPU per armed page, in nanoseconds (`None` before any).
    pub cpu_ns_per_armed_page: Option<f64>,
    /// CPU time of the engine's own thread, in microseconds.
    pub engine_cpu_us: u64,
    /// Time guest writers waited on migrations, summed, in microseconds.
    pub write_stall_us: u64,
    /// Bytes migrated, both ways.
    pub bytes_moved: u64,
    /// The benefit as the engine estimates it: the share of all heat
    /// (estimated accesses) held by frames on the fast tier after the
    /// last interval, in `[0, 1]`; `None` before any heat.
    pub fast_heat_share: Option<f64>,
    /// The read latency the guest's accesses see as placed, by the
    /// estimate: each tier's read latency (measured or declared) weighted
    /// by its share of the heat, in nanoseconds; `None` before any heat or
    /// while a tier holding heat has no known speed.
    #[serde(default)]
    pub estimated_read_latency_ns: Option<f64>,
    /// The fast tier's read latency, nanoseconds: what the estimate would
    /// be with every access on it (all-DRAM); `None` when unknown.
    #[serde(default)]
    pub fast_read_latency_ns: Option<u64>,
}

impl EngineCost {
    /// One line for people: the CPU, write stalls and bytes the engine
    /// cost, against the share of the heat on the fast tier and the read
    /// latency that gives the guest's accesses.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "CPU {:.2} s sampler + {:.2} s engine, write stalls {:.3} s, {} moved; heat on the \
             fast tier {}",
            self.sampler_cpu_us as f64 / 1e6,
            self.engine_cpu_us as f64 / 1e6,
            self.write_stall_us as f64 / 1e6,
            guest_memory::format_size(self.bytes_moved),
            self.fast_heat_share
                .map_or_else(|| "-".to_owned(), |s| format!("{:.1} %", s * 100.0))
        );
        if let (Some(now), Some(fast)) = (self.estimated_read_latency_ns, self.fast_read_latency_ns)
        {
            line.push_str(&format!(
                ", reads at ~{now:.0} ns (all on the fast tier: {fast} ns)"
            ));
        }
        line
    }

    /// The heat-weighted read latency of frames on `tier` (per frame)
    /// given each tier's latency (`None` where unknown), and the fast
    /// tier's: sets [`estimated_read_latency_ns`](Self::estimated_read_latency_ns)
    /// and [`fast_read_latency_ns`](Self::fast_read_latency_ns).
    pub(crate) fn estimate_latency(
        &mut self,
        heat: &[f64],
        tier: &[usize],
        latency_ns: &[Option<u64>],
    ) {
        self.fast_read_latency_ns = latency_ns.first().copied().flatten();
        let mut weighted = 0.0;
        let mut all = 0.0;
        for (&h, &t) in heat.iter().zip(tier) {
            if h <= 0.0 {
                continue;
            }
            let Some(Some(ns)) = latency_ns.get(t) else {
                self.estimated_read_latency_ns = None;
                return;
            };
            weighted += h * *ns as f64;
            all += h;
        }
        self.estimated_read_latency_ns = (all > 0.0).then(|| weighted / all);
    }

    /// Takes in the sampler's totals.
    pub(crate) fn sampled(&mut self, report: Option<SamplerReport>) {
        let Some(r) = report else {
            self.budget_pages_per_sec = None;
            return;
        };
        self.budget_pages_per_sec = Some(r.budget_pages_per_sec);
        self.armed_pages = r.armed_pages;
        self.armed_hits = r.hits;
        self.windows = r.windows;
        self.window_us = u64::try_from(r.window.as_micros()).unwrap_or(u64::MAX);
        self.regions = r.regions as u64;
        self.sampler_cpu_us = r.cpu_ns / 1000;
        self.cpu_ns_per_armed_page =
            (r.armed_pages > 0).then(|| r.cpu_ns as f64 / r.armed_pages as f64);
    }

    /// The share of `heat` on frames whose `tier` is the fast one (0).
    pub(crate) fn fast_share(heat: &[f64], tier: &[usize]) -> Option<f64> {
        let (fast, all) = heat
            .iter()
            .zip(tier)
            .fold((0.0, 0.0), |(fast, all), (&h, &t)| {
                (if t == 0 { fast + h } else { fast }, all + h)
            });
        (all > 0.0).then(|| fast / all)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_fast_share_counts_heat_on_tier_zero() {
        assert_eq!(EngineCost::fast_share(&[3.0, 1.0], &[0, 1]), Some(0.75));
        assert_eq!(EngineCost::fast_share(&[0.0, 0.0], &[0, 1]), None);
    }

    #[test]
    fn the_latency_estimate_weights_each_tier_by_its_heat() {
        let mut c = EngineCost::default();
        // 3/4 of the heat on a 100 ns tier, 1/4 on a 300 ns one.
        c.estimate_latency(&[3.0, 1.0, 0.0], &[0, 1, 1], &[Some(100), Some(300)]);
        assert_eq!(c.estimated_read_latency_ns, Some(150.0));
        assert_eq!(c.fast_read_latency_ns, Some(100));
        c.fast_heat_share = Some(0.75);
        assert!(
            c.describe().ends_with(
                "heat on the fast tier 75.0 %, reads at ~150 ns (all on the fast tier: 100 ns)"
            ),
            "{}",
            c.describe()
        );
        // A tier of unknown speed holding heat: no estimate. Holding none:
        // it does not matter.
        c.estimate_latency(&[3.0, 1.0], &[0, 1], &[Some(100), None]);
        assert_eq!(c.estimated_read_latency_ns, None);
        c.estimate_latency(&[3.0, 0.0], &[0, 1], &[Some(100), None]);
        assert_eq!(c.estimated_read_latency_ns, Some(100.0));
        c.estimate_latency(&[0.0], &[0], &[Some(100)]);
        assert_eq!(c.estimated_read_latency_ns, None, "no heat yet");
    }

    #[test]
    fn sampler_totals_give_the_cost_per_armed_page() {
        let mut c = EngineCost::default();
        c.sampled(Some(SamplerReport {
            budget_pages_per_sec: 100,
            armed_pages: 1000,
            cpu_ns: 2_000_000,
            window: Duration::from_millis(2),
            ..SamplerReport::default()
        }));
        assert_eq!(c.cpu_ns_per_armed_page, Some(2000.0));
        assert_eq!((c.window_us, c.sampler_cpu_us), (2000, 2000));
        c.sampled(None);
        assert_eq!(c.budget_pages_per_sec, None);
    }
}
