//! Whether a tracker costs the guest exits: KVM's own counters for the VM
//! (debugfs) over equal stretches of a guest's run with the tracker on and
//! off, the dirty-log tracker as the control that shows exits.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use access_track::{AccessTracker, SamplingSettings, TrackerKind};
use vmm::devices::hypercall::LogSink;
use vmm::migration::MigratorKind;
use vmm::vm::{Vm, VmEnd};

use crate::rig::vm_config;

/// KVM's counters for one VM, from its debugfs directory
/// (`/sys/kernel/debug/kvm/TID-FD`, the vCPUs' counts summed).
struct KvmStats(PathBuf);

impl KvmStats {
    /// The counters of `vm`, created by the thread `creator` (KVM names
    /// the directory after the creating thread's id, not the process's).
    fn of(vm: &Vm, creator: u32) -> Self {
        let fd = vm.trackers().vm.as_raw_fd();
        KvmStats(PathBuf::from(format!(
            "/sys/kernel/debug/kvm/{creator}-{fd}"
        )))
    }

    /// The calling thread's id.
    fn thread_id() -> u32 {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        // "PID/task/TID"
        link.file_name()
            .and_then(|t| t.to_str()?.parse().ok())
            .unwrap_or_else(|| panic!("/proc/thread-self -> {}", link.display()))
    }

    fn read(&self, stat: &str) -> u64 {
        let path = self.0.join(stat);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (is debugfs mounted?)", path.display()))
            .trim()
            .parse()
            .unwrap()
    }

    /// (page faults KVM took, exits of every kind) now.
    fn now(&self) -> (u64, u64) {
        (self.read("pf_taken"), self.read("exits"))
    }
}

/// Faults and exits over one stretch of the guest's run.
#[derive(Clone, Copy, Debug)]
struct Stretch {
    faults: u64,
    exits: u64,
    secs: f64,
}

impl Stretch {
    /// Exits per second.
    fn rate(&self) -> f64 {
        self.exits as f64 / self.secs.max(1e-9)
    }
}

/// Tracking costs the guest no exits: over equal stretches of a warmed-up
/// `hotset` (every page of its buffer already mapped), KVM takes no more
/// page faults with the tracker `kind` sampling than with no tracker,
/// where the dirty-log tracker (which write-protects the pages it arms)
/// makes it take many: the same counter, shown able to see a tracker's
/// exits. Exits of every kind are reported for each stretch (the
/// emulated host's timer and the payload's hypercalls make most of them).
/// Needs KVM's debugfs (mounted at `/sys/kernel/debug`).
pub fn assert_costs_no_exits(kind: TrackerKind) {
    const STRETCH: Duration = Duration::from_secs(4);
    let config = vm_config(
        "hotset:size=384M,hot=32M,hot-frac=0.9,phases=1,seconds=40",
        2,
        false,
        MigratorKind::None,
    );
    let log: LogSink = Arc::new(|_, _| {});
    let creator = KvmStats::thread_id();
    let mut vm = Vm::with_trackers(&config, log, &[kind, TrackerKind::DirtyLog]).unwrap();
    let stats = KvmStats::of(&vm, creator);
    let state = vm.state().clone();
    let trackers = vm.trackers().clone();
    let stop = vm.stop_handle();
    let (end, stretches) = std::thread::scope(|s| {
        let measure = s.spawn(|| {
            // The warm-up wrote every page of the buffer.
            while state.ground_truth().is_empty() {
                std::thread::sleep(Duration::from_millis(50));
            }
            let mut stretches = Vec::new();
            for on in [None, Some(kind), Some(TrackerKind::DirtyLog)] {
                let mut tracker: Option<Box<dyn AccessTracker>> = on.map(|k| {
                    trackers
                        .tracker(k, Default::default(), SamplingSettings::default())
                        .unwrap()
                });
                let (faults, exits) = stats.now();
                let start = Instant::now();
                while start.elapsed() < STRETCH {
                    std::thread::sleep(Duration::from_millis(200));
                    if let Some(t) = &mut tracker {
                        t.collect().unwrap();
                    }
                }
                let (faults_after, exits_after) = stats.now();
                let secs = start.elapsed().as_secs_f64();
                drop(tracker);
                stretches.push((
                    on,
                    Stretch {
                        faults: faults_after - faults,
                        exits: exits_after - exits,
                        secs,
                    },
                ));
            }
            stretches
        });
        // Measured: the guest ends its phase early and checks its data.
        let end = vm
            .run(Duration::from_millis(100), &mut |_, _| {
                if measure.is_finished() {
                    stop.request();
                }
            })
            .unwrap();
        (end, measure.join().unwrap())
    });
    assert_eq!(
        end,
        VmEnd::Success,
        "the guest verified its data and exited"
    );
    for (kind, s) in &stretches {
        eprintln!(
            "no-exits: {}: {} page faults, {} exits ({:.0}/s) in {:.1} s",
            kind.map_or("no tracker", TrackerKind::name),
            s.faults,
            s.exits,
            s.rate(),
            s.secs
        );
    }
    let [(_, off), (_, tracked), (_, dirty)] = stretches[..] else {
        panic!("{stretches:?}")
    };
    // A few faults of the guest's own (a page the host reclaimed or
    // compacted) may land in either stretch.
    const SLACK: u64 = 32;
    assert!(
        tracked.faults <= off.faults + SLACK,
        "the {} tracker made KVM take page faults: {tracked:?} against {off:?} with no tracker",
        kind.name()
    );
    // Exits of every kind: mostly the emulated host's timer and the
    // payload's hypercalls, whose rate varies with the host's load (the
    // tiered host measured 285/s untracked, 209/s with the access log,
    // 2544/s with the dirty log, 2026-11-27). A tracker that exits once
    // per page it looks at, or flushes TLBs per harvest, exceeds this.
    assert!(
        tracked.rate() <= 2.0 * off.rate() + 100.0,
        "the {} tracker made the guest exit more: {:.0}/s against {:.0}/s with no tracker",
        kind.name(),
        tracked.rate(),
        off.rate()
    );
    assert!(
        dirty.faults > off.faults + 4 * SLACK,
        "the dirty-log tracker's write-protect faults did not show: {dirty:?} against {off:?} \
         (the counter cannot tell)"
    );
}
