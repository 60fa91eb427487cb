//! The operator API end to end, the way an operator uses it: the
//! `tiervisor` binary serving a unix socket, driven by HTTP requests
//! (`api::ApiClient`), with a real KVM guest that verifies its data.
//! `tiervisor serve` takes a VM through create → boot → stats → policy →
//! rebalance → pause/resume → shutdown; `tiervisor run --api-socket`
//! serves the VM it runs and ends when an operator shuts it down.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use api::ApiClient;
use api::types::{VmCounters, VmInfo, VmState};
use serde_json::{Value, json};
use tiering::{EngineStats, RebalanceProgress, RebalanceState, TieringPolicy};

const MIB: u64 = 1 << 20;

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tv-api-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tiervisor process, killed on drop if it is still running.
struct Vmm(Child);

impl Drop for Vmm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Vmm {
    fn start(args: &[&str]) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_tiervisor"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Vmm(child)
    }

    /// Waits for the process to exit; its status and stdout.
    fn wait(mut self, limit: Duration) -> (i32, String) {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.0.try_wait().unwrap() {
                let mut out = String::new();
                use std::io::Read;
                self.0
                    .stdout
                    .take()
                    .unwrap()
                    .read_to_string(&mut out)
                    .unwrap();
                return (status.code().unwrap_or(-1), out);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("tiervisor did not exit within {limit:?}");
    }
}

fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    f()
}

/// A client of the VMM on `path`, once it answers (a stale socket file
/// there refuses connections until the VMM replaces it).
fn wait_for_socket(path: &Path) -> ApiClient {
    let c = ApiClient::unix(path);
    assert!(
        wait_for(Duration::from_secs(60), || c
            .request("GET", "/api/v1/vmm.ping", None)
            .is_ok_and(|r| r.status == 200)),
        "no VMM answers on {}",
        path.display()
    );
    c
}

/// `(status, body as JSON or Null)` of a request.
fn call(c: &ApiClient, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let bytes = body.map(|b| serde_json::to_vec(&b).unwrap());
    let r = c
        .request(method, &format!("/api/v1/{path}"), bytes.as_deref())
        .unwrap();
    let json = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, json)
}

fn get<T: serde::de::DeserializeOwned>(c: &ApiClient, path: &str) -> T {
    c.get_json(&format!("/api/v1/{path}")).unwrap()
}

fn ops(c: &ApiClient) -> Vec<u64> {
    let counters: VmCounters = get(c, "vm.counters");
    counters.vcpus.iter().map(|v| v.ops).collect()
}

/// A 128 MiB guest on a 32 MiB fast and a 128 MiB slow memfd tier
/// running `hotset` with data verification, tiering on.
fn vm_config(id: &str, seconds: u32) -> Value {
    json!({
        "id": id,
        "vcpus": 2,
        "memory": {
            "size": 128 * MIB,
            "frame_size": 2 * MIB,
            "tiers": [
                {"name": "fast", "backend": {"kind": "memfd"}, "size": 32 * MIB},
                {"name": "slow", "backend": {"kind": "memfd"}, "size": 128 * MIB}
            ]
        },
        "payload": {
            "kind": "workload",
            "spec": format!("hotset:size=64M,hot=8M,verify=1,phases=1,seconds={seconds}")
        },
        "tiering": {"interval_ms": 100, "fast_quota": {"max_bytes": 32 * MIB}},
        "timeout_s": 120.0
    })
}

#[test]
fn serve_drives_a_vm_through_its_life_over_the_unix_socket() {
    let dir = Scratch::new("serve");
    let socket = dir.0.join("api.sock");
    // A stale socket file from a VMM that died is replaced.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let vmm = Vmm::start(&["serve", "--api-socket", socket.to_str().unwrap()]);
    let c = wait_for_socket(&socket);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");

    assert_eq!(call(&c, "GET", "vmm.ping", None).0, 200);
    assert_eq!(call(&c, "GET", "vm.info", None).0, 404);
    assert_eq!(call(&c, "PUT", "vm.boot", None).0, 404);
    let (status, err) = call(&c, "PUT", "vm.create", Some(json!({"vcpus": 2})));
    assert_eq!(status, 400, "{err}");
    assert!(err["error"].as_str().unwrap().contains("memory"), "{err}");
    let mut bad = vm_config("e2e", 60);
    bad["memory"]["tiers"][1]["size"] = json!(-1);
    assert_eq!(call(&c, "PUT", "vm.create", Some(bad)).0, 400);

    let (status, err) = call(&c, "PUT", "vm.create", Some(vm_config("e2e", 60)));
    assert_eq!(status, 204, "{err}");
    assert_eq!(
        call(&c, "PUT", "vm.create", Some(vm_config("e2e", 60))).0,
        409
    );
    assert_eq!(call(&c, "PUT", "vm.pause", None).0, 409);
    assert_eq!(call(&c, "PUT", "vm.boot", None).0, 204);
    assert_eq!(call(&c, "PUT", "vm.boot", None).0, 409);
    assert!(wait_for(Duration::from_secs(60), || ops(&c)
        .iter()
        .all(|&o| o > 0)));

    // Two clients at once, while the guest runs.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let c = ApiClient::unix(&socket);
                for _ in 0..20 {
                    let info: VmInfo = get(&c, "vm.info");
                    assert_eq!(info.state, VmState::Running);
                }
            });
        }
    });

    assert!(wait_for(Duration::from_secs(60), || {
        get::<EngineStats>(&c, "vm.tiering.stats").intervals >= 3
    }));
    // A new policy applies whole; a bad one changes nothing.
    let mut policy: TieringPolicy = get(&c, "vm.tiering");
    policy.interval_ms = 200;
    let (status, err) = call(&c, "PUT", "vm.tiering", Some(json!(policy)));
    assert_eq!(status, 204, "{err}");
    let (status, err) = call(
        &c,
        "PUT",
        "vm.tiering",
        Some(json!({"interval_ms": 300, "fast_quota": {"max_bytes": 1024 * MIB}})),
    );
    assert_eq!(status, 400);
    assert_eq!(err["detail"]["field"], "fast_quota.max_bytes", "{err}");
    assert_eq!(get::<TieringPolicy>(&c, "vm.tiering"), policy);

    // Rebalance the fast tier down to 8 MiB.
    let (status, err) = call(
        &c,
        "PUT",
        "vm.rebalance",
        Some(json!({"fast_bytes": 8 * MIB, "deadline_ms": 10_000})),
    );
    assert_eq!(status, 202, "{err}");
    assert!(
        wait_for(Duration::from_secs(15), || {
            let p: Option<RebalanceProgress> = get(&c, "vm.rebalance");
            p.is_some_and(|p| p.state == RebalanceState::Done)
        }),
        "{:?}",
        get::<Option<RebalanceProgress>>(&c, "vm.rebalance")
    );
    let info: VmInfo = get(&c, "vm.info");
    assert!(info.tiers[0].used_frames <= 4, "{:?}", info.tiers);

    // Paused vCPUs make no progress; resumed ones do.
    assert_eq!(call(&c, "PUT", "vm.pause", None).0, 204);
    assert_eq!(get::<VmInfo>(&c, "vm.info").state, VmState::Paused);
    let before = ops(&c);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ops(&c), before);
    assert_eq!(call(&c, "PUT", "vm.resume", None).0, 204);
    assert!(wait_for(Duration::from_secs(60), || ops(&c) != before));

    let metrics = c.get_text("/metrics").unwrap();
    assert!(
        metrics.contains("tiervisor_tier_used_bytes{vm=\"e2e\",tier=\"fast\"}"),
        "{metrics}"
    );

    // Shutdown: the guest finishes its phase and checks every write.
    assert_eq!(call(&c, "PUT", "vm.shutdown", None).0, 204);
    let info: VmInfo = get(&c, "vm.info");
    assert_eq!(info.state, VmState::Shutdown);
    let end = info.end.unwrap();
    assert!(end.success, "{}", end.description);
    assert_eq!(call(&c, "PUT", "vm.delete", None).0, 204);
    assert_eq!(call(&c, "GET", "vm.info", None).0, 404);

    assert_eq!(call(&c, "PUT", "vmm.shutdown", None).0, 204);
    let (code, out) = vmm.wait(Duration::from_secs(60));
    assert_eq!(code, 0);
    assert!(!socket.exists(), "the socket outlived the VMM");
    // The VM's end-of-run report, as `tiervisor run` prints it: its
    // phases, what the engine did and the placement check.
    for expected in [
        "vm e2e:\n",
        "phase  vcpu",
        "tiering: ",
        "placement check: ok",
        "result: guest exited successfully",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in\n{out}");
    }
}

#[test]
fn run_serves_the_vm_it_runs_until_an_operator_shuts_it_down() {
    let dir = Scratch::new("run");
    let socket = dir.0.join("api.sock");
    let vmm = Vmm::start(&[
        "run",
        "--workload",
        "hotset:size=64M,hot=8M,verify=1,phases=1,seconds=60",
        "--memory",
        "128M",
        "--timeout",
        "60",
        "--api-socket",
        socket.to_str().unwrap(),
    ]);
    let c = wait_for_socket(&socket);
    assert!(wait_for(Duration::from_secs(60), || {
        get::<VmInfo>(&c, "vm.info").state == VmState::Running && ops(&c).iter().all(|&o| o > 0)
    }));
    let info: VmInfo = get(&c, "vm.info");
    assert_eq!(info.memory_bytes, 128 * MIB);
    assert!(info.tiering);
    assert_eq!(call(&c, "PUT", "vm.shutdown", None).0, 204);
    let (code, report) = vmm.wait(Duration::from_secs(20));
    assert_eq!(code, 0, "{report}");
    assert!(report.contains("hotset"), "{report}");
    assert!(!socket.exists());
}
