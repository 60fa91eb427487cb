//! The `access-log` tracker (and `access-log+dirty-log`) on real KVM: the
//! accessed bits of KVM's secondary MMU, read through the KVM access log
//! (`host-kernel/kvm-access-log`), find `hotset`'s hot set and follow its
//! shift, also while frames migrate, find the working set of a `zipf` that
//! only reads (which the dirty log cannot see), and cost the guest no
//! exits: KVM takes no more page faults with the tracker on than off.
//!
//! These need a host whose KVM has the access log: the tiered host
//! (`tests/nested`, scenario `access-log`) loads the patched `kvm.ko` and
//! runs them with `TIERVISOR_REQUIRE_ACCESS_LOG=1`, where its absence
//! fails them. Elsewhere (the development machines' stock KVM) each says
//! why it is skipped and passes.

use std::sync::Arc;
use std::time::Duration;

use access_track::{KvmAccessLog, TrackerKind};
use vmm::migration::MigratorKind;

use crate::exits::assert_costs_no_exits;
use crate::rig::{Run, TopK, assert_tracks, run, zipf_top};

/// The rig's `hotset` with 16 s phases, as the damon tests run it in the
/// tiered host (its emulated CPUs are slow: 600 ms intervals, at least 5
/// with evidence per phase).
const HOTSET: &str = "hotset:size=384M,hot=32M,hot-frac=0.9,phases=2,seconds=16";

/// The rig's `zipf` layout (32 record frames), reads only, 16 s phases.
const READ_ONLY_ZIPF: &str =
    "zipf:size=384M,items=1048576,theta=0.99,write-frac=0,phases=2,seconds=16";

/// Whether this host's KVM has the access log; panics with the reason
/// where it must.
fn access_log_here(test: &str) -> bool {
    let probe = kvm_ioctls::Kvm::new()
        .and_then(|kvm| kvm.create_vm())
        .map_err(|e| format!("no KVM VM: {e}"))
        .and_then(|vm| {
            KvmAccessLog::new(Arc::new(vm))
                .map(drop)
                .map_err(|e| e.to_string())
        });
    crate::rig::host_offers(test, "TIERVISOR_REQUIRE_ACCESS_LOG", probe)
}

/// The rig's run on `kind`, every interval 3× the rig's usual 200 ms, as
/// the damon tests run: in the emulated host the rig's own loop is slow.
fn access_log_run(args: &str, kind: TrackerKind, top: TopK) -> Run {
    let mut r = Run::new(args, kind, top);
    r.interval = Duration::from_millis(600);
    r.fault.interval = r.interval;
    r
}

#[test]
fn access_log_finds_the_hotset_hot_set_and_follows_it() {
    let _alone = crate::rig::alone();
    if !access_log_here("access_log_finds_the_hotset_hot_set_and_follows_it") {
        return;
    }
    let o = run(&access_log_run(
        HOTSET,
        TrackerKind::AccessLog,
        TopK::Fixed(16),
    ));
    assert_tracks(&o.with_evidence(), 2);
    assert_eq!(o.overcounted, 0, "no page counted twice");
    let report = o
        .report
        .expect("the access-log tracker reports its sampling");
    assert!(report.windows > 0 && report.looks > 0, "{report:?}");
    eprintln!("access-log: {report:?}");
}

/// `zipf` that only reads (`write-frac=0`): the dirty log sees nothing of
/// it, the access log finds its record frames, alone and combined with
/// the dirty log.
#[test]
fn access_log_finds_a_read_only_working_set() {
    let _alone = crate::rig::alone();
    if !access_log_here("access_log_finds_a_read_only_working_set") {
        return;
    }
    for kind in [TrackerKind::AccessLog, TrackerKind::AccessLogDirtyLog] {
        let o = run(&access_log_run(READ_ONLY_ZIPF, kind, zipf_top()));
        assert_tracks(&o.with_evidence(), 2);
        assert_eq!(o.overcounted, 0, "{kind:?}: no page counted twice");
    }
}

/// Frames move all along (plain remap: a move replaces the frame's host
/// pages, and KVM drops its mappings of them); the access log is read by
/// guest-physical address, so it needs no re-targeting, and a refaulted
/// page reads accessed.
#[test]
fn access_log_keeps_tracking_while_frames_migrate() {
    let _alone = crate::rig::alone();
    if !access_log_here("access_log_keeps_tracking_while_frames_migrate") {
        return;
    }
    let mut r = access_log_run(HOTSET, TrackerKind::AccessLog, TopK::Fixed(16));
    r.migrator = MigratorKind::Remap;
    // 4 frames a second: the emulated host copies slowly, and the rig
    // judges the tracker, not the migrator.
    (r.batch, r.move_every) = (2, Duration::from_millis(500));
    let o = run(&r);
    assert_tracks(&o.with_evidence(), 2);
    o.assert_moved_in_every_phase("access_log");
}

/// Tracking costs the guest no exits (`exits.rs`): KVM takes no more
/// page faults with the access-log tracker sampling than with none.
#[test]
fn access_log_costs_the_guest_no_exits() {
    let _alone = crate::rig::alone();
    if !access_log_here("access_log_costs_the_guest_no_exits") {
        return;
    }
    assert_costs_no_exits(TrackerKind::AccessLog);
}
