//! The hypercall device: payload requests arrive as a 32-bit `out` to
//! [`guest_abi::HYPERCALL_PORT`] carrying the guest-physical address of a
//! [`guest_abi::Request`].
//!
//! Everything here is hostile input. Each request is bounds-checked (address
//! inside RAM and aligned, lengths limited, op known, values in range) and a
//! bad one ends the guest's own VM with an error naming what was wrong; the
//! VMM never panics or blocks on guest data. Log text is sanitized so a
//! guest cannot drive the operator's terminal with escape sequences.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use thiserror::Error;
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use guest_abi::{
    AccessRange, MAX_GROUND_TRUTH_RANGES, MAX_IDLE_MICROS, MAX_LOG_LEN, Op, Request, Status,
};
use guest_memory::migrate::HostWriteLog;

use crate::guest_state::{GuestState, PhaseReport};

/// Log lines printed per VM before further lines are only counted.
pub const LOG_LINE_LIMIT: u64 = 1000;
/// Log hypercalls per VM after which the guest is deemed to be flooding and
/// its VM ends. Each costs a VM exit (~45 µs under PVM), so an unbounded
/// flood would keep a VMM thread busy at the host's expense.
pub const LOG_CALL_LIMIT: u64 = 100_000;

/// Why a hypercall was refused; the VM ends with this error.
#[derive(Debug, Error, PartialEq)]
pub enum HypercallError {
    /// Port I/O to a port no device claims.
    #[error("port {direction} to unclaimed port {port:#x}")]
    UnclaimedPort {
        /// "out" or "in".
        direction: &'static str,
        /// The port.
        port: u16,
    },
    /// The `out` was not 32 bits wide.
    #[error("hypercall port written with {0} bytes (expected 4)")]
    BadWidth(usize),
    /// The request address is misaligned.
    #[error("request address {0:#x} is not 8-byte aligned")]
    Misaligned(u64),
    /// The request block lies outside guest RAM.
    #[error("request at {0:#x} is outside guest RAM")]
    RequestOutsideRam(u64),
    /// Unknown op number.
    #[error("unknown hypercall op {0}")]
    UnknownOp(u32),
    /// An argument was out of range.
    #[error("{op:?}: {what}")]
    BadArgument {
        /// The operation.
        op: Op,
        /// What was wrong.
        what: String,
    },
    /// A buffer the request points to lies outside guest RAM.
    #[error("{op:?}: buffer {gpa:#x}+{len:#x} is outside guest RAM")]
    BufferOutsideRam {
        /// The operation.
        op: Op,
        /// Buffer address.
        gpa: u64,
        /// Buffer length.
        len: u64,
    },
    /// A limit on stored results was reached.
    #[error("{op:?}: too many {what}")]
    LimitReached {
        /// The operation.
        op: Op,
        /// What overflowed.
        what: &'static str,
    },
}

/// What the vCPU does after a hypercall.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Resume the guest.
    Continue,
    /// The vCPU exited with this code.
    Exit(u64),
}

/// Callback that prints a sanitized guest log line.
pub type LogSink = Arc<dyn Fn(u32, &str) + Send + Sync>;

/// The hypercall device of one VM (shared by its vCPU threads).
#[derive(Clone)]
pub struct HypercallDevice {
    mem: GuestMemoryMmap,
    state: Arc<GuestState>,
    log: LogSink,
    writes: Arc<HostWriteLog>,
}

impl std::fmt::Debug for HypercallDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HypercallDevice").finish_non_exhaustive()
    }
}

impl HypercallDevice {
    /// A device over `mem` recording into `state`; its writes to guest
    /// memory are announced in `writes` (pre-copy migration reads it).
    pub fn new(
        mem: GuestMemoryMmap,
        state: Arc<GuestState>,
        log: LogSink,
        writes: Arc<HostWriteLog>,
    ) -> Self {
        HypercallDevice {
            mem,
            state,
            log,
            writes,
        }
    }

    /// Handles an `out` from `vcpu` to `port`.
    pub fn handle_out(&self, vcpu: u32, port: u16, data: &[u8]) -> Result<Outcome, HypercallError> {
        if port != guest_abi::HYPERCALL_PORT {
            return Err(HypercallError::UnclaimedPort {
                direction: "out",
                port,
            });
        }
        let raw: [u8; 4] = data
            .try_into()
            .map_err(|_| HypercallError::BadWidth(data.len()))?;
        let gpa = u64::from(u32::from_le_bytes(raw));
        if gpa % 8 != 0 {
            return Err(HypercallError::Misaligned(gpa));
        }
        let mut bytes = [0u8; Request::SIZE];
        self.mem
            .read_slice(&mut bytes, GuestAddress(gpa))
            .map_err(|_| HypercallError::RequestOutsideRam(gpa))?;
        let req = Request::decode(&bytes);
        let op = Op::from_u32(req.op).ok_or(HypercallError::UnknownOp(req.op))?;
        if let Some(p) = self.state.vcpus.get(vcpu as usize) {
            p.hypercalls.fetch_add(1, Ordering::Relaxed);
        }
        let outcome = self.dispatch(vcpu, op, &req.args)?;
        // The request was validated when read, so the status write is in RAM.
        let status = (Status::Ok as u32).to_le_bytes();
        let at = gpa + Request::STATUS_OFFSET;
        self.writes
            .write_section(at, status.len() as u64, || {
                self.mem.write_slice(&status, GuestAddress(at))
            })
            .map_err(|_| HypercallError::RequestOutsideRam(gpa))?;
        Ok(outcome)
    }

    fn dispatch(&self, vcpu: u32, op: Op, args: &[u64; 4]) -> Result<Outcome, HypercallError> {
        match op {
            Op::Log => self.log(vcpu, args[0], args[1]),
            Op::Report => {
                let report = PhaseReport {
                    vcpu,
                    phase: args[0],
                    ops: args[1],
                    bytes: args[2],
                    nanos: args[3],
                };
                if !self.state.add_report(report) {
                    return Err(HypercallError::LimitReached {
                        op,
                        what: "reports",
                    });
                }
                Ok(Outcome::Continue)
            }
            Op::Phase => {
                if !self.state.start_phase(vcpu, args[0]) {
                    return Err(HypercallError::LimitReached { op, what: "phases" });
                }
                Ok(Outcome::Continue)
            }
            Op::Progress => {
                if let Some(p) = self.state.vcpus.get(vcpu as usize) {
                    p.phase.store(args[0], Ordering::Relaxed);
                    p.ops.store(args[1], Ordering::Relaxed);
                }
                Ok(Outcome::Continue)
            }
            Op::Exit => Ok(Outcome::Exit(args[0])),
            Op::GroundTruth => self.ground_truth(args[0], args[1], args[2]),
            Op::Idle => {
                if !(1..=MAX_IDLE_MICROS).contains(&args[0]) {
                    return Err(HypercallError::BadArgument {
                        op,
                        what: format!("{} µs is outside 1..={MAX_IDLE_MICROS}", args[0]),
                    });
                }
                // The vCPU thread sleeps outside KVM_RUN; a stop request is
                // seen when it re-enters the run loop, within the cap.
                std::thread::sleep(Duration::from_micros(args[0]));
                Ok(Outcome::Continue)
            }
        }
    }

    fn log(&self, vcpu: u32, gpa: u64, len: u64) -> Result<Outcome, HypercallError> {
        let op = Op::Log;
        if len > MAX_LOG_LEN {
            return Err(HypercallError::BadArgument {
                op,
                what: format!("length {len} exceeds {MAX_LOG_LEN}"),
            });
        }
        let mut buf = vec![0u8; len as usize];
        self.mem
            .read_slice(&mut buf, GuestAddress(gpa))
            .map_err(|_| HypercallError::BufferOutsideRam { op, gpa, len })?;
        if self.state.log_printed.load(Ordering::Relaxed) >= LOG_LINE_LIMIT {
            let suppressed = self.state.log_suppressed.fetch_add(1, Ordering::Relaxed) + 1;
            if LOG_LINE_LIMIT + suppressed > LOG_CALL_LIMIT {
                return Err(HypercallError::LimitReached {
                    op,
                    what: "log calls (flood)",
                });
            }
            return Ok(Outcome::Continue);
        }
        self.state.log_printed.fetch_add(1, Ordering::Relaxed);
        (self.log)(vcpu, &sanitize(&buf));
        Ok(Outcome::Continue)
    }

    fn ground_truth(&self, gpa: u64, count: u64, phase: u64) -> Result<Outcome, HypercallError> {
        let op = Op::GroundTruth;
        let bad = |what: String| HypercallError::BadArgument { op, what };
        if count == 0 || count > MAX_GROUND_TRUTH_RANGES {
            return Err(bad(format!(
                "count {count} not in 1..={MAX_GROUND_TRUTH_RANGES}"
            )));
        }
        let len = count * AccessRange::SIZE as u64;
        let mut buf = vec![0u8; len as usize];
        self.mem
            .read_slice(&mut buf, GuestAddress(gpa))
            .map_err(|_| HypercallError::BufferOutsideRam { op, gpa, len })?;
        let mut ranges = Vec::with_capacity(count as usize);
        let mut total = 0.0;
        for chunk in buf.chunks_exact(AccessRange::SIZE) {
            let raw: &[u8; AccessRange::SIZE] =
                chunk.try_into().map_err(|_| bad("short entry".into()))?;
            let r = AccessRange::decode(raw);
            let inside = r.len > 0
                && r.gpa.checked_add(r.len).is_some()
                && usize::try_from(r.len)
                    .is_ok_and(|len| self.mem.check_range(GuestAddress(r.gpa), len));
            if !inside {
                return Err(bad(format!(
                    "range {:#x}+{:#x} is not inside guest RAM",
                    r.gpa, r.len
                )));
            }
            if !r.weight.is_finite() || r.weight < 0.0 {
                return Err(bad(format!(
                    "weight {} is not a finite non-negative number",
                    r.weight
                )));
            }
            if !(0.0..=1.0).contains(&r.write_fraction) {
                return Err(bad(format!(
                    "write fraction {} not in [0, 1]",
                    r.write_fraction
                )));
            }
            total += r.weight;
            ranges.push(r);
        }
        // A zero sum describes a phase without accesses (an idle guest).
        if !total.is_finite() {
            return Err(bad("weights sum to infinity".into()));
        }
        if !self.state.set_ground_truth(phase, ranges) {
            return Err(HypercallError::LimitReached { op, what: "phases" });
        }
        Ok(Outcome::Continue)
    }
}

/// Guest text made safe for a terminal: invalid UTF-8 replaced, control
/// characters (escape sequences, carriage returns) shown as `\u{..}`.
pub fn sanitize(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches('\n');
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\t' {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn device() -> (HypercallDevice, Arc<GuestState>, Arc<Mutex<Vec<String>>>) {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 1 << 20)]).unwrap();
        let state = Arc::new(GuestState::new(2));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let log: LogSink = Arc::new(move |_, l| sink.lock().unwrap().push(l.to_string()));
        let writes = Arc::new(HostWriteLog::new(1 << 20));
        (
            HypercallDevice::new(mem, state.clone(), log, writes),
            state,
            lines,
        )
    }

    fn call(dev: &HypercallDevice, gpa: u64, req: Request) -> Result<Outcome, HypercallError> {
        dev.mem
            .write_slice(&req.encode(), GuestAddress(gpa))
            .unwrap();
        dev.handle_out(0, guest_abi::HYPERCALL_PORT, &(gpa as u32).to_le_bytes())
    }

    #[test]
    fn log_prints_sanitized_text_and_marks_status() {
        let (dev, _, lines) = device();
        dev.mem
            .write_slice(b"hi \x1b[2J\n", GuestAddress(0x100))
            .unwrap();
        let out = call(&dev, 0x1000, Request::new(Op::Log, [0x100, 8, 0, 0])).unwrap();
        assert_eq!(out, Outcome::Continue);
        assert_eq!(lines.lock().unwrap().as_slice(), ["hi \\u{1b}[2J"]);
        let mut status = [0u8; 4];
        dev.mem
            .read_slice(&mut status, GuestAddress(0x1004))
            .unwrap();
        assert_eq!(u32::from_le_bytes(status), Status::Ok as u32);
    }

    #[test]
    fn hostile_requests_are_refused() {
        let (dev, _, _) = device();
        let port = guest_abi::HYPERCALL_PORT;
        assert_eq!(
            dev.handle_out(0, 0x80, &[0; 4]),
            Err(HypercallError::UnclaimedPort {
                direction: "out",
                port: 0x80
            })
        );
        assert_eq!(
            dev.handle_out(0, port, &[0; 2]),
            Err(HypercallError::BadWidth(2))
        );
        assert_eq!(
            dev.handle_out(0, port, &3u32.to_le_bytes()),
            Err(HypercallError::Misaligned(3))
        );
        let far = 0xfff0_0000u32;
        assert_eq!(
            dev.handle_out(0, port, &far.to_le_bytes()),
            Err(HypercallError::RequestOutsideRam(u64::from(far)))
        );
        // Straddles the end of RAM.
        assert_eq!(
            dev.handle_out(0, port, &((1u32 << 20) - 8).to_le_bytes()),
            Err(HypercallError::RequestOutsideRam((1 << 20) - 8))
        );
        let mut unknown = Request::new(Op::Log, [0; 4]);
        unknown.op = 99;
        assert_eq!(
            call(&dev, 0x1000, unknown),
            Err(HypercallError::UnknownOp(99))
        );
        assert!(matches!(
            call(&dev, 0x1000, Request::new(Op::Log, [0x100, 1 << 63, 0, 0])),
            Err(HypercallError::BadArgument { op: Op::Log, .. })
        ));
        for micros in [0, MAX_IDLE_MICROS + 1, u64::MAX] {
            assert!(matches!(
                call(&dev, 0x1000, Request::new(Op::Idle, [micros, 0, 0, 0])),
                Err(HypercallError::BadArgument { op: Op::Idle, .. })
            ));
        }
        assert!(matches!(
            call(
                &dev,
                0x1000,
                Request::new(Op::Log, [u64::MAX - 4, 16, 0, 0])
            ),
            Err(HypercallError::BufferOutsideRam { .. })
        ));
        assert!(matches!(
            call(
                &dev,
                0x1000,
                Request::new(Op::GroundTruth, [0x100, MAX_GROUND_TRUTH_RANGES + 1, 0, 0])
            ),
            Err(HypercallError::BadArgument { .. })
        ));
    }

    #[test]
    fn ground_truth_is_validated() {
        let (dev, state, _) = device();
        let put = |r: AccessRange| {
            dev.mem
                .write_slice(&r.encode(), GuestAddress(0x200))
                .unwrap()
        };
        let good = AccessRange {
            gpa: 0x8000,
            len: 0x1000,
            weight: 1.0,
            write_fraction: 0.5,
        };
        put(good);
        call(
            &dev,
            0x1000,
            Request::new(Op::GroundTruth, [0x200, 1, 7, 0]),
        )
        .unwrap();
        assert_eq!(state.ground_truth()[0].phase, 7);
        // Zero weights describe a phase without accesses.
        put(AccessRange {
            weight: 0.0,
            ..good
        });
        call(
            &dev,
            0x1000,
            Request::new(Op::GroundTruth, [0x200, 1, 9, 0]),
        )
        .unwrap();
        for bad in [
            AccessRange {
                weight: f64::NAN,
                ..good
            },
            AccessRange {
                weight: -1.0,
                ..good
            },
            AccessRange {
                weight: f64::INFINITY,
                ..good
            },
            AccessRange {
                write_fraction: 2.0,
                ..good
            },
            AccessRange {
                gpa: u64::MAX,
                ..good
            },
            AccessRange {
                gpa: 1 << 20,
                ..good
            },
            AccessRange { len: 0, ..good },
        ] {
            put(bad);
            assert!(
                call(
                    &dev,
                    0x1000,
                    Request::new(Op::GroundTruth, [0x200, 1, 8, 0])
                )
                .is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn log_flood_is_counted_not_printed() {
        let (dev, state, lines) = device();
        dev.mem.write_slice(b"x", GuestAddress(0x100)).unwrap();
        for _ in 0..LOG_LINE_LIMIT + 50 {
            call(&dev, 0x1000, Request::new(Op::Log, [0x100, 1, 0, 0])).unwrap();
        }
        assert_eq!(lines.lock().unwrap().len() as u64, LOG_LINE_LIMIT);
        assert_eq!(state.log_suppressed.load(Ordering::Relaxed), 50);
        for _ in LOG_LINE_LIMIT + 50..LOG_CALL_LIMIT {
            call(&dev, 0x1000, Request::new(Op::Log, [0x100, 1, 0, 0])).unwrap();
        }
        assert!(matches!(
            call(&dev, 0x1000, Request::new(Op::Log, [0x100, 1, 0, 0])),
            Err(HypercallError::LimitReached { op: Op::Log, .. })
        ));
    }

    #[test]
    fn exit_and_reports() {
        let (dev, state, _) = device();
        call(
            &dev,
            0x1000,
            Request::new(Op::Report, [1, 100, 800, 1_000_000]),
        )
        .unwrap();
        assert_eq!(state.reports()[0].ops_per_sec(), 100_000.0);
        assert_eq!(
            call(&dev, 0x1000, Request::new(Op::Exit, [3, 0, 0, 0])),
            Ok(Outcome::Exit(3))
        );
    }

    #[test]
    fn idle_parks_the_vcpu_thread_for_the_time_asked() {
        let (dev, _, _) = device();
        let started = std::time::Instant::now();
        let out = call(&dev, 0x1000, Request::new(Op::Idle, [2000, 0, 0, 0]));
        assert_eq!(out, Ok(Outcome::Continue));
        assert!(started.elapsed() >= Duration::from_micros(2000));
    }
}
