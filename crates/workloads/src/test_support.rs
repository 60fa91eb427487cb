//! Host stand-ins for the guest: RAM in a `Vec`, a platform that records
//! every hypercall and checks it the way the VMM does, and a helper that
//! runs all vCPUs of a "VM" as threads.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use guest_abi::{
    ABI_VERSION, AccessRange, BootInfo, GpaRange, MAX_GROUND_TRUTH_RANGES, MAX_IDLE_MICROS,
    MAX_LOG_LEN, Op, Request, Status,
};

use crate::entry::guest_main;
use crate::platform::{GuestMemory, Platform, SpinBarrier};

/// Where the fake boot info block lives.
const BOOT_INFO_GPA: u64 = 0x1000;
/// Where the fake argument string lives.
const ARGS_GPA: u64 = 0x2000;
/// Low memory (boot info and arguments) ends here.
const LOW_END: u64 = 0x4000;
/// First byte of the free range (2 MiB aligned, like the VMM's).
pub(crate) const RAM_BASE: u64 = 8 << 20;

/// A guest: low memory with boot info and arguments, and one free range of
/// RAM at [`RAM_BASE`].
#[derive(Debug)]
pub(crate) struct FakeGuest {
    low: Vec<u8>,
    ram: Vec<AtomicU64>,
    stop: std::sync::atomic::AtomicBool,
}

impl FakeGuest {
    /// A guest with `ram_bytes` of zeroed free RAM and no boot info.
    pub fn new(ram_bytes: u64) -> Self {
        FakeGuest {
            low: vec![0; LOW_END as usize],
            ram: (0..ram_bytes / 8).map(|_| AtomicU64::new(0)).collect(),
            stop: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Sets the stop word, as the VMM does for a graceful shutdown.
    pub fn request_stop(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the stop word is set.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A guest booted for `vcpus` vCPUs with `args`.
    pub fn booted(ram_bytes: u64, vcpus: u32, args: &str) -> Self {
        Self::booted_with(ram_bytes, vcpus, args.as_bytes(), |_| {})
    }

    /// Like [`FakeGuest::booted`], with raw argument bytes and a chance to
    /// edit the boot info.
    pub fn booted_with(
        ram_bytes: u64,
        vcpus: u32,
        args: &[u8],
        edit: impl FnOnce(&mut BootInfo),
    ) -> Self {
        let mut g = Self::new(ram_bytes);
        let mut info = BootInfo {
            version: ABI_VERSION,
            vcpu_count: vcpus,
            tsc_khz: 1_000_000,
            ram_count: 1,
            free_count: 1,
            args_gpa: ARGS_GPA,
            args_len: args.len() as u64,
            ..Default::default()
        };
        info.ram[0] = GpaRange {
            start: 0,
            len: RAM_BASE + ram_bytes,
        };
        info.free[0] = GpaRange {
            start: RAM_BASE,
            len: ram_bytes,
        };
        edit(&mut info);
        let enc = info.encode();
        g.low[BOOT_INFO_GPA as usize..][..enc.len()].copy_from_slice(&enc);
        g.low[ARGS_GPA as usize..][..args.len()].copy_from_slice(args);
        g
    }

    /// Breaks the boot info's magic.
    pub fn corrupt_boot_magic(&mut self) {
        self.low[BOOT_INFO_GPA as usize] ^= 0xff;
    }

    pub fn boot_info_gpa(&self) -> u64 {
        BOOT_INFO_GPA
    }

    /// The free RAM as words.
    pub fn ram(&self) -> &[AtomicU64] {
        &self.ram
    }

    /// The word at `gpa` in RAM.
    pub fn word(&self, gpa: u64) -> &AtomicU64 {
        &self.ram[((gpa - RAM_BASE) / 8) as usize]
    }

    /// `count` ground-truth entries at `gpa`, decoded as the VMM would.
    fn ranges(&self, gpa: u64, count: u64) -> Option<Vec<AccessRange>> {
        let words = self.words(gpa, count.checked_mul(AccessRange::SIZE as u64)?)?;
        Some(
            words
                .chunks(4)
                .map(|w| {
                    let bytes: Vec<u8> = w
                        .iter()
                        .flat_map(|x| x.load(Relaxed).to_le_bytes())
                        .collect();
                    AccessRange::decode(bytes.as_slice().try_into().unwrap())
                })
                .collect(),
        )
    }
}

impl GuestMemory for FakeGuest {
    fn bytes(&self, gpa: u64, len: u64) -> Option<&[u8]> {
        let end = gpa.checked_add(len)?;
        (end <= LOW_END).then(|| &self.low[gpa as usize..end as usize])
    }

    fn words(&self, gpa: u64, len: u64) -> Option<&[AtomicU64]> {
        let off = gpa.checked_sub(RAM_BASE)?;
        if off % 8 != 0 || len % 8 != 0 {
            return None;
        }
        self.ram.get((off / 8) as usize..((off + len) / 8) as usize)
    }
}

/// One hypercall or log line, as the VMM would see it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Event {
    Log(String),
    Phase(u32),
    GroundTruth {
        phase: u32,
        ranges: Vec<AccessRange>,
    },
    Progress {
        phase: u32,
        ops: u64,
    },
    Report {
        phase: u32,
        ops: u64,
        bytes: u64,
        nanos: u64,
    },
    Exit(u64),
    Idle(u64),
}

/// Called with each event as it is recorded.
type EventHook<'g> = Box<dyn Fn(&Event) + 'g>;

/// Called with the vCPU index and each event as it is recorded.
pub(crate) type VmHook<'a> = &'a (dyn Fn(u32, &Event) + Sync);

/// A [`Platform`] that records hypercalls, checks them like the VMM (an
/// invalid request fails the test) and has a fake clock that advances a
/// fixed step per read.
pub(crate) struct Recorder<'g> {
    guest: &'g FakeGuest,
    step_ns: Option<u64>,
    clock: Cell<u64>,
    events: RefCell<Vec<Event>>,
    reject: Option<Op>,
    barrier: Option<(&'g SpinBarrier, u32)>,
    hook: Option<EventHook<'g>>,
}

impl<'g> Recorder<'g> {
    /// A recorder whose clock advances `step_ns` per read (`None`: no clock).
    pub fn new(guest: &'g FakeGuest, step_ns: Option<u64>) -> Self {
        Recorder {
            guest,
            step_ns,
            clock: Cell::new(0),
            events: RefCell::new(Vec::new()),
            reject: None,
            barrier: None,
            hook: None,
        }
    }

    /// Answers `op` with `Status::Invalid`.
    pub fn rejecting(mut self, op: Op) -> Self {
        self.reject = Some(op);
        self
    }

    /// Uses `barrier` shared by `parties` vCPUs.
    pub fn with_barrier(mut self, barrier: &'g SpinBarrier, parties: u32) -> Self {
        self.barrier = Some((barrier, parties));
        self
    }

    /// Calls `hook` after recording each event.
    pub fn with_hook(mut self, hook: impl Fn(&Event) + 'g) -> Self {
        self.hook = Some(Box::new(hook));
        self
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.borrow().clone()
    }

    fn record(&self, e: Event) {
        if let Some(hook) = &self.hook {
            hook(&e);
        }
        self.events.borrow_mut().push(e);
    }

    fn decode(&self, req: &Request) -> Event {
        let a = req.args;
        let phase = u32::try_from(a[0]).expect("phase fits u32");
        match Op::from_u32(req.op).expect("known op") {
            Op::Phase => Event::Phase(phase),
            Op::Progress => Event::Progress { phase, ops: a[1] },
            Op::Report => Event::Report {
                phase,
                ops: a[1],
                bytes: a[2],
                nanos: a[3],
            },
            Op::Exit => Event::Exit(a[0]),
            Op::Idle => {
                assert!((1..=MAX_IDLE_MICROS).contains(&a[0]), "idle {}", a[0]);
                Event::Idle(a[0])
            }
            Op::GroundTruth => {
                assert!(
                    a[1] >= 1 && a[1] <= MAX_GROUND_TRUTH_RANGES,
                    "count {}",
                    a[1]
                );
                let ranges = self.guest.ranges(a[0], a[1]).expect("descriptor in RAM");
                for r in &ranges {
                    assert!(
                        r.len > 0 && self.guest.words(r.gpa, r.len).is_some(),
                        "{r:?}"
                    );
                    assert!(r.weight.is_finite() && r.weight >= 0.0, "{r:?}");
                    assert!((0.0..=1.0).contains(&r.write_fraction), "{r:?}");
                }
                Event::GroundTruth {
                    phase: u32::try_from(a[2]).unwrap(),
                    ranges,
                }
            }
            Op::Log => panic!("logs go through Platform::log"),
        }
    }
}

impl Platform for Recorder<'_> {
    fn now_ns(&self) -> Option<u64> {
        let step = self.step_ns?;
        self.clock.set(self.clock.get() + step);
        Some(self.clock.get())
    }

    fn hypercall(&self, request: &mut Request) {
        if Some(request.op) == self.reject.map(|op| op as u32) {
            request.status = Status::Invalid as u32;
            return;
        }
        let event = self.decode(request);
        self.record(event);
        request.status = Status::Ok as u32;
    }

    fn log(&self, message: &[u8]) {
        assert!(message.len() as u64 <= MAX_LOG_LEN);
        self.record(Event::Log(
            String::from_utf8(message.to_vec()).expect("UTF-8 log"),
        ));
    }

    fn barrier(&self) {
        if let Some((b, parties)) = self.barrier {
            b.wait(parties);
        }
    }

    fn barrier_vote(&self, vote: bool) -> bool {
        match self.barrier {
            Some((b, parties)) => b.wait_vote(parties, vote),
            None => vote,
        }
    }

    fn stop_requested(&self) -> bool {
        self.guest.stop_requested()
    }
}

/// Runs `vcpus` vCPUs of a booted guest as threads; returns each vCPU's
/// events. `hook(vcpu, event)` sees every event as it happens.
pub(crate) fn run_vm(
    guest: &FakeGuest,
    vcpus: u32,
    step_ns: Option<u64>,
    hook: Option<VmHook<'_>>,
) -> Vec<Vec<Event>> {
    let barrier = SpinBarrier::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..vcpus)
            .map(|v| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut rec = Recorder::new(guest, step_ns).with_barrier(barrier, vcpus);
                    if let Some(hook) = hook {
                        rec = rec.with_hook(move |e| hook(v, e));
                    }
                    guest_main(
                        &rec,
                        guest,
                        u64::from(v),
                        u64::from(vcpus),
                        guest.boot_info_gpa(),
                    );
                    rec.events()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// `(phase, ops, bytes)` of each `Report`.
pub(crate) fn reports(events: &[Event]) -> Vec<(u32, u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Report {
                phase, ops, bytes, ..
            } => Some((*phase, *ops, *bytes)),
            _ => None,
        })
        .collect()
}

/// The ground truth sent for each phase, in order.
pub(crate) fn truths(events: &[Event]) -> Vec<(u32, Vec<AccessRange>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::GroundTruth { phase, ranges } => Some((*phase, ranges.clone())),
            _ => None,
        })
        .collect()
}

/// Checks the protocol every workload follows on every vCPU: per phase a
/// `Phase`, (vCPU 0) a `GroundTruth` inside the buffer, a `Report` with
/// work done; then `Exit(0)`. Returns the ground truths.
pub(crate) fn check_protocol(
    per_vcpu: &[Vec<Event>],
    phases: u32,
    buffer: GpaRange,
) -> Vec<Vec<AccessRange>> {
    for (v, events) in per_vcpu.iter().enumerate() {
        let order: Vec<&Event> = events
            .iter()
            .filter(|e| !matches!(e, Event::Log(_) | Event::Progress { .. }))
            .collect();
        let per_phase = if v == 0 { 3 } else { 2 };
        assert_eq!(
            order.len(),
            phases as usize * per_phase + 1,
            "vcpu {v}: {order:?}"
        );
        for p in 0..phases {
            let at = p as usize * per_phase;
            assert_eq!(order[at], &Event::Phase(p), "vcpu {v}");
            assert!(
                matches!(order[at + per_phase - 1], Event::Report { phase, ops, bytes, .. }
                if *phase == p && *ops > 0 && *bytes >= *ops),
                "vcpu {v}: {:?}",
                order[at + per_phase - 1]
            );
        }
        assert_eq!(order.last(), Some(&&Event::Exit(0)), "vcpu {v}");
    }
    let truths = truths(&per_vcpu[0]);
    assert_eq!(truths.len(), phases as usize);
    truths
        .into_iter()
        .enumerate()
        .map(|(p, (phase, ranges))| {
            assert_eq!(phase as usize, p);
            let total: f64 = ranges.iter().map(|r| r.weight).sum();
            assert!(total > 0.0);
            for r in &ranges {
                assert!(
                    r.gpa >= buffer.start && r.gpa + r.len <= buffer.end(),
                    "{r:?} outside {buffer:?}"
                );
            }
            ranges
        })
        .collect()
}

/// The messages of the `Log` hypercalls among `events`.
pub(crate) fn logs(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Log(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}
