//! Fitting a spec into guest memory: the buffer size (explicit or a default
//! share of the first free range) and the ground-truth area after it. The
//! VMM calls this before boot and the payload calls it again at run time, so
//! both always agree.

use core::fmt::Write;

use crate::ground_truth::{CHUNK_BYTES, ChunkGrid};
use crate::number::SizeArg;
use crate::parse_error::{ParseError, Snippet};
use crate::spec::{HotsetParams, PmbenchParams, Spec, StreamOp, Workload, ZipfParams};

/// Page size: buffer sizes and hot subsets are multiples of it.
pub const PAGE_BYTES: u64 = 4096;

/// Where a workload's memory goes in the first free range: the buffer at
/// the range's start, the ground-truth area right after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of the data buffer every vCPU works on.
    pub buffer_bytes: u64,
    /// Bytes reserved after the buffer for ground-truth descriptors (a
    /// multiple of 4 KiB; 32 bytes per entry).
    pub ground_truth_bytes: u64,
}

impl Layout {
    /// Bytes of the first free range the workload uses.
    pub fn total_bytes(&self) -> u64 {
        self.buffer_bytes + self.ground_truth_bytes
    }
}

/// Resolved hotset parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct HotsetPlan {
    pub hot_bytes: u64,
    /// Alignment of the hot subset's position (2 MiB if `hot_bytes` is a
    /// multiple of it, else 4 KiB).
    pub align: u64,
    pub hot_frac: f64,
    /// Whether the run checks that no increment was lost.
    pub verify: bool,
}

/// Resolved zipf parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ZipfPlan {
    pub items: u64,
    pub item: u64,
    pub theta: f64,
    pub write_frac: f64,
}

/// Resolved pmbench parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PmbenchPlan {
    pub pages: u64,
    pub stddev_pages: u64,
    pub read_frac: f64,
}

/// A spec with every size-dependent default resolved for one buffer size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Plan {
    Hotset(HotsetPlan),
    Zipf(ZipfPlan),
    Pmbench(PmbenchPlan),
    Stream(StreamOp),
    Memcheck { rounds: u64 },
    Idle,
}

impl Spec {
    /// The memory the spec needs from a first free range of `free_bytes`.
    ///
    /// Default buffer sizes (when `size` is not given):
    /// * memcheck, stream: the whole free range minus the ground-truth
    ///   area (one 4 KiB page);
    /// * zipf with `items`: `items * item` rounded up to 4 KiB;
    /// * idle: one 4 KiB page;
    /// * otherwise 3/4 of the free range, rounded down to 2 MiB (to 4 KiB
    ///   when that would be 0).
    ///
    /// Fails if the buffer and its ground-truth area do not fit, or if a
    /// size-dependent parameter (`hot`, `items`, `stddev`) does not fit the
    /// buffer.
    pub fn layout(&self, free_bytes: u64) -> Result<Layout, ParseError> {
        let buffer_bytes = match self.size {
            Some(size) => size,
            None => self.default_buffer_bytes(free_bytes),
        };
        if buffer_bytes == 0 {
            return Err(ParseError::DoesNotFit {
                workload: self.name(),
                needed: 0,
                free: free_bytes,
            });
        }
        let plan = self.plan(buffer_bytes)?;
        let layout = Layout {
            buffer_bytes,
            ground_truth_bytes: area_bytes(plan.ground_truth_ranges(buffer_bytes)),
        };
        if layout
            .buffer_bytes
            .saturating_add(layout.ground_truth_bytes)
            > free_bytes
        {
            return Err(ParseError::DoesNotFit {
                workload: self.name(),
                needed: layout
                    .buffer_bytes
                    .saturating_add(layout.ground_truth_bytes),
                free: free_bytes,
            });
        }
        Ok(layout)
    }

    /// The buffer size [`Spec::layout`] picks for a first free range of
    /// `free_bytes`.
    pub fn buffer_bytes(&self, free_bytes: u64) -> Result<u64, ParseError> {
        self.layout(free_bytes).map(|l| l.buffer_bytes)
    }

    fn default_buffer_bytes(&self, free: u64) -> u64 {
        match &self.workload {
            // One page: warm-up touches it once, then nothing does.
            Workload::Idle => PAGE_BYTES,
            Workload::Memcheck(_) | Workload::Stream(_) => {
                // Their ground-truth entry count does not depend on the size.
                let gt = match self.plan(PAGE_BYTES) {
                    Ok(plan) => area_bytes(plan.ground_truth_ranges(PAGE_BYTES)),
                    Err(_) => PAGE_BYTES,
                };
                round_down(free.saturating_sub(gt), PAGE_BYTES)
            }
            Workload::Zipf(ZipfParams {
                items: Some(items),
                item,
                ..
            }) => items.checked_mul(*item).map_or(u64::MAX, |b| {
                b.div_ceil(PAGE_BYTES).saturating_mul(PAGE_BYTES)
            }),
            _ => {
                let share = free / 4 * 3;
                match round_down(share, CHUNK_BYTES) {
                    0 => round_down(share, PAGE_BYTES),
                    b => b,
                }
            }
        }
    }

    /// Resolves size-dependent defaults for a buffer of `buffer_bytes`.
    pub(crate) fn plan(&self, buffer_bytes: u64) -> Result<Plan, ParseError> {
        Ok(match &self.workload {
            Workload::Hotset(p) => Plan::Hotset(self.hotset_plan(p, buffer_bytes)?),
            Workload::Zipf(p) => Plan::Zipf(self.zipf_plan(p, buffer_bytes)?),
            Workload::Pmbench(p) => Plan::Pmbench(self.pmbench_plan(p, buffer_bytes)?),
            Workload::Stream(p) => Plan::Stream(p.op),
            Workload::Memcheck(p) => Plan::Memcheck { rounds: p.rounds },
            Workload::Idle => Plan::Idle,
        })
    }

    fn hotset_plan(&self, p: &HotsetParams, buffer: u64) -> Result<HotsetPlan, ParseError> {
        let hot_bytes = match p.hot {
            Some(hot) if hot > buffer => {
                return Err(self.derived_error("hot", SizeArg(hot), "must not exceed size"));
            }
            Some(hot) => hot,
            None => match round_down(buffer / 8, CHUNK_BYTES) {
                0 => round_down(buffer / 8, PAGE_BYTES).max(PAGE_BYTES),
                b => b,
            },
        };
        let align = if hot_bytes % CHUNK_BYTES == 0 {
            CHUNK_BYTES
        } else {
            PAGE_BYTES
        };
        Ok(HotsetPlan {
            hot_bytes,
            align,
            hot_frac: p.hot_frac,
            verify: p.verify,
        })
    }

    fn zipf_plan(&self, p: &ZipfParams, buffer: u64) -> Result<ZipfPlan, ParseError> {
        let items = match p.items {
            Some(items) => {
                if items.checked_mul(p.item).is_none_or(|b| b > buffer) {
                    return Err(self.derived_error(
                        "items",
                        items,
                        "items * item must fit in size",
                    ));
                }
                items
            }
            None if p.item > buffer => {
                return Err(self.derived_error("item", p.item, "must not exceed size"));
            }
            None => buffer / p.item,
        };
        Ok(ZipfPlan {
            items,
            item: p.item,
            theta: p.theta,
            write_frac: p.write_frac,
        })
    }

    fn pmbench_plan(&self, p: &PmbenchParams, buffer: u64) -> Result<PmbenchPlan, ParseError> {
        let pages = buffer / PAGE_BYTES;
        let stddev_pages = match p.stddev_pages {
            Some(s) if s > pages => {
                return Err(self.derived_error("stddev", s, "must not exceed the buffer's pages"));
            }
            Some(s) => s,
            None => (pages / 16).max(1),
        };
        Ok(PmbenchPlan {
            pages,
            stddev_pages,
            read_frac: p.read_frac,
        })
    }

    fn derived_error(
        &self,
        key: &'static str,
        value: impl core::fmt::Display,
        reason: &'static str,
    ) -> ParseError {
        let mut snippet = Snippet::new("");
        write!(snippet, "{value}").ok();
        ParseError::OutOfRange {
            workload: self.name(),
            key,
            value: snippet,
            reason,
        }
    }
}

impl Plan {
    /// Most ground-truth entries the workload emits for one phase.
    pub(crate) fn ground_truth_ranges(&self, buffer_bytes: u64) -> u64 {
        match self {
            Plan::Hotset(_) | Plan::Stream(StreamOp::Copy) => 2,
            Plan::Stream(_) | Plan::Memcheck { .. } | Plan::Idle => 1,
            Plan::Zipf(_) | Plan::Pmbench(_) => ChunkGrid::new(buffer_bytes).count(),
        }
    }
}

/// Bytes for `ranges` ground-truth entries, rounded up to whole pages.
fn area_bytes(ranges: u64) -> u64 {
    (ranges * guest_abi::AccessRange::SIZE as u64).div_ceil(PAGE_BYTES) * PAGE_BYTES
}

fn round_down(v: u64, align: u64) -> u64 {
    v / align * align
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn layout(s: &str, free: u64) -> Result<Layout, ParseError> {
        Spec::parse(s).unwrap().layout(free)
    }

    #[test]
    fn default_sizes() {
        let free = 8 * GIB;
        let l = layout("memcheck", free).unwrap();
        assert_eq!(
            l,
            Layout {
                buffer_bytes: free - 4096,
                ground_truth_bytes: 4096
            }
        );
        assert_eq!(l.total_bytes(), free);
        assert_eq!(
            layout("stream:op=copy", free).unwrap().buffer_bytes,
            free - 4096
        );
        assert_eq!(layout("hotset", free).unwrap().buffer_bytes, 6 * GIB);
        // 3/4 of 10 MiB = 7.5 MiB -> 6 MiB.
        assert_eq!(layout("pmbench", 10 * MIB).unwrap().buffer_bytes, 6 * MIB);
        // 3/4 of 1 MiB rounds to pages when 2 MiB rounding gives nothing.
        assert_eq!(layout("hotset", MIB).unwrap().buffer_bytes, 768 * 1024);
        assert_eq!(
            layout("zipf:items=100,item=64", GIB).unwrap().buffer_bytes,
            8192
        );
    }

    #[test]
    fn ground_truth_area_scales_with_chunks() {
        let l = layout("zipf:size=1G", 2 * GIB).unwrap();
        // 512 chunks of 2 MiB, 32 bytes each = 16 KiB.
        assert_eq!(l.ground_truth_bytes, 16384);
        let l = layout("hotset:size=1G", 2 * GIB).unwrap();
        assert_eq!(l.ground_truth_bytes, 4096);
        // 64 GiB of 2 MiB chunks is 32768 entries (1 MiB of descriptors).
        let l = layout("pmbench:size=64G", 65 * GIB).unwrap();
        assert_eq!(l.ground_truth_bytes, MIB);
    }

    #[test]
    fn explicit_size_larger_than_free_is_an_error() {
        let e = layout("hotset:size=16G", 8 * GIB).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hotset: needs 16.00 GiB of guest memory (buffer plus ground-truth area) \
             but the first free range has 8 GiB"
        );
        // Exactly the free range leaves no room for the ground-truth page.
        assert!(layout("memcheck:size=1G", GIB).is_err());
        assert!(layout("memcheck:size=1020M", GIB).is_ok());
        let tiny = layout("hotset", 4096).unwrap_err();
        assert!(tiny.to_string().contains("too small"), "{tiny}");
        assert_eq!(
            Spec::parse("hotset:size=2M").unwrap().buffer_bytes(4 * MIB),
            Ok(2 * MIB)
        );
    }

    #[test]
    fn size_dependent_limits() {
        let e = layout("hotset:size=64M,hot=128M", GIB).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hotset: hot=128M out of range: must not exceed size"
        );
        let e = layout("zipf:size=1M,items=100000", GIB).unwrap_err();
        assert!(
            e.to_string().contains("items * item must fit in size"),
            "{e}"
        );
        let e = layout("zipf:size=4K,item=8K", GIB).unwrap_err();
        assert!(e.to_string().contains("item=8192 out of range"), "{e}");
        let e = layout("pmbench:size=4M,stddev=2000", GIB).unwrap_err();
        assert!(e.to_string().contains("stddev=2000 out of range"), "{e}");
        assert!(layout("zipf:items=18446744073709551615", GIB).is_err());
    }

    #[test]
    fn plans_resolve_defaults() {
        let spec = Spec::parse("hotset").unwrap();
        let Plan::Hotset(h) = spec.plan(256 * MIB).unwrap() else {
            panic!()
        };
        assert_eq!((h.hot_bytes, h.align), (32 * MIB, CHUNK_BYTES));
        let Plan::Hotset(h) = spec.plan(MIB).unwrap() else {
            panic!()
        };
        assert_eq!((h.hot_bytes, h.align), (128 * 1024, PAGE_BYTES));
        let Plan::Hotset(h) = spec.plan(8192).unwrap() else {
            panic!()
        };
        assert_eq!(h.hot_bytes, 4096);
        let Plan::Zipf(z) = Spec::parse("zipf").unwrap().plan(MIB).unwrap() else {
            panic!()
        };
        assert_eq!(z.items, MIB / 64);
        let Plan::Pmbench(p) = Spec::parse("pmbench").unwrap().plan(64 * MIB).unwrap() else {
            panic!()
        };
        assert_eq!((p.pages, p.stddev_pages), (16384, 1024));
    }
}
