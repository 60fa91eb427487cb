//! How fast a tier's memory is: its read latency and one thread's read
//! bandwidth, either declared in the tier's configuration or measured by a
//! short probe on memory of the tier's own kind (a scratch memfd bound to
//! the tier's NUMA node).
//!
//! The probe buffer is four times the host's last-level cache (64 MiB to
//! 1 GiB), so that most of its reads reach memory. Latency is a chase of
//! dependent loads through the buffer's cache lines in a random cycle;
//! bandwidth the faster of two sequential passes. Results are cached per
//! node for the life of the process: every VM of a process sees the same
//! host memory, and a probe costs a tenth of a second or more.
//!
//! The probe never uses guest memory or a tier's slots, so it cannot
//! disturb a guest. Hugetlb tiers are probed with ordinary pages of their
//! node (the probe must not take hugepages a guest may need); device-DAX
//! and file tiers cannot be probed this way and are unknown unless their
//! configuration declares a profile.

use std::collections::HashMap;
use std::fs;
use std::hint::black_box;
use std::os::fd::AsFd;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;
use crate::mapping::HostMapping;
use crate::size::format_size_with_decimals;
use crate::{memfd, numa};

/// Smallest probe buffer.
const MIN_PROBE_BYTES: usize = 64 << 20;
/// Largest probe buffer.
const MAX_PROBE_BYTES: usize = 1 << 30;
/// Dependent loads timed for the latency.
const CHASE_STEPS: usize = 1 << 18;
/// Bytes of one cache line: the chase's stride unit.
const LINE: usize = 64;
/// The host's last-level cache size, per CPU 0's sysfs description.
const LLC_SIZE: &str = "/sys/devices/system/cpu/cpu0/cache/index3/size";

/// A tier's speed as one thread sees it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierProfile {
    /// Nanoseconds per dependent read of a random cache line.
    pub read_latency_ns: u64,
    /// Bytes per second one thread reads sequentially.
    pub read_bandwidth: u64,
}

impl TierProfile {
    /// "95 ns, 10.4 GiB/s".
    pub fn describe(&self) -> String {
        format!(
            "{} ns, {}/s",
            self.read_latency_ns,
            format_size_with_decimals(self.read_bandwidth, 1)
        )
    }

    /// Whether `slower` is hardly slower than `self`: latency within
    /// 15 % and bandwidth within 15 %. Then moving frames between the two
    /// cannot speed a guest up by more than the probe's own noise.
    pub fn alike(&self, slower: &TierProfile) -> bool {
        (slower.read_latency_ns as f64) < self.read_latency_ns as f64 * 1.15
            && (slower.read_bandwidth as f64) > self.read_bandwidth as f64 * 0.85
    }
}

/// A tier's speed and where it came from.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum TierSpeed {
    /// Measured by the probe when the memory was built.
    Measured {
        /// The figures.
        profile: TierProfile,
    },
    /// Declared in the tier's configuration (emulation, benchmarks, or
    /// a device the probe cannot reach).
    Declared {
        /// The figures.
        profile: TierProfile,
    },
    /// Neither declared nor measurable.
    Unknown {
        /// Why not.
        reason: String,
    },
}

impl TierSpeed {
    /// The figures, when known.
    pub fn profile(&self) -> Option<&TierProfile> {
        match self {
            TierSpeed::Measured { profile } | TierSpeed::Declared { profile } => Some(profile),
            TierSpeed::Unknown { .. } => None,
        }
    }

    /// "95 ns, 10.4 GiB/s (measured)", or why unknown.
    pub fn describe(&self) -> String {
        match self {
            TierSpeed::Measured { profile } => format!("{} (measured)", profile.describe()),
            TierSpeed::Declared { profile } => format!("{} (declared)", profile.describe()),
            TierSpeed::Unknown { reason } => format!("unknown ({reason})"),
        }
    }

    /// The speed of a tier of `kind`: `declared` when given, else a probe
    /// of its node's memory (the process's earlier result for the node
    /// unless `fresh`).
    pub(crate) fn of(kind: &BackendKind, declared: Option<TierProfile>, fresh: bool) -> TierSpeed {
        if let Some(profile) = declared {
            return TierSpeed::Declared { profile };
        }
        match kind {
            BackendKind::Memfd { numa_node, .. } => match probe_node(*numa_node, fresh) {
                Ok(profile) => TierSpeed::Measured { profile },
                Err(reason) => TierSpeed::Unknown { reason },
            },
            BackendKind::DevDax { .. } | BackendKind::RegularFile { .. } => TierSpeed::Unknown {
                reason: "device-DAX and file tiers are not probed: declare read-latency and \
                         read-bandwidth"
                    .to_owned(),
            },
        }
    }
}

/// A probe's result: the profile, or why there is none.
type Probed = Result<TierProfile, String>;

/// Probe results per node (`None`: unbound memory), for the process.
static PROBED: Mutex<Option<HashMap<Option<u32>, Probed>>> = Mutex::new(None);

/// The profile of memory on `node` (or unbound): probed once per process,
/// or again when `fresh` (the new result replaces the old).
fn probe_node(node: Option<u32>, fresh: bool) -> Probed {
    // Holding the lock through the probe keeps two probes from running at
    // once and measuring each other.
    let mut cache = PROBED.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if fresh {
        cache.remove(&node);
    }
    cache
        .entry(node)
        .or_insert_with(|| probe(node, probe_bytes()))
        .clone()
}

/// Four times the last-level cache, within the bounds.
fn probe_bytes() -> usize {
    let llc = fs::read_to_string(LLC_SIZE)
        .ok()
        .and_then(|text| {
            let text = text.trim();
            let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
            let n: usize = digits.parse().ok()?;
            match unit {
                "K" => Some(n << 10),
                "M" => Some(n << 20),
                _ => None,
            }
        })
        .unwrap_or(0);
    (llc.saturating_mul(4)).clamp(MIN_PROBE_BYTES, MAX_PROBE_BYTES)
}

/// Measures `bytes` of fresh memory on `node`.
fn probe(node: Option<u32>, bytes: usize) -> Probed {
    let file = memfd::create("probe", bytes as u64, false).map_err(|e| format!("probe: {e}"))?;
    let map = HostMapping::map_shared(file.as_fd(), bytes, 0)
        .map_err(|e| format!("probe: map {bytes} bytes: {e}"))?;
    if let Some(node) = node {
        numa::bind_to_node(map.addr(), bytes, node)
            .map_err(|e| format!("probe: bind to node {node}: {e}"))?;
    }
    map.populate_write()
        .map_err(|e| format!("probe: populate {bytes} bytes: {e}"))?;
    // SAFETY: the mapping is ours alone (a fresh memfd nobody else maps),
    // `bytes` long, readable and writable, and page-aligned (so u64-
    // aligned); it lives until the end of this function.
    let words = unsafe { std::slice::from_raw_parts_mut(map.addr() as *mut u64, bytes / 8) };
    let read_bandwidth = bandwidth(words);
    let read_latency_ns = latency(words).round().max(1.0) as u64;
    Ok(TierProfile {
        read_latency_ns,
        read_bandwidth,
    })
}

/// Bytes per second of the faster of two sequential passes over `words`.
fn bandwidth(words: &[u64]) -> u64 {
    let mut best = f64::INFINITY;
    for _ in 0..2 {
        let start = Instant::now();
        // Four independent sums keep several loads in flight.
        let mut sums = [0u64; 4];
        for chunk in words.chunks_exact(4) {
            for (sum, w) in sums.iter_mut().zip(chunk) {
                *sum = sum.wrapping_add(*w);
            }
        }
        black_box(sums);
        best = best.min(start.elapsed().as_secs_f64());
    }
    ((words.len() * 8) as f64 / best.max(1e-9)) as u64
}

/// Nanoseconds per load of a chase through `words`' cache lines in one
/// random cycle (Sattolo's shuffle: every line visited before any repeats).
fn latency(words: &mut [u64]) -> f64 {
    let per_line = LINE / 8;
    let lines = words.len() / per_line;
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..lines).rev() {
        state = splitmix64(state);
        let j = (state % i as u64) as usize;
        order.swap(i, j);
    }
    // Line order[k] points at line order[k + 1], the last back to the first.
    for k in 0..lines {
        let next = order[(k + 1) % lines];
        words[order[k] as usize * per_line] = u64::from(next) * per_line as u64;
    }
    let mut at = u64::from(order[0]) * per_line as u64;
    let start = Instant::now();
    for _ in 0..CHASE_STEPS {
        at = words[at as usize];
    }
    black_box(at);
    start.elapsed().as_secs_f64() * 1e9 / CHASE_STEPS as f64
}

/// One step of the SplitMix64 generator.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_measures_plausible_figures() {
        let p = probe(None, MIN_PROBE_BYTES).unwrap();
        // Any memory: a load takes between a cache hit and a page fault, and
        // a thread reads between a slow disk and a very fast machine.
        assert!(
            (1..20_000).contains(&p.read_latency_ns),
            "latency {} ns",
            p.read_latency_ns
        );
        assert!(
            (10_000_000..2_000_000_000_000).contains(&p.read_bandwidth),
            "bandwidth {} B/s",
            p.read_bandwidth
        );
    }

    #[test]
    fn the_chase_visits_every_line_once_per_cycle() {
        let mut words = vec![0u64; 8 * 1000];
        latency(&mut words);
        let mut seen = vec![false; 1000];
        let mut at = 0usize;
        for _ in 0..1000 {
            let line = at / 8;
            assert!(!seen[line], "line {line} visited twice");
            seen[line] = true;
            at = words[at] as usize;
        }
        assert_eq!(at, 0, "the cycle closes");
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn a_declared_profile_is_not_probed() {
        let declared = TierProfile {
            read_latency_ns: 250,
            read_bandwidth: 8_000_000_000,
        };
        let kind = BackendKind::RegularFile {
            path: "/nonexistent".into(),
        };
        assert_eq!(
            TierSpeed::of(&kind, Some(declared), true),
            TierSpeed::Declared { profile: declared }
        );
        let unknown = TierSpeed::of(&kind, None, false);
        assert!(unknown.profile().is_none());
        assert!(unknown.describe().contains("declare read-latency"));
    }

    #[test]
    fn alike_means_within_the_probes_noise() {
        let profile = |read_latency_ns, gb: u64| TierProfile {
            read_latency_ns,
            read_bandwidth: gb * 1_000_000_000,
        };
        let (dram, same, cxl) = (profile(100, 10), profile(110, 9), profile(250, 8));
        assert!(dram.alike(&same));
        assert!(!dram.alike(&cxl));
        assert!(!dram.alike(&profile(105, 4)), "bandwidth alone differs");
        assert_eq!(same.describe(), "110 ns, 8.4 GiB/s");
    }

    #[test]
    fn speeds_serialize_with_their_source() {
        let s = TierSpeed::Measured {
            profile: TierProfile {
                read_latency_ns: 95,
                read_bandwidth: 11_000_000_000,
            },
        };
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(
            json,
            r#"{"source":"measured","profile":{"read_latency_ns":95,"read_bandwidth":11000000000}}"#
        );
        assert_eq!(serde_json::from_str::<TierSpeed>(&json).unwrap(), s);
    }
}
