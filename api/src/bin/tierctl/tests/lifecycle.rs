//! The VMM and VM verbs, the policy, rebalance and metrics, errors and
//! where the server is.

use serde_json::json;

use api::types::{VmCounters, VmmPingResponse};
use tiering::{RebalanceProgress, RebalanceState, TieringPolicy};

use super::fixture::{Reply, Request, Server, error, json, tierctl};
use super::samples::{self, MIB};
use crate::error::{TierctlError, report_text};

fn ping() -> Reply {
    json(
        200,
        &VmmPingResponse {
            version: "0.1.0".into(),
            pid: 4242,
        },
    )
}

/// Answers PUTs with 204 and GETs by path.
fn vmm(request: &Request) -> Reply {
    match (request.method.as_str(), request.path.as_str()) {
        ("PUT", _) => (204, Vec::new()),
        ("GET", "/api/v1/vmm.ping") => ping(),
        ("GET", "/api/v1/vm.info") => json(200, &samples::info()),
        ("GET", "/api/v1/vm.counters") => json(
            200,
            &VmCounters {
                vcpus: Vec::new(),
                log_lines: 3,
                log_lines_suppressed: 0,
                tiers: samples::tiers(),
                frame_size: 2 * MIB,
            },
        ),
        ("GET", "/api/v1/vm.tiering") => json(200, &TieringPolicy::with_quota(64 * MIB)),
        ("GET", "/metrics") => (
            200,
            b"# TYPE tiervisor_vm_state gauge\ntiervisor_vm_state{vm=\"vm-test\"} 1\n".to_vec(),
        ),
        _ => error(404, "no such endpoint", serde_json::Value::Null),
    }
}

#[test]
fn ping_prints_the_version_or_the_raw_json() {
    let server = Server::unix(vmm);
    let out = server.tierctl(&["ping"]).unwrap();
    assert_eq!(
        out,
        format!(
            "tiervisor 0.1.0 (pid 4242) at unix socket {}\n",
            server.socket.display()
        )
    );
    let raw = server.tierctl(&["--json", "ping"]).unwrap();
    assert_eq!(raw, "{\"version\":\"0.1.0\",\"pid\":4242}\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", "/api/v1/vmm.ping")
    );
}

#[test]
fn verbs_put_to_their_endpoints_without_a_body() {
    let server = Server::unix(vmm);
    for (command, path, said) in [
        ("boot", "vm.boot", "VM booted\n"),
        ("pause", "vm.pause", "VM paused\n"),
        ("resume", "vm.resume", "VM resumed\n"),
        ("shutdown", "vm.shutdown", "VM shut down\n"),
        ("delete", "vm.delete", "VM deleted\n"),
        ("shutdown-vmm", "vmm.shutdown", "VMM shutting down\n"),
    ] {
        assert_eq!(server.tierctl(&[command]).unwrap(), said);
        assert_eq!(
            server.tierctl(&["--json", command]).unwrap(),
            "",
            "{command}"
        );
        let last = server.requests().pop().unwrap();
        assert_eq!(last.method, "PUT");
        assert_eq!(last.path, format!("/api/v1/{path}"));
        assert!(last.body.is_empty());
    }
}

#[test]
fn create_and_set_policy_send_the_file_as_written_after_checking_it() {
    let server = Server::unix(vmm);
    let config = server.path("vm.json");
    let text = serde_json::to_string_pretty(&samples::config()).unwrap();
    std::fs::write(&config, &text).unwrap();
    assert_eq!(
        server
            .tierctl(&["create", config.to_str().unwrap()])
            .unwrap(),
        "VM created\n"
    );
    let sent = server.requests().pop().unwrap();
    assert_eq!(sent.path, "/api/v1/vm.create");
    assert_eq!(sent.body, text.as_bytes());
    assert_eq!(sent.header("content-type"), Some("application/json"));

    let policy = server.path("policy.json");
    std::fs::write(
        &policy,
        r#"{"fast_quota": {"max_bytes": 67108864}, "interval_ms": 100}"#,
    )
    .unwrap();
    let out = server
        .tierctl(&["set-policy", policy.to_str().unwrap()])
        .unwrap();
    assert_eq!(
        out,
        "policy accepted: it applies at the engine's next interval\n"
    );
    let sent = server.requests().pop().unwrap();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("PUT", "/api/v1/vm.tiering")
    );
    assert_eq!(sent.body, std::fs::read(&policy).unwrap());

    // A typo is caught here, with the file named, and nothing is sent.
    let before = server.requests().len();
    std::fs::write(
        &policy,
        r#"{"fast_quota": {"max_bytes": 1}, "intervall_ms": 100}"#,
    )
    .unwrap();
    let e = server
        .tierctl(&["set-policy", policy.to_str().unwrap()])
        .unwrap_err();
    assert_eq!(e.exit_code(), 1);
    let text = report_text(&e, false).unwrap();
    assert!(
        text.contains("policy.json: not a valid tiering policy: unknown field `intervall_ms`"),
        "{text}"
    );
    let e = server
        .tierctl(&["create", server.path("missing.json").to_str().unwrap()])
        .unwrap_err();
    assert!(matches!(e, TierctlError::ReadInput { .. }));
    assert_eq!(server.requests().len(), before);
}

#[test]
fn refused_requests_exit_1_with_the_server_error() {
    let server = Server::unix(|_: &Request| {
        error(
            409,
            "VM is created: cannot pause",
            json!({"state": "created", "action": "pause"}),
        )
    });
    let e = server.tierctl(&["pause"]).unwrap_err();
    assert!(matches!(e, TierctlError::Refused { status: 409, .. }));
    assert_eq!(e.exit_code(), 1);
    assert_eq!(
        report_text(&e, false).unwrap(),
        "error: VM is created: cannot pause (HTTP 409)\n"
    );
    let e = server.tierctl(&["--json", "info"]).unwrap_err();
    let raw = report_text(&e, true).unwrap();
    let body: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(body["error"], "VM is created: cannot pause");
}

#[test]
fn an_absent_server_exits_2_naming_the_socket() {
    let dir = std::env::temp_dir().join(format!("tierctl-absent-{}", std::process::id()));
    let socket = dir.join("nothing.sock");
    let e = tierctl(&[
        "tierctl".into(),
        "--api-socket".into(),
        socket.display().to_string(),
        "ping".into(),
    ])
    .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let text = report_text(&e, false).unwrap();
    assert!(
        text.starts_with(&format!(
            "tierctl: cannot reach tiervisor at unix socket {}",
            socket.display()
        )),
        "{text}"
    );
    // A closed TCP port too.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = tierctl(&[
        "tierctl".into(),
        "--api-tcp".into(),
        port.to_string(),
        "ping".into(),
    ])
    .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        report_text(&e, false)
            .unwrap()
            .contains(&format!("tcp {port}"))
    );
}

#[test]
fn tcp_sends_the_bearer_token_from_the_file() {
    let server = Server::tcp(vmm);
    let token = server.path("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let addr = server.tcp.unwrap().to_string();
    let out = server
        .tierctl(&[
            "--api-tcp",
            &addr,
            "--token-file",
            token.to_str().unwrap(),
            "ping",
        ])
        .unwrap();
    assert_eq!(out, format!("tiervisor 0.1.0 (pid 4242) at tcp {addr}\n"));
    let sent = server.requests().pop().unwrap();
    assert_eq!(sent.header("authorization"), Some("Bearer s3cret-token"));
    server.tierctl(&["--api-tcp", &addr, "ping"]).unwrap();
    assert_eq!(
        server.requests().pop().unwrap().header("authorization"),
        None
    );
}

#[test]
fn info_counters_policy_and_metrics_render() {
    let server = Server::unix(vmm);
    let info = server.tierctl(&["info"]).unwrap();
    assert!(
        info.starts_with("vm         vm-test\nstate      running, up 5.0 s\n"),
        "{info}"
    );
    let counters = server.tierctl(&["counters"]).unwrap();
    assert!(
        counters.contains("guest log: 3 lines printed, 0 suppressed"),
        "{counters}"
    );
    let policy = server.tierctl(&["policy"]).unwrap();
    assert!(policy.contains("fast quota     max 64 MiB\n"), "{policy}");
    let raw: TieringPolicy =
        serde_json::from_str(&server.tierctl(&["--json", "policy"]).unwrap()).unwrap();
    assert_eq!(raw, TieringPolicy::with_quota(64 * MIB));
    let metrics = server.tierctl(&["metrics"]).unwrap();
    assert_eq!(
        metrics,
        "# TYPE tiervisor_vm_state gauge\ntiervisor_vm_state{vm=\"vm-test\"} 1\n"
    );
}

#[test]
fn rebalance_puts_the_request_and_shows_progress() {
    let progress = std::sync::Mutex::new(None::<RebalanceProgress>);
    let server = Server::unix(move |r: &Request| match r.method.as_str() {
        "PUT" => {
            *progress.lock().unwrap() = Some(RebalanceProgress {
                target_bytes: 64 * MIB,
                start_bytes: 128 * MIB,
                fast_bytes: 96 * MIB,
                moved_frames: 16,
                elapsed_ms: 800,
                deadline_ms: 5000,
                state: RebalanceState::Running,
            });
            (204, Vec::new())
        }
        // As the server answers: 204 before any rebalance.
        _ => match &*progress.lock().unwrap() {
            Some(p) => json(200, p),
            None => (204, Vec::new()),
        },
    });
    assert_eq!(
        server.tierctl(&["rebalance", "--status"]).unwrap(),
        "no rebalance has run\n"
    );
    assert_eq!(
        server
            .tierctl(&["--json", "rebalance", "--status"])
            .unwrap(),
        "null\n"
    );
    let out = server
        .tierctl(&["rebalance", "--fast-bytes", "64M", "--deadline-ms", "5000"])
        .unwrap();
    assert!(
        out.starts_with("rebalance to a fast tier of 64 MiB within 5000 ms started"),
        "{out}"
    );
    let sent = server.requests().pop().unwrap();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("PUT", "/api/v1/vm.rebalance")
    );
    let body: serde_json::Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body, json!({"fast_bytes": 64 * MIB, "deadline_ms": 5000}));
    let status = server.tierctl(&["rebalance", "--status"]).unwrap();
    assert_eq!(
        status,
        "rebalance  running: fast tier 96 MiB -> 64 MiB (from 128 MiB), 16 frames moved, \
         800 ms of 5.0 s [##########..........] 50.0%\n"
    );
}
