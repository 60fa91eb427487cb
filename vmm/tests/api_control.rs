//! The operator API's VMM side (issue 6) on real KVM guests: the
//! lifecycle through `VmController` (create, boot, policy, rebalance,
//! pause, resume, shutdown, delete), guests that end on their own, the
//! requests that are refused in the wrong state, and bad configurations,
//! each refused with the field at fault and no VM left behind.

mod common;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use api::types::{
    MigrationBody, PayloadConfig, RebalanceRequest, VmConfigBody, VmCounters, VmEndKind, VmState,
};
use api::{ControlError, VmmControl};
use guest_abi::{Op, Request};
use guest_memory::{BackendSpec, MemoryConfig, Placement, TierProfile, TierSpec, TierSpeed};
use tiering::{PinnedRange, RebalanceState, TieringPolicy};
use vmm::controller::{ControllerOptions, VmController};
use vmm::devices::hypercall::LogSink;
use vmm::migration::MigratorKind;
use vmm::vm::VmEnd;

const MIB: u64 = 1 << 20;
const FRAME: u64 = 2 * MIB;
/// Guest RAM of every test VM: 64 frames.
const MEMORY: u64 = 128 * MIB;
/// The fast tier: 16 frames, filled first.
const FAST: u64 = 32 * MIB;

static BUSY_GUEST: Mutex<()> = Mutex::new(());

/// Held by tests whose guests keep both host cores busy, so that their
/// waits (parking, rebalance deadlines) are not measured on a machine
/// that another such guest is using.
fn alone() -> MutexGuard<'static, ()> {
    BUSY_GUEST.lock().unwrap_or_else(PoisonError::into_inner)
}

fn controller() -> Arc<VmController> {
    let log: LogSink = Arc::new(|vcpu, line| eprintln!("[guest vcpu{vcpu}] {line}"));
    // The guests here verify tens of MiB before they exit on the stop
    // word; a busy host must not turn that into a hard stop. A guest that
    // ignores the word still ends Stopped, later.
    let options = ControllerOptions {
        shutdown_grace: Duration::from_secs(30),
        ..ControllerOptions::default()
    };
    VmController::with_options(log, options)
}

fn memfd_tier(name: &str, size: u64) -> TierSpec {
    TierSpec {
        name: name.into(),
        backend: BackendSpec::Memfd {
            numa_node: None,
            hugetlb: false,
            prealloc: false,
        },
        size: Some(size),
        profile: None,
    }
}

/// A 128 MiB guest on a 32 MiB fast and a 128 MiB slow memfd tier,
/// running the embedded workload `spec`, with `policy` (if any).
fn body(spec: &str, vcpus: u32, policy: Option<TieringPolicy>) -> VmConfigBody {
    VmConfigBody {
        id: "test-vm".into(),
        vcpus,
        memory: MemoryConfig {
            size: MEMORY,
            frame_size: FRAME,
            tiers: vec![memfd_tier("fast", FAST), memfd_tier("slow", MEMORY)],
            placement: Placement::FastFirst,
            ..Default::default()
        },
        payload: PayloadConfig::Workload { spec: spec.into() },
        migration: MigrationBody::default(),
        tiering: policy,
        timeout_s: Some(60.0),
    }
}

fn policy(quota: u64) -> TieringPolicy {
    TieringPolicy {
        interval_ms: 100,
        ..TieringPolicy::with_quota(quota)
    }
}

/// Waits until `f` holds or `limit` passes; whether it held.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

fn fast_frames(c: &VmController) -> usize {
    c.vm_info().unwrap().tiers[0].used_frames
}

/// Per vCPU: (phase, ops, hypercalls).
fn progress(counters: &VmCounters) -> Vec<(u64, u64, u64)> {
    counters
        .vcpus
        .iter()
        .map(|v| (v.phase, v.ops, v.hypercalls))
        .collect()
}

fn every_vcpu_reported_ops(c: &VmController) -> bool {
    c.vm_counters().unwrap().vcpus.iter().all(|v| v.ops > 0)
}

fn invalid_field(e: ControlError) -> String {
    match e {
        ControlError::Invalid { field, .. } => field,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

fn wrong_state(e: ControlError) -> VmState {
    match e {
        ControlError::WrongState { state, .. } => state,
        other => panic!("expected WrongState, got {other:?}"),
    }
}

#[test]
fn full_lifecycle_keeps_every_guest_write() {
    let _alone = alone();
    let c = controller();
    // One long phase: ops only grow, until the shutdown's stop word ends
    // the phase and the guest verifies its stripes.
    let spec = "hotset:size=64M,verify=1,phases=1,seconds=60";
    // A quota of 12 frames, below the 16 that fast-first placement puts
    // on the fast tier: a running engine would demote at once.
    c.create_vm(body(spec, 2, Some(policy(24 * MIB)))).unwrap();

    let info = c.vm_info().unwrap();
    assert_eq!(info.state, VmState::Created);
    assert_eq!((info.memory_bytes, info.frame_size), (MEMORY, FRAME));
    assert_eq!((info.uptime_ms, info.tiering, info.end), (0, true, None));
    assert_eq!(c.tiering_policy().unwrap(), policy(24 * MIB));
    assert_eq!(c.rebalance_progress().unwrap(), None);
    assert_eq!(
        wrong_state(c.tiering_stats().unwrap_err()),
        VmState::Created
    );
    // The engine starts at boot: a created VM moves nothing.
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(fast_frames(&c), 16);

    c.boot_vm().unwrap();
    assert_eq!(c.vm_info().unwrap().state, VmState::Running);
    assert!(
        wait_for(Duration::from_secs(15), || every_vcpu_reported_ops(&c)),
        "{:?}",
        c.vm_counters()
    );
    let info = c.vm_info().unwrap();
    assert!(info.uptime_ms > 0);
    assert_eq!(info.tiers.iter().map(|t| t.used_frames).sum::<usize>(), 64);
    let counters = c.vm_counters().unwrap();
    assert_eq!(counters.vcpus.len(), 2);
    assert!(counters.vcpus.iter().all(|v| v.hypercalls > 0));
    assert!(counters.log_lines > 0, "the workload logs its summary");
    assert!(
        wait_for(Duration::from_secs(60), || fast_frames(&c) <= 12),
        "the engine enforces the quota once booted: {:?}",
        c.vm_info().unwrap().tiers
    );
    assert!(c.tiering_stats().unwrap().intervals > 0);

    // PUT policy: a bad one changes nothing, a good one applies whole.
    let mut bad = policy(24 * MIB);
    bad.fast_quota.max_bytes = 2 * FAST;
    let e = c.set_tiering_policy(bad).unwrap_err();
    assert_eq!(invalid_field(e), "fast_quota.max_bytes");
    let mut bad = policy(24 * MIB);
    bad.heat.write_weight = -1.0;
    assert_eq!(
        invalid_field(c.set_tiering_policy(bad).unwrap_err()),
        "heat.write_weight"
    );
    assert_eq!(c.tiering_policy().unwrap(), policy(24 * MIB));
    let mut next = policy(24 * MIB);
    next.significance = 3.0;
    next.promote_rate_mbps = 500.0;
    c.set_tiering_policy(next.clone()).unwrap();
    assert_eq!(c.tiering_policy().unwrap(), next);

    // Rebalance to 4 frames.
    let e = c
        .rebalance(RebalanceRequest {
            fast_bytes: 8 * MIB,
            deadline_ms: 0,
        })
        .unwrap_err();
    assert_eq!(invalid_field(e), "deadline_ms");
    let e = c
        .rebalance(RebalanceRequest {
            fast_bytes: 2 * FAST,
            deadline_ms: 2000,
        })
        .unwrap_err();
    assert_eq!(invalid_field(e), "fast_bytes");
    // A deadline no busy host misses: this checks the rebalance's
    // outcome, not its speed (tierbench measures that).
    c.rebalance(RebalanceRequest {
        fast_bytes: 8 * MIB,
        deadline_ms: 60_000,
    })
    .unwrap();
    let settled = wait_for(Duration::from_secs(120), || {
        c.rebalance_progress()
            .unwrap()
            .is_some_and(|p| p.target_bytes == 8 * MIB && p.state != RebalanceState::Running)
    });
    let progress_now = c.rebalance_progress().unwrap().unwrap();
    assert!(settled, "{progress_now:?}");
    assert_eq!(progress_now.state, RebalanceState::Done, "{progress_now:?}");
    assert!(progress_now.fast_bytes <= 8 * MIB, "{progress_now:?}");
    assert_eq!(c.tiering_policy().unwrap().fast_quota.max_bytes, 8 * MIB);
    let frames = c.tiering_frames().unwrap();
    assert_eq!(frames.frame_size, FRAME);
    assert_eq!(frames.tier_names, ["fast", "slow"]);
    assert_eq!(frames.view.tier.len(), 64);
    // Heat comes from the tracker's evidence, at the sampler's pace and
    // the host's: wait for it rather than assume it is there yet.
    assert!(
        wait_for(Duration::from_secs(60), || c
            .tiering_frames()
            .unwrap()
            .view
            .heat
            .iter()
            .any(|&h| h > 0.0)),
        "no frame ever showed heat"
    );

    // Pause: the guest's counters stand still.
    c.pause_vm().unwrap();
    assert_eq!(c.vm_info().unwrap().state, VmState::Paused);
    let paused = progress(&c.vm_counters().unwrap());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(progress(&c.vm_counters().unwrap()), paused);
    assert_eq!(wrong_state(c.pause_vm().unwrap_err()), VmState::Paused);
    assert_eq!(wrong_state(c.boot_vm().unwrap_err()), VmState::Paused);
    // The engine goes on while the vCPUs are parked: a rebalance is
    // accepted (docs/api.md) and done while paused.
    assert!(c.tiering_stats().is_ok());
    c.rebalance(RebalanceRequest {
        fast_bytes: 16 * MIB,
        deadline_ms: 60_000,
    })
    .unwrap();
    assert!(
        wait_for(Duration::from_secs(120), || c
            .rebalance_progress()
            .unwrap()
            .is_some_and(
                |p| p.target_bytes == 16 * MIB && p.state == RebalanceState::Done
            )),
        "{:?}",
        c.rebalance_progress()
    );
    assert_eq!(c.vm_info().unwrap().state, VmState::Paused);

    // Resume: they move again.
    c.resume_vm().unwrap();
    assert_eq!(c.vm_info().unwrap().state, VmState::Running);
    assert!(
        wait_for(Duration::from_secs(60), || {
            let now = progress(&c.vm_counters().unwrap());
            now.iter().zip(&paused).all(|(n, p)| n.1 > p.1 && n.2 > p.2)
        }),
        "{:?} after {paused:?}",
        c.vm_counters()
    );
    assert_eq!(wrong_state(c.resume_vm().unwrap_err()), VmState::Running);

    // Shutdown: the stop word ends the phase; the guest verifies every
    // increment and exits 0.
    let parts = c.parts().unwrap();
    c.shutdown_vm().unwrap();
    let info = c.vm_info().unwrap();
    assert_eq!(info.state, VmState::Shutdown);
    let end = info.end.unwrap();
    assert!(end.success, "{end:?}");
    assert_eq!(end.kind, VmEndKind::Success, "{end:?}");
    assert_eq!(c.end(), Some(VmEnd::Success), "{end:?}");
    assert_eq!(parts.guest.reports().len(), 2, "each vCPU reported");
    parts.memory.verify_backing().unwrap();
    let uptime = info.uptime_ms;
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.vm_info().unwrap().uptime_ms, uptime, "uptime stops");
    // Stats stay readable; nothing else goes.
    let stats = c.tiering_stats().unwrap();
    assert!(stats.demotions.frames >= 8, "{stats:?}");
    assert_eq!(stats.aborted, 0, "{stats:?}");
    for e in [
        c.pause_vm().unwrap_err(),
        c.resume_vm().unwrap_err(),
        c.boot_vm().unwrap_err(),
        c.shutdown_vm().unwrap_err(),
        c.set_tiering_policy(next).unwrap_err(),
        c.rebalance(RebalanceRequest {
            fast_bytes: 8 * MIB,
            deadline_ms: 1000,
        })
        .unwrap_err(),
    ] {
        assert_eq!(wrong_state(e), VmState::Shutdown);
    }

    c.delete_vm().unwrap();
    assert_eq!(c.vm_info().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.vm_counters().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.tiering_stats().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.delete_vm().unwrap_err(), ControlError::NoVm);
}

#[test]
fn paused_time_does_not_count_towards_the_timeout() {
    let _alone = alone();
    let c = controller();
    let timeout = Duration::from_secs(8);
    let mut b = body("hotset:size=32M,verify=1,phases=1,seconds=60", 1, None);
    b.timeout_s = Some(timeout.as_secs_f64());
    c.create_vm(b).unwrap();
    c.boot_vm().unwrap();
    assert!(wait_for(Duration::from_secs(60), || {
        every_vcpu_reported_ops(&c)
    }));
    c.pause_vm().unwrap();
    // The VM had run at most its uptime so far (the timeout's clock
    // starts after boot); after the pause it must run the rest.
    let ran = Duration::from_millis(c.vm_info().unwrap().uptime_ms + 1);
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(c.vm_info().unwrap().state, VmState::Paused);
    let resumed = Instant::now();
    c.resume_vm().unwrap();
    assert!(c.wait_for_shutdown(Duration::from_secs(120)));
    // Had the 2 s pause counted, the run would end 2 s sooner than this.
    assert!(
        resumed.elapsed() >= timeout.saturating_sub(ran),
        "ended {:?} after resuming, having run {ran:?} before the pause",
        resumed.elapsed()
    );
    assert_eq!(
        c.end(),
        Some(VmEnd::TimedOut {
            seconds: timeout.as_secs_f64()
        })
    );
    let end = c.vm_info().unwrap().end.unwrap();
    assert!(!end.success);
    assert_eq!(end.kind, VmEndKind::TimedOut);
}

#[test]
fn a_paused_vm_shuts_down_cleanly() {
    let _alone = alone();
    let c = controller();
    c.create_vm(body(
        "hotset:size=32M,verify=1,phases=1,seconds=60",
        2,
        None,
    ))
    .unwrap();
    c.boot_vm().unwrap();
    assert!(wait_for(Duration::from_secs(10), || {
        every_vcpu_reported_ops(&c)
    }));
    c.pause_vm().unwrap();
    // The guest is let run to finish its phase and verify.
    c.shutdown_vm().unwrap();
    let info = c.vm_info().unwrap();
    assert_eq!(info.state, VmState::Shutdown);
    assert_eq!(c.end(), Some(VmEnd::Success), "{:?}", info.end);
    assert!(info.end.unwrap().success);
}

#[test]
fn a_guest_that_ends_on_its_own_shows_its_end() {
    let c = controller();
    c.create_vm(body(
        "hotset:size=16M,verify=1,phases=1,seconds=0.3",
        1,
        None,
    ))
    .unwrap();
    c.boot_vm().unwrap();
    assert!(c.wait_for_shutdown(Duration::from_secs(20)));
    let info = c.vm_info().unwrap();
    assert_eq!(info.state, VmState::Shutdown);
    assert!(info.end.unwrap().success);
    assert_eq!(c.end(), Some(VmEnd::Success));

    // A guest that exits with code 7: its end says so.
    let dir = common::scratch("api-exit7");
    let elf = common::hypercall_payload(Request::new(Op::Exit, [7, 0, 0, 0]), false, &[]);
    let path = common::write_file(&dir, "exit7.elf", &elf);
    c.delete_vm().unwrap();
    let mut b = body("", 1, None);
    b.memory.size = 64 * MIB;
    b.payload = PayloadConfig::Elf {
        path: path.into(),
        args: String::new(),
    };
    c.create_vm(b).unwrap();
    c.boot_vm().unwrap();
    assert!(c.wait_for_shutdown(Duration::from_secs(10)));
    let end = c.vm_info().unwrap().end.unwrap();
    assert!(!end.success);
    assert_eq!(end.kind, VmEndKind::GuestExit);
    assert_eq!(end.description, "guest exited with code 7 on vCPU 0");
    assert_eq!(c.end(), Some(VmEnd::GuestExit { vcpu: 0, code: 7 }));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A guest that spins at CPL3 and never exits to the VMM: only the kick
/// signal gets its vCPUs out of KVM_RUN, to park or to stop; and it
/// ignores the stop word, so a shutdown ends in a hard stop.
#[test]
fn a_guest_that_never_exits_is_parked_and_stopped_by_kicks() {
    let _alone = alone();
    let log: LogSink = Arc::new(|_, _| {});
    let options = ControllerOptions {
        shutdown_grace: Duration::from_millis(300),
        ..ControllerOptions::default()
    };
    let c = VmController::with_options(log, options);
    let dir = common::scratch("api-spin");
    let jmp_self = [0xeb, 0xfe];
    let elf = common::elf(common::LOAD, common::LOAD, &jmp_self, 62);
    let path = common::write_file(&dir, "spin.elf", &elf);
    let mut b = body("", 2, None);
    b.memory.size = 64 * MIB;
    b.payload = PayloadConfig::Elf {
        path: path.into(),
        args: String::new(),
    };
    c.create_vm(b).unwrap();
    c.boot_vm().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let asked = Instant::now();
    c.pause_vm().unwrap();
    // Without kicks it would never park: the bound only catches a hang.
    assert!(
        asked.elapsed() < Duration::from_secs(30),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(c.vm_info().unwrap().state, VmState::Paused);
    c.resume_vm().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let asked = Instant::now();
    c.shutdown_vm().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(30),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(c.end(), Some(VmEnd::Stopped));
    let end = c.vm_info().unwrap().end.unwrap();
    assert!(end.success, "a stop on request is not a failure");
    assert_eq!(end.kind, VmEndKind::Stopped);
    assert_eq!(end.description, "guest stopped by the VMM");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn requests_in_the_wrong_state_are_refused() {
    let c = controller();
    // No VM yet.
    assert_eq!(c.boot_vm().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.pause_vm().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.resume_vm().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.shutdown_vm().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.delete_vm().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.vm_info().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.tiering_policy().unwrap_err(), ControlError::NoVm);
    // What the API server is handed.
    let api: Arc<dyn VmmControl> = c.clone();
    assert_eq!(api.ping().pid, std::process::id());

    // An idle guest without tiering: cheap to keep running.
    let idle = "idle:phases=1,seconds=60";
    c.create_vm(body(idle, 2, None)).unwrap();
    let again = wrong_state(c.create_vm(body(idle, 2, None)).unwrap_err());
    assert_eq!(again, VmState::Created);
    assert_eq!(wrong_state(c.pause_vm().unwrap_err()), VmState::Created);
    assert_eq!(wrong_state(c.resume_vm().unwrap_err()), VmState::Created);
    assert_eq!(wrong_state(c.shutdown_vm().unwrap_err()), VmState::Created);
    assert_eq!(c.tiering_policy().unwrap_err(), ControlError::NoTiering);
    assert_eq!(c.tiering_stats().unwrap_err(), ControlError::NoTiering);
    assert_eq!(c.tiering_frames().unwrap_err(), ControlError::NoTiering);
    assert_eq!(c.rebalance_progress().unwrap_err(), ControlError::NoTiering);
    assert_eq!(
        c.set_tiering_policy(policy(FAST)).unwrap_err(),
        ControlError::NoTiering
    );

    c.boot_vm().unwrap();
    assert_eq!(wrong_state(c.boot_vm().unwrap_err()), VmState::Running);
    assert_eq!(wrong_state(c.resume_vm().unwrap_err()), VmState::Running);
    let again = wrong_state(c.create_vm(body(idle, 2, None)).unwrap_err());
    assert_eq!(again, VmState::Running);
    assert_eq!(
        c.rebalance(RebalanceRequest {
            fast_bytes: FAST,
            deadline_ms: 1000
        })
        .unwrap_err(),
        ControlError::NoTiering
    );
    // Delete stops a running guest first.
    c.delete_vm().unwrap();
    assert_eq!(c.vm_info().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.pause_vm().unwrap_err(), ControlError::NoVm);
    assert_eq!(c.vm_counters().unwrap_err(), ControlError::NoVm);

    // The slot is free again; shutting the VMM down stops the guest and
    // asks for the exit.
    c.create_vm(body(idle, 1, None)).unwrap();
    c.boot_vm().unwrap();
    assert!(!c.exit_requested());
    c.shutdown_vmm().unwrap();
    assert!(c.exit_requested());
    assert!(c.wait_for_exit_request(Some(Duration::ZERO)));
    assert_eq!(c.vm_info().unwrap().state, VmState::Shutdown);
}

#[test]
fn a_pending_policy_is_checked_and_replaced_before_boot() {
    let c = controller();
    c.create_vm(body("idle:phases=1,seconds=60", 1, Some(policy(FAST))))
        .unwrap();
    let mut bad = policy(FAST);
    bad.pinned = vec![PinnedRange {
        gpa: 0,
        len: 64 * MIB,
    }];
    bad.fast_quota.max_bytes = 8 * MIB;
    assert_eq!(
        invalid_field(c.set_tiering_policy(bad).unwrap_err()),
        "fast_quota.max_bytes"
    );
    assert_eq!(c.tiering_policy().unwrap(), policy(FAST));
    assert_eq!(
        wrong_state(
            c.rebalance(RebalanceRequest {
                fast_bytes: FAST,
                deadline_ms: 1000
            })
            .unwrap_err()
        ),
        VmState::Created
    );
    c.set_tiering_policy(policy(8 * MIB)).unwrap();
    c.boot_vm().unwrap();
    // The engine started with the policy set before boot.
    assert_eq!(c.tiering_policy().unwrap(), policy(8 * MIB));
    assert!(wait_for(Duration::from_secs(60), || c
        .tiering_stats()
        .unwrap()
        .intervals
        > 0));
    assert_eq!(
        c.tiering_stats().unwrap().fast_quota.unwrap().max_bytes,
        8 * MIB
    );
    c.shutdown_vm().unwrap();
}

#[test]
fn bad_configurations_name_the_field_and_leave_no_vm() {
    let c = controller();
    type Edit = Box<dyn Fn(&mut VmConfigBody)>;
    let file_tier = |b: &mut VmConfigBody| {
        b.memory.tiers[1] = TierSpec {
            name: "pmem".into(),
            backend: BackendSpec::File {
                path: "/nonexistent/pmem".into(),
            },
            size: None,
            profile: None,
        }
    };
    let with_policy = |edit: fn(&mut TieringPolicy)| -> Edit {
        Box::new(move |b: &mut VmConfigBody| {
            let mut p = policy(FAST);
            edit(&mut p);
            b.tiering = Some(p);
        })
    };
    let cases: Vec<(&str, Edit)> = vec![
        ("id", Box::new(|b| b.id = "a b".into())),
        ("vcpus", Box::new(|b| b.vcpus = 0)),
        ("vcpus", Box::new(|b| b.vcpus = 100_000)),
        ("timeout_s", Box::new(|b| b.timeout_s = Some(0.0))),
        ("memory.size", Box::new(|b| b.memory.size = 0)),
        // Too small for the payload, which loads at 4 MiB.
        ("memory.size", Box::new(|b| b.memory.size = 2 * MIB)),
        (
            "memory.frame_size",
            Box::new(|b| b.memory.frame_size = 1000),
        ),
        ("memory.tiers", Box::new(|b| b.memory.tiers.truncate(1))),
        (
            "memory.tiers[1].size",
            Box::new(|b| b.memory.tiers[1].size = Some(MEMORY + 4096)),
        ),
        (
            "memory.tiers[0].size",
            Box::new(|b| b.memory.tiers[0].size = None),
        ),
        (
            "memory.tiers[1].name",
            Box::new(|b| b.memory.tiers[1].name = "fast".into()),
        ),
        (
            "memory.tiers[1].backend.numa_node",
            Box::new(|b| {
                b.memory.tiers[1].backend = BackendSpec::Memfd {
                    numa_node: Some(77),
                    hugetlb: false,
                    prealloc: false,
                }
            }),
        ),
        ("memory.tiers[1].backend.path", Box::new(file_tier)),
        (
            "payload.spec",
            Box::new(|b| {
                b.payload = PayloadConfig::Workload {
                    spec: "hotset:hot-frac=7".into(),
                }
            }),
        ),
        (
            "payload.spec",
            Box::new(|b| {
                b.payload = PayloadConfig::Workload {
                    spec: "hotset:size=1G".into(),
                }
            }),
        ),
        (
            "payload.path",
            Box::new(|b| {
                b.payload = PayloadConfig::Elf {
                    path: "/nonexistent/payload.elf".into(),
                    args: String::new(),
                }
            }),
        ),
        (
            "migration.copy_engine",
            Box::new(|b| b.migration.copy_engine = Some("warp:9".into())),
        ),
        (
            "migration.migrator",
            Box::new(|b| b.migration.migrator = MigratorKind::Kernel),
        ),
        (
            "tiering.fast_quota.max_bytes",
            with_policy(|p| p.fast_quota.max_bytes = 2 * FAST),
        ),
        (
            "tiering.tracker",
            with_policy(|p| p.tracker = "a-bits".into()),
        ),
        (
            "tiering.significance",
            with_policy(|p| p.significance = 50.0),
        ),
        ("tiering.interval_ms", with_policy(|p| p.interval_ms = 0)),
        (
            "tiering.pinned[0]",
            with_policy(|p| {
                p.pinned = vec![PinnedRange {
                    gpa: 1 << 40,
                    len: FRAME,
                }]
            }),
        ),
        (
            "tiering",
            Box::new(|b| {
                b.memory.tiers = vec![memfd_tier("only", MEMORY)];
                b.tiering = Some(policy(FAST));
            }),
        ),
    ];
    for (want, edit) in &cases {
        let mut b = body("hotset:size=32M", 1, Some(policy(FAST)));
        edit(&mut b);
        let e = c.create_vm(b.clone()).unwrap_err();
        let text = e.to_string();
        assert_eq!(invalid_field(e), *want, "{text}; {b:?}");
        assert_eq!(c.vm_info().unwrap_err(), ControlError::NoVm, "{want}");
    }
    // And the same controller takes a good one.
    c.create_vm(body("hotset:size=32M", 1, Some(policy(FAST))))
        .unwrap();
    assert_eq!(c.vm_info().unwrap().state, VmState::Created);
}

/// `vm.tiers.measure` probes the tiers again in the background: the
/// request answers at once, `vm.info` shows the measurement running until
/// the new figures are in, and a declared speed stays as declared.
#[test]
fn tiers_are_measured_again_on_request() {
    let c = controller();
    assert_eq!(c.measure_tiers().unwrap_err(), ControlError::NoVm);
    let mut config = body("idle:phases=1,seconds=60", 1, None);
    config.memory.tiers[1].profile = Some(TierProfile {
        read_latency_ns: 300,
        read_bandwidth: 4 << 30,
    });
    c.create_vm(config).unwrap();
    let declared = c.vm_info().unwrap().tiers[1].speed.clone();
    assert!(
        matches!(declared, TierSpeed::Declared { .. }),
        "{declared:?}"
    );
    assert!(matches!(
        c.vm_info().unwrap().tiers[0].speed,
        TierSpeed::Measured { .. }
    ));

    c.measure_tiers().unwrap();
    assert!(
        wait_for(Duration::from_secs(60), || !c
            .vm_info()
            .unwrap()
            .measuring_tiers),
        "the measurement never ended"
    );
    let info = c.vm_info().unwrap();
    assert!(
        matches!(info.tiers[0].speed, TierSpeed::Measured { .. }),
        "{:?}",
        info.tiers[0].speed
    );
    assert_eq!(info.tiers[1].speed, declared, "a declared speed is kept");

    // Once the VM has shut down there is nothing to measure for.
    c.boot_vm().unwrap();
    c.shutdown_vm().unwrap();
    assert_eq!(
        wrong_state(c.measure_tiers().unwrap_err()),
        VmState::Shutdown
    );
    c.delete_vm().unwrap();
}

/// A policy naming a tracker the host cannot serve — `damon` where
/// another program owns DAMON (the development machines' platform
/// kdamond), `access-log` where KVM lacks the access log (stock kernels)
/// — is refused as an invalid `tracker` with the reason (HTTP 400), and
/// the policy in force stays.
#[test]
fn a_tracker_policy_the_host_cannot_serve_is_refused_with_the_reason() {
    let _alone = alone();
    let c = controller();
    c.create_vm(body("idle:phases=1,seconds=60", 1, Some(policy(FAST))))
        .unwrap();
    c.boot_vm().unwrap();
    assert!(wait_for(Duration::from_secs(60), || c
        .tiering_stats()
        .unwrap()
        .intervals
        > 0));
    let reasons: [(&str, &[&str]); 2] = [
        (
            "damon",
            &["DAMON is busy", "lacks DAMON", "no damon:damon_aggregated"],
        ),
        ("access-log", &["host kernel lacks the KVM access log"]),
    ];
    for (tracker, why) in reasons {
        let mut asked = policy(FAST);
        asked.tracker = tracker.into();
        match c.set_tiering_policy(asked.clone()) {
            // A host that can serve it (the tiered host).
            Ok(()) => {
                assert_eq!(c.tiering_policy().unwrap(), asked);
                c.set_tiering_policy(policy(FAST)).unwrap();
            }
            Err(ControlError::Invalid { field, reason }) => {
                assert_eq!(field, "tracker");
                assert!(
                    why.iter().any(|w| reason.contains(w)),
                    "{tracker}: no reason given: {reason}"
                );
                assert_eq!(c.tiering_policy().unwrap(), policy(FAST));
            }
            Err(other) => panic!("{tracker}: expected Invalid, got {other:?}"),
        }
    }
    c.shutdown_vm().unwrap();
}
