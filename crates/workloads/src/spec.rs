//! What a workload string means: the workload kind, its typed parameters
//! and their defaults. Parsing lives in `parse`, fitting into memory in
//! `layout`.

use core::fmt;

use crate::number::{SecondsArg, SizeArg};

/// Names of all workloads, as accepted before the `:` of a workload string.
pub const NAMES: &[&str] = &["hotset", "zipf", "pmbench", "stream", "memcheck", "idle"];

/// Default phase length for all workloads but memcheck, in milliseconds.
pub const DEFAULT_PHASE_MS: u64 = 2000;
/// Default number of phases for hotset, pmbench and stream.
pub const DEFAULT_PHASES: u32 = 3;
/// Default seed.
pub const DEFAULT_SEED: u64 = 0;

/// A parsed workload string `NAME[:k=v,k=v,...]`.
///
/// Parameters every workload has:
/// * `size` — buffer bytes (`K`/`M`/`G`/`T` suffixes, multiple of 4 KiB);
///   default: see [`Spec::layout`];
/// * `phases` — number of phases, 1..=100000; default 3 (zipf and
///   memcheck: 1);
/// * `seconds` — length of each phase, up to 3 decimals, at most 86400;
///   default 2; memcheck: default 0 = run `rounds` rounds per phase;
/// * `seed` — seed of every random choice (decimal or `0x` hex); default 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The workload and its own parameters.
    pub workload: Workload,
    /// Buffer size in bytes (`size`); `None` picks a share of free memory.
    pub size: Option<u64>,
    /// Number of phases (`phases`).
    pub phases: u32,
    /// Length of one phase in milliseconds (`seconds`); 0 only for memcheck.
    pub phase_ms: u64,
    /// Seed (`seed`).
    pub seed: u64,
}

/// A workload with its own parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// GUPS-style random read-modify-write with a moving hot subset.
    Hotset(HotsetParams),
    /// Key-value lookups with Zipf popularity.
    Zipf(ZipfParams),
    /// Page-granular accesses with normally distributed page numbers.
    Pmbench(PmbenchParams),
    /// Sequential scans.
    Stream(StreamParams),
    /// Data-integrity check of every word of the buffer.
    Memcheck(MemcheckParams),
    /// Nothing to do: the vCPUs give their host CPUs back (`Idle`
    /// hypercalls) until the phase ends, like an idle guest halting.
    Idle,
}

/// `hotset` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HotsetParams {
    /// Bytes of the hot subset (`hot`, multiple of 4 KiB, at most `size`);
    /// default `size / 8` rounded down to 2 MiB (to 4 KiB for buffers under
    /// 16 MiB, at least 4 KiB).
    pub hot: Option<u64>,
    /// Share of accesses that go to the hot subset (`hot-frac`, in
    /// `[0, 1]`); default 0.9.
    pub hot_frac: f64,
    /// Whether each vCPU checks at the end that none of its increments was
    /// lost (`verify`, `0` or `1`); default off. See
    /// `docs/payload-abi.md`, hotset.
    pub verify: bool,
}

/// `zipf` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZipfParams {
    /// Number of records (`items`, at least 1); default `size / item`.
    /// When given without `size`, the buffer is `items * item` rounded up to
    /// 4 KiB.
    pub items: Option<u64>,
    /// Record size in bytes (`item`, multiple of 8 in 8..=64K); default 64.
    pub item: u64,
    /// Zipf exponent (`theta`, in `(0, 5]`); default 0.99.
    pub theta: f64,
    /// Share of lookups that write the record (`write-frac`, in `[0, 1]`);
    /// default 0.05.
    pub write_frac: f64,
}

/// `pmbench` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PmbenchParams {
    /// Standard deviation of the page number in pages (`stddev`, 1 up to the
    /// buffer's page count); default `pages / 16` (at least 1).
    pub stddev_pages: Option<u64>,
    /// Share of accesses that read (`read-frac`, in `[0, 1]`); default 0.8.
    pub read_frac: f64,
}

/// `stream` parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamParams {
    /// What each pass does (`op`); default [`StreamOp::Read`].
    pub op: StreamOp,
}

/// What a `stream` pass does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamOp {
    /// `read`: sum all words.
    Read,
    /// `copy`: copy the first half of the buffer onto the second half.
    Copy,
    /// `write`: store to all words.
    Write,
}

impl StreamOp {
    /// The parameter value naming this operation.
    pub fn name(self) -> &'static str {
        match self {
            StreamOp::Read => "read",
            StreamOp::Copy => "copy",
            StreamOp::Write => "write",
        }
    }
}

/// `memcheck` parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemcheckParams {
    /// Write-and-verify rounds per phase when `seconds` is 0 (`rounds`,
    /// 1..=10^9); default 2.
    pub rounds: u64,
}

const HOTSET_KEYS: &[&str] = &[
    "size", "phases", "seconds", "seed", "hot", "hot-frac", "verify",
];
const ZIPF_KEYS: &[&str] = &[
    "size",
    "phases",
    "seconds",
    "seed",
    "items",
    "item",
    "theta",
    "write-frac",
];
const PMBENCH_KEYS: &[&str] = &["size", "phases", "seconds", "seed", "stddev", "read-frac"];
const STREAM_KEYS: &[&str] = &["size", "phases", "seconds", "seed", "op"];
const MEMCHECK_KEYS: &[&str] = &["size", "phases", "seconds", "seed", "rounds"];
const IDLE_KEYS: &[&str] = &["size", "phases", "seconds", "seed"];

impl Workload {
    /// The workload with all parameters at their defaults, by name.
    pub fn default_for(name: &str) -> Option<Self> {
        Some(match name {
            "hotset" => Workload::Hotset(HotsetParams {
                hot: None,
                hot_frac: 0.9,
                verify: false,
            }),
            "zipf" => Workload::Zipf(ZipfParams {
                items: None,
                item: 64,
                theta: 0.99,
                write_frac: 0.05,
            }),
            "pmbench" => Workload::Pmbench(PmbenchParams {
                stddev_pages: None,
                read_frac: 0.8,
            }),
            "stream" => Workload::Stream(StreamParams { op: StreamOp::Read }),
            "memcheck" => Workload::Memcheck(MemcheckParams { rounds: 2 }),
            "idle" => Workload::Idle,
            _ => return None,
        })
    }

    /// The workload's name (one of [`NAMES`]).
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Hotset(_) => "hotset",
            Workload::Zipf(_) => "zipf",
            Workload::Pmbench(_) => "pmbench",
            Workload::Stream(_) => "stream",
            Workload::Memcheck(_) => "memcheck",
            Workload::Idle => "idle",
        }
    }

    /// All keys this workload accepts, common keys first.
    pub fn keys(&self) -> &'static [&'static str] {
        match self {
            Workload::Hotset(_) => HOTSET_KEYS,
            Workload::Zipf(_) => ZIPF_KEYS,
            Workload::Pmbench(_) => PMBENCH_KEYS,
            Workload::Stream(_) => STREAM_KEYS,
            Workload::Memcheck(_) => MEMCHECK_KEYS,
            Workload::Idle => IDLE_KEYS,
        }
    }

    /// Default number of phases.
    pub fn default_phases(&self) -> u32 {
        match self {
            Workload::Zipf(_) | Workload::Memcheck(_) | Workload::Idle => 1,
            _ => DEFAULT_PHASES,
        }
    }

    /// Default phase length in milliseconds.
    pub fn default_phase_ms(&self) -> u64 {
        match self {
            Workload::Memcheck(_) => 0,
            _ => DEFAULT_PHASE_MS,
        }
    }
}

impl Spec {
    /// The spec for `workload` with every common parameter at its default.
    pub fn with_defaults(workload: Workload) -> Self {
        Spec {
            size: None,
            phases: workload.default_phases(),
            phase_ms: workload.default_phase_ms(),
            seed: DEFAULT_SEED,
            workload,
        }
    }

    /// The workload's name (one of [`NAMES`]).
    pub fn name(&self) -> &'static str {
        self.workload.name()
    }
}

/// The canonical string: the name, then every parameter that has a value
/// (defaults that depend on the buffer size are left out). Parsing it gives
/// back an equal spec.
impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        f.write_str(":")?;
        if let Some(size) = self.size {
            write!(f, "size={},", SizeArg(size))?;
        }
        write!(
            f,
            "phases={},seconds={},seed={}",
            self.phases,
            SecondsArg(self.phase_ms),
            self.seed
        )?;
        match &self.workload {
            Workload::Hotset(p) => {
                if let Some(hot) = p.hot {
                    write!(f, ",hot={}", SizeArg(hot))?;
                }
                write!(f, ",hot-frac={}", p.hot_frac)?;
                if p.verify {
                    f.write_str(",verify=1")?;
                }
                Ok(())
            }
            Workload::Zipf(p) => {
                if let Some(items) = p.items {
                    write!(f, ",items={items}")?;
                }
                write!(
                    f,
                    ",item={},theta={},write-frac={}",
                    p.item, p.theta, p.write_frac
                )
            }
            Workload::Pmbench(p) => {
                if let Some(stddev) = p.stddev_pages {
                    write!(f, ",stddev={stddev}")?;
                }
                write!(f, ",read-frac={}", p.read_frac)
            }
            Workload::Stream(p) => write!(f, ",op={}", p.op.name()),
            Workload::Memcheck(p) => write!(f, ",rounds={}", p.rounds),
            Workload::Idle => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_defaults_and_keys() {
        for name in NAMES {
            let w = Workload::default_for(name).unwrap();
            assert_eq!(w.name(), *name);
            assert_eq!(&w.keys()[..4], &["size", "phases", "seconds", "seed"]);
            assert!(w.keys().len() <= 32, "keys are tracked in a u32 bitmask");
        }
        assert!(Workload::default_for("nope").is_none());
    }

    #[test]
    fn per_workload_common_defaults() {
        let memcheck = Spec::with_defaults(Workload::default_for("memcheck").unwrap());
        assert_eq!((memcheck.phases, memcheck.phase_ms), (1, 0));
        let zipf = Spec::with_defaults(Workload::default_for("zipf").unwrap());
        assert_eq!((zipf.phases, zipf.phase_ms), (1, 2000));
        let hotset = Spec::with_defaults(Workload::default_for("hotset").unwrap());
        assert_eq!((hotset.phases, hotset.phase_ms, hotset.seed), (3, 2000, 0));
    }
}
