//! The benchmark guests: their VM configuration, the workload each runs
//! and the pool of frames the benchmark moves under it.

use std::time::Duration;

use thiserror::Error;

use guest_abi::GpaRange;
use guest_memory::FrameId;
use guest_memory::{BackendSpec, MemoryConfig, Placement, TierSpec, TieredMemory};
use vmm::migration::{MigrationConfig, MigratorKind};
use vmm::vm::{PayloadSource, VmConfig};
use workloads::Spec;

use super::scenario::GuestLoad;
use super::settings::GUEST_TIMEOUT_SECS;
use crate::size::format_size;

/// Why the pool of frames could not be chosen.
#[derive(Debug, Error)]
pub enum PoolError {
    /// The workload string does not parse (a bug in this module).
    #[error("workload {args:?}: {why}")]
    Workload {
        /// The string.
        args: String,
        /// The parser's message.
        why: String,
    },
    /// Guest RAM has no room for the pool where it must go.
    #[error("{wanted} frames do not fit {where_}")]
    DoesNotFit {
        /// Frames asked for.
        wanted: usize,
        /// Where they had to go.
        where_: String,
    },
}

/// The shape of a benchmark VM.
#[derive(Debug, Clone)]
pub struct GuestShape {
    /// Guest RAM.
    pub guest_bytes: u64,
    /// Frame size.
    pub frame_size: u64,
    /// vCPUs.
    pub vcpus: u32,
    /// Capacity of each of the two tiers.
    pub tier_bytes: u64,
    /// Where frames start.
    pub placement: Placement,
    /// The migrator.
    pub migrator: MigratorKind,
    /// Preallocate both tiers (`prealloc=on`): migrations copy into memory
    /// that exists instead of allocating it page by page.
    pub prealloc: bool,
    /// Back both tiers with 2 MiB hugetlb pages.
    pub hugetlb: bool,
}

impl GuestShape {
    /// The VM configuration running the embedded workload `args`.
    pub fn vm_config(&self, args: &str) -> VmConfig {
        let tier = |name: &str| TierSpec {
            name: name.to_owned(),
            backend: BackendSpec::Memfd {
                numa_node: None,
                hugetlb: self.hugetlb,
                prealloc: self.prealloc,
            },
            size: Some(self.tier_bytes),
            profile: None,
        };
        VmConfig {
            vcpus: self.vcpus,
            memory: MemoryConfig {
                size: self.guest_bytes,
                frame_size: self.frame_size,
                tiers: vec![tier("fast"), tier("slow")],
                placement: self.placement,
                ..MemoryConfig::default()
            },
            payload: PayloadSource::Embedded,
            args: args.to_owned(),
            timeout: Some(Duration::from_secs(GUEST_TIMEOUT_SECS)),
            dirty_log_tracking: false,
            tiering: None,
            migration: MigrationConfig {
                migrator: self.migrator,
                ..MigrationConfig::default()
            },
        }
    }
}

/// The workload string of `load` for a pool of `pool_frames` frames: the
/// idle guest runs `idle` (its vCPUs sleep in the VMM), the write-busy guest runs
/// memcheck over exactly the pool. Both run until the VMM asks them to
/// stop (the phase length is the longest allowed).
pub fn workload(load: GuestLoad, pool_frames: usize, frame_size: u64) -> String {
    match load {
        GuestLoad::Idle => "idle:phases=1,seconds=86400".to_owned(),
        GuestLoad::WriteBusy => memcheck(pool_frames as u64 * frame_size),
    }
}

/// memcheck over `bytes`, until stopped.
pub fn memcheck(bytes: u64) -> String {
    format!("memcheck:size={}K,seconds=86400", bytes / 1024)
}

/// The frames the benchmark moves: for the write-busy guest the frames of
/// memcheck's buffer (at the start of free RAM); for the idle guest the
/// last `pool_frames` frames of RAM, above everything the workload uses.
pub fn pool(
    load: GuestLoad,
    args: &str,
    memory: &TieredMemory,
    free: GpaRange,
    pool_frames: usize,
) -> Result<Vec<usize>, PoolError> {
    let spec = Spec::parse(args).map_err(|e| PoolError::Workload {
        args: args.to_owned(),
        why: e.to_string(),
    })?;
    let layout = spec.layout(free.len).map_err(|e| PoolError::Workload {
        args: args.to_owned(),
        why: e.to_string(),
    })?;
    let frames = memory.frames();
    let fs = memory.frame_size();
    let too_big = |where_: String| PoolError::DoesNotFit {
        wanted: pool_frames,
        where_,
    };
    match load {
        GuestLoad::WriteBusy => {
            let first = frames
                .frame_of_gpa(free.start)
                .map(FrameId::index)
                .ok_or_else(|| too_big(format!("at free RAM {:#x}", free.start)))?;
            let pool: Vec<usize> = (first..first + pool_frames).collect();
            let buffer_end = free.start + layout.buffer_bytes;
            let covered = pool.len() as u64 * fs;
            if free.start % fs != 0
                || covered != layout.buffer_bytes
                || pool
                    .iter()
                    .any(|&f| frames.gpa(FrameId(f)).is_none_or(|g| g >= buffer_end))
            {
                return Err(too_big(format!(
                    "memcheck's buffer of {} at {:#x}",
                    format_size(layout.buffer_bytes),
                    free.start
                )));
            }
            Ok(pool)
        }
        GuestLoad::Idle => {
            let used_end = free.start + layout.total_bytes();
            let count = memory.frame_count();
            let first = count.checked_sub(pool_frames);
            let pool: Vec<usize> = first.map(|f| (f..count).collect()).unwrap_or_default();
            let clear = |&f: &usize| frames.gpa(FrameId(f)).is_some_and(|g| g >= used_end);
            if pool.len() != pool_frames || !pool.iter().all(clear) {
                return Err(too_big(format!(
                    "in {} of RAM above the workload's last byte {:#x}",
                    format_size(memory.frame_count() as u64 * fs),
                    used_end
                )));
            }
            Ok(pool)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(size: u64) -> TieredMemory {
        let shape = GuestShape {
            guest_bytes: size,
            frame_size: 2 << 20,
            vcpus: 2,
            tier_bytes: size,
            placement: Placement::FastFirst,
            migrator: MigratorKind::Remap,
            prealloc: false,
            hugetlb: false,
        };
        TieredMemory::new(&shape.vm_config("stream").memory).unwrap()
    }

    #[test]
    fn workloads_parse_and_cover_the_pool() {
        let busy = workload(GuestLoad::WriteBusy, 16, 2 << 20);
        assert_eq!(busy, "memcheck:size=32768K,seconds=86400");
        let idle = workload(GuestLoad::Idle, 16, 2 << 20);
        for args in [&busy, &idle] {
            assert!(Spec::parse(args).is_ok(), "{args}");
        }
    }

    #[test]
    fn write_busy_pool_is_the_memcheck_buffer() {
        let mem = memory(64 << 20);
        let free = GpaRange {
            start: 8 << 20,
            len: 56 << 20,
        };
        let args = workload(GuestLoad::WriteBusy, 16, 2 << 20);
        let pool = pool(GuestLoad::WriteBusy, &args, &mem, free, 16).unwrap();
        assert_eq!(pool, (4..20).collect::<Vec<_>>());
    }

    #[test]
    fn idle_pool_is_the_top_of_ram_clear_of_the_workload() {
        let mem = memory(64 << 20);
        let free = GpaRange {
            start: 8 << 20,
            len: 56 << 20,
        };
        let args = workload(GuestLoad::Idle, 16, 2 << 20);
        assert_eq!(
            pool(GuestLoad::Idle, &args, &mem, free, 16).unwrap(),
            (16..32).collect::<Vec<_>>()
        );
        // 28 frames would reach down into the stream buffer at 8 MiB.
        assert!(matches!(
            pool(GuestLoad::Idle, &args, &mem, free, 28),
            Err(PoolError::DoesNotFit { wanted: 28, .. })
        ));
    }

    #[test]
    fn a_buffer_beyond_ram_is_refused() {
        let mem = memory(64 << 20);
        let free = GpaRange {
            start: 8 << 20,
            len: 56 << 20,
        };
        let args = workload(GuestLoad::WriteBusy, 32, 2 << 20);
        assert!(matches!(
            pool(GuestLoad::WriteBusy, &args, &mem, free, 32),
            Err(PoolError::Workload { .. } | PoolError::DoesNotFit { .. })
        ));
    }

    #[test]
    fn vm_config_has_two_tiers_each_holding_all_ram() {
        let shape = GuestShape {
            guest_bytes: 64 << 20,
            frame_size: 64 << 10,
            vcpus: 2,
            tier_bytes: 32 << 20,
            placement: Placement::Interleave,
            migrator: MigratorKind::RemapPrecopy,
            prealloc: false,
            hugetlb: false,
        };
        let config = shape.vm_config("memcheck");
        assert_eq!(config.memory.tiers.len(), 2);
        assert_eq!(config.memory.tiers[1].size, Some(32 << 20));
        assert_eq!(config.memory.frame_size, 64 << 10);
        assert_eq!(config.migration.migrator, MigratorKind::RemapPrecopy);
        assert_eq!(config.args, "memcheck");
        assert!(config.timeout.is_some());
    }
}
