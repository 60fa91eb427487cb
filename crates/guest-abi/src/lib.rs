//! The ABI between tiervisor and its workload payloads.
//!
//! A payload is a static x86-64 ELF that the VMM starts on every vCPU in
//! 64-bit mode at CPL3 (see `docs/payload-abi.md`). At entry:
//!
//! * `rdi` = vCPU index, `rsi` = vCPU count, `rdx` = guest-physical address
//!   of the [`BootInfo`] block, `rsp` = top of this vCPU's stack minus 8
//!   (as if `call` had pushed a return address);
//! * all guest RAM is identity mapped (virtual = guest-physical) with
//!   user-accessible 2 MiB pages; interrupts are off, `RFLAGS.IOPL` = 3;
//! * SSE is enabled; there is no IDT, so any exception ends the VM.
//!
//! The payload talks to the VMM with hypercalls: it fills a [`Request`] in
//! guest memory and executes `out dx, eax` with `dx` = [`HYPERCALL_PORT`]
//! and `eax` = the request's guest-physical address. The VMM validates the
//! request, performs it and writes a [`Status`] back into the request.
//!
//! This crate holds only data definitions and their byte encoding, so that
//! the VMM decodes hostile guest bytes without `unsafe`.

#![no_std]

/// I/O port the payload writes a request's guest-physical address to.
pub const HYPERCALL_PORT: u16 = 0x0510;

/// Lowest guest-physical address a payload segment may be loaded at.
pub const PAYLOAD_MIN_LOAD_ADDR: u64 = 4 << 20;

/// Magic value at the start of [`BootInfo`] (`"TIERBOOT"`).
pub const BOOT_INFO_MAGIC: u64 = u64::from_le_bytes(*b"TIERBOOT");

/// Version of this ABI; bumped on any incompatible change.
pub const ABI_VERSION: u32 = 3;

/// Largest number of RAM ranges described in [`BootInfo`].
pub const MAX_RANGES: usize = 4;

/// Longest argument string the VMM passes to a payload, in bytes.
pub const MAX_ARGS_LEN: usize = 4096;

/// Longest log message the VMM accepts, in bytes.
pub const MAX_LOG_LEN: u64 = 1024;

/// Largest number of [`AccessRange`] entries in one ground-truth descriptor.
pub const MAX_GROUND_TRUTH_RANGES: u64 = 1 << 16;

/// Longest one `Idle` hypercall may park a vCPU, in microseconds: short
/// enough that a stop request is seen within a few milliseconds.
pub const MAX_IDLE_MICROS: u64 = 10_000;

/// A guest-physical address range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpaRange {
    /// First guest-physical address.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
}

impl GpaRange {
    /// One past the last address (saturating).
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.len)
    }
}

/// Boot information the VMM writes into guest memory before the first vCPU
/// runs. Encoded little-endian with the layout of [`BootInfo::encode`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BootInfo {
    /// [`ABI_VERSION`] of the VMM that wrote the block.
    pub version: u32,
    /// Number of vCPUs started.
    pub vcpu_count: u32,
    /// Guest TSC frequency in kHz (0 if unknown).
    pub tsc_khz: u64,
    /// Number of valid entries in `ram`.
    pub ram_count: u32,
    /// All guest RAM.
    pub ram: [GpaRange; MAX_RANGES],
    /// Number of valid entries in `free`.
    pub free_count: u32,
    /// RAM the payload may use for data: RAM minus page tables, boot info,
    /// the loaded image and the vCPU stacks. Each range is 2 MiB aligned.
    pub free: [GpaRange; MAX_RANGES],
    /// Guest-physical address of the argument string (UTF-8, no NUL).
    pub args_gpa: u64,
    /// Length of the argument string in bytes.
    pub args_len: u64,
    /// Guest-physical address of the stop word: the VMM sets it non-zero to
    /// ask the payload to finish its current phase, verify what it must and
    /// exit 0 (a graceful shutdown). 0 if the VMM offers none.
    pub stop_gpa: u64,
}

impl BootInfo {
    /// Encoded size in bytes.
    pub const SIZE: usize = 8 + 4 + 4 + 8 + 8 + MAX_RANGES * 16 + 8 + MAX_RANGES * 16 + 24;

    /// Encodes the block, magic first.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut w = Writer::new([0u8; Self::SIZE]);
        w.u64(BOOT_INFO_MAGIC);
        w.u32(self.version);
        w.u32(self.vcpu_count);
        w.u64(self.tsc_khz);
        w.u64(u64::from(self.ram_count));
        for r in &self.ram {
            w.u64(r.start);
            w.u64(r.len);
        }
        w.u64(u64::from(self.free_count));
        for r in &self.free {
            w.u64(r.start);
            w.u64(r.len);
        }
        w.u64(self.args_gpa);
        w.u64(self.args_len);
        w.u64(self.stop_gpa);
        w.finish()
    }

    /// Decodes a block; `None` if the magic or a count is wrong.
    pub fn decode(bytes: &[u8; Self::SIZE]) -> Option<Self> {
        let mut r = Reader::new(bytes);
        if r.u64() != BOOT_INFO_MAGIC {
            return None;
        }
        let mut info = BootInfo {
            version: r.u32(),
            vcpu_count: r.u32(),
            tsc_khz: r.u64(),
            ..Default::default()
        };
        info.ram_count = u32::try_from(r.u64()).ok()?;
        for slot in &mut info.ram {
            *slot = GpaRange {
                start: r.u64(),
                len: r.u64(),
            };
        }
        info.free_count = u32::try_from(r.u64()).ok()?;
        for slot in &mut info.free {
            *slot = GpaRange {
                start: r.u64(),
                len: r.u64(),
            };
        }
        info.args_gpa = r.u64();
        info.args_len = r.u64();
        info.stop_gpa = r.u64();
        if info.ram_count as usize > MAX_RANGES || info.free_count as usize > MAX_RANGES {
            return None;
        }
        Some(info)
    }

    /// The valid RAM ranges.
    pub fn ram(&self) -> &[GpaRange] {
        &self.ram[..(self.ram_count as usize).min(MAX_RANGES)]
    }

    /// The valid free ranges.
    pub fn free(&self) -> &[GpaRange] {
        &self.free[..(self.free_count as usize).min(MAX_RANGES)]
    }
}

/// Hypercall operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    /// Print a message: `args[0]` = GPA of UTF-8 bytes, `args[1]` = length
    /// (at most [`MAX_LOG_LEN`]).
    Log = 1,
    /// Report a finished phase: `args[0]` = phase, `args[1]` = operations,
    /// `args[2]` = bytes touched, `args[3]` = guest-measured nanoseconds.
    Report = 2,
    /// A phase starts: `args[0]` = phase index.
    Phase = 3,
    /// This vCPU is done: `args[0]` = exit code (0 = success). The VM ends
    /// when every vCPU has exited, or at once on a non-zero code.
    Exit = 4,
    /// Harness-only description of the access distribution of a phase:
    /// `args[0]` = GPA of an array of [`AccessRange`], `args[1]` = count (at
    /// most [`MAX_GROUND_TRUTH_RANGES`]), `args[2]` = phase.
    GroundTruth = 5,
    /// Live progress: `args[0]` = phase, `args[1]` = operations done in the
    /// phase so far. Payloads send it a few times a second at most.
    Progress = 6,
    /// The vCPU has nothing to do: the VMM parks its thread for `args[0]`
    /// microseconds (1 ..= [`MAX_IDLE_MICROS`]) before resuming it, giving
    /// the host CPU back the way `HLT` with a timer would.
    Idle = 7,
}

impl Op {
    /// Decodes an operation number.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Op::Log,
            2 => Op::Report,
            3 => Op::Phase,
            4 => Op::Exit,
            5 => Op::GroundTruth,
            6 => Op::Progress,
            7 => Op::Idle,
            _ => return None,
        })
    }
}

/// Result the VMM writes into [`Request::status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Status {
    /// The request has not been handled (initial value).
    Pending = 0,
    /// Done.
    Ok = 1,
    /// An argument was out of range; the request had no effect.
    Invalid = 2,
}

/// A hypercall request block in guest memory (8-byte aligned, below 4 GiB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct Request {
    /// An [`Op`] number.
    pub op: u32,
    /// A [`Status`] number, written by the VMM.
    pub status: u32,
    /// Operation arguments.
    pub args: [u64; 4],
}

impl Request {
    /// Encoded size in bytes.
    pub const SIZE: usize = 40;
    /// Offset of the `status` field, the only field the VMM writes.
    pub const STATUS_OFFSET: u64 = 4;

    /// A request for `op` with `args`.
    pub fn new(op: Op, args: [u64; 4]) -> Self {
        Request {
            op: op as u32,
            status: Status::Pending as u32,
            args,
        }
    }

    /// Decodes a request.
    pub fn decode(bytes: &[u8; Self::SIZE]) -> Self {
        let mut r = Reader::new(bytes);
        Request {
            op: r.u32(),
            status: r.u32(),
            args: [r.u64(), r.u64(), r.u64(), r.u64()],
        }
    }

    /// Encodes a request.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut w = Writer::new([0u8; Self::SIZE]);
        w.u32(self.op);
        w.u32(self.status);
        for a in self.args {
            w.u64(a);
        }
        w.finish()
    }
}

/// One entry of a ground-truth descriptor: accesses fall into
/// `[gpa, gpa + len)` with probability `weight / sum(weights)`, uniformly
/// within the range, and `write_fraction` of them are writes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct AccessRange {
    /// First guest-physical address.
    pub gpa: u64,
    /// Length in bytes.
    pub len: u64,
    /// Relative access weight (finite, ≥ 0).
    pub weight: f64,
    /// Share of accesses that are writes, in `[0, 1]`.
    pub write_fraction: f64,
}

impl AccessRange {
    /// Encoded size in bytes.
    pub const SIZE: usize = 32;

    /// Decodes an entry.
    pub fn decode(bytes: &[u8; Self::SIZE]) -> Self {
        let mut r = Reader::new(bytes);
        AccessRange {
            gpa: r.u64(),
            len: r.u64(),
            weight: f64::from_bits(r.u64()),
            write_fraction: f64::from_bits(r.u64()),
        }
    }

    /// Encodes an entry.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut w = Writer::new([0u8; Self::SIZE]);
        w.u64(self.gpa);
        w.u64(self.len);
        w.u64(self.weight.to_bits());
        w.u64(self.write_fraction.to_bits());
        w.finish()
    }
}

/// Little-endian field writer over a fixed buffer.
struct Writer<const N: usize> {
    buf: [u8; N],
    pos: usize,
}

impl<const N: usize> Writer<N> {
    fn new(buf: [u8; N]) -> Self {
        Writer { buf, pos: 0 }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }

    fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }

    fn finish(self) -> [u8; N] {
        debug_assert_eq!(self.pos, N);
        self.buf
    }
}

/// Little-endian field reader over a fixed buffer.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn take<const K: usize>(&mut self) -> [u8; K] {
        let mut out = [0u8; K];
        out.copy_from_slice(&self.buf[self.pos..self.pos + K]);
        self.pos += K;
        out
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_layout_matches_encoding() {
        assert_eq!(core::mem::size_of::<Request>(), Request::SIZE);
        assert_eq!(core::mem::size_of::<AccessRange>(), AccessRange::SIZE);
        let req = Request::new(Op::GroundTruth, [1, 2, 3, u64::MAX]);
        assert_eq!(Request::decode(&req.encode()), req);
    }

    #[test]
    fn boot_info_round_trips() {
        let mut info = BootInfo {
            version: ABI_VERSION,
            vcpu_count: 2,
            tsc_khz: 2_000_000,
            ram_count: 1,
            free_count: 1,
            args_gpa: 0x3000,
            args_len: 6,
            stop_gpa: 0x2800,
            ..Default::default()
        };
        info.ram[0] = GpaRange {
            start: 0,
            len: 1 << 30,
        };
        info.free[0] = GpaRange {
            start: 8 << 20,
            len: (1 << 30) - (8 << 20),
        };
        let decoded = BootInfo::decode(&info.encode()).unwrap();
        assert_eq!(decoded, info);
        assert_eq!(decoded.ram().len(), 1);
    }

    #[test]
    fn boot_info_rejects_bad_magic_and_counts() {
        let mut bytes = BootInfo::default().encode();
        bytes[0] ^= 1;
        assert!(BootInfo::decode(&bytes).is_none());
        let info = BootInfo {
            ram_count: MAX_RANGES as u32 + 1,
            ..Default::default()
        };
        assert!(BootInfo::decode(&info.encode()).is_none());
    }

    #[test]
    fn unknown_ops_are_rejected() {
        assert_eq!(Op::from_u32(0), None);
        assert_eq!(Op::from_u32(7), Some(Op::Idle));
        assert_eq!(Op::from_u32(8), None);
        assert_eq!(Op::from_u32(u32::MAX), None);
        assert_eq!(Op::from_u32(4), Some(Op::Exit));
    }
}
