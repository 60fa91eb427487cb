//! Every route's happy path, through the typed client, against the
//! in-memory VMM; each status seen is checked against the document.

mod common;

use std::time::Duration;

use serde_json::json;

use api::types::{FramesPage, VmCounters, VmInfo, VmState, VmmPingResponse};
use common::{Fixture, MIB, documented_statuses};
use tiering::{RebalanceProgress, RebalanceState, TieringPolicy};

fn documented(method: &str, path: &str, status: u16) {
    assert!(
        documented_statuses(method, path).contains(&status),
        "{method} {path} {status} undocumented"
    );
}

#[test]
fn ping_answers_version_and_pid() {
    let f = Fixture::new();
    let ping: VmmPingResponse = f.client().get_json("/api/v1/vmm.ping").unwrap();
    assert_eq!(ping.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(ping.pid, std::process::id());
    documented("GET", "/api/v1/vmm.ping", 200);
}

#[test]
fn lifecycle_create_boot_pause_resume_shutdown_delete() {
    let f = Fixture::new();
    let c = f.client();
    let created = c
        .put_json("/api/v1/vm.create", &common::vm_config())
        .unwrap();
    assert_eq!(created.status, 204);
    assert!(created.body.is_empty());
    documented("PUT", "/api/v1/vm.create", 204);

    let info: VmInfo = c.get_json("/api/v1/vm.info").unwrap();
    assert_eq!(info.state, VmState::Created);
    assert_eq!(info.config.id, "vm0");
    assert_eq!(info.memory_bytes, 64 * MIB);
    assert_eq!(info.tiers[0].name, "dram");
    assert_eq!(info.tiers[0].used_frames, 16);
    assert_eq!(info.tiers[1].used_frames, 16);
    assert!(info.tiering);
    assert!(!info.measuring_tiers);
    assert_eq!(c.put("/api/v1/vm.tiers.measure").unwrap().status, 202);
    documented("PUT", "/api/v1/vm.tiers.measure", 202);

    for (verb, state) in [
        ("vm.boot", VmState::Running),
        ("vm.pause", VmState::Paused),
        ("vm.resume", VmState::Running),
        ("vm.shutdown", VmState::Shutdown),
    ] {
        let path = format!("/api/v1/{verb}");
        assert_eq!(c.put(&path).unwrap().status, 204, "{verb}");
        documented("PUT", &path, 204);
        let info: VmInfo = c.get_json("/api/v1/vm.info").unwrap();
        assert_eq!(info.state, state, "after {verb}");
    }

    let counters: VmCounters = c.get_json("/api/v1/vm.counters").unwrap();
    assert_eq!(counters.vcpus.len(), 2);
    assert_eq!(counters.vcpus[1].hypercalls, 11);
    assert_eq!(counters.log_lines, 7);

    let shut = c.put("/api/v1/vm.tiers.measure").unwrap_err();
    assert_eq!(shut.status(), Some(409), "nothing to measure for");
    documented("PUT", "/api/v1/vm.tiers.measure", 409);

    assert_eq!(c.put("/api/v1/vm.delete").unwrap().status, 204);
    let gone = c.get_json::<VmInfo>("/api/v1/vm.info").unwrap_err();
    assert_eq!(gone.status(), Some(404));
}

#[test]
fn tiering_policy_get_and_replace() {
    let f = Fixture::new();
    f.create_vm();
    let c = f.client();
    let policy: TieringPolicy = c.get_json("/api/v1/vm.tiering").unwrap();
    assert_eq!(policy, TieringPolicy::with_quota(16 * MIB));

    let mut next = TieringPolicy::with_quota(24 * MIB);
    next.interval_ms = 100;
    next.significance = 3.0;
    let put = c.put_json("/api/v1/vm.tiering", &next).unwrap();
    assert_eq!(put.status, 204);
    documented("PUT", "/api/v1/vm.tiering", 204);
    let now: TieringPolicy = c.get_json("/api/v1/vm.tiering").unwrap();
    assert_eq!(now, next);

    // A policy that fails validation changes nothing.
    let mut bad = next.clone();
    bad.fast_quota.max_bytes = 64 * MIB;
    bad.interval_ms = 300;
    let e = c.put_json("/api/v1/vm.tiering", &bad).unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert_eq!(
        c.get_json::<TieringPolicy>("/api/v1/vm.tiering").unwrap(),
        next
    );
}

#[test]
fn tiering_stats_and_frames_pages() {
    let f = Fixture::new();
    f.create_vm();
    let c = f.client();
    // EngineStats is Serialize only: compare JSON with JSON.
    let stats: serde_json::Value = c.get_json("/api/v1/vm.tiering.stats").unwrap();
    assert_eq!(stats["intervals"], 42);
    assert_eq!(stats["promotions"]["frames"], 4);
    let expected =
        serde_json::to_value(&*api::VmmControl::tiering_stats(&*f.vmm).unwrap()).unwrap();
    assert_eq!(stats, expected);

    let all: FramesPage = c.get_json("/api/v1/vm.tiering.frames").unwrap();
    assert_eq!(all.total_frames, 32);
    assert_eq!(all.frames.len(), 32);
    assert_eq!(all.tiers, ["dram", "pmem"]);
    assert_eq!(all.frame_size, 2 * MIB);

    let page: FramesPage = c
        .get_json("/api/v1/vm.tiering.frames?offset=15&limit=3")
        .unwrap();
    assert_eq!(page.offset, 15);
    let summary: Vec<_> = page
        .frames
        .iter()
        .map(|f| (f.index, f.gpa, f.tier, f.heat))
        .collect();
    assert_eq!(
        summary,
        [
            (15, 15 * 2 * MIB, 0, 7.5),
            (16, 16 * 2 * MIB, 1, 8.0),
            (17, 17 * 2 * MIB, 1, 8.5)
        ]
    );
    let past: FramesPage = c
        .get_json("/api/v1/vm.tiering.frames?offset=100&limit=10")
        .unwrap();
    assert_eq!(
        (past.offset, past.frames.len(), past.total_frames),
        (32, 0, 32)
    );
    let huge_offset: FramesPage = c
        .get_json("/api/v1/vm.tiering.frames?offset=9223372036854775807&limit=65536")
        .unwrap();
    assert!(huge_offset.frames.is_empty());
}

#[test]
fn rebalance_starts_and_reports_progress() {
    let f = Fixture::new();
    f.create_vm();
    let c = f.client();
    c.put("/api/v1/vm.boot").unwrap();
    let none: Option<serde_json::Value> = c.get_json("/api/v1/vm.rebalance").unwrap();
    assert_eq!(none, None);
    documented("GET", "/api/v1/vm.rebalance", 204);

    let started = c
        .put_json(
            "/api/v1/vm.rebalance",
            &json!({ "fast_bytes": 8 * MIB, "deadline_ms": 5000 }),
        )
        .unwrap();
    assert_eq!(started.status, 202);
    documented("PUT", "/api/v1/vm.rebalance", 202);
    let progress: serde_json::Value = c.get_json("/api/v1/vm.rebalance").unwrap();
    assert_eq!(progress["target_bytes"], 8 * MIB);
    assert_eq!(progress["deadline_ms"], 5000);
    assert_eq!(progress["state"], json!({ "state": "running" }));
    let typed: Option<RebalanceProgress> = api::VmmControl::rebalance_progress(&*f.vmm).unwrap();
    assert_eq!(typed.unwrap().state, RebalanceState::Running);
}

#[test]
fn vmm_shutdown_is_answered_then_signalled() {
    let f = Fixture::new();
    f.create_vm();
    assert!(!f.server.shutdown_requested());
    assert!(
        !f.server
            .wait_for_shutdown_timeout(Duration::from_millis(10))
    );
    let reply = f.client().put("/api/v1/vmm.shutdown").unwrap();
    assert_eq!(reply.status, 204);
    documented("PUT", "/api/v1/vmm.shutdown", 204);
    f.server.wait_for_shutdown();
    assert!(f.server.shutdown_requested());
    assert_eq!(
        f.vmm
            .vmm_shutdowns
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[test]
fn metrics_route_serves_text() {
    let f = Fixture::new();
    let c = f.client();
    let reply = c.request("GET", "/metrics", None).unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = String::from_utf8(reply.body).unwrap();
    assert!(text.contains("tiervisor_build_info{version=\""), "{text}");
    assert!(!text.contains("tiervisor_vm_state"), "no VM yet: {text}");
}
