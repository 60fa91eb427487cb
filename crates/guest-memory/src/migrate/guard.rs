//! The write guard of a VM's guest RAM: one userfaultfd registered over
//! every RAM region, and a handler thread that watches write-protect
//! faults.
//!
//! The migrator opens a *window* over the frames it is moving before it
//! write-protects them; guest (and host) writes into the window block in
//! the kernel until the migrator wakes them, and the handler timestamps
//! each such fault so the migrator can report how long writes stalled. A
//! write-protect fault outside any window (which the migrator never
//! causes) is resolved at once by removing the protection, so nothing can
//! hang on a stray protection. The handler never touches guest memory.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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
    stop: AtomicBool,
    stray: AtomicU64,
}

impl Shared {
    fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
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
        let uffd = Userfault::new(true)?;
        let modes = Modes {
            write_protect: true,
            minor: false,
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
            stop: AtomicBool::new(false),
            stray: AtomicU64::new(0),
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

    /// Registers a range again after its mapping was replaced (a new VMA
    /// is not registered).
    pub fn reregister(&self, start: u64, len: u64) -> Result<(), UffdError> {
        self.shared.uffd.register(start, len, self.modes)
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

    /// Pages of the window a writer is waiting on now (unordered).
    pub fn waiting_pages(&self) -> Vec<u64> {
        self.shared.window().faults.keys().copied().collect()
    }

    /// Closes the window; returns how long each write still recorded in it
    /// has waited (call right after waking the ranges).
    pub fn close_window(&self) -> Vec<Duration> {
        let mut w = self.shared.window();
        w.ranges.clear();
        let now = Instant::now();
        w.faults.drain().map(|(_, t)| now - t).collect()
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
            if !fault.wp {
                continue;
            }
            let page = fault.address & !(PAGE - 1);
            let mut w = shared.window();
            if w.ranges.iter().any(|&(s, e)| s <= page && page < e) {
                w.faults.entry(page).or_insert_with(Instant::now);
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
