//! Tier backends: the file behind each tier (a memfd, a device-DAX device
//! or a regular file), cut into frame-sized slots, plus one shared "view"
//! mapping of the whole backing through which copy engines read and write
//! slots without touching the guest's mappings.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::backend_error::BackendError;
use crate::file_backend;
use crate::host::{self, HUGEPAGE_SIZE};
use crate::mapping::HostMapping;
use crate::memfd;
use crate::numa;

/// What kind of object backs a tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum BackendKind {
    /// A memfd (shmem or hugetlbfs).
    Memfd {
        /// NUMA node the memory is bound to.
        numa_node: Option<u32>,
        /// Whether it is backed by 2 MiB hugetlb pages.
        hugetlb: bool,
        /// Allocated whole at creation; released slots keep their memory.
        prealloc: bool,
    },
    /// A device-DAX character device.
    DevDax {
        /// Device path.
        path: PathBuf,
        /// Mapping alignment the device requires.
        align: u64,
    },
    /// A regular file (tmpfs, a DAX filesystem, or any other).
    RegularFile {
        /// File path.
        path: PathBuf,
    },
}

impl BackendKind {
    /// Whether userfaultfd can write-protect this backing's mappings
    /// (memfd: shmem or hugetlbfs). Device-DAX and file mappings cannot
    /// be registered: the remap migrator moves their frames under a
    /// VM-wide write stop instead.
    pub fn write_protectable(&self) -> bool {
        matches!(self, BackendKind::Memfd { .. })
    }

    /// Whether this is preallocated shmem with 4 KiB pages: every page of
    /// every slot stays in the page cache for the tier's life, so
    /// userfaultfd reports a touch of a page with no page-table entry as a
    /// minor fault, page by page (a hole would fault as a missing page,
    /// which nothing traps). The remap migrator holds such frames by
    /// registering minor faults rather than by write-protecting their
    /// unmapped pages.
    pub fn preallocated_small_page_shmem(&self) -> bool {
        matches!(
            self,
            BackendKind::Memfd {
                hugetlb: false,
                prealloc: true,
                ..
            }
        )
    }
}

/// A tier that passed validation: its usable capacity and backend.
#[derive(Debug, Clone)]
pub(crate) struct PlannedTier {
    pub name: String,
    pub capacity: u64,
    pub kind: BackendKind,
}

/// Identity of a file as `/proc/self/maps` shows it: device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    pub dev_major: u32,
    pub dev_minor: u32,
    pub inode: u64,
}

impl FileId {
    /// The identity of `file`.
    pub(crate) fn of(file: &File) -> Result<Self, BackendError> {
        let meta = file.metadata().map_err(BackendError::Stat)?;
        Ok(Self {
            dev_major: libc::major(meta.dev()),
            dev_minor: libc::minor(meta.dev()),
            inode: meta.ino(),
        })
    }
}

/// One tier's backing object, its slots and its view mapping.
///
/// With a shared backing (`Backing::SharedNuma`) every tier is the same
/// memfd and view, with one slot per guest frame; `capacity` is the tier's
/// quota on its NUMA node, not the size of the backing.
#[derive(Debug)]
pub struct TierBackend {
    name: String,
    kind: BackendKind,
    capacity: u64,
    slot_size: u64,
    slot_count: usize,
    view: Arc<HostMapping>,
    file: Arc<File>,
    id: FileId,
    shared: bool,
}

impl TierBackend {
    /// Creates (memfd) or opens (file) the backing of a validated tier and
    /// maps its view.
    pub(crate) fn create(plan: &PlannedTier, slot_size: u64) -> Result<Self, BackendError> {
        let file = match &plan.kind {
            BackendKind::Memfd { hugetlb, .. } => {
                memfd::create(&plan.name, plan.capacity, *hugetlb)?
            }
            BackendKind::DevDax { path, .. } => file_backend::open_device(path)?,
            BackendKind::RegularFile { path } => file_backend::open_regular(path, plan.capacity)?,
        };
        let hugetlb = matches!(plan.kind, BackendKind::Memfd { hugetlb: true, .. });
        let needed = plan.capacity / HUGEPAGE_SIZE;
        let available = if hugetlb {
            host::available_hugepages().unwrap_or(0)
        } else {
            0
        };
        let len = usize::try_from(plan.capacity).map_err(|_| BackendError::MapView {
            len: plan.capacity,
            source: io::Error::from_raw_os_error(libc::ENOMEM),
        })?;
        // For hugetlb, a shared mapping reserves the pages: ENOMEM = too few.
        let view =
            HostMapping::map_shared(file.as_fd(), len, 0).map_err(|source| match hugetlb {
                true => BackendError::Hugepages {
                    needed,
                    available,
                    source,
                },
                false => BackendError::MapView {
                    len: plan.capacity,
                    source,
                },
            })?;
        if let BackendKind::Memfd {
            numa_node: Some(node),
            ..
        } = plan.kind
        {
            numa::bind_to_node(view.addr(), view.len(), node)
                .map_err(|source| BackendError::Mbind { node, source })?;
        }
        let prealloc = matches!(plan.kind, BackendKind::Memfd { prealloc: true, .. });
        if prealloc && !hugetlb {
            // Allocate the whole tier now (through the view, so on the
            // bound node) instead of page by page during migrations.
            view.populate_write()
                .map_err(|source| BackendError::MapView {
                    len: plan.capacity,
                    source,
                })?;
        }
        if hugetlb {
            // Fault every page in now (through the view, so on the bound
            // node): a shortage is an error here rather than a SIGBUS in a
            // vCPU later.
            view.populate_write()
                .map_err(|source| BackendError::Hugepages {
                    needed,
                    available,
                    source,
                })?;
        }
        let id = FileId::of(&file)?;
        Ok(Self {
            name: plan.name.clone(),
            kind: plan.kind.clone(),
            capacity: plan.capacity,
            slot_size,
            slot_count: (plan.capacity / slot_size) as usize,
            view: Arc::new(view),
            file: Arc::new(file),
            id,
            shared: false,
        })
    }

    /// A tier of a shared backing: `file` (the one memfd of guest RAM, with
    /// `slot_count` frame-sized slots) and its `view`, shared by all tiers.
    /// No NUMA policy is set here: it is kept per frame range.
    pub(crate) fn on_shared(
        plan: &PlannedTier,
        slot_size: u64,
        slot_count: usize,
        file: Arc<File>,
        view: Arc<HostMapping>,
        id: FileId,
    ) -> Self {
        Self {
            name: plan.name.clone(),
            kind: plan.kind.clone(),
            capacity: plan.capacity,
            slot_size,
            slot_count,
            view,
            file,
            id,
            shared: true,
        }
    }

    /// Tier name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What backs the tier.
    pub fn kind(&self) -> &BackendKind {
        &self.kind
    }

    /// Usable bytes (`slot_count * slot_size`).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes per slot (the frame size).
    pub fn slot_size(&self) -> u64 {
        self.slot_size
    }

    /// Number of slots (with a shared backing: one per guest frame, more
    /// than [`TierBackend::capacity_frames`]).
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// Frames the tier may hold (`capacity / slot_size`).
    pub fn capacity_frames(&self) -> usize {
        (self.capacity / self.slot_size) as usize
    }

    /// Whether the tier is part of a shared backing (`Backing::SharedNuma`).
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// The host NUMA node the tier's memory is bound to, if any.
    pub fn numa_node(&self) -> Option<u32> {
        match self.kind {
            BackendKind::Memfd { numa_node, .. } => numa_node,
            _ => None,
        }
    }

    /// The backing file descriptor (map it at [`TierBackend::slot_offset`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Byte offset of `slot` in the backing.
    pub fn slot_offset(&self, slot: usize) -> Result<u64, BackendError> {
        self.check_slot(slot)?;
        Ok(slot as u64 * self.slot_size)
    }

    /// Host address of the view mapping (the whole backing, shared).
    pub fn view_base(&self) -> u64 {
        self.view.addr() as u64
    }

    /// Whether every page of the view stays mapped for the tier's lifetime
    /// (a preallocated memfd: populated at creation, never punched out), so
    /// copies through the view need not populate it first.
    pub fn view_resident(&self) -> bool {
        !self.shared && matches!(self.kind, BackendKind::Memfd { prealloc: true, .. })
    }

    /// Whether `[addr, addr + len)` lies inside the view mapping.
    pub fn view_contains(&self, addr: u64, len: u64) -> bool {
        let base = self.view_base();
        addr >= base && addr.saturating_add(len) <= base + self.capacity
    }

    /// Host address of `slot` in the view mapping.
    pub fn slot_view_addr(&self, slot: usize) -> Result<u64, BackendError> {
        Ok(self.view_base() + self.slot_offset(slot)?)
    }

    /// Whether any byte of `slot` is backed by memory (`lseek(SEEK_DATA)`):
    /// false for a slot never written or punched out. Device-DAX and files
    /// without hole support always report true.
    pub fn slot_has_data(&self, slot: usize) -> Result<bool, BackendError> {
        let offset = self.slot_offset(slot)?;
        let err = |source| BackendError::Discard { slot, source };
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| err(io::Error::from_raw_os_error(libc::EINVAL)))?;
        // SAFETY: lseek on our own fd only moves its file position.
        let data = unsafe { libc::lseek(self.file.as_raw_fd(), offset, libc::SEEK_DATA) };
        if data < 0 {
            let e = io::Error::last_os_error();
            // ENXIO: no data at or after `offset`.
            return if e.raw_os_error() == Some(libc::ENXIO) {
                Ok(false)
            } else {
                Err(err(e))
            };
        }
        Ok((data as u64) < offset as u64 + self.slot_size)
    }

    /// Gives the memory of a released slot back to the host
    /// (`fallocate(PUNCH_HOLE)`); the slot reads as zeros afterwards.
    /// Returns `false` where the backing cannot do this (device-DAX, or a
    /// filesystem without hole punching): the old contents then stay.
    /// Refused for a shared backing, whose slots are the guest frames.
    pub fn discard_slot(&self, slot: usize) -> Result<bool, BackendError> {
        let offset = self.slot_offset(slot)?;
        if self.shared {
            return Err(BackendError::SharedSlot(slot));
        }
        // Device-DAX cannot give memory back; a preallocated tier keeps it
        // for the next migration into this slot.
        if matches!(
            self.kind,
            BackendKind::DevDax { .. } | BackendKind::Memfd { prealloc: true, .. }
        ) {
            return Ok(false);
        }
        let discard_err = |source| BackendError::Discard { slot, source };
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| discard_err(io::Error::from_raw_os_error(libc::EINVAL)))?;
        let len = libc::off_t::try_from(self.slot_size)
            .map_err(|_| discard_err(io::Error::from_raw_os_error(libc::EINVAL)))?;
        // SAFETY: fallocate on our own fd; punching a hole only zeroes the
        // slot's bytes in the file, which no frame maps any more.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset,
                len,
            )
        };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
                return Ok(false);
            }
            return Err(discard_err(err));
        }
        Ok(true)
    }

    /// Whether a slot of this tier may hold old data before anything
    /// wrote it: device-DAX and file contents outlive the process (a
    /// previous VM's, or persistent memory's), a fresh memfd reads as
    /// zeros.
    pub fn keeps_old_data(&self) -> bool {
        !matches!(self.kind, BackendKind::Memfd { .. })
    }

    /// Makes `slot` read as zeros: a hole punched where the backing can,
    /// zeros written through the view otherwise (device-DAX). For slots
    /// no frame maps yet: a new guest must never see what an earlier one
    /// left on persistent memory.
    pub fn clear_slot(&self, slot: usize) -> Result<(), BackendError> {
        if self.discard_slot(slot)? {
            return Ok(());
        }
        let addr = self.slot_view_addr(slot)?;
        // SAFETY: `addr..addr + slot_size` is one slot of the view mapping,
        // which lives as long as `self`; no frame maps the slot (caller's
        // contract) and Rust holds no reference into it.
        unsafe { std::ptr::write_bytes(addr as *mut u8, 0, self.slot_size as usize) };
        Ok(())
    }

    pub(crate) fn file_id(&self) -> FileId {
        self.id
    }

    fn check_slot(&self, slot: usize) -> Result<(), BackendError> {
        let count = self.slot_count();
        if slot >= count {
            return Err(BackendError::SlotOutOfRange { slot, count });
        }
        Ok(())
    }
}

impl AsFd for TierBackend {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}
