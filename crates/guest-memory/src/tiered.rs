//! `TieredMemory`: a VM's guest RAM built from its tiers. It owns the tier
//! backends, the host-virtual ranges that hold guest RAM (fixed for the life
//! of the VM, one per RAM region, for KVM memslots), the frame table, and the
//! slot ledger (placement map + slot allocators) behind a lock so that a
//! migration thread can change placement while the VMM reads it.
//!
//! A migrator moves frame `f` from `src` to tier `t` like this:
//! [`TieredMemory::reserve_slot`]`(t)` → write-protect `f`'s host range →
//! copy between the tiers' views ([`TierBackend::slot_view_addr`]) →
//! [`TieredMemory::map_frames`]`(f, 1, dst)` → [`TieredMemory::commit_move`]
//! → [`TierBackend::discard_slot`]`(src.slot)` → [`TieredMemory::release_slot`]`(src)`.
//!
//! With [`Backing::SharedNuma`] all tiers are one memfd (see
//! `shared_numa`): frames keep their slot and change NUMA node instead,
//! moved by the kernel migrator; slot reservations and remaps are refused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use vm_memory::GuestMemoryMmap;

use crate::backend::TierBackend;
use crate::backing::Backing;
use crate::config::{MemoryConfig, Plan, validate};
use crate::config_error::ConfigError;
use crate::error::Error;
use crate::frame_table::{FrameTable, MappedRegion};
use crate::guest_ranges::{GuestRanges, map_all, map_run};
use crate::ids::{FrameId, TierId};
use crate::initial_placement::Placement;
use crate::ledger::{Ledger, LedgerError};
use crate::placement::{Location, PlacementMap, PlacementSnapshot};
use crate::shared_numa;
use crate::tier_speed::{TierProfile, TierSpeed};
use crate::verify::verify;

/// Occupancy of one tier, derived from the placement map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TierUsage {
    /// Tier name.
    pub name: String,
    /// Frames the tier can hold.
    pub capacity_frames: usize,
    /// Frames living on the tier.
    pub used_frames: usize,
    /// How fast the tier's memory is.
    pub speed: TierSpeed,
}

/// A VM's tiered guest RAM.
///
/// Dropping it unmaps the guest ranges and views and closes the backings —
/// unless a clone of [`TieredMemory::guest_memory`] (or of one of its
/// regions) is still alive, in which case the guest ranges are leaked rather
/// than left dangling under that clone.
#[derive(Debug)]
pub struct TieredMemory {
    /// Declared first: guest ranges go before the tiers they map.
    ranges: GuestRanges,
    frames: FrameTable,
    tiers: Vec<TierBackend>,
    ledger: Mutex<Ledger>,
    policy: Placement,
    backing: Backing,
    /// Per tier, declared or measured (when the memory was built, or
    /// since by [`TieredMemory::measure_speeds`]).
    speeds: Mutex<Vec<TierSpeed>>,
    /// Per tier, the profile its spec declares.
    declared: Vec<Option<TierProfile>>,
    /// Whether [`TieredMemory::measure_speeds`] runs.
    measuring: AtomicBool,
}

/// Zeroes the slots that will back frames on tiers whose contents
/// outlive a VM (device-DAX, files): guest RAM starts zeroed, and a guest
/// must not read what an earlier one left there. Slots filled later by
/// migration are overwritten whole by the copy.
fn clear_old_data(tiers: &[TierBackend], map: &PlacementMap) -> Result<(), Error> {
    for (_, loc) in map.iter() {
        let tier = &tiers[loc.tier.index()];
        if tier.keeps_old_data() && !tier.is_shared() {
            tier.clear_slot(loc.slot).map_err(|source| Error::Backend {
                tier: tier.name().to_owned(),
                source,
            })?;
        }
    }
    Ok(())
}

impl TieredMemory {
    /// Validates `cfg` (before creating anything), creates the tier
    /// backends, places every frame per `cfg.placement` and maps it.
    pub fn new(cfg: &MemoryConfig) -> Result<Self, Error> {
        let plan = validate(cfg)?;
        let (tiers, ledger) = match cfg.backing {
            Backing::PerTier => build_per_tier(&plan, cfg)?,
            Backing::SharedNuma { .. } => shared_numa::build(&plan, cfg)?,
        };
        clear_old_data(&tiers, ledger.map())?;
        let ranges = GuestRanges::reserve(&plan.regions, plan.frame_size)?;
        let frames = FrameTable::new(plan.frame_size, ranges.mapped().to_vec());
        map_all(&frames, &tiers, ledger.map())?;
        let declared: Vec<Option<TierProfile>> = cfg.tiers.iter().map(|t| t.profile).collect();
        let speeds = tiers
            .iter()
            .zip(&declared)
            .map(|(tier, declared)| TierSpeed::of(tier.kind(), *declared, false))
            .collect();
        Ok(Self {
            ranges,
            frames,
            tiers,
            ledger: Mutex::new(ledger),
            policy: cfg.placement,
            backing: cfg.backing,
            speeds: Mutex::new(speeds),
            declared,
            measuring: AtomicBool::new(false),
        })
    }

    /// How guest RAM is backed.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// One host-virtual range per RAM region (for KVM memslots).
    pub fn regions(&self) -> &[MappedRegion] {
        self.frames.regions()
    }

    /// vm-memory view over the guest ranges (not owning them: clones must
    /// not outlive `self`; if they do, `self` leaks the ranges on drop).
    pub fn guest_memory(&self) -> &GuestMemoryMmap {
        self.ranges.memory()
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u64 {
        self.frames.frame_size()
    }

    /// Number of frames.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Frame index ↔ guest-physical ↔ host-virtual addresses.
    pub fn frames(&self) -> &FrameTable {
        &self.frames
    }

    /// The tiers, fastest first.
    pub fn tiers(&self) -> &[TierBackend] {
        &self.tiers
    }

    /// The tier called `name`.
    pub fn tier_index(&self, name: &str) -> Option<TierId> {
        self.tiers.iter().position(|t| t.name() == name).map(TierId)
    }

    /// The initial placement policy the memory was built with.
    pub fn placement_policy(&self) -> Placement {
        self.policy
    }

    /// A copy of the placement map as it is now.
    pub fn placement(&self) -> PlacementSnapshot {
        self.ledger().map().clone()
    }

    /// Where `frame` lives now.
    pub fn location(&self, frame: FrameId) -> Option<Location> {
        self.ledger().map().location(frame)
    }

    /// Runs `f` on the placement map under the lock (no copy); placement
    /// changes wait until `f` returns, so keep it short.
    pub fn with_placement<R>(&self, f: impl FnOnce(&PlacementMap) -> R) -> R {
        f(self.ledger().map())
    }

    /// Marks a measurement of the tiers' speeds as under way, for
    /// [`measure_speeds`](Self::measure_speeds) to do and unmark (on any
    /// thread); `false`, marking nothing, when one already is. Marking
    /// first lets a caller answer at once and readers see the measurement
    /// as running until its results are in.
    pub fn begin_measuring_speeds(&self) -> bool {
        !self.measuring.swap(true, Ordering::AcqRel)
    }

    /// Measures every tier that declares no speed again, on fresh probes
    /// (a tenth of a second or more per node: off any thread that must
    /// answer quickly), keeps the results and ends the measurement that
    /// [`begin_measuring_speeds`](Self::begin_measuring_speeds) marked.
    pub fn measure_speeds(&self) {
        let speeds: Vec<TierSpeed> = self
            .tiers
            .iter()
            .zip(&self.declared)
            .map(|(tier, declared)| TierSpeed::of(tier.kind(), *declared, true))
            .collect();
        *self.speeds.lock().unwrap_or_else(PoisonError::into_inner) = speeds;
        self.measuring.store(false, Ordering::Release);
    }

    /// Whether a measurement of the tiers' speeds is under way.
    pub fn measuring_speeds(&self) -> bool {
        self.measuring.load(Ordering::Acquire)
    }

    /// Capacity and occupancy of each tier, from the placement map.
    pub fn tier_usage(&self) -> Vec<TierUsage> {
        let speeds = self
            .speeds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let ledger = self.ledger();
        self.tiers
            .iter()
            .zip((0..).map(TierId))
            .map(|(t, tier)| TierUsage {
                name: t.name().to_owned(),
                capacity_frames: t.capacity_frames(),
                used_frames: ledger.map().used_frames(tier),
                speed: speeds[tier.index()].clone(),
            })
            .collect()
    }

    /// Slots of `tier` that are allocated but back no frame (migration
    /// destinations in flight, or sources not yet released).
    pub fn reserved_slots(&self, tier: TierId) -> usize {
        self.ledger().reserved(tier)
    }

    /// Slots of `tier` (within its quota) that neither back a frame nor
    /// are reserved: how many frames could move in now.
    pub fn free_slots(&self, tier: TierId) -> usize {
        let ledger = self.ledger();
        ledger.quota(tier).saturating_sub(ledger.allocated(tier))
    }

    /// Reserves one free slot of `tier` as a migration destination.
    pub fn reserve_slot(&self, tier: TierId) -> Result<Location, Error> {
        Ok(self.ledger().reserve(tier, 1)?[0])
    }

    /// Reserves one free slot of `tier` as a migration destination: the
    /// slot right after `prev` if there is one and it is free, so frames
    /// moving together keep consecutive slots and map with one `mmap`.
    pub fn reserve_slot_after(
        &self,
        tier: TierId,
        prev: Option<Location>,
    ) -> Result<Location, Error> {
        match prev {
            Some(p) if p.tier == tier => Ok(self.ledger().reserve_preferring(tier, p.slot + 1)?),
            _ => self.reserve_slot(tier),
        }
    }

    /// Reserves `count` free slots of `tier`, all or none.
    pub fn reserve_slots(&self, tier: TierId, count: usize) -> Result<Vec<Location>, Error> {
        Ok(self.ledger().reserve(tier, count)?)
    }

    /// Frees a reserved slot (an unused destination, or a source after
    /// [`TieredMemory::commit_move`] and [`TierBackend::discard_slot`]).
    pub fn release_slot(&self, loc: Location) -> Result<(), Error> {
        Ok(self.ledger().release(loc)?)
    }

    /// Records that `frame` moved from `from` to the reserved slot `to`
    /// (call after [`TieredMemory::map_frames`] put `to` under the frame).
    /// `from` stays reserved until released, so it is not handed out while
    /// its contents are being discarded.
    pub fn commit_move(&self, frame: FrameId, from: Location, to: Location) -> Result<(), Error> {
        Ok(self.ledger().commit_move(frame, from, to)?)
    }

    /// Records that frames `a` (at `a_at`) and `b` (at `b_at`) swapped slots.
    pub fn commit_exchange(
        &self,
        a: FrameId,
        a_at: Location,
        b: FrameId,
        b_at: Location,
    ) -> Result<(), Error> {
        Ok(self.ledger().commit_exchange(a, a_at, b, b_at)?)
    }

    /// Maps `count` consecutive slots of `start.tier`, from `start.slot`, over
    /// the host range of frames `first..first + count` (`MAP_FIXED`, one call;
    /// the range never becomes unmapped). The placement map is NOT changed:
    /// that is [`TieredMemory::commit_move`]'s job, once the data is in place.
    /// Refused with a shared backing unless each frame keeps its own slot.
    pub fn map_frames(&self, first: FrameId, count: usize, start: Location) -> Result<(), Error> {
        if self.backing.is_shared() && start.slot != first.index() {
            return Err(LedgerError::FixedSlots.into());
        }
        map_run(&self.frames, &self.tiers, first, count, start)
    }

    /// Maps `fd` at `offset` over `frame`'s host range (`MAP_FIXED`, no
    /// gap). For migration internals that park a frame on memory that is
    /// not a tier slot (the exchange bounce buffer) for a moment; the
    /// placement map does not describe such a mapping, so the caller maps a
    /// slot back before anyone else looks.
    pub fn map_frame_from(
        &self,
        frame: FrameId,
        fd: std::os::fd::BorrowedFd<'_>,
        offset: u64,
    ) -> Result<(), Error> {
        let host = self.frames.host_addr(frame).ok_or(Error::NotARun {
            first: frame.index(),
            count: 1,
        })?;
        let len = self.frames.frame_size();
        // SAFETY: the frame's host range lies inside our guest-range
        // reservation (host_addr checked the index); Rust holds no
        // references into guest memory; MAP_FIXED replaces without a gap.
        unsafe { crate::mapping::map_fixed_shared(host as usize, len as usize, fd, offset) }
            .map_err(|source| Error::MapFrames {
                first: frame.index(),
                count: 1,
                tier: "bounce".to_owned(),
                slot: 0,
                source,
            })
    }

    /// Host ranges of the frames mapped from tiers userfaultfd can
    /// write-protect (see [`crate::BackendKind::write_protectable`]), adjacent
    /// frames merged: what a write guard registers. The whole RAM when
    /// every tier is a memfd.
    pub fn write_protectable_ranges(&self) -> Vec<MappedRegion> {
        let ledger = self.ledger();
        let fs = self.frames.frame_size();
        let mut out: Vec<MappedRegion> = Vec::new();
        for frame in (0..self.frame_count()).map(FrameId) {
            let protectable = ledger
                .map()
                .location(frame)
                .is_some_and(|loc| self.tiers[loc.tier.index()].kind().write_protectable());
            let (Some(host), Some(gpa)) = (self.frames.host_addr(frame), self.frames.gpa(frame))
            else {
                continue;
            };
            if !protectable {
                continue;
            }
            match out.last_mut() {
                Some(r) if r.host_addr + r.len == host && r.gpa + r.len == gpa => r.len += fs,
                _ => out.push(MappedRegion {
                    gpa,
                    len: fs,
                    host_addr: host,
                }),
            }
        }
        out
    }

    /// Checks that every frame's host range is really mapped from the tier
    /// and slot the placement map says (via `/proc/self/maps`, see
    /// [`crate::VerifyError`]); non-destructive. Holds the placement lock meanwhile.
    pub fn verify_backing(&self) -> Result<(), Error> {
        let ledger = self.ledger();
        Ok(verify(&self.frames, &self.tiers, ledger.map())?)
    }

    /// Slots of memfd tiers that are free (back no frame, not reserved)
    /// yet still hold memory (a migration that forgot to punch
    /// out its source). Empty when occupancy and backing agree.
    pub fn leaked_slots(&self) -> Result<Vec<Location>, Error> {
        let ledger = self.ledger();
        let mut leaked = Vec::new();
        for (tier, backend) in (0..).map(TierId).zip(&self.tiers) {
            // Shared backing keeps every frame's data at its own offset in
            // one memfd: there are no per-tier slots to leak.
            // A preallocated tier keeps released slots' memory on purpose.
            if backend.is_shared()
                || !matches!(
                    backend.kind(),
                    crate::backend::BackendKind::Memfd {
                        prealloc: false,
                        ..
                    }
                )
            {
                continue;
            }
            for slot in 0..backend.slot_count() {
                let loc = Location { tier, slot };
                if !ledger.is_allocated(loc)
                    && backend
                        .slot_has_data(slot)
                        .map_err(|source| Error::Backend {
                            tier: backend.name().to_owned(),
                            source,
                        })?
                {
                    leaked.push(loc);
                }
            }
        }
        Ok(leaked)
    }

    pub(crate) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // Ledger operations check before they change anything, so a panic
        // elsewhere while holding the lock leaves it consistent.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Creates each tier's own backing and places the frames in their slots.
fn build_per_tier(plan: &Plan, cfg: &MemoryConfig) -> Result<(Vec<TierBackend>, Ledger), Error> {
    let tiers = plan
        .tiers
        .iter()
        .map(|t| {
            TierBackend::create(t, plan.frame_size).map_err(|source| Error::Backend {
                tier: t.name.clone(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let slot_counts: Vec<usize> = tiers.iter().map(TierBackend::slot_count).collect();
    let too_small = ConfigError::TiersTooSmall {
        memory: cfg.size,
        capacity: tiers.iter().map(TierBackend::capacity).sum(),
    };
    let tier_of_frame = cfg
        .placement
        .assign(plan.frame_count, &slot_counts)
        .ok_or(too_small)?;
    let ledger = Ledger::new(&slot_counts, &tier_of_frame)?;
    Ok((tiers, ledger))
}
