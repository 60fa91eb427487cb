//! Starting the tiered host under QEMU for one scenario and collecting its
//! serial console.
//!
//! The machine (see `docs/testing.md`): TCG with `qemu64,+svm,+npt` (KVM
//! inside works through nested SVM with NPT), 2 vCPUs, 2 GiB in two NUMA
//! nodes of 1 GiB (node 1 CPU-less, 80 ns / 20 GB/s vs 250 ns / 8 GB/s in
//! its HMAT, roughly DRAM vs CXL), and a 512 MiB NVDIMM on node 1 backed
//! by a sparse file, which the devdax scenario turns into `/dev/dax0.0`.

use std::fs;
use std::io::{self, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::console::Console;

/// The QEMU binary, under `qemu/` of the built host (QEMU 10 from
/// bookworm-backports, unpacked by `tests/nested/build.sh`: the system's
/// QEMU 7.2 hung or crashed the host now and then, `docs/testing.md`).
const QEMU: &str = "qemu/usr/bin/qemu-system-x86_64";
/// Its firmware (option ROMs, SeaBIOS), under the built host.
const QEMU_DATA: [&str; 2] = ["qemu/usr/share/qemu", "qemu/usr/share/seabios"];
/// Bytes of the emulated NVDIMM.
const PMEM_BYTES: u64 = 512 << 20;
/// What the host's `/init` prints first (`tests/nested/host/init`).
const BOOT_MARK: &str = "@@nested boot ";
/// The host's CPU model (see `boot`).
const CPU: &str = "qemu64,+svm,+npt,+ssse3,+sse4.1,+sse4.2,+popcnt,-cx16";
/// Wall time by which a host must have reached its `/init`: it takes
/// 10–30 s; QEMU's emulated host has also hung in its kernel's early boot,
/// before any tiervisor code ran, and then never printed again.
const BOOT_DEADLINE: Duration = Duration::from_secs(150);
/// Boots per scenario: a host that never reached its `/init`, or that
/// froze (below), is booted again, up to three boots in all (CI saw a
/// host freeze in two boots in a row, `docs/testing.md`).
const BOOT_ATTEMPTS: u32 = 3;
/// Console silence after which a booted host counts as frozen. The
/// host's `/init` prints a heartbeat every 30 s (`tests/nested/host/lib.sh`),
/// also while a scenario's process hangs, so four missed beats mean that
/// the host's kernel or the emulator stopped: that has happened now and
/// then while the host ran a Linux guest (`docs/testing.md`).
const SILENCE_LIMIT: Duration = Duration::from_secs(120);
/// The monitor socket's name in a scenario's scratch directory.
const MONITOR: &str = "monitor.sock";

/// Why a scenario produced no console log to judge.
#[derive(Debug, Error)]
pub enum HostError {
    /// An artifact of `tests/nested/build.sh` is missing.
    #[error("{0} is missing: run tests/nested/build.sh")]
    MissingArtifact(PathBuf),
    /// QEMU could not be started.
    #[error(
        "cannot start {QEMU} (its libraries come with qemu-system-x86; scripts/test-all.sh installs it)"
    )]
    Spawn(#[source] io::Error),
    /// Scratch files could not be made or read.
    #[error("{what}")]
    Io {
        /// What failed.
        what: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The host never reached its `/init`, or froze, in every boot.
    #[error(
        "scenario {scenario}: in {BOOT_ATTEMPTS} boots the host did not reach its init within \
         {secs} s or froze (printed nothing, not even its heartbeat, for {} s: its kernel or \
         the emulator stopped); console tail:\n{tail}",
        SILENCE_LIMIT.as_secs()
    )]
    NeverBooted {
        /// The scenario.
        scenario: String,
        /// The boot deadline.
        secs: u64,
        /// The last lines of the last boot's console.
        tail: String,
    },
    /// The scenario ran past its time limit; the log so far is attached.
    #[error("scenario {scenario} ran past {secs} s; console tail:\n{tail}")]
    TimedOut {
        /// The scenario.
        scenario: String,
        /// Its limit.
        secs: u64,
        /// The last lines of its console.
        tail: String,
    },
}

/// Overrides every scenario's TCG threading (`single` or `multi`), for
/// looping a scenario both ways (`docs/testing.md`).
pub const TCG_ENV: &str = "TIERVISOR_NESTED_TCG";
/// Overrides every scenario's number of host vCPUs.
pub const SMP_ENV: &str = "TIERVISOR_NESTED_SMP";

/// `default`, unless [`SMP_ENV`] gives another number of host vCPUs.
fn host_cpus(default: u32) -> u32 {
    match std::env::var(SMP_ENV) {
        Err(_) => default,
        Ok(v) => match v.parse::<u32>() {
            Ok(n @ 1..=8) => n,
            _ => panic!("{SMP_ENV}={v}: expected a number of host vCPUs from 1 to 8"),
        },
    }
}

/// How QEMU's TCG runs the host's two vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tcg {
    /// One host thread per vCPU: fast, and has timing-dependent failure
    /// modes with nested SVM (`docs/testing.md`).
    Multi,
    /// One host thread for both vCPUs, taking turns.
    Single,
}

impl Tcg {
    /// The `-accel` argument.
    fn accel(self) -> &'static str {
        match self {
            Tcg::Multi => "tcg,thread=multi",
            Tcg::Single => "tcg,thread=single",
        }
    }

    /// `default`, unless [`TCG_ENV`] names the other one.
    fn from_env_or(default: Tcg) -> Tcg {
        match std::env::var(TCG_ENV).as_deref() {
            Ok("single") => Tcg::Single,
            Ok("multi") => Tcg::Multi,
            _ => default,
        }
    }
}

/// Which of the built kernels the host boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKernel {
    /// Debian's cloud kernel (`bzImage`), the tiered host's usual one.
    Cloud,
    /// Debian's generic kernel of the same release (`bzImage-generic`):
    /// it has dmaengine, which the cloud kernel lacks.
    Generic,
}

impl HostKernel {
    /// The image's file name in the built host's directory.
    fn image(self) -> &'static str {
        match self {
            HostKernel::Cloud => "bzImage",
            HostKernel::Generic => "bzImage-generic",
        }
    }
}

/// One scenario run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The script under `tests/nested/scenarios/` (without `.sh`).
    pub name: String,
    /// More `KEY=VALUE` words for the host's kernel command line (e.g.
    /// `tiervisor.corrupt=1`).
    pub cmdline: Vec<String>,
    /// Time allowed from QEMU's start to its exit.
    pub timeout: Duration,
    /// TCG threading, unless [`TCG_ENV`] overrides it.
    pub tcg: Tcg,
    /// The host's vCPUs, unless [`SMP_ENV`] overrides it.
    pub smp: u32,
    /// The kernel the host boots.
    pub kernel: HostKernel,
}

impl Scenario {
    /// Scenario `name` with a limit of `secs` seconds.
    pub fn new(name: &str, secs: u64) -> Self {
        Scenario {
            name: name.to_owned(),
            cmdline: Vec::new(),
            timeout: Duration::from_secs(secs),
            tcg: Tcg::Multi,
            smp: 2,
            kernel: HostKernel::Cloud,
        }
    }

    /// Boots the generic kernel instead of the cloud kernel.
    pub fn on_generic_kernel(mut self) -> Self {
        self.kernel = HostKernel::Generic;
        self
    }

    /// Runs the host's vCPUs on one TCG thread.
    pub fn single_threaded(mut self) -> Self {
        self.tcg = Tcg::Single;
        self
    }

    /// Gives the host one vCPU instead of two. Linux guests run on a
    /// one-vCPU host: on two, about one run in ten failed in the emulator
    /// (the guest triple-faulting, the host locking up in a cross-CPU
    /// call), with QEMU 7.2 and 10.0 alike; on one, none in 28
    /// (`docs/testing.md`).
    pub fn on_one_host_cpu(mut self) -> Self {
        self.smp = 1;
        self
    }

    /// Adds `word` to the host's kernel command line.
    pub fn with(mut self, word: &str) -> Self {
        self.cmdline.push(word.to_owned());
        self
    }

    /// A name for its files: the scenario, its kernel unless the cloud
    /// kernel, and its extra words.
    fn label(&self) -> String {
        let mut label = self.name.clone();
        if self.kernel == HostKernel::Generic {
            label.push_str("-generic");
        }
        for w in &self.cmdline {
            label.push('-');
            label.extend(w.chars().map(|c| if c.is_alphanumeric() { c } else { '_' }));
        }
        label
    }
}

/// The built tiered host: `bzImage`, `bzImage-generic` and `host.cpio.gz`
/// in a directory.
#[derive(Debug, Clone)]
pub struct TieredHost {
    dir: PathBuf,
}

impl TieredHost {
    /// The host whose artifacts `tests/nested/build.sh` put in `dir`.
    pub fn new(dir: &Path) -> Result<Self, HostError> {
        for name in ["bzImage", "bzImage-generic", "host.cpio.gz", QEMU] {
            let path = dir.join(name);
            if !path.is_file() {
                return Err(HostError::MissingArtifact(path));
            }
        }
        Ok(TieredHost {
            dir: dir.to_owned(),
        })
    }

    /// What the runner reports of a frozen host's vCPUs
    /// ([`frozen_cpus`]), read from a machine of this QEMU held at reset
    /// (`-S`, two vCPUs, no kernel): a check of that report, whose vCPUs
    /// sit at the reset vector (`EIP=0000fff0`), the boot vCPU running and
    /// the other halted until its start-up IPI.
    pub fn vcpus_at_reset(&self) -> Result<String, HostError> {
        let io = |what: String| move |source| HostError::Io { what, source };
        let scratch = self.dir.join("run").join("monitor-check");
        fs::create_dir_all(&scratch).map_err(io(format!("create {}", scratch.display())))?;
        let monitor = scratch.join(MONITOR);
        let _ = fs::remove_file(&monitor);
        let mut child = self
            .qemu_command()
            .args(["-accel", "tcg", "-S", "-smp", "2", "-display", "none"])
            .args(["-nic", "none", "-serial", "none", "-monitor"])
            .arg(monitor_arg(&monitor))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(HostError::Spawn)?;
        let started = Instant::now();
        while !monitor.exists() && started.elapsed() < Duration::from_secs(30) {
            thread::sleep(Duration::from_millis(100));
        }
        let cpus = frozen_cpus(&monitor);
        let _ = child.kill();
        let _ = child.wait();
        let _ = fs::remove_dir_all(&scratch);
        Ok(cpus)
    }

    /// Where the console log of `scenario` goes.
    pub fn log_path(&self, scenario: &Scenario) -> PathBuf {
        self.dir
            .join("logs")
            .join(format!("{}.log", scenario.label()))
    }

    /// Boots the host, runs `scenario` and returns its console once QEMU
    /// exits (the host powers off after the scenario). A host that does
    /// not reach its `/init` within [`BOOT_DEADLINE`] is booted again, up
    /// to [`BOOT_ATTEMPTS`] times.
    pub fn run(&self, scenario: &Scenario) -> Result<Console, HostError> {
        let mut tail = String::new();
        for attempt in 1..=BOOT_ATTEMPTS {
            match self.boot(scenario)? {
                Boot::Ran(console) => return Ok(console),
                Boot::Hung(console) => {
                    eprintln!(
                        "{}: boot {attempt}/{BOOT_ATTEMPTS}: the host did not reach its init \
                         within {} s",
                        scenario.label(),
                        BOOT_DEADLINE.as_secs()
                    );
                    tail = console.tail(20);
                }
                Boot::Froze(console, probe) => {
                    let kept = self.keep_frozen(scenario, attempt, &console, &probe);
                    eprintln!(
                        "{}: boot {attempt}/{BOOT_ATTEMPTS}: the host froze (its console printed \
                         nothing for {} s, last heartbeat at uptime {}):\n{probe}\n\
                         (log: {}); the scenario runs again on a fresh host",
                        scenario.label(),
                        SILENCE_LIMIT.as_secs(),
                        console
                            .alive
                            .map_or("none".to_owned(), |t| format!("{t:.0} s")),
                        kept.display(),
                    );
                    tail = format!("{}\n{probe}", console.tail(20));
                }
            }
        }
        Err(HostError::NeverBooted {
            scenario: scenario.label(),
            secs: BOOT_DEADLINE.as_secs(),
            tail,
        })
    }

    /// Keeps `console`, the log of a boot that froze, as
    /// `LABEL-froze-ATTEMPT.log` beside the others, with `probe` (what the
    /// runner found, [`probe_frozen`]) appended, since the next boot
    /// writes the scenario's log afresh; the kept log's path.
    fn keep_frozen(
        &self,
        scenario: &Scenario,
        attempt: u32,
        console: &Console,
        probe: &str,
    ) -> PathBuf {
        let log = self.log_path(scenario);
        let kept = log.with_file_name(format!("{}-froze-{attempt}.log", scenario.label()));
        let mut text = console.text.clone();
        text.push_str("\n--- the runner's probe of the frozen host ---\n");
        text.push_str(probe);
        text.push('\n');
        let _ = fs::write(&kept, text);
        kept
    }

    /// The built host's QEMU, with its firmware.
    fn qemu_command(&self) -> Command {
        let mut cmd = Command::new(self.dir.join(QEMU));
        for data in QEMU_DATA {
            cmd.arg("-L").arg(self.dir.join(data));
        }
        cmd
    }

    /// One boot of the host for `scenario`.
    fn boot(&self, scenario: &Scenario) -> Result<Boot, HostError> {
        let io = |what: String| move |source| HostError::Io { what, source };
        let log = self.log_path(scenario);
        let scratch = self.dir.join("run").join(scenario.label());
        fs::create_dir_all(log.parent().unwrap_or(&self.dir))
            .map_err(io(format!("create {}", self.dir.display())))?;
        fs::create_dir_all(&scratch).map_err(io(format!("create {}", scratch.display())))?;
        let pmem = scratch.join("pmem0.img");
        // A fresh, sparse NVDIMM each run: no DAX info block from before.
        let _ = fs::remove_file(&pmem);
        fs::File::create(&pmem)
            .and_then(|f| f.set_len(PMEM_BYTES))
            .map_err(io(format!("create {}", pmem.display())))?;
        let _ = fs::remove_file(&log);
        let monitor = scratch.join(MONITOR);
        let _ = fs::remove_file(&monitor);

        // A host that locks up panics at once, with every CPU's backtrace
        // on the console (loglevel 5 lets the traces through `quiet`), and
        // the panic ends QEMU (-no-reboot): a hang shows where it hangs
        // instead of running into the scenario's time limit.
        let mut append = format!(
            "console=ttyS0 quiet loglevel=5 panic=-1 softlockup_panic=1 \
             softlockup_all_cpu_backtrace=1 tiervisor.scenario={}",
            scenario.name
        );
        for w in &scenario.cmdline {
            append.push(' ');
            append.push_str(w);
        }
        let mut cmd = self.qemu_command();
        let tcg = Tcg::from_env_or(scenario.tcg);
        let smp = host_cpus(scenario.smp);
        let cpus = if smp > 1 {
            format!("0-{}", smp - 1)
        } else {
            "0".to_owned()
        };
        // SSSE3, SSE4.1/4.2 and POPCNT: the payload is built for
        // x86-64-v2 (vmm/build.rs), and qemu64 lacks them (zipf's code hit
        // #UD on `blendvpd`). No CMPXCHG16B: 6.12's slab fast path uses it,
        // and with it exposed 9 of 24 boots of 6.12 crashed under QEMU
        // 7.2's TCG (double faults right after the instruction), 0 of 28
        // without (docs/testing.md).
        cmd.args(["-accel", tcg.accel(), "-cpu", CPU])
            .args(["-smp", &smp.to_string(), "-machine", "pc,nvdimm=on,hmat=on"])
            .args(["-m", "2G,slots=2,maxmem=3G"])
            .args(["-object", "memory-backend-ram,id=m0,size=1G"])
            .args(["-object", "memory-backend-ram,id=m1,size=1G"])
            .args([
                "-numa",
                &format!("node,nodeid=0,memdev=m0,cpus={cpus},initiator=0"),
            ])
            .args(["-numa", "node,nodeid=1,memdev=m1,initiator=0"]);
        for (target, latency, bandwidth) in [(0, 80, "20G"), (1, 250, "8G")] {
            let lb = format!("hmat-lb,initiator=0,target={target},hierarchy=memory");
            cmd.args([
                "-numa",
                &format!("{lb},data-type=access-latency,latency={latency}"),
            ])
            .args([
                "-numa",
                &format!("{lb},data-type=access-bandwidth,bandwidth={bandwidth}"),
            ]);
        }
        cmd.args([
            "-object",
            &format!(
                "memory-backend-file,id=nvm0,share=on,mem-path={},size={PMEM_BYTES},align=2M",
                pmem.display()
            ),
        ])
        .args(["-device", "nvdimm,id=nv0,memdev=nvm0,node=1"])
        .arg("-kernel")
        .arg(self.dir.join(scenario.kernel.image()))
        .arg("-initrd")
        .arg(self.dir.join("host.cpio.gz"))
        .args(["-append", &append])
        .args([
            "-display",
            "none",
            "-monitor",
            &monitor_arg(&monitor),
            "-nic",
            "none",
            "-no-reboot",
        ])
        .arg("-serial")
        .arg(format!("file:{}", log.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(HostError::Spawn)?;
        let started = Instant::now();
        let mut boot_checked = false;
        let (mut printed, mut last_print) = (0, Instant::now());
        let status = loop {
            if let Some(status) = child.try_wait().map_err(io("wait for qemu".to_owned()))? {
                break Some(status);
            }
            let len = fs::metadata(&log).map_or(0, |m| m.len());
            if len != printed {
                (printed, last_print) = (len, Instant::now());
            } else if boot_checked && last_print.elapsed() > SILENCE_LIMIT {
                let probe = probe_frozen(&monitor, &log);
                let _ = child.kill();
                let _ = child.wait();
                let text = fs::read_to_string(&log).unwrap_or_default();
                return Ok(Boot::Froze(Console::parse(&text), probe));
            }
            if !boot_checked && started.elapsed() > BOOT_DEADLINE {
                boot_checked = true;
                let text = fs::read_to_string(&log).unwrap_or_default();
                if !text.contains(BOOT_MARK) {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Ok(Boot::Hung(Console::parse(&text)));
                }
            }
            if started.elapsed() > scenario.timeout {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            thread::sleep(Duration::from_millis(200));
        };
        let text = fs::read_to_string(&log).unwrap_or_default();
        let console = Console::parse(&text);
        match status {
            None => Err(HostError::TimedOut {
                scenario: scenario.label(),
                secs: scenario.timeout.as_secs(),
                tail: console.tail(60),
            }),
            Some(status) if !status.success() => {
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = io::Read::read_to_string(&mut e, &mut stderr);
                }
                Err(HostError::Io {
                    what: format!("qemu exited with {status}: {}", stderr.trim()),
                    source: io::Error::other("qemu failed"),
                })
            }
            Some(_) => {
                let _ = fs::remove_dir_all(&scratch);
                Ok(Boot::Ran(console))
            }
        }
    }
}

/// How one boot of the host ended.
enum Boot {
    /// QEMU exited after the host ran (the console says how the scenario
    /// went).
    Ran(Console),
    /// The host did not reach its `/init` by [`BOOT_DEADLINE`]; QEMU was
    /// stopped.
    Hung(Console),
    /// The host reached its `/init`, then its console stayed silent for
    /// [`SILENCE_LIMIT`]; QEMU was stopped. With what the runner found
    /// ([`probe_frozen`]).
    Froze(Console, String),
}

/// Grace for a frozen host's kernel to print after an NMI.
const NMI_GRACE: Duration = Duration::from_secs(3);

/// What a host whose console went silent still does: where its vCPUs are
/// ([`frozen_cpus`]), then whether its kernel prints after an NMI sent
/// through the monitor (an unknown NMI makes the kernel print
/// "Uhhuh. NMI received for unknown reason", through the console's
/// polled path, not the tty). A kernel that answers is alive and its
/// user space or the tty's output stopped; one that does not stopped
/// whole, or QEMU did.
fn probe_frozen(monitor: &Path, log: &Path) -> String {
    let cpus = frozen_cpus(monitor);
    let before = fs::metadata(log).map_or(0, |m| m.len());
    let nmi = match monitor_command(monitor, "nmi") {
        Ok(_) => {
            thread::sleep(NMI_GRACE);
            let text = fs::read(log).unwrap_or_default();
            let new = text.get(before as usize..).unwrap_or_default();
            if new.is_empty() {
                format!(
                    "after an NMI the console printed nothing in {} s",
                    NMI_GRACE.as_secs()
                )
            } else {
                format!(
                    "after an NMI the console printed {} bytes in {} s:\n{}",
                    new.len(),
                    NMI_GRACE.as_secs(),
                    String::from_utf8_lossy(&new[..new.len().min(2000)]).trim_end()
                )
            }
        }
        Err(e) => format!("the monitor took no NMI: {e}"),
    };
    format!("its vCPUs, 1 s apart:\n{cpus}\n{nmi}")
}

/// QEMU's `-monitor` argument: the human monitor on a Unix socket at
/// `path`, which the runner asks where a frozen host's vCPUs are; none
/// when the path is too long for a socket address.
fn monitor_arg(path: &Path) -> String {
    // sun_path holds 108 bytes with the terminating NUL.
    if path.as_os_str().len() < 108 {
        format!("unix:{},server=on,wait=off", path.display())
    } else {
        "none".to_owned()
    }
}

/// Each vCPU's `RIP=` line (`EIP=` outside long mode; with its flags and
/// `HLT=`) from QEMU's `info registers -a`, twice 1 s apart: a vCPU
/// halted with interrupts on waits for an interrupt that never comes; one
/// whose RIP stays put while not halted spins. What went wrong when the
/// monitor did not answer.
fn frozen_cpus(monitor: &Path) -> String {
    let mut out = Vec::new();
    for sample in 0..2 {
        if sample > 0 {
            thread::sleep(Duration::from_secs(1));
        }
        match monitor_command(monitor, "info registers -a") {
            Ok(text) => {
                let lines: Vec<String> = text
                    .lines()
                    .filter(|l| {
                        l.starts_with("RIP=") || l.starts_with("EIP=") || l.starts_with("CPU#")
                    })
                    .map(str::to_owned)
                    .collect();
                if lines.is_empty() {
                    out.push("the monitor printed no registers in 10 s".to_owned());
                }
                out.extend(lines);
            }
            Err(e) => out.push(format!("the monitor did not answer: {e}")),
        }
    }
    out.join("\n")
}

/// Runs `command` on QEMU's human monitor at `path`; what it printed
/// (the banner, the echo and the answer, without terminal escapes) up to
/// the prompt after the answer, or all it printed in 10 s.
fn monitor_command(path: &Path, command: &str) -> io::Result<String> {
    const PROMPT: &[u8] = b"(qemu)";
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.write_all(format!("{command}\n").as_bytes())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    // One prompt follows the banner, the next one the answer.
    while Instant::now() < deadline
        && bytes.windows(PROMPT.len()).filter(|w| *w == PROMPT).count() < 2
    {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(without_escapes(&String::from_utf8_lossy(&bytes)))
}

/// `text` without ANSI escape sequences (`ESC [ ... letter`) and carriage
/// returns: the monitor's line editor echoes with them.
fn without_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                if chars.next() == Some('[') {
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}
