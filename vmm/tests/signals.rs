//! The operator's stop signals, end to end on the `tiervisor` binary:
//! SIGTERM or SIGINT stops a run gracefully (the migration batch in
//! flight ends, the engine stops, the guest finishes its own data check),
//! writes the report, removes the API socket and exits with status 5;
//! `serve` does the same for its VM and exits 0; a second signal ends the
//! process at once with 128 + the signal's number.
//!
//! Nothing here depends on timing: each step waits for what it needs to
//! see (the guest working, a line on stderr) with a generous limit, and
//! the second-signal test uses a guest that ignores its stop word and a
//! grace period far longer than the test's limits.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use api::ApiClient;
use api::types::VmCounters;
use serde_json::{Value, json};

/// Limit of every wait: far beyond what any step takes on a busy host.
const LIMIT: Duration = Duration::from_secs(120);

/// A `tiervisor` process with its stderr read line by line, killed on drop
/// if still running.
struct Vmm {
    child: Child,
    stderr: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Drop for Vmm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Vmm {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tiervisor"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, stderr) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Vmm {
            child,
            stderr,
            seen: Vec::new(),
        }
    }

    fn signal(&self, signo: i32) {
        // SAFETY: sends a signal to our own child process.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signo) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for a stderr line containing `text`.
    fn wait_for_line(&mut self, text: &str) {
        let start = Instant::now();
        while start.elapsed() < LIMIT {
            match self.stderr.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("no stderr line with {text:?}; stderr: {:#?}", self.seen);
    }

    /// Waits for the exit; its status code and all of stderr.
    fn wait(mut self) -> (Option<i32>, String) {
        let start = Instant::now();
        while start.elapsed() < LIMIT {
            if let Some(status) = self.child.try_wait().unwrap() {
                // The reader ends at the pipe's end of file.
                while let Ok(line) = self.stderr.recv_timeout(LIMIT) {
                    self.seen.push(line);
                }
                return (status.code(), self.seen.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("tiervisor did not exit within {LIMIT:?}: {:#?}", self.seen);
    }
}

/// A client of the VMM on `path`, once it answers.
fn client(path: &Path) -> ApiClient {
    let c = ApiClient::unix(path);
    let start = Instant::now();
    while start.elapsed() < LIMIT {
        if c.request("GET", "/api/v1/vmm.ping", None)
            .is_ok_and(|r| r.status == 200)
        {
            return c;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no VMM answers on {}", path.display());
}

/// Waits until every vCPU of the API's VM has done work.
fn wait_for_guest_work(c: &ApiClient) {
    let start = Instant::now();
    while start.elapsed() < LIMIT {
        let counters: Result<VmCounters, _> = c.get_json("/api/v1/vm.counters");
        if counters.is_ok_and(|k| !k.vcpus.is_empty() && k.vcpus.iter().all(|v| v.ops > 0)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the guest did no work within {LIMIT:?}");
}

fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch(name);
    let _ = std::fs::remove_file(dir.join("api.sock"));
    let _ = std::fs::remove_file(dir.join("report.json"));
    dir
}

/// memcheck verifies every word it wrote while `--shuffle` moves random
/// frames between the tiers; the engine runs too.
fn memcheck_run_args<'a>(socket: &'a str, report: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--workload",
        "memcheck:size=32M,seconds=600",
        "--memory",
        "256M",
        "--migrator",
        "remap",
        "--shuffle",
        "50",
        "--timeout",
        "900",
        "--api-socket",
        socket,
        "--report-json",
        report,
    ]
}

fn sigterm_stops_a_run(signo: i32, name: &str) {
    let dir = scratch(&format!("signal-run-{name}"));
    let (socket, report) = (dir.join("api.sock"), dir.join("report.json"));
    let mut vmm = Vmm::start(&memcheck_run_args(
        socket.to_str().unwrap(),
        report.to_str().unwrap(),
    ));
    wait_for_guest_work(&client(&socket));
    vmm.signal(signo);
    vmm.wait_for_line("stopping gracefully");
    let (code, stderr) = vmm.wait();
    assert_eq!(code, Some(5), "stderr:\n{stderr}");
    assert!(!socket.exists(), "the API socket is removed");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    // memcheck exits 0 only if its final check of every word passed.
    assert_eq!(report["end"]["kind"], "success", "{report:#}");
    assert_eq!(
        report["stopped_by_signal"],
        json!({"signal": name, "hard_stop": false})
    );
    assert!(
        report["migrations"]["moved"].as_u64().unwrap() > 0,
        "frames moved live before the signal: {report:#}"
    );
    assert_eq!(report["placement_check"]["leaked_slots"], 0, "{report:#}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigterm_during_live_migration_ends_the_run_gracefully() {
    sigterm_stops_a_run(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_ends_the_run_the_same_way() {
    sigterm_stops_a_run(libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_stops_serve_and_its_vm_gracefully() {
    let dir = scratch("signal-serve");
    let socket = dir.join("api.sock");
    let mut vmm = Vmm::start(&["serve", "--api-socket", socket.to_str().unwrap()]);
    let c = client(&socket);
    let config = json!({
        "id": "sig",
        "vcpus": 2,
        "memory": {
            "size": 128u64 << 20,
            "frame_size": 2u64 << 20,
            "tiers": [
                {"name": "fast", "backend": {"kind": "memfd"}, "size": 32u64 << 20},
                {"name": "slow", "backend": {"kind": "memfd"}, "size": 128u64 << 20}
            ]
        },
        "payload": {"kind": "workload", "spec": "memcheck:size=32M,seconds=600"},
        "tiering": {"interval_ms": 100, "fast_quota": {"max_bytes": 32u64 << 20}},
        "timeout_s": 900.0
    });
    let body = serde_json::to_vec(&config).unwrap();
    let created = c.request("PUT", "/api/v1/vm.create", Some(&body)).unwrap();
    assert_eq!(created.status, 204);
    assert_eq!(
        c.request("PUT", "/api/v1/vm.boot", None).unwrap().status,
        204
    );
    wait_for_guest_work(&c);
    vmm.signal(libc::SIGTERM);
    vmm.wait_for_line("stopping gracefully");
    let (code, stderr) = vmm.wait();
    assert_eq!(code, Some(0), "stderr:\n{stderr}");
    assert!(
        stderr.contains("SIGTERM: guest exited successfully"),
        "the guest finished its own data check: {stderr}"
    );
    assert!(!socket.exists(), "the API socket is removed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_signal_stops_at_once() {
    let dir = scratch("signal-twice");
    let (socket, report) = (dir.join("api.sock"), dir.join("report.json"));
    // A guest that spins at CPL3 and ignores its stop word, with a grace
    // period no test waits for: only the second signal can end it.
    let elf = common::elf(common::LOAD, common::LOAD, &[0xeb, 0xfe], 62);
    let payload = common::write_file(&dir, "spin.elf", &elf);
    let mut vmm = Vmm::start(&[
        "run",
        "--payload",
        &payload,
        "--memory",
        "64M",
        "--stop-grace",
        "3600",
        "--api-socket",
        socket.to_str().unwrap(),
        "--report-json",
        report.to_str().unwrap(),
    ]);
    let c = client(&socket);
    let start = Instant::now();
    while c
        .get_json::<Value>("/api/v1/vm.info")
        .map_or(true, |i| i["state"] != "running")
    {
        assert!(start.elapsed() < LIMIT, "the VM never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    vmm.signal(libc::SIGTERM);
    vmm.wait_for_line("stopping gracefully");
    vmm.signal(libc::SIGINT);
    let (code, stderr) = vmm.wait();
    assert_eq!(code, Some(128 + libc::SIGINT), "stderr:\n{stderr}");
    assert!(stderr.contains("SIGINT: stopping at once"), "{stderr}");
    assert!(!report.exists(), "no report: the run did not end");
    assert!(!socket.exists(), "the API socket is removed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn outputs_in_missing_directories_are_refused_before_the_guest_starts() {
    for (option, value) in [
        ("--report-json", "/nonexistent-tiervisor/r.json"),
        ("--api-socket", "/nonexistent-tiervisor/api.sock"),
    ] {
        let out = common::tiervisor_run(&[option, value]);
        common::assert_code(&out, 2);
        let text = common::text(&out);
        assert!(
            text.contains(&format!(
                "{option} {value}: directory /nonexistent-tiervisor does not exist"
            )),
            "{text}"
        );
        assert!(!text.contains("[guest"), "no guest ran: {text}");
    }
}
