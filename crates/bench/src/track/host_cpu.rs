//! Where a tracker's cost lands on the host, phase by phase: CPU time of
//! the process's threads other than the vCPUs (the collector, the fault
//! sampler's round thread, the userfault handler, the VMM), host-kernel
//! time of the vCPU threads (exits: write faults, minor faults, TLB-flush
//! kicks), and time the vCPU threads waited for a CPU.
//!
//! Process CPU comes from `getrusage(RUSAGE_SELF)`, which keeps the time
//! of threads that have exited (a stopped tracker's round thread); the
//! vCPU threads' figures from `/proc/self/task/*/{schedstat,stat}`.

use std::fs;
use std::io;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Clock ticks per second of `/proc` `stat` times (`USER_HZ`; 100 on
/// every Linux architecture this runs on).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSnapshot {
    at: Instant,
    /// CPU time of every thread of the process, exited ones included.
    process: Duration,
    /// CPU time of the vCPU threads.
    vcpu_run: Duration,
    /// Host-kernel time of the vCPU threads, seconds.
    vcpu_kernel: f64,
    /// Time the vCPU threads spent runnable, waiting for a CPU.
    vcpu_wait: Duration,
}

/// CPU use over one phase, as shares of one core (1.0 = one core busy
/// for the whole phase).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseCpu {
    /// Wall seconds of the phase.
    pub seconds: f64,
    /// Threads other than the vCPUs.
    pub host_threads: f64,
    /// vCPU threads in the host kernel.
    pub vcpu_kernel: f64,
    /// vCPU threads runnable but not running.
    pub vcpu_wait: f64,
}

impl PhaseCpu {
    /// The mean of `phases`; `None` without one.
    pub fn mean<'a>(phases: impl IntoIterator<Item = &'a PhaseCpu>) -> Option<PhaseCpu> {
        let mut sum = PhaseCpu {
            seconds: 0.0,
            host_threads: 0.0,
            vcpu_kernel: 0.0,
            vcpu_wait: 0.0,
        };
        let mut n = 0u32;
        for p in phases {
            sum.seconds += p.seconds;
            sum.host_threads += p.host_threads;
            sum.vcpu_kernel += p.vcpu_kernel;
            sum.vcpu_wait += p.vcpu_wait;
            n += 1;
        }
        let n = f64::from(n);
        (n > 0.0).then(|| PhaseCpu {
            seconds: sum.seconds / n,
            host_threads: sum.host_threads / n,
            vcpu_kernel: sum.vcpu_kernel / n,
            vcpu_wait: sum.vcpu_wait / n,
        })
    }
}

impl CpuSnapshot {
    /// The counters now.
    pub fn now() -> io::Result<Self> {
        let at = Instant::now();
        let mut snapshot = CpuSnapshot {
            at,
            process: process_cpu()?,
            vcpu_run: Duration::ZERO,
            vcpu_kernel: 0.0,
            vcpu_wait: Duration::ZERO,
        };
        for entry in fs::read_dir("/proc/self/task")? {
            let task = entry?.path();
            // A thread that exits meanwhile has no files left: skip it.
            let Ok(comm) = fs::read_to_string(task.join("comm")) else {
                continue;
            };
            if !is_vcpu(comm.trim()) {
                continue;
            }
            let (Ok(schedstat), Ok(stat)) = (
                fs::read_to_string(task.join("schedstat")),
                fs::read_to_string(task.join("stat")),
            ) else {
                continue;
            };
            let (run, wait) = parse_schedstat(&schedstat).ok_or_else(|| bad("schedstat"))?;
            snapshot.vcpu_run += run;
            snapshot.vcpu_wait += wait;
            snapshot.vcpu_kernel += parse_stime(&stat).ok_or_else(|| bad("stat"))?;
        }
        Ok(snapshot)
    }

    /// CPU use from `earlier` to this snapshot; `None` if the vCPU
    /// threads' counters went back (a vCPU thread exited in between).
    pub fn since(&self, earlier: &CpuSnapshot) -> Option<PhaseCpu> {
        let seconds = self.at.checked_duration_since(earlier.at)?.as_secs_f64();
        let vcpu_run = self.vcpu_run.checked_sub(earlier.vcpu_run)?;
        let vcpu_wait = self.vcpu_wait.checked_sub(earlier.vcpu_wait)?;
        let vcpu_kernel = self.vcpu_kernel - earlier.vcpu_kernel;
        if seconds <= 0.0 || vcpu_kernel < 0.0 {
            return None;
        }
        let process = self.process.saturating_sub(earlier.process);
        let host = process.saturating_sub(vcpu_run);
        Some(PhaseCpu {
            seconds,
            host_threads: host.as_secs_f64() / seconds,
            vcpu_kernel: vcpu_kernel / seconds,
            vcpu_wait: vcpu_wait.as_secs_f64() / seconds,
        })
    }
}

/// The VMM names its vCPU threads `vcpu0`, `vcpu1`, ...
fn is_vcpu(comm: &str) -> bool {
    comm.strip_prefix("vcpu")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// User plus system CPU time of the whole process.
fn process_cpu() -> io::Result<Duration> {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage that outlives the call;
    // getrusage writes only into it.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let of = |t: libc::timeval| {
        Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_usec).unwrap_or(0).saturating_mul(1000),
        )
    };
    Ok(of(usage.ru_utime) + of(usage.ru_stime))
}

/// Run and wait time from a `schedstat` line (`run_ns wait_ns slices`).
fn parse_schedstat(text: &str) -> Option<(Duration, Duration)> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let run = fields.next()??;
    let wait = fields.next()??;
    Some((Duration::from_nanos(run), Duration::from_nanos(wait)))
}

/// System time (`stime`, field 15) of a `stat` line, seconds. The name
/// (field 2) may hold spaces and parentheses, so fields are counted from
/// its last `)`.
fn parse_stime(text: &str) -> Option<f64> {
    let rest = &text[text.rfind(')')? + 1..];
    // After the name: state is field 3, so stime is the 13th from here.
    let stime: u64 = rest.split_whitespace().nth(12)?.parse().ok()?;
    Some(stime as f64 / TICKS_PER_SECOND)
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("unreadable {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_lines() {
        assert_eq!(
            parse_schedstat("2000000000 500000 77\n"),
            Some((Duration::from_secs(2), Duration::from_micros(500)))
        );
        assert_eq!(parse_schedstat("12"), None);
        let stat = "4242 (vcpu 1) x) R 1 2 3 4 5 6 7 8 9 10 250 37 0 0 20 0 3 0";
        assert_eq!(parse_stime(stat), Some(0.37));
        assert_eq!(parse_stime("4242 (vcpu1) R 1 2"), None);
    }

    #[test]
    fn mean_of_phases() {
        let phase = |x: f64| PhaseCpu {
            seconds: 2.0,
            host_threads: x,
            vcpu_kernel: x / 2.0,
            vcpu_wait: 0.0,
        };
        let m = PhaseCpu::mean(&[phase(0.1), phase(0.3)]).unwrap();
        assert!((m.host_threads - 0.2).abs() < 1e-12 && (m.vcpu_kernel - 0.1).abs() < 1e-12);
        assert_eq!(m.seconds, 2.0);
        assert_eq!(PhaseCpu::mean(&[]), None);
    }

    #[test]
    fn vcpu_threads_by_name() {
        assert!(is_vcpu("vcpu0") && is_vcpu("vcpu12"));
        assert!(!is_vcpu("vcpu") && !is_vcpu("vcpu-x") && !is_vcpu("fault-sampler"));
    }

    #[test]
    fn a_busy_thread_shows_as_host_cpu() {
        let before = CpuSnapshot::now().unwrap();
        // 200 ms of this thread's own CPU time, however long that takes
        // on a busy host.
        let start = access_track::thread_cpu_time().unwrap();
        let mut x = 0u64;
        while access_track::thread_cpu_time().unwrap() - start < Duration::from_millis(200) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        let cpu = CpuSnapshot::now().unwrap().since(&before).unwrap();
        assert!(cpu.seconds >= 0.2, "{cpu:?}");
        // This thread is no vCPU: its 200 ms count as host CPU (less the
        // tick-granular rounding of /proc's counters).
        assert!(cpu.host_threads * cpu.seconds >= 0.15, "{cpu:?}");
        assert_eq!(cpu.vcpu_kernel, 0.0);
        assert_eq!(cpu.vcpu_wait, 0.0);
    }
}
