//! Minor faults on the guard's userfaultfd (fault sampling), measured on
//! this host's kernel: a zapped page faults to the handler on its next
//! touch and is mapped back; inside a migration window the page keeps its
//! write-protection, so a writer still waits for the migrator.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use guest_memory::FrameId;
use guest_memory::migrate::{GuardOptions, MinorFaultSink, WriteGuard};
use guest_memory::{Placement, TieredMemory};

use crate::common::{config, memfd, read_host_u64, write_host_u64};

const FRAME: u64 = 64 << 10;
const PAGE: u64 = 4096;

/// Records every minor fault and remap it is told about.
#[derive(Debug, Default)]
pub struct Recorder {
    pub faults: Mutex<Vec<(u64, bool)>>,
    pub remaps: Mutex<Vec<(u64, u64)>>,
}

impl MinorFaultSink for Recorder {
    fn minor_fault(&self, page: u64, write: bool) {
        self.faults.lock().unwrap().push((page, write));
    }

    fn remapped(&self, start: u64, len: u64) {
        self.remaps.lock().unwrap().push((start, len));
    }
}

/// Drops the page-table entry of one page (the sampler's zap).
pub fn zap(addr: u64, len: u64) {
    // SAFETY: callers pass page-aligned ranges of the memory under test;
    // on shmem the pages stay in the page cache, only the entries go.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len as usize, libc::MADV_DONTNEED) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

fn setup() -> (Arc<TieredMemory>, WriteGuard, Arc<Recorder>) {
    let cfg = config(
        4 * FRAME,
        FRAME,
        vec![memfd("fast", "256K"), memfd("slow", "256K")],
        Placement::FastFirst,
    );
    let mem = Arc::new(TieredMemory::new(&cfg).unwrap());
    let guard =
        WriteGuard::with_options(mem.regions(), GuardOptions { minor_faults: true }).unwrap();
    assert!(
        guard.minor_faults_enabled(),
        "host has UFFD_FEATURE_MINOR_SHMEM"
    );
    let rec = Arc::new(Recorder::default());
    guard.set_minor_sink(rec.clone());
    (mem, guard, rec)
}

fn view_of(mem: &TieredMemory, frame: usize) -> u64 {
    let loc = mem.location(FrameId(frame)).unwrap();
    mem.tiers()[loc.tier.index()]
        .slot_view_addr(loc.slot)
        .unwrap()
}

/// Maps `page` from the page cache without waking its waiters
/// (`UFFDIO_CONTINUE_MODE_DONTWAKE`): what a racing fault that allocates a
/// fresh page does, seen from a thread that found it in the page cache.
fn map_without_waking(uffd: i32, page: u64) {
    const CONTINUE: u64 = (3 << 30) | (32 << 16) | (0xaa << 8) | 0x07;
    const MODE_DONTWAKE: u64 = 1;
    // struct uffdio_continue: range (start, len), mode, mapped.
    let mut arg: [u64; 4] = [page, PAGE, MODE_DONTWAKE, 0];
    // SAFETY: a 32-byte uffdio_continue the kernel reads and writes back.
    let rc = unsafe { libc::ioctl(uffd, CONTINUE as _, arg.as_mut_ptr()) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

/// The kernel function a thread sleeps in (`wchan`).
fn sleeps_in(tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/wchan")).unwrap_or_default()
}

/// A thread waiting in a minor fault on a page that was mapped behind the
/// handler's back is woken: the handler's `UFFDIO_CONTINUE` meets
/// `EEXIST`, and the kernel wakes nobody for a call that mapped nothing.
#[test]
fn a_waiter_on_a_page_mapped_behind_the_handler_is_woken() {
    let (mem, guard, rec) = setup();
    let host = mem.frames().host_addr(FrameId(1)).unwrap();
    write_host_u64(host, 42);
    zap(host, PAGE);
    let tid = AtomicI32::new(0);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        // Held, the window lock keeps the handler from resolving the fault.
        let window = guard.lock_window();
        let reader = s.spawn(|| {
            // SAFETY: gettid has no preconditions.
            tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            let value = read_host_u64(host);
            done.store(true, Ordering::SeqCst);
            value
        });
        let limit = Instant::now() + Duration::from_secs(60);
        loop {
            let t = tid.load(Ordering::SeqCst);
            if t != 0 && sleeps_in(t).trim() == "handle_userfault" {
                break;
            }
            assert!(Instant::now() < limit, "the reader never faulted");
            thread::sleep(Duration::from_millis(1));
        }
        map_without_waking(guard.uffd().raw_fd(), host);
        drop(window);
        // Woken, the reader ends at once; never woken, it would wait
        // forever, so the test wakes it itself before failing.
        let limit = Instant::now() + Duration::from_secs(60);
        while !done.load(Ordering::SeqCst) && Instant::now() < limit {
            thread::sleep(Duration::from_millis(1));
        }
        let woken = done.load(Ordering::SeqCst);
        if !woken {
            guard.uffd().wake(host, PAGE).unwrap();
        }
        assert!(woken, "the handler left the reader waiting");
        assert_eq!(reader.join().unwrap(), 42);
    });
    assert_eq!(rec.faults.lock().unwrap().as_slice(), [(host, false)]);
}

#[test]
fn a_zapped_page_faults_once_and_keeps_its_data() {
    let (mem, guard, rec) = setup();
    let host = mem.frames().host_addr(FrameId(1)).unwrap();
    for p in 0..FRAME / PAGE {
        write_host_u64(host + p * PAGE, 1000 + p);
    }
    zap(host + PAGE, 2 * PAGE);
    assert_eq!(read_host_u64(host + PAGE), 1001, "read through the fault");
    write_host_u64(host + 2 * PAGE, 7);
    assert_eq!(read_host_u64(host + 2 * PAGE), 7);
    assert_eq!(read_host_u64(host + 3 * PAGE), 1003, "not zapped: no fault");
    assert_eq!(
        *rec.faults.lock().unwrap(),
        [(host + PAGE, false), (host + 2 * PAGE, true)],
        "exactly the touched zapped pages fault, with their access kind"
    );
    assert_eq!(
        read_host_u64(view_of(&mem, 1) + 2 * PAGE),
        7,
        "write in the backing"
    );
    assert_eq!(guard.minor_faults(), 2);
}

/// The hazard of sampling next to migration: a page zapped before the
/// migrator write-protected its frame has no entry to carry the
/// protection; its next touch is a minor fault, and mapping it back
/// writable would let a write land in the source while it is copied.
#[test]
fn a_minor_fault_in_a_write_protected_window_keeps_the_protection() {
    let (mem, guard, rec) = setup();
    let host = mem.frames().host_addr(FrameId(2)).unwrap();
    write_host_u64(host, 1);
    zap(host, PAGE);
    // What the migrator does: open the window, then protect.
    guard.open_window(&[(host, FRAME)]);
    guard.uffd().protect(host, FRAME).unwrap();
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            write_host_u64(host, 2);
            done.store(true, Ordering::SeqCst);
        });
        // The minor fault is resolved (and recorded) before the write
        // meets the protection and is recorded waiting in the window.
        assert!(
            guard.wait_for_writer(Duration::from_secs(60)),
            "the writer waits in the window"
        );
        assert!(
            !done.load(Ordering::SeqCst),
            "the writer waits for the migrator"
        );
        assert_eq!(read_host_u64(view_of(&mem, 2)), 1, "nothing written yet");
        assert_eq!(
            *rec.faults.lock().unwrap(),
            [(host, true)],
            "one minor fault first"
        );
        // Readers go on meanwhile.
        assert_eq!(read_host_u64(host), 1);
        // The migrator lifts the protection and wakes the writer.
        guard.uffd().unprotect(host, FRAME, false).unwrap();
        guard.close_window();
    });
    assert!(done.load(Ordering::SeqCst));
    assert_eq!(read_host_u64(view_of(&mem, 2)), 2, "the write landed");
}
