//! Modeled memory performance: what a measured run would cost on a real
//! two-tier machine. The development machine has one kind of memory, so
//! both tiers of a benchmark VM run at DRAM speed and a placement's
//! quality shows only in its DRAM-hit ratio. This module turns per-tier
//! access shares and the measured operation count into a *modeled*
//! memory-stall time and a *modeled* throughput relative to all-DRAM, for
//! DRAM + CXL and DRAM + Optane PMEM. Nothing here is measured; every
//! number it returns is labelled "modeled" where it is shown.
//!
//! The model: a tier serves its share `s` of the guest's accesses. For a
//! [`Pattern::Random`] workload (hotset, zipf, pmbench) every operation is
//! one access that misses the caches (their buffers are far larger than
//! the LLC and touched at random) and waits the tier's idle latency:
//! stall `s·ops·latency`. For a [`Pattern::Sequential`] one (stream) the
//! prefetchers hide latency and the tier's bandwidth bounds it: stall
//! `s·bytes / bandwidth`. Both are upper bounds on the stall (no overlap
//! between accesses, no cache hits); the shares are what the tiering
//! changes, and the bounds treat every configuration alike. The extra stall
//! of a placement is its stall minus the stall had every access hit DRAM;
//! the modeled relative throughput adds that extra to the measured time
//! (which was taken at DRAM speed): `measured / (measured + extra)`.

use serde::{Deserialize, Serialize};

/// Latency and bandwidth of one kind of memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TierModel {
    /// The memory's name.
    pub name: &'static str,
    /// Idle random-read latency, nanoseconds.
    pub latency_ns: f64,
    /// Sequential read bandwidth, GB/s (10^9 bytes/s, i.e. bytes/ns).
    pub bandwidth_gbps: f64,
}

/// Local DDR4 DRAM. Izraelevitz et al., "Basic Performance Measurements of
/// the Intel Optane DC Persistent Memory Module", arXiv:1903.05714, 2019:
/// idle random read latency ~81 ns; sequential read ~15 GB/s per DIMM.
pub const DRAM: TierModel = TierModel {
    name: "DRAM",
    latency_ns: 81.0,
    bandwidth_gbps: 15.0,
};

/// Intel Optane DC PMM (App Direct), same paper as [`DRAM`]: idle random
/// read latency ~305 ns (3.7x DRAM); sequential read ~6.6 GB/s per DIMM
/// (writes ~2.3 GB/s; the model uses the read figure for all bytes, which
/// flatters write-heavy workloads).
pub const OPTANE: TierModel = TierModel {
    name: "Optane PMEM",
    latency_ns: 305.0,
    bandwidth_gbps: 6.6,
};

/// A CXL memory expander. Li et al., "Pond: CXL-Based Memory Pooling
/// Systems for Cloud Platforms", ASPLOS 2023: CXL adds ~70–90 ns over
/// NUMA-local DRAM, about 2x its latency; the model takes DRAM's 81 ns +
/// 80 ns. Sun et al., "Demystifying CXL Memory with Genuine CXL-Ready
/// Systems and Devices", MICRO 2023, measure 214–394 ns on real devices
/// against ~100 ns local, so this is the optimistic end. Bandwidth: an
/// assumption, half of [`DRAM`]'s (one DDR channel behind a x8 link;
/// Sun et al. measure devices below local DRAM bandwidth).
pub const CXL: TierModel = TierModel {
    name: "CXL",
    latency_ns: 161.0,
    bandwidth_gbps: 7.5,
};

/// How a workload reaches memory, which decides what bounds its stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Dependent random accesses: latency-bound.
    Random,
    /// Streaming: bandwidth-bound.
    Sequential,
}

/// A two-tier machine: tier 0 is fast, tier 1 slow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryModel {
    /// `DRAM+CXL`.
    pub name: &'static str,
    /// The fast tier.
    pub fast: TierModel,
    /// The slow tier.
    pub slow: TierModel,
}

/// DRAM with a CXL expander as the slow tier.
pub const DRAM_CXL: MemoryModel = MemoryModel {
    name: "DRAM+CXL",
    fast: DRAM,
    slow: CXL,
};

/// DRAM with Optane PMEM as the slow tier.
pub const DRAM_OPTANE: MemoryModel = MemoryModel {
    name: "DRAM+Optane",
    fast: DRAM,
    slow: OPTANE,
};

/// Both modeled machines, in report order.
pub const MODELS: [MemoryModel; 2] = [DRAM_CXL, DRAM_OPTANE];

/// What a run measured: operations, bytes they moved, and the time they
/// took (at DRAM speed), summed over vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Demand {
    /// Memory operations.
    pub ops: u64,
    /// Bytes those operations moved.
    pub bytes: u64,
    /// vCPU nanoseconds they took.
    pub nanos: u64,
}

/// A placement's modeled cost on one [`MemoryModel`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Modeled {
    /// Modeled memory-stall time, seconds (vCPU time).
    pub stall_secs: f64,
    /// Modeled stall had every access hit the fast tier, seconds.
    pub all_fast_stall_secs: f64,
    /// Modeled throughput relative to all-DRAM (1 = as fast), `None` when
    /// nothing was measured.
    pub relative_throughput: Option<f64>,
}

fn tier_stall_ns(tier: &TierModel, share: f64, demand: &Demand, pattern: Pattern) -> f64 {
    match pattern {
        Pattern::Random => share * demand.ops as f64 * tier.latency_ns,
        Pattern::Sequential => share * demand.bytes as f64 / tier.bandwidth_gbps,
    }
}

impl MemoryModel {
    /// The modeled cost of `demand`, reaching memory by `pattern`, when a
    /// share `fast_share` (clamped to [0, 1]; NaN counts as 0) of its
    /// accesses hits the fast tier and the rest the slow.
    pub fn model(&self, fast_share: f64, demand: &Demand, pattern: Pattern) -> Modeled {
        let fast_share = if fast_share.is_nan() {
            0.0
        } else {
            fast_share.clamp(0.0, 1.0)
        };
        let stall = tier_stall_ns(&self.fast, fast_share, demand, pattern)
            + tier_stall_ns(&self.slow, 1.0 - fast_share, demand, pattern);
        let all_fast = tier_stall_ns(&self.fast, 1.0, demand, pattern);
        let extra = (stall - all_fast).max(0.0);
        let measured = demand.nanos as f64;
        Modeled {
            stall_secs: stall / 1e9,
            all_fast_stall_secs: all_fast / 1e9,
            relative_throughput: (measured > 0.0).then(|| measured / (measured + extra)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMAND: Demand = Demand {
        ops: 1_000_000,
        bytes: 8_000_000,
        nanos: 100_000_000,
    };

    #[test]
    fn all_fast_costs_dram_latency_and_keeps_full_throughput() {
        for model in MODELS {
            let m = model.model(1.0, &DEMAND, Pattern::Random);
            // 10^6 accesses at 81 ns.
            assert!((m.stall_secs - 0.081).abs() < 1e-12, "{model:?}");
            assert_eq!(m.stall_secs, m.all_fast_stall_secs);
            assert_eq!(m.relative_throughput, Some(1.0));
        }
    }

    #[test]
    fn all_slow_adds_the_latency_gap_to_the_measured_time() {
        let m = DRAM_OPTANE.model(0.0, &DEMAND, Pattern::Random);
        assert!((m.stall_secs - 0.305).abs() < 1e-12);
        // 100 ms measured + 224 ms extra.
        let rel = m.relative_throughput.unwrap();
        assert!((rel - 100.0 / 324.0).abs() < 1e-12, "{rel}");
        let cxl = DRAM_CXL.model(0.0, &DEMAND, Pattern::Random);
        assert!((cxl.stall_secs - 0.161).abs() < 1e-12);
        assert!(
            cxl.relative_throughput.unwrap() > rel,
            "CXL is the faster slow tier"
        );
    }

    #[test]
    fn stall_falls_as_the_fast_share_rises() {
        for model in MODELS {
            let mut last = f64::INFINITY;
            for step in 0..=8 {
                let m = model.model(f64::from(step) / 8.0, &DEMAND, Pattern::Random);
                assert!(m.stall_secs < last, "{model:?} at {step}");
                last = m.stall_secs;
            }
        }
        // Half and half: the mean of the two latencies.
        let m = DRAM_CXL.model(0.5, &DEMAND, Pattern::Random);
        assert!((m.stall_secs - 0.121).abs() < 1e-12);
    }

    #[test]
    fn streaming_demand_is_bandwidth_bound() {
        // 1 GB in 125 M words: bandwidth, not 125 M latencies.
        let demand = Demand {
            ops: 125_000_000,
            bytes: 1_000_000_000,
            nanos: 50_000_000,
        };
        let fast = DRAM_OPTANE.model(1.0, &demand, Pattern::Sequential);
        assert!((fast.stall_secs - 1.0 / 15.0).abs() < 1e-12);
        let slow = DRAM_OPTANE.model(0.0, &demand, Pattern::Sequential);
        assert!((slow.stall_secs - 1.0 / 6.6).abs() < 1e-12);
        let extra = 1.0 / 6.6 - 1.0 / 15.0;
        let rel = slow.relative_throughput.unwrap();
        assert!((rel - 0.05 / (0.05 + extra)).abs() < 1e-9, "{rel}");
    }

    #[test]
    fn shares_outside_the_unit_interval_are_clamped_and_no_time_is_no_ratio() {
        assert_eq!(
            DRAM_CXL.model(1.5, &DEMAND, Pattern::Random),
            DRAM_CXL.model(1.0, &DEMAND, Pattern::Random)
        );
        assert_eq!(
            DRAM_CXL.model(f64::NAN, &DEMAND, Pattern::Random),
            DRAM_CXL.model(0.0, &DEMAND, Pattern::Random)
        );
        let m = DRAM_CXL.model(0.5, &Demand::default(), Pattern::Sequential);
        assert_eq!(m.stall_secs, 0.0);
        assert_eq!(m.relative_throughput, None);
    }
}
