//! Linux guests end to end, through the `tiervisor` binary.
//!
//! * Tiny hand-made kernels (a bzImage and a PVH ELF of a few instructions)
//!   check both boot protocols on KVM: the entry state (zero page in RSI,
//!   start info in EBX), the serial console and the i8042 reset that ends
//!   the VM. Bad kernels, initramfs and command lines get clear errors.
//! * With `TIERVISOR_TEST_VMLINUX=PATH` (an ELF vmlinux, booted through
//!   its PVH entry), a real kernel boots on 1 and 2 vCPUs until its
//!   console shows the banner, the command line with a marker and the e820
//!   map of guest RAM; with `TIERVISOR_TEST_KERNEL=PATH` (the bzImage it
//!   came from) the same through the 64-bit boot protocol, whose
//!   decompressor runs emulated here and takes minutes.
//!   `TIERVISOR_TEST_KERNEL_TIMEOUT` (seconds) overrides each boot's time
//!   limit. `scripts/test-all.sh` sets both from the Debian cloud kernel;
//!   without them those tests say so and pass.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;

const HDRS: u32 = 0x5372_6448;
const START_INFO_MAGIC: u32 = 0x336e_c578;

/// Machine code that prints `ok` (after checking the boot structure the
/// entry register points at) or `bad`, a newline, then resets through the
/// i8042. `check` compares a dword at the register's target with a magic.
fn reporting_code(check: &[u8]) -> Vec<u8> {
    let mut c = check.to_vec();
    // jne bad
    c.extend_from_slice(&[0x75, 0x0c]);
    // mov dx, 0x3f8; mov al,'o'; out dx,al; mov al,'k'; out dx,al; jmp end
    c.extend_from_slice(&[0x66, 0xba, 0xf8, 0x03, 0xb0, b'o', 0xee, 0xb0, b'k', 0xee]);
    c.extend_from_slice(&[0xeb, 0x0d]);
    // bad: mov dx, 0x3f8; 'b','a','d'
    c.extend_from_slice(&[0x66, 0xba, 0xf8, 0x03, 0xb0, b'b', 0xee, 0xb0, b'a', 0xee]);
    c.extend_from_slice(&[0xb0, b'd', 0xee]);
    // end: mov al,'\n'; out dx,al; mov al,0xfe; out 0x64,al; hlt; jmp $
    c.extend_from_slice(&[0xb0, b'\n', 0xee, 0xb0, 0xfe, 0xe6, 0x64, 0xf4, 0xeb, 0xfe]);
    c
}

/// A bzImage whose 64-bit entry checks that RSI points at a zero page
/// (`HdrS` at +0x202).
fn tiny_bzimage(init_size: u32) -> Vec<u8> {
    let setup_sects = 4usize;
    let mut b = vec![0u8; (setup_sects + 1) * 512 + 0x1000];
    b[0x1f1] = setup_sects as u8;
    b[0x1fe..0x200].copy_from_slice(&0xaa55u16.to_le_bytes());
    b[0x202..0x206].copy_from_slice(&HDRS.to_le_bytes());
    b[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    b[0x211] = 1; // loaded high
    b[0x214..0x218].copy_from_slice(&0x10_0000u32.to_le_bytes());
    b[0x22c..0x230].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    b[0x230..0x234].copy_from_slice(&0x20_0000u32.to_le_bytes());
    b[0x234] = 1; // relocatable
    b[0x236..0x238].copy_from_slice(&1u16.to_le_bytes()); // XLF_KERNEL_64
    b[0x238..0x23c].copy_from_slice(&2047u32.to_le_bytes());
    b[0x258..0x260].copy_from_slice(&0x100_0000u64.to_le_bytes());
    b[0x260..0x264].copy_from_slice(&init_size.to_le_bytes());
    // cmp dword [rsi+0x202], "HdrS"
    let mut check = vec![0x81, 0xbe, 0x02, 0x02, 0x00, 0x00];
    check.extend_from_slice(&HDRS.to_le_bytes());
    let code = reporting_code(&check);
    let entry = (setup_sects + 1) * 512 + 0x200;
    b[entry..entry + code.len()].copy_from_slice(&code);
    b
}

/// An ELF vmlinux whose PVH entry (32-bit, paging off) checks that EBX
/// points at the start info (its magic).
fn tiny_pvh_elf() -> Vec<u8> {
    let paddr: u64 = 0x100_0000;
    // cmp dword [ebx], magic
    let mut check = vec![0x81, 0x3b];
    check.extend_from_slice(&START_INFO_MAGIC.to_le_bytes());
    let code = reporting_code(&check);
    let note = {
        let mut n = Vec::new();
        for v in [4u32, 4, 18] {
            n.extend_from_slice(&v.to_le_bytes());
        }
        n.extend_from_slice(b"Xen\0");
        n.extend_from_slice(&(paddr as u32).to_le_bytes());
        n
    };
    let data_off = 64 + 2 * 56;
    let mut b = vec![0u8; 64];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[6] = 1;
    b[16..18].copy_from_slice(&2u16.to_le_bytes());
    b[18..20].copy_from_slice(&62u16.to_le_bytes());
    b[24..32].copy_from_slice(&paddr.to_le_bytes());
    b[32..40].copy_from_slice(&64u64.to_le_bytes());
    b[52..54].copy_from_slice(&64u16.to_le_bytes());
    b[54..56].copy_from_slice(&56u16.to_le_bytes());
    b[56..58].copy_from_slice(&2u16.to_le_bytes());
    let phdr = |kind: u32, off: u64, addr: u64, size: u64| {
        let mut p = vec![0u8; 56];
        p[..4].copy_from_slice(&kind.to_le_bytes());
        p[4..8].copy_from_slice(&7u32.to_le_bytes());
        p[8..16].copy_from_slice(&off.to_le_bytes());
        p[16..24].copy_from_slice(&addr.to_le_bytes());
        p[24..32].copy_from_slice(&addr.to_le_bytes());
        p[32..40].copy_from_slice(&size.to_le_bytes());
        p[40..48].copy_from_slice(&size.to_le_bytes());
        p
    };
    let code_len = code.len() as u64;
    b.extend(phdr(1, data_off, paddr, code_len));
    b.extend(phdr(4, data_off + code_len, 0, note.len() as u64));
    b.extend(code);
    b.extend(note);
    b
}

#[test]
fn a_bzimage_enters_in_long_mode_with_the_zero_page_in_rsi() {
    let dir = scratch("linux-bz");
    let kernel = write_file(&dir, "bzImage", &tiny_bzimage(0x10_0000));
    let out = tiervisor_run(&[
        "--kernel",
        &kernel,
        "--memory",
        "64M",
        "--vcpus",
        "2",
        "--timeout",
        "60",
    ]);
    assert_code(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().next(),
        Some("ok")
    );
    assert!(
        text(&out).contains("guest reset itself on vCPU 0"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_pvh_elf_enters_in_protected_mode_with_the_start_info_in_ebx() {
    let dir = scratch("linux-pvh");
    let kernel = write_file(&dir, "vmlinux", &tiny_pvh_elf());
    let log = dir.join("console.log");
    let out = tiervisor_run(&[
        "--kernel",
        &kernel,
        "--memory",
        "64M",
        "--timeout",
        "60",
        "--console-log",
        log.to_str().unwrap(),
    ]);
    assert_code(&out, 0);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "ok\n");
    // The console went to the file, not stdout (whose report may say "ok").
    assert!(
        !String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == "ok")
    );
}

fn assert_setup_error(out: &std::process::Output, needle: &str) {
    assert_code(out, 2);
    let t = text(out);
    assert!(t.contains(needle), "expected {needle:?} in:\n{t}");
    assert!(!t.contains("panicked"), "{t}");
}

#[test]
fn bad_kernels_initramfs_and_command_lines_are_refused_before_boot() {
    let dir = scratch("linux-bad");
    let not_kernel = write_file(&dir, "script", b"#!/bin/sh\necho hi\n");
    let out = tiervisor_run(&["--kernel", &not_kernel, "--memory", "64M"]);
    assert_setup_error(&out, "neither a bzImage");

    let out = tiervisor_run(&["--kernel", "/nonexistent/vmlinuz", "--memory", "64M"]);
    assert_setup_error(&out, "reading kernel /nonexistent/vmlinuz");

    // Loaded at 16 MiB, it needs 256 MiB more to decompress.
    let big = write_file(&dir, "big", &tiny_bzimage(0x1000_0000));
    let out = tiervisor_run(&["--kernel", &big, "--memory", "64M"]);
    assert_setup_error(&out, "kernel needs guest RAM 0x1000000..0x11000000");

    let kernel = write_file(&dir, "bzImage", &tiny_bzimage(0x10_0000));
    let initramfs = dir.join("initramfs");
    std::fs::File::create(&initramfs)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let out = tiervisor_run(&[
        "--kernel",
        &kernel,
        "--initramfs",
        initramfs.to_str().unwrap(),
        "--memory",
        "64M",
    ]);
    assert_setup_error(&out, "initramfs of 67108864 bytes does not fit");

    let long = format!("console=ttyS0 {}", "x".repeat(3000));
    let out = tiervisor_run(&["--kernel", &kernel, "--cmdline", &long, "--memory", "64M"]);
    assert_setup_error(
        &out,
        "command line is 3014 bytes; this kernel accepts at most 2047",
    );
}

/// A real kernel's console, seen line by line.
struct Guest {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: Option<PathBuf>,
    seen: String,
    started: Instant,
}

impl Guest {
    fn boot(
        kernel: &str,
        vcpus: u32,
        memory: &str,
        cmdline: &str,
        log: Option<&Path>,
        extra: &[&str],
    ) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tiervisor"));
        cmd.args(["run", "--kernel", kernel, "--cmdline", cmdline])
            .args(["--memory", memory, "--vcpus", &vcpus.to_string()])
            .args(["--timeout", "600"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(path) = log {
            cmd.arg("--console-log").arg(path);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().expect("spawn tiervisor");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        for stream in [
            Box::new(stdout) as Box<dyn std::io::Read + Send>,
            Box::new(stderr),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Guest {
            child,
            lines,
            log: log.map(Path::to_path_buf),
            seen: String::new(),
            started,
        }
    }

    /// Waits until the console shows every needle; returns the seconds
    /// after start at which each first appeared.
    fn wait_for(&mut self, needles: &[String], limit: Duration) -> Vec<f64> {
        let mut found = vec![None; needles.len()];
        let deadline = self.started + limit;
        let mut exited = false;
        while found.iter().any(Option::is_none) {
            assert!(
                Instant::now() < deadline,
                "after {limit:?} the console lacks {:?}:\n{}",
                needles
                    .iter()
                    .zip(&found)
                    .filter(|(_, f)| f.is_none())
                    .map(|(n, _)| n)
                    .collect::<Vec<_>>(),
                self.seen
            );
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => exited = true,
            }
            let console = match &self.log {
                Some(path) => std::fs::read_to_string(path).unwrap_or_default(),
                None => self.seen.clone(),
            };
            let now = self.started.elapsed().as_secs_f64();
            for (f, needle) in found.iter_mut().zip(needles) {
                if f.is_none() && console.contains(needle.as_str()) {
                    *f = Some(now);
                }
            }
            assert!(
                !exited || found.iter().all(Option::is_some),
                "tiervisor exited early:\n{}\nconsole:\n{console}",
                self.seen
            );
        }
        found.into_iter().flatten().collect()
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        // Our own child, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which kernel image a test boots.
#[derive(Clone, Copy)]
enum Image {
    /// `TIERVISOR_TEST_VMLINUX`: ELF, PVH entry (~20 s here).
    Vmlinux,
    /// `TIERVISOR_TEST_KERNEL`: bzImage, 64-bit protocol (~140 s here).
    BzImage,
}

/// The kernel to boot and the time allowed, or `None` (with a message)
/// when no kernel is configured.
fn test_kernel(test: &str, image: Image) -> Option<(String, Duration)> {
    let (var, default_secs) = match image {
        Image::Vmlinux => ("TIERVISOR_TEST_VMLINUX", 120.0),
        // Under tiervisor's own 600 s `--timeout`, so a slow boot fails
        // on the console it lacks rather than on the VMM's exit.
        Image::BzImage => ("TIERVISOR_TEST_KERNEL", 550.0),
    };
    let Some(kernel) = std::env::var_os(var) else {
        eprintln!("{test}: skipped: set {var} (scripts/test-all.sh does)");
        return None;
    };
    let seconds = std::env::var("TIERVISOR_TEST_KERNEL_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_secs);
    Some((
        kernel.to_string_lossy().into_owned(),
        Duration::from_secs_f64(seconds),
    ))
}

/// Boots the test kernel with `extra` options and checks its console:
/// banner, command line with a marker, and the e820 map of the guest's
/// 256 MiB of RAM.
fn boot_real_kernel(test: &str, image: Image, vcpus: u32, to_file: bool, extra: &[&str]) {
    let Some((kernel, limit)) = test_kernel(test, image) else {
        return;
    };
    let memory_mib: u64 = 256;
    let marker = format!("tiervisor-marker={}-{vcpus}", std::process::id());
    let cmdline = format!("console=ttyS0 earlyprintk=serial,ttyS0,115200 {marker}");
    let dir = scratch(test);
    let log = to_file.then(|| dir.join("console.log"));
    let mut guest = Guest::boot(
        &kernel,
        vcpus,
        &format!("{memory_mib}M"),
        &cmdline,
        log.as_deref(),
        extra,
    );
    let mut needles = vec![
        "Linux version ".to_string(),
        format!("Command line: {cmdline}"),
        "BIOS-e820: [mem 0x0000000000000000-0x000000000009fbff] usable".into(),
        "BIOS-e820: [mem 0x000000000009fc00-0x00000000000fffff] reserved".into(),
        format!(
            "BIOS-e820: [mem 0x0000000000100000-0x{:016x}] usable",
            (memory_mib << 20) - 1
        ),
    ];
    if vcpus > 1 {
        // The kernel found our ACPI tables and, in the MADT, every vCPU
        // (it has no MP-table parser).
        needles.push("ACPI: RSDP 0x00000000000E0000".into());
        needles.push("ACPI: Using ACPI (MADT) for SMP configuration information".into());
        needles.push(format!("smpboot: Allowing {vcpus} CPUs"));
    }
    let at = guest.wait_for(&needles, limit);
    eprintln!(
        "{test}: {vcpus} vCPU(s): 'Linux version' after {:.1} s, 'Command line:' after {:.1} s",
        at[0], at[1]
    );
}

#[test]
fn a_real_kernel_boots_to_its_console_on_one_vcpu() {
    boot_real_kernel("linux-real-1", Image::Vmlinux, 1, false, &["--no-tiering"]);
}

/// The bzImage itself, through the 64-bit boot protocol and the kernel's
/// own decompressor (emulated here: minutes).
#[test]
fn a_real_bzimage_boots_to_its_console() {
    boot_real_kernel("linux-real-bz", Image::BzImage, 1, false, &["--no-tiering"]);
}

/// Two vCPUs, the console in a file, and the guest's frames moving between
/// tiers while it boots: tiering applies to Linux guests unchanged.
#[test]
fn a_real_kernel_boots_on_two_vcpus_while_its_frames_move() {
    boot_real_kernel(
        "linux-real-2",
        Image::Vmlinux,
        2,
        true,
        &["--no-tiering", "--migrator", "remap", "--shuffle", "20"],
    );
}
