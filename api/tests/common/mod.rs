//! Shared by the API tests: an in-memory [`VmmControl`] (the trait exists
//! so the API can be tested without a VM), a server on a fresh socket, a
//! raw HTTP connection for requests the typed client would never send,
//! and a check that every status seen is in the OpenAPI document.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use utoipa::OpenApi;

use api::openapi::ApiDoc;
use api::types::{
    FrameSnapshot, RebalanceRequest, VcpuCounters, VmConfigBody, VmCounters, VmEndInfo, VmEndKind,
    VmInfo, VmState, VmmPingResponse,
};
use api::{ApiClient, ApiServer, ControlError, ServerConfig, VmmControl};
use guest_memory::{BackendSpec, TierSpeed, TierUsage};
use tiering::stats::{MoveCount, StageMicros};
use tiering::{EngineCost, EngineWarning};
use tiering::{
    EngineStats, FrameView, PolicyLimits, RebalanceProgress, RebalanceState, TieringPolicy,
};

pub const MIB: u64 = 1 << 20;

/// A VM as the in-memory VMM keeps it.
#[derive(Debug)]
struct Vm {
    config: VmConfigBody,
    state: VmState,
    booted: Option<Instant>,
    policy: Option<TieringPolicy>,
    rebalance: Option<RebalanceProgress>,
    placement: Vec<u8>,
}

impl Vm {
    fn frame_count(&self) -> usize {
        (self.config.memory.size / self.config.memory.frame_size) as usize
    }

    fn tier_capacities(&self) -> Vec<u64> {
        self.config
            .memory
            .tiers
            .iter()
            .map(|t| t.size.unwrap_or(0))
            .collect()
    }

    fn usage(&self) -> Vec<TierUsage> {
        let fs = self.config.memory.frame_size;
        self.config
            .memory
            .tiers
            .iter()
            .enumerate()
            .map(|(i, t)| TierUsage {
                name: t.name.clone(),
                capacity_frames: (t.size.unwrap_or(0) / fs) as usize,
                used_frames: self.placement.iter().filter(|p| **p as usize == i).count(),
                speed: t.profile.map_or_else(
                    || TierSpeed::Unknown {
                        reason: "the test double measures nothing".into(),
                    },
                    |profile| TierSpeed::Declared { profile },
                ),
            })
            .collect()
    }

    fn limits(&self) -> PolicyLimits {
        PolicyLimits {
            frame_size: self.config.memory.frame_size,
            fast_capacity: self.tier_capacities()[0],
            slow_capacity: self.tier_capacities()[1..].iter().sum(),
            ram: vec![guest_memory::GpaRange::new(0, self.config.memory.size)],
            trackers: vec!["dirty-log".into(), "fault-sample".into()],
        }
    }
}

/// A VMM that keeps one VM's state in memory and validates like the real
/// one (whole configuration first, nothing half-applied).
#[derive(Debug, Default)]
pub struct MemoryVmm {
    vm: Mutex<Option<Vm>>,
    /// `vmm.shutdown` calls.
    pub vmm_shutdowns: AtomicUsize,
    /// Makes `vm_counters` fail with an internal error.
    pub fail_counters: AtomicBool,
    /// Makes `vm_info` panic.
    pub panic_info: AtomicBool,
    /// Holds `boot_vm` until [`BootGate::release`]: a slow request the
    /// test controls.
    pub boot_gate: BootGate,
}

/// A gate `boot_vm` passes: open unless closed; a closed gate tells when
/// a boot waits at it and holds it until released.
#[derive(Debug, Default)]
pub struct BootGate {
    state: std::sync::Mutex<(bool, bool)>,
    changed: std::sync::Condvar,
}

impl BootGate {
    /// Holds the next boots until [`release`](Self::release).
    pub fn close(&self) {
        *self.state.lock().unwrap() = (true, false);
    }

    /// Waits until a boot waits at the closed gate, at most `limit`;
    /// whether one does.
    pub fn wait_for_boot(&self, limit: Duration) -> bool {
        let state = self.state.lock().unwrap();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, limit, |s| !s.1)
            .unwrap();
        state.1
    }

    /// Opens the gate.
    pub fn release(&self) {
        self.state.lock().unwrap().0 = false;
        self.changed.notify_all();
    }

    fn pass(&self) {
        let mut state = self.state.lock().unwrap();
        state.1 = true;
        self.changed.notify_all();
        while state.0 {
            state = self.changed.wait(state).unwrap();
        }
    }
}

fn wrong(state: VmState, action: &'static str) -> ControlError {
    ControlError::WrongState { state, action }
}

impl MemoryVmm {
    fn with_vm<T>(
        &self,
        f: impl FnOnce(&mut Vm) -> Result<T, ControlError>,
    ) -> Result<T, ControlError> {
        let mut guard = self.vm.lock().unwrap();
        f(guard.as_mut().ok_or(ControlError::NoVm)?)
    }

    fn validate(config: &VmConfigBody) -> Result<Vec<u8>, ControlError> {
        let id_ok = !config.id.is_empty()
            && config.id.len() <= 64
            && config
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !id_ok {
            return Err(ControlError::invalid(
                "id",
                "use 1 to 64 letters, digits, '-', '_'",
            ));
        }
        if !(1..=64).contains(&config.vcpus) {
            return Err(ControlError::invalid(
                "vcpus",
                format!("{} not in 1..=64", config.vcpus),
            ));
        }
        let m = &config.memory;
        if !m.frame_size.is_power_of_two() || m.frame_size < 4096 {
            return Err(ControlError::invalid(
                "memory.frame_size",
                "not a power of two >= 4096",
            ));
        }
        if m.size == 0 || m.size % m.frame_size != 0 {
            return Err(ControlError::invalid(
                "memory.size",
                "must be a non-zero multiple of the frame size",
            ));
        }
        if m.tiers.is_empty() {
            return Err(ControlError::invalid("memory.tiers", "no tiers configured"));
        }
        let mut capacity = 0u64;
        for (i, t) in m.tiers.iter().enumerate() {
            let Some(size) = t.size else {
                return Err(ControlError::invalid(
                    format!("memory.tiers[{i}].size"),
                    "a memfd tier needs a size",
                ));
            };
            if !matches!(t.backend, BackendSpec::Memfd { .. }) {
                return Err(ControlError::invalid(
                    format!("memory.tiers[{i}].backend"),
                    "only memfd here",
                ));
            }
            capacity = capacity.saturating_add(size);
        }
        if capacity < m.size {
            return Err(ControlError::invalid(
                "memory.tiers",
                "tiers too small for guest RAM",
            ));
        }
        // Fast-first placement.
        let frames = (m.size / m.frame_size) as usize;
        let mut placement = Vec::with_capacity(frames);
        for (i, t) in m.tiers.iter().enumerate() {
            let fit = (t.size.unwrap_or(0) / m.frame_size) as usize;
            let take = fit.min(frames - placement.len());
            placement.extend(std::iter::repeat_n(i as u8, take));
        }
        Ok(placement)
    }
}

impl VmmControl for MemoryVmm {
    fn ping(&self) -> VmmPingResponse {
        VmmPingResponse {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        }
    }

    fn shutdown_vmm(&self) -> Result<(), ControlError> {
        self.vmm_shutdowns.fetch_add(1, Ordering::SeqCst);
        if let Some(vm) = self.vm.lock().unwrap().as_mut() {
            vm.state = VmState::Shutdown;
        }
        Ok(())
    }

    fn create_vm(&self, config: VmConfigBody) -> Result<(), ControlError> {
        let mut guard = self.vm.lock().unwrap();
        if let Some(vm) = guard.as_ref() {
            return Err(wrong(vm.state, "create"));
        }
        let placement = Self::validate(&config)?;
        let mut vm = Vm {
            policy: None,
            state: VmState::Created,
            booted: None,
            rebalance: None,
            placement,
            config,
        };
        if let Some(policy) = &vm.config.tiering {
            policy
                .validate(&vm.limits())
                .map_err(|e| ControlError::invalid("tiering", e))?;
            vm.policy = Some(policy.clone());
        }
        *guard = Some(vm);
        Ok(())
    }

    fn boot_vm(&self) -> Result<(), ControlError> {
        self.boot_gate.pass();
        self.with_vm(|vm| match vm.state {
            VmState::Created => {
                vm.state = VmState::Running;
                vm.booted = Some(Instant::now());
                Ok(())
            }
            s => Err(wrong(s, "boot")),
        })
    }

    fn pause_vm(&self) -> Result<(), ControlError> {
        self.with_vm(|vm| match vm.state {
            VmState::Running => {
                vm.state = VmState::Paused;
                Ok(())
            }
            s => Err(wrong(s, "pause")),
        })
    }

    fn resume_vm(&self) -> Result<(), ControlError> {
        self.with_vm(|vm| match vm.state {
            VmState::Paused => {
                vm.state = VmState::Running;
                Ok(())
            }
            s => Err(wrong(s, "resume")),
        })
    }

    fn shutdown_vm(&self) -> Result<(), ControlError> {
        self.with_vm(|vm| match vm.state {
            VmState::Running | VmState::Paused => {
                vm.state = VmState::Shutdown;
                Ok(())
            }
            s => Err(wrong(s, "shut down")),
        })
    }

    fn delete_vm(&self) -> Result<(), ControlError> {
        let mut guard = self.vm.lock().unwrap();
        guard.take().map(|_| ()).ok_or(ControlError::NoVm)
    }

    fn vm_info(&self) -> Result<VmInfo, ControlError> {
        if self.panic_info.load(Ordering::SeqCst) {
            panic!("vm_info asked to panic");
        }
        self.with_vm(|vm| {
            Ok(VmInfo {
                config: vm.config.clone(),
                state: vm.state,
                memory_bytes: vm.config.memory.size,
                frame_size: vm.config.memory.frame_size,
                tiers: vm.usage(),
                measuring_tiers: false,
                tiering: vm.policy.is_some(),
                uptime_ms: vm.booted.map_or(0, |b| b.elapsed().as_millis() as u64),
                // The stand-in's guests only end on request.
                end: (vm.state == VmState::Shutdown).then(|| VmEndInfo {
                    success: true,
                    kind: VmEndKind::Stopped,
                    description: "guest stopped by the VMM".into(),
                }),
            })
        })
    }

    /// The stand-in's tiers have declared speeds or none: nothing to
    /// measure, so a measurement ends as it starts.
    fn measure_tiers(&self) -> Result<(), ControlError> {
        self.with_vm(|vm| match vm.state {
            VmState::Shutdown => Err(wrong(vm.state, "measure tiers")),
            _ => Ok(()),
        })
    }

    fn vm_counters(&self) -> Result<VmCounters, ControlError> {
        if self.fail_counters.load(Ordering::SeqCst) {
            return Err(ControlError::Internal("counter page unreadable".into()));
        }
        self.with_vm(|vm| {
            Ok(VmCounters {
                vcpus: (0..vm.config.vcpus)
                    .map(|index| VcpuCounters {
                        index,
                        phase: 1,
                        ops: 1000 + u64::from(index),
                        hypercalls: 10 + u64::from(index),
                    })
                    .collect(),
                log_lines: 7,
                log_lines_suppressed: 1,
                tiers: vm.usage(),
                frame_size: vm.config.memory.frame_size,
            })
        })
    }

    fn tiering_policy(&self) -> Result<TieringPolicy, ControlError> {
        self.with_vm(|vm| vm.policy.clone().ok_or(ControlError::NoTiering))
    }

    fn set_tiering_policy(&self, policy: TieringPolicy) -> Result<(), ControlError> {
        self.with_vm(|vm| {
            if vm.policy.is_none() {
                return Err(ControlError::NoTiering);
            }
            policy
                .validate(&vm.limits())
                .map_err(|e| ControlError::invalid("policy", e))?;
            vm.policy = Some(policy);
            Ok(())
        })
    }

    fn tiering_stats(&self) -> Result<Arc<EngineStats>, ControlError> {
        self.with_vm(|vm| {
            let policy = vm.policy.as_ref().ok_or(ControlError::NoTiering)?;
            Ok(Arc::new(EngineStats {
                intervals: 42,
                tracker: policy.tracker.clone(),
                fast_quota: Some(policy.fast_quota),
                threshold: Some(1.5),
                threshold_pages: Some(0.2),
                hot_frames: 3,
                hot_set_bytes: 3 * vm.config.memory.frame_size,
                hot_page_bytes: 5 * 4096,
                promotions: MoveCount {
                    frames: 4,
                    bytes: 4 * vm.config.memory.frame_size,
                },
                demotions: MoveCount {
                    frames: 2,
                    bytes: 2 * vm.config.memory.frame_size,
                },
                exchanges: 1,
                aborted: 0,
                tiers: vm.usage(),
                stage_micros: StageMicros {
                    collect: 1500,
                    heat: 250,
                    plan: 1_000_000,
                    migrate: 20,
                },
                tracker_errors: 0,
                cost: EngineCost {
                    budget_pages_per_sec: Some(16_384),
                    armed_pages: 1000,
                    armed_hits: 100,
                    windows: 10,
                    window_us: 2000,
                    regions: 100,
                    sampler_cpu_us: 3000,
                    cpu_ns_per_armed_page: Some(3000.0),
                    engine_cpu_us: 5000,
                    write_stall_us: 700,
                    bytes_moved: 6 * vm.config.memory.frame_size,
                    fast_heat_share: Some(0.8),
                    estimated_read_latency_ns: Some(140.0),
                    fast_read_latency_ns: Some(100),
                },
                last_error: None,
                rebalance: vm.rebalance.clone(),
                recent: Vec::new(),
                warnings: EngineWarning::of(
                    3 * vm.config.memory.frame_size,
                    Some(policy.fast_quota),
                    &vm.usage(),
                ),
            }))
        })
    }

    fn tiering_frames(&self) -> Result<FrameSnapshot, ControlError> {
        self.with_vm(|vm| {
            vm.policy.as_ref().ok_or(ControlError::NoTiering)?;
            let n = vm.frame_count();
            Ok(FrameSnapshot {
                frame_size: vm.config.memory.frame_size,
                tier_names: vm
                    .config
                    .memory
                    .tiers
                    .iter()
                    .map(|t| t.name.clone())
                    .collect(),
                view: Arc::new(FrameView {
                    gpa: frame_gpas(n, vm.config.memory.frame_size),
                    tier: vm.placement.clone(),
                    heat: (0..n).map(|i| i as f32 * 0.5).collect(),
                }),
            })
        })
    }

    fn rebalance(&self, request: RebalanceRequest) -> Result<(), ControlError> {
        self.with_vm(|vm| {
            vm.policy.as_ref().ok_or(ControlError::NoTiering)?;
            if vm.state != VmState::Running {
                return Err(wrong(vm.state, "rebalance"));
            }
            let capacity = vm.tier_capacities()[0];
            if request.fast_bytes > capacity {
                return Err(ControlError::invalid(
                    "fast_bytes",
                    format!(
                        "{} above the fast tier's {capacity} bytes",
                        request.fast_bytes
                    ),
                ));
            }
            let fs = vm.config.memory.frame_size;
            let fast = vm.placement.iter().filter(|t| **t == 0).count() as u64 * fs;
            vm.rebalance = Some(RebalanceProgress {
                target_bytes: request.fast_bytes,
                start_bytes: fast,
                fast_bytes: fast,
                moved_frames: 0,
                elapsed_ms: 0,
                deadline_ms: request.deadline_ms,
                state: RebalanceState::Running,
            });
            Ok(())
        })
    }

    fn rebalance_progress(&self) -> Result<Option<RebalanceProgress>, ControlError> {
        self.with_vm(|vm| {
            vm.policy.as_ref().ok_or(ControlError::NoTiering)?;
            Ok(vm.rebalance.clone())
        })
    }
}

/// A VM configuration: 64 MiB in 2 MiB frames on 32 MiB dram + 64 MiB
/// pmem, with a tiering policy of a 16 MiB quota.
pub fn vm_config() -> serde_json::Value {
    json!({
        "id": "vm0",
        "vcpus": 2,
        "memory": {
            "size": 64 * MIB,
            "tiers": [
                { "name": "dram", "backend": { "kind": "memfd" }, "size": 32 * MIB },
                { "name": "pmem", "backend": { "kind": "memfd" }, "size": 64 * MIB }
            ]
        },
        "payload": { "kind": "workload", "spec": "hotset" },
        "migration": { "migrator": "remap" },
        "tiering": { "fast_quota": { "max_bytes": 16 * MIB } }
    })
}

/// A directory removed when dropped (short path: unix socket paths are
/// limited to 107 bytes).
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "tva-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server on a unix socket with the in-memory VMM.
pub struct Fixture {
    pub server: ApiServer,
    pub vmm: Arc<MemoryVmm>,
    pub socket: PathBuf,
    pub dir: TempDir,
}

impl Fixture {
    /// A server with default limits but short timeouts.
    pub fn new() -> Self {
        Self::with(|_| {})
    }

    /// A server whose configuration `adjust` changes.
    pub fn with(adjust: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = TempDir::new();
        let socket = dir.path().join("api.sock");
        let mut config = ServerConfig::unix(&socket);
        config.request_timeout = Duration::from_millis(500);
        config.idle_timeout = Duration::from_secs(2);
        adjust(&mut config);
        let vmm = Arc::new(MemoryVmm::default());
        let server = ApiServer::start(config, vmm.clone()).unwrap();
        Fixture {
            server,
            vmm,
            socket,
            dir,
        }
    }

    pub fn client(&self) -> ApiClient {
        ApiClient::unix(&self.socket).with_timeout(Duration::from_secs(5))
    }

    pub fn raw(&self) -> RawConn {
        RawConn::new(UnixStream::connect(&self.socket).unwrap())
    }

    /// Creates the VM of [`vm_config`].
    pub fn create_vm(&self) {
        self.client()
            .put_json("/api/v1/vm.create", &vm_config())
            .unwrap();
    }
}

/// A parsed response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

/// A raw HTTP connection: sends bytes as given, reads responses one by
/// one.
pub struct RawConn {
    stream: Box<dyn ReadWriteTimeout>,
    buf: Vec<u8>,
}

pub trait ReadWriteTimeout: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWriteTimeout for T {}

impl RawConn {
    pub fn new(stream: UnixStream) -> Self {
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        RawConn {
            stream: Box::new(stream),
            buf: Vec::new(),
        }
    }

    pub fn tcp(stream: std::net::TcpStream) -> Self {
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        RawConn {
            stream: Box::new(stream),
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) -> &mut Self {
        self.stream.write_all(bytes).unwrap();
        self
    }

    /// Sends bytes, telling whether the server still takes them.
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends a request with a body (and its Content-Length).
    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> Reply {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.send(head.as_bytes()).send(body);
        self.read_reply()
    }

    /// Reads one response (Content-Length framed, or none for 204).
    pub fn read_reply(&mut self) -> Reply {
        self.read(true)
    }

    /// Reads the head of a response that has no body whatever its
    /// Content-Length says (the answer to HEAD).
    pub fn read_head_only(&mut self) -> Reply {
        self.read(false)
    }

    fn read(&mut self, with_body: bool) -> Reply {
        let head_end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().expect("connection closed before a response");
        };
        let head = String::from_utf8(self.buf[..head_end].to_vec()).unwrap();
        self.buf.drain(..head_end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap();
                (n.to_owned(), v.trim().to_owned())
            })
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length") && with_body)
            .map_or(0, |(_, v)| v.parse().unwrap());
        while self.buf.len() < length {
            self.fill().expect("connection closed inside a body");
        }
        let body = self.buf.drain(..length).collect();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// Whether the server has closed the connection (reads to EOF).
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    fn fill(&mut self) -> Option<()> {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) => None,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Some(())
            }
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// The statuses the OpenAPI document lists for `method path`.
pub fn documented_statuses(method: &str, path: &str) -> BTreeSet<u16> {
    let doc = ApiDoc::openapi();
    let item = doc
        .paths
        .paths
        .get(path)
        .unwrap_or_else(|| panic!("{path} undocumented"));
    let op = match method {
        "GET" => item.get.as_ref(),
        "PUT" => item.put.as_ref(),
        _ => None,
    }
    .unwrap_or_else(|| panic!("{method} {path} undocumented"));
    op.responses
        .responses
        .keys()
        .map(|k| k.parse().unwrap())
        .collect()
}

/// Asserts `reply` has `status`, that the document lists it for the
/// route, and that an error body says something; returns the error body.
pub fn expect_status(reply: &Reply, status: u16, method: &str, path: &str) -> serde_json::Value {
    assert_eq!(
        reply.status,
        status,
        "{method} {path}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    assert!(
        documented_statuses(method, path).contains(&status),
        "{method} {path} answered {status}, which the OpenAPI document does not list"
    );
    if status >= 400 {
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let body = reply.json();
        assert!(
            !body["error"].as_str().unwrap().is_empty(),
            "error body without a message: {body}"
        );
        assert!(body.get("detail").is_some(), "no detail: {body}");
        body
    } else {
        serde_json::Value::Null
    }
}

/// Guest-physical address of each of `n` frames of `frame_size`, laid out
/// as the VMM lays out guest RAM (around the MMIO hole).
fn frame_gpas(n: usize, frame_size: u64) -> Vec<u64> {
    guest_memory::ram_regions(n as u64 * frame_size)
        .iter()
        .flat_map(|r| (0..r.len / frame_size).map(move |k| r.gpa + k * frame_size))
        .collect()
}
