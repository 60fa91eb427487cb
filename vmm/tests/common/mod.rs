//! Helpers for end-to-end tests that drive the `tiervisor` binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use guest_abi::Request;

/// Runs `tiervisor run` with `args`.
pub fn tiervisor_run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tiervisor"))
        .arg("run")
        .args(args)
        .output()
        .expect("spawn tiervisor")
}

/// stdout + stderr as text.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts an exit code, showing the output on failure.
pub fn assert_code(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "output:\n{}", text(out));
}

/// A scratch directory unique to one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tiervisor-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `bytes` to `dir/name` and returns the path as a string.
pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

/// Load address of the test ELFs.
pub const LOAD: u64 = 0x40_0000;
/// Where a test ELF keeps its request block.
pub const REQUEST: u64 = LOAD + 0x100;

/// A static ELF with one RWX segment at `gpa` holding `data`, entry at `entry`.
pub fn elf(gpa: u64, entry: u64, data: &[u8], machine: u16) -> Vec<u8> {
    let mut b = vec![0u8; 64 + 56];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[6] = 1;
    b[16..18].copy_from_slice(&2u16.to_le_bytes());
    b[18..20].copy_from_slice(&machine.to_le_bytes());
    b[20..24].copy_from_slice(&1u32.to_le_bytes());
    b[24..32].copy_from_slice(&entry.to_le_bytes());
    b[32..40].copy_from_slice(&64u64.to_le_bytes());
    b[52..54].copy_from_slice(&64u16.to_le_bytes());
    b[54..56].copy_from_slice(&56u16.to_le_bytes());
    b[56..58].copy_from_slice(&1u16.to_le_bytes());
    let ph = 64;
    b[ph..ph + 4].copy_from_slice(&1u32.to_le_bytes());
    b[ph + 4..ph + 8].copy_from_slice(&7u32.to_le_bytes());
    b[ph + 8..ph + 16].copy_from_slice(&120u64.to_le_bytes());
    b[ph + 16..ph + 24].copy_from_slice(&gpa.to_le_bytes());
    b[ph + 24..ph + 32].copy_from_slice(&gpa.to_le_bytes());
    b[ph + 32..ph + 40].copy_from_slice(&(data.len() as u64).to_le_bytes());
    b[ph + 40..ph + 48].copy_from_slice(&(data.len() as u64).to_le_bytes());
    b[ph + 48..ph + 56].copy_from_slice(&0x1000u64.to_le_bytes());
    b.extend_from_slice(data);
    b
}

/// Machine code: `mov eax, gpa; mov dx, HYPERCALL_PORT; out dx, eax`,
/// repeated forever if `forever`, else followed by `hlt` (which faults at
/// CPL3 and so ends the VM if the hypercall returns).
pub fn hypercall_code(gpa: u32, forever: bool) -> Vec<u8> {
    let mut code = vec![0xb8];
    code.extend_from_slice(&gpa.to_le_bytes());
    code.extend_from_slice(&[0x66, 0xba]);
    code.extend_from_slice(&guest_abi::HYPERCALL_PORT.to_le_bytes());
    code.push(0xef);
    if forever {
        code.extend_from_slice(&[0xeb, 0xf4]); // jmp -12: back to `mov eax`
    } else {
        code.push(0xf4);
    }
    code
}

/// A payload that sends `request` (kept at [`REQUEST`]) to the VMM, once or
/// forever, with `extra` bytes placed after the request block.
pub fn hypercall_payload(request: Request, forever: bool, extra: &[u8]) -> Vec<u8> {
    hypercall_payload_at(REQUEST as u32, request, forever, extra)
}

/// Like [`hypercall_payload`], but the `out` carries `gpa` as the request
/// address (which may point anywhere).
pub fn hypercall_payload_at(gpa: u32, request: Request, forever: bool, extra: &[u8]) -> Vec<u8> {
    let mut data = hypercall_code(gpa, forever);
    data.resize((REQUEST - LOAD) as usize, 0x90);
    data.extend_from_slice(&request.encode());
    data.extend_from_slice(extra);
    elf(LOAD, LOAD, &data, 62)
}
