//! The write guard of a VM's guest RAM: one userfaultfd registered over
//! every RAM region, and a handler thread that watches write-protect
//! faults and, when fault sampling is on, resolves minor faults. (Without
//! fault sampling, the remap migrator leaves a frame it moved onto
//! preallocated 4 KiB-page shmem unregistered until the frame's next
//! hold registers it.)
//!
//! The migrator opens a *window* over the frames it is moving before it
//! write-protects them; guest (and host) writes into the window block in
//! the kernel until the migrator wakes them, and the handler timestamps
//! each such fault so the migrator can report how long writes stalled. A
//! write-protect fault outside any window (which the migrator never
//! causes) is resolved at once by removing the protection, so nothing can
//! hang on a stray protection. The handler never touches guest memory.
//!
//! A frame the remap migrator holds by minor faults
//! ([`WriteGuard::hold_unmapped`]) takes the same path while it moves: a
//! touch of an unmapped page is mapped back write-protected inside the
//! window, with no sink to tell.
//!
//! Minor faults (registered with [`GuardOptions::minor_faults`]): a page
//! whose page-table entry was zapped (`MADV_DONTNEED` on shmem keeps the
//! page) faults to the handler on its next touch. The handler tells the
//! [`MinorFaultSink`] (the fault sampler) and maps the page back with
//! `UFFDIO_CONTINUE`, keeping write-protection (`UFFDIO_CONTINUE_MODE_WP`)
//! inside a migration window: a page zapped before the migrator protected
//! its frame must not become writable behind the migrator's back. Both
//! happen under the window lock, which the migrator takes to open a window
//! before it protects, so the decision cannot race a window opening. A new
//! mapping (after a remap) is populated before it is registered, so its
//! first touches are not minor faults.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::frame_table::MappedRegion;
use crate::uffd::{Modes, UffdError, Userfault};

/// Errors setting up the guard.
#[derive(Debug, Error)]
pub enum GuardError {
    /// userfaultfd could not be opened or registered.
    #[error(transparent)]
    Uffd(#[from] UffdError),
    /// The handler thread could not start.
    #[error("starting the userfaultfd handler thread")]
    Thread(#[source] std::io::Error),
}

/// Receives the minor faults of guest RAM: the fault sampler, which zaps
/// pages and counts the ones touched again. See
/// [`WriteGuard::set_minor_sink`].
pub trait MinorFaultSink: Send + Sync + std::fmt::Debug {
    /// `page` (host address, 4 KiB aligned) was touched (`write`: by a
    /// write) while it had no page-table entry. Called on the handler
    /// thread with the window lock held: must not block, nor call back
    /// into the guard.
    fn minor_fault(&self, page: u64, write: bool);

    /// `[start, start + len)` got a new, fully populated mapping (a frame
    /// moved): pages zapped in the old mapping will never fault. Called
    /// with the window lock held.
    fn remapped(&self, start: u64, len: u64);
}

/// What the guard registers besides write-protection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuardOptions {
    /// Register minor faults too (fault sampling). Ignored, and
    /// [`WriteGuard::minor_faults_enabled`] false, when the host kernel
    /// lacks `UFFD_FEATURE_MINOR_SHMEM`. Only for shmem memfd RAM: minor
    /// registration of a hugetlbfs mapping would need
    /// `UFFD_FEATURE_MINOR_HUGETLBFS`, and 4 KiB pages of a huge page
    /// cannot be zapped anyway.
    pub minor_faults: bool,
}

#[derive(Debug, Default)]
struct Window {
    /// Host ranges `[start, end)` under migration.
    ranges: Vec<(u64, u64)>,
    /// When a write into each page of the window was first seen.
    faults: HashMap<u64, Instant>,
}

#[derive(Debug)]
struct Shared {
    uffd: Userfault,
    window: Mutex<Window>,
    /// Signalled when a writer is recorded waiting in the window.
    writer_waits: Condvar,
    stop: AtomicBool,
    stray: AtomicU64,
    minor: AtomicU64,
    sink: RwLock<Option<Arc<dyn MinorFaultSink>>>,
}

impl Shared {
    fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sink(&self) -> Option<Arc<dyn MinorFaultSink>> {
        self.sink
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Window {
    fn overlaps(&self, start: u64, len: u64) -> bool {
        self.ranges
            .iter()
            .any(|&(s, e)| s < start + len && start < e)
    }
}

/// The guard's migration window, locked: while it is held no window opens
/// or closes and the handler resolves no fault. The fault sampler zaps and
/// restores pages under it.
#[derive(Debug)]
pub struct WindowLock<'a> {
    window: MutexGuard<'a, Window>,
    uffd: &'a Userfault,
}

impl WindowLock<'_> {
    /// Whether host range `[start, start + len)` overlaps the migration
    /// window (its frames are, or are about to be, write-protected).
    pub fn overlaps(&self, start: u64, len: u64) -> bool {
        self.window.overlaps(start, len)
    }

    /// Maps the zapped pages of `[start, start + len)` back
    /// (`UFFDIO_CONTINUE`; pages already mapped are skipped), keeping
    /// write-protection where the range overlaps the window, and wakes
    /// threads waiting there. Returns the pages mapped.
    pub fn restore(&self, start: u64, len: u64) -> Result<u64, UffdError> {
        let protect = self.window.overlaps(start, len);
        self.uffd.continue_pages(start, len, protect)
    }
}

/// The userfaultfd guard of one VM's guest RAM.
#[derive(Debug)]
pub struct WriteGuard {
    shared: Arc<Shared>,
    modes: Modes,
    wakeup: OwnedFd,
    handler: Option<JoinHandle<()>>,
}

const PAGE: u64 = 4096;

impl WriteGuard {
    /// Registers every region for write-protect faults and starts the
    /// handler thread.
    pub fn new(regions: &[MappedRegion]) -> Result<Self, GuardError> {
        Self::with_options(regions, GuardOptions::default())
    }

    /// Like [`new`](Self::new), registering minor faults too if `options`
    /// ask for them and the host kernel has them.
    pub fn with_options(
        regions: &[MappedRegion],
        options: GuardOptions,
    ) -> Result<Self, GuardError> {
        let uffd = Userfault::new(true)?;
        let modes = Modes {
            write_protect: true,
            minor: options.minor_faults && uffd.supports_minor(),
        };
        for r in regions {
            uffd.register(r.host_addr, r.len, modes)?;
        }
        // SAFETY: eventfd with constant flags; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(GuardError::Thread(std::io::Error::last_os_error()));
        }
        // SAFETY: a fresh descriptor owned by nothing else.
        let wakeup = unsafe { OwnedFd::from_raw_fd(efd) };
        let shared = Arc::new(Shared {
            uffd,
            window: Mutex::default(),
            writer_waits: Condvar::new(),
            stop: AtomicBool::new(false),
            stray: AtomicU64::new(0),
            minor: AtomicU64::new(0),
            sink: RwLock::new(None),
        });
        let thread_shared = shared.clone();
        let wake_fd = wakeup.as_raw_fd();
        let handler = std::thread::Builder::new()
            .name("uffd-guard".into())
            .spawn(move || handle_faults(&thread_shared, wake_fd))
            .map_err(GuardError::Thread)?;
        Ok(WriteGuard {
            shared,
            modes,
            wakeup,
            handler: Some(handler),
        })
    }

    /// The userfaultfd.
    pub fn uffd(&self) -> &Userfault {
        &self.shared.uffd
    }

    /// Whether minor faults are registered (fault sampling can run).
    pub fn minor_faults_enabled(&self) -> bool {
        self.modes.minor
    }

    /// Whether the host kernel offers minor faults on shmem
    /// (`UFFD_FEATURE_MINOR_SHMEM`) and on hugetlbfs
    /// (`UFFD_FEATURE_MINOR_HUGETLBFS`).
    pub fn host_minor_support(&self) -> (bool, bool) {
        let uffd = &self.shared.uffd;
        (uffd.supports_minor(), uffd.supports_minor_hugetlbfs())
    }

    /// Sends minor faults to `sink` from now on (replacing any sink).
    pub fn set_minor_sink(&self, sink: Arc<dyn MinorFaultSink>) {
        *self
            .shared
            .sink
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(sink);
    }

    /// Minor faults resolved so far (sampled or not).
    pub fn minor_faults(&self) -> u64 {
        self.shared.minor.load(Ordering::Relaxed)
    }

    /// Locks the migration window (see [`WindowLock`]).
    pub fn lock_window(&self) -> WindowLock<'_> {
        WindowLock {
            window: self.shared.window(),
            uffd: &self.shared.uffd,
        }
    }

    /// Registers a range again after its mapping was replaced (a new VMA
    /// is not registered): [`replaced`](Self::replaced), then
    /// [`register`](Self::register).
    pub fn reregister(&self, start: u64, len: u64) -> Result<(), UffdError> {
        self.replaced(start, len);
        self.register(start, len)
    }

    /// Takes note that the mapping of `[start, start + len)` was just
    /// replaced. With minor faults on, populates the new mapping (one
    /// `MADV_POPULATE_WRITE`, before it is registered, so these are
    /// ordinary faults: otherwise every first touch would be a minor
    /// fault) and tells the sink that pages zapped in the old mapping will
    /// never fault. Does nothing without minor faults.
    pub fn replaced(&self, start: u64, len: u64) {
        if !self.modes.minor {
            return;
        }
        // SAFETY: `[start, start + len)` is guest RAM the caller just
        // mapped; populating faults its pages in and changes no data. A
        // failure only means that some first touches become minor faults,
        // which the handler resolves all the same.
        unsafe {
            libc::madvise(
                start as *mut libc::c_void,
                len as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
        let _window = self.shared.window();
        if let Some(sink) = self.shared.sink() {
            sink.remapped(start, len);
        }
    }

    /// Registers `[start, start + len)` with the guard's modes. The range
    /// may cover mappings that are registered already (the kernel skips
    /// them), so one call can serve a whole batch of replaced mappings:
    /// each call holds `mmap_lock` for writing, and a write-busy guest's
    /// faults queue behind it.
    pub fn register(&self, start: u64, len: u64) -> Result<(), UffdError> {
        self.shared.uffd.register(start, len, self.modes)
    }

    /// Holds `[start, start + len)` (preallocated 4 KiB-page shmem RAM:
    /// no holes) against touches
    /// of its unmapped pages while it moves: registers minor faults there,
    /// which the handler resolves inside the window by mapping the page
    /// write-protected. Nothing to do when minor faults are registered
    /// already (fault sampling).
    pub fn hold_unmapped(&self, start: u64, len: u64) -> Result<(), UffdError> {
        if self.modes.minor {
            return Ok(());
        }
        if !self.shared.uffd.supports_minor() {
            return Err(UffdError::MissingFeature("MINOR_SHMEM"));
        }
        let modes = Modes {
            write_protect: true,
            minor: true,
        };
        self.shared.uffd.register(start, len, modes)
    }

    /// Ends [`hold_unmapped`](Self::hold_unmapped) for a range that keeps
    /// its mapping (a rolled-back move): unregisters it (which lifts
    /// write-protection and wakes waiters) and registers it with the
    /// guard's own modes. A replaced mapping needs nothing: it is
    /// registered afresh. If registering fails the range is left
    /// unregistered, and the next hold registers it.
    pub fn release_unmapped(&self, start: u64, len: u64) -> Result<(), UffdError> {
        if self.modes.minor {
            return Ok(());
        }
        self.shared.uffd.unregister(start, len)?;
        self.register(start, len)
    }

    /// Opens the migration window over `ranges` (host `[start, len)`).
    pub fn open_window(&self, ranges: &[(u64, u64)]) {
        let mut w = self.shared.window();
        w.ranges = ranges.iter().map(|&(s, l)| (s, s + l)).collect();
        w.faults.clear();
    }

    /// Removes the faults in `[start, start + len)` from the window and
    /// returns how long each waited (call right after waking that range).
    pub fn woken(&self, start: u64, len: u64) -> Vec<Duration> {
        let mut w = self.shared.window();
        let now = Instant::now();
        let mut out = Vec::new();
        w.faults.retain(|&page, &mut t| {
            let inside = start <= page && page < start + len;
            if inside {
                out.push(now - t);
            }
            !inside
        });
        out
    }

    /// Waits until a writer is recorded waiting in the window, at most
    /// `limit`; whether one is. A test hook (see
    /// [`FaultInjection::hold_until_write_waits`](super::FaultInjection::hold_until_write_waits)):
    /// the migrator never waits for writers otherwise.
    pub fn wait_for_writer(&self, limit: Duration) -> bool {
        let w = self.shared.window();
        let (w, _) = self
            .shared
            .writer_waits
            .wait_timeout_while(w, limit, |w| w.faults.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        !w.faults.is_empty()
    }

    /// Pages of the window a writer is waiting on now (unordered).
    pub fn waiting_pages(&self) -> Vec<u64> {
        self.shared.window().faults.keys().copied().collect()
    }

    /// Closes the window; returns how long each write still recorded in it
    /// has waited (call right after waking the ranges). Writers still
    /// recorded are woken once more: a write-protected entry the handler
    /// left while resolving a minor fault in the window (fault sampling,
    /// or a frame held by minor faults) may have caught a writer after the
    /// migrator's own wake; woken, it faults again outside the window and
    /// the handler lifts the protection.
    pub fn close_window(&self) -> Vec<Duration> {
        let mut w = self.shared.window();
        w.ranges.clear();
        let now = Instant::now();
        let mut waited = Vec::with_capacity(w.faults.len());
        for (page, t) in w.faults.drain() {
            // Nothing waits there any more unless the case above.
            let _ = self.shared.uffd.wake(page, PAGE);
            waited.push(now - t);
        }
        waited
    }

    /// Write-protect faults read outside any window: late reads of faults
    /// already woken by the migrator, or protection nobody asked for.
    pub fn unmatched_faults(&self) -> u64 {
        self.shared.stray.load(Ordering::Relaxed)
    }
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes to our own eventfd to wake the handler.
        unsafe { libc::write(self.wakeup.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        if let Some(h) = self.handler.take() {
            // The handler only returns; a panic in it has nothing to clean.
            let _ = h.join();
        }
    }
}

fn handle_faults(shared: &Shared, wake_fd: i32) {
    let mut fds = [
        libc::pollfd {
            fd: shared.uffd.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake_fd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    while !shared.stop.load(Ordering::SeqCst) {
        // SAFETY: `fds` is a live array of two pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
        if n <= 0 || fds[0].revents & libc::POLLIN == 0 {
            continue;
        }
        while let Ok(Some(fault)) = shared.uffd.read_fault() {
            let page = fault.address & !(PAGE - 1);
            if fault.minor {
                resolve_minor(shared, page, fault.write);
                continue;
            }
            if !fault.wp {
                continue;
            }
            let mut w = shared.window();
            if w.ranges.iter().any(|&(s, e)| s <= page && page < e) {
                w.faults.entry(page).or_insert_with(Instant::now);
                shared.writer_waits.notify_all();
            } else {
                drop(w);
                shared.stray.fetch_add(1, Ordering::Relaxed);
                // Not ours: lift the protection and let the writer go. A
                // failure leaves the writer waiting for the next wake.
                let _ = shared.uffd.unprotect(page, PAGE, false);
            }
        }
    }
}

/// Tells the sink about a minor fault and maps the page back, keeping
/// write-protection inside the migration window. A write there will wait
/// on that protection: its stall is timed from this first fault.
fn resolve_minor(shared: &Shared, page: u64, write: bool) {
    let mut w = shared.window();
    let protect = w.overlaps(page, PAGE);
    if protect && write {
        w.faults.entry(page).or_insert_with(Instant::now);
        shared.writer_waits.notify_all();
    }
    if let Some(sink) = shared.sink() {
        sink.minor_fault(page, write);
    }
    shared.minor.fetch_add(1, Ordering::Relaxed);
    if shared.uffd.continue_pages(page, PAGE, protect).is_err() {
        // The mapping changed under the fault (a remap): the waiter
        // retries on the new mapping, which is populated.
        let _ = shared.uffd.wake(page, PAGE);
    }
}
