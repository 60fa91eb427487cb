//! Bad input end to end: every case gets a clear error and a non-zero exit,
//! never a panic (exit 101) or a hang; hostile guests end only their own VM.

mod common;

use common::*;
use guest_abi::{Op, Request};

/// Small guest so each case starts fast.
const SMALL: &[&str] = &["--memory", "64M", "--vcpus", "1"];

fn run_payload(name: &str, elf: &[u8], extra: &[&str]) -> std::process::Output {
    let dir = scratch(name);
    let path = write_file(&dir, "payload.elf", elf);
    let mut args = vec!["--payload", path.as_str()];
    args.extend_from_slice(SMALL);
    args.extend_from_slice(extra);
    if !extra.contains(&"--timeout") {
        args.extend_from_slice(&["--timeout", "20"]);
    }
    tiervisor_run(&args)
}

fn assert_setup_error(out: &std::process::Output, needle: &str) {
    assert_code(out, 2);
    let t = text(out);
    assert!(t.contains(needle), "expected {needle:?} in:\n{t}");
    assert!(!t.contains("panicked"), "{t}");
}

fn assert_guest_failed(out: &std::process::Output, needle: &str) {
    assert_code(out, 3);
    let t = text(out);
    assert!(t.contains(needle), "expected {needle:?} in:\n{t}");
    assert!(t.contains("vCPU 0"), "error names the vCPU:\n{t}");
    assert!(!t.contains("panicked"), "{t}");
}

#[test]
fn not_an_elf() {
    let out = run_payload("notelf", b"#!/bin/sh\necho hi\n", &[]);
    assert_setup_error(&out, "not an ELF file");
}

#[test]
fn missing_payload_file() {
    let out = tiervisor_run(&["--payload", "/nonexistent/payload.elf"]);
    assert_setup_error(&out, "reading payload /nonexistent/payload.elf");
}

#[test]
fn wrong_machine() {
    let out = run_payload("arm", &elf(LOAD, LOAD, &[0; 16], 183), &[]);
    assert_setup_error(&out, "not x86-64");
}

#[test]
fn segment_outside_ram() {
    let out = run_payload("outside", &elf(1 << 30, 1 << 30, &[0x90; 16], 62), &[]);
    assert_setup_error(&out, "outside guest RAM");
}

#[test]
fn segment_over_page_tables() {
    let out = run_payload("pagetables", &elf(0x1_0000, 0x1_0000, &[0x90; 16], 62), &[]);
    assert_setup_error(&out, "page tables");
}

#[test]
fn memory_not_a_multiple_of_frame_size() {
    let out = tiervisor_run(&[
        "--memory",
        "65M",
        "--tier",
        "name=a,backend=memfd,size=128M",
    ]);
    assert_setup_error(&out, "multiple of the frame size");
}

/// One size grammar: `GB` is refused as ambiguous on `--memory` and in a
/// tier spec alike, and a fraction that comes to whole bytes is a size.
#[test]
fn decimal_units_are_refused_and_fractions_taken() {
    let out = tiervisor_run(&["--memory", "1GB"]);
    assert_setup_error(&out, "'1GB' is ambiguous");
    let out = tiervisor_run(&[
        "--memory",
        "64M",
        "--tier",
        "name=a,backend=memfd,size=64MB",
    ]);
    assert_setup_error(&out, "'64MB' is ambiguous");
    let out = tiervisor_run(&["--memory", "0.1K"]);
    assert_setup_error(&out, "not a whole number of bytes");
    // 64.5 MiB is a size, but not whole 2 MiB frames: refused for that,
    // not for its syntax.
    let out = tiervisor_run(&[
        "--memory",
        "64.5M",
        "--tier",
        "name=a,backend=memfd,size=0.125G",
    ]);
    assert_setup_error(&out, "multiple of the frame size");
}

/// More vCPUs than the host has CPUs run, with a warning naming both.
#[test]
fn more_vcpus_than_host_cpus_are_warned_about() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let vcpus = (cpus + 1).to_string();
    let out = tiervisor_run(&[
        "--vcpus",
        &vcpus,
        "--memory",
        "64M",
        "--workload",
        "idle:phases=1,seconds=0.1",
    ]);
    assert_code(&out, 0);
    let t = text(&out);
    let expected = format!("warning: {vcpus} vCPUs on a host with {cpus} CPUs");
    assert!(t.contains(&expected), "expected {expected:?} in:\n{t}");
}

#[test]
fn tiers_too_small() {
    let out = tiervisor_run(&[
        "--memory",
        "256M",
        "--tier",
        "name=dram,backend=memfd,size=64M",
        "--tier",
        "name=slow,backend=memfd,size=64M",
    ]);
    assert_setup_error(&out, "too small");
}

#[test]
fn unknown_workload() {
    let out = tiervisor_run(&["--workload", "bogus", "--memory", "64M"]);
    assert_setup_error(&out, "bogus");
}

#[test]
fn bad_workload_arguments() {
    let out = tiervisor_run(&["--workload", "hotset:hot-frac=7", "--memory", "64M"]);
    assert_setup_error(&out, "hot-frac");
    let out = tiervisor_run(&["--workload", "memcheck:size=1G", "--memory", "64M"]);
    assert_code(&out, 2);
}

#[test]
fn malformed_tier() {
    for spec in [
        "backend=memfd,size=1G",
        "name=a,backend=floppy,size=1G",
        "name=a,backend=memfd,size=lots",
        "name=a,backend=file",
    ] {
        let out = tiervisor_run(&["--tier", spec]);
        assert_code(&out, 2);
        assert!(text(&out).contains("--tier"), "{}", text(&out));
    }
}

#[test]
fn zero_vcpus() {
    let out = tiervisor_run(&["--vcpus", "0", "--memory", "64M"]);
    assert_setup_error(&out, "vCPU count 0");
}

#[test]
fn hypercall_address_outside_ram() {
    let elf = hypercall_payload_at(0xf000_0000, Request::new(Op::Exit, [0; 4]), false, &[]);
    let out = run_payload("gpa", &elf, &[]);
    assert_guest_failed(&out, "outside guest RAM");
}

#[test]
fn hypercall_huge_length() {
    let elf = hypercall_payload(Request::new(Op::Log, [REQUEST, 1 << 63, 0, 0]), false, &[]);
    let out = run_payload("len", &elf, &[]);
    assert_guest_failed(&out, "length 9223372036854775808 exceeds");
}

#[test]
fn hypercall_unknown_op() {
    let mut req = Request::new(Op::Log, [0; 4]);
    req.op = 0xdead;
    let out = run_payload("op", &hypercall_payload(req, false, &[]), &[]);
    assert_guest_failed(&out, "unknown hypercall op 57005");
}

#[test]
fn hypercall_log_flood() {
    let msg = b"flood";
    let req = Request::new(
        Op::Log,
        [REQUEST + Request::SIZE as u64, msg.len() as u64, 0, 0],
    );
    let out = run_payload(
        "flood",
        &hypercall_payload(req, true, msg),
        &["--timeout", "120"],
    );
    assert_guest_failed(&out, "too many log calls (flood)");
    let t = text(&out);
    assert_eq!(
        t.matches("[guest vcpu0] flood").count(),
        1000,
        "log lines are capped"
    );
}

#[test]
fn guest_crash_names_vcpu_and_rip() {
    // `ud2` at the entry point: #UD with no IDT is a triple fault.
    let out = run_payload("ud2", &elf(LOAD, LOAD, &[0x0f, 0x0b], 62), &[]);
    assert_guest_failed(&out, "triple fault");
    assert!(text(&out).contains("RIP 0x400000"), "{}", text(&out));
}

#[test]
fn guest_that_spins_is_stopped_by_timeout() {
    let out = run_payload(
        "spin",
        &elf(LOAD, LOAD, &[0xeb, 0xfe], 62),
        &["--timeout", "1"],
    );
    assert_code(&out, 4);
    assert!(text(&out).contains("timed out"));
}

#[test]
fn guest_exit_code_is_reported() {
    let out = run_payload(
        "exit7",
        &hypercall_payload(Request::new(Op::Exit, [7, 0, 0, 0]), false, &[]),
        &[],
    );
    assert_code(&out, 1);
    assert!(
        text(&out).contains("exited with code 7 on vCPU 0"),
        "{}",
        text(&out)
    );
}

#[test]
fn shuffle_needs_a_migrator() {
    let out = tiervisor_run(&["--shuffle", "10", "--memory", "64M"]);
    assert_setup_error(&out, "--shuffle needs --migrator");
}

#[test]
fn kernel_migrator_needs_shared_numa_backing() {
    let out = tiervisor_run(&["--migrator", "kernel", "--memory", "64M"]);
    assert_code(&out, 2);
    assert!(
        text(&out).contains("shared-numa") || text(&out).contains("SharedNuma"),
        "{}",
        text(&out)
    );
}

#[test]
fn unknown_migrator() {
    let out = tiervisor_run(&["--migrator", "teleport"]);
    assert_code(&out, 2);
    assert!(
        text(&out).contains("unknown migrator 'teleport'"),
        "{}",
        text(&out)
    );
}

/// `tiervisor run` of a one-second idle guest on `tiers` with the remap
/// migrator and the options `extra`.
fn run_idle(tiers: [&str; 2], extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--workload",
        "idle:seconds=1",
        "--memory",
        "64M",
        "--vcpus",
        "1",
        "--migrator",
        "remap",
        "--tier",
        tiers[0],
        "--tier",
        tiers[1],
        "--timeout",
        "20",
    ];
    args.extend_from_slice(extra);
    tiervisor_run(&args)
}

/// Two 32 MiB memfd tiers.
const MEMFD_TIERS: [&str; 2] = [
    "name=fast,backend=memfd,size=32M",
    "name=slow,backend=memfd,size=32M",
];

/// The damon tracker refuses tiers whose pages DAMON cannot see (hugetlb
/// pages are not on the LRU), and a host whose DAMON another program owns
/// (the development machines' platform kdamond): exit 2 with the reason.
#[test]
fn damon_tracker_refusals_say_why() {
    let dir = scratch("damon-policy");
    let policy = write_file(
        &dir,
        "policy.json",
        br#"{"tracker": "damon", "fast_quota": {"max_bytes": 33554432}}"#,
    );
    let run = |tiers: [&str; 2]| run_idle(tiers, &["--policy", &policy]);
    let out = run([
        "name=fast,backend=memfd,size=32M,hugetlb=on",
        "name=slow,backend=memfd,size=32M,hugetlb=on",
    ]);
    assert_setup_error(&out, "tier 'fast' is hugetlb");
    let out = run(MEMFD_TIERS);
    let t = text(&out);
    if out.status.code() == Some(0) {
        // A host whose DAMON this process may own (the tiered host).
        return;
    }
    assert_code(&out, 2);
    assert!(
        [
            "DAMON is busy",
            "lacks DAMON",
            "no damon:damon_aggregated",
            "hides page frame"
        ]
        .iter()
        .any(|why| t.contains(why)),
        "no reason given:\n{t}"
    );
    assert!(!t.contains("panicked"), "{t}");
}

/// The access-log tracker on a host whose KVM lacks the access log (stock
/// kernels; `host-kernel/kvm-access-log` adds it): exit 2 with the reason
/// and what to load.
#[test]
fn access_log_tracker_refusal_says_why() {
    let dir = scratch("access-log-policy");
    let policy = write_file(
        &dir,
        "policy.json",
        br#"{"tracker": "access-log", "fast_quota": {"max_bytes": 33554432}}"#,
    );
    let out = run_idle(MEMFD_TIERS, &["--policy", &policy]);
    if out.status.code() == Some(0) {
        // A host whose KVM has the access log (the tiered host).
        return;
    }
    assert_setup_error(&out, "host kernel lacks the KVM access log");
    assert!(
        text(&out).contains("host-kernel/kvm-access-log"),
        "{}",
        text(&out)
    );
}

/// The kernel copy engine where the host-kernel module is not loaded (the
/// development machines): exit 2 with what to load; a back end it does
/// not have is refused by name.
#[test]
fn kernel_copy_engine_refusals_say_why() {
    if std::path::Path::new("/dev/tiercopy").exists() {
        eprintln!("skipped: /dev/tiercopy exists here");
        return;
    }
    let run = |engine: &str| run_idle(MEMFD_TIERS, &["--copy-engine", engine]);
    assert_setup_error(
        &run("kernel:dma"),
        "kernel copy engine: /dev/tiercopy not found (load host-kernel/tiercopy)",
    );
    let out = run("kernel:gpu");
    assert_code(&out, 2);
    assert!(
        text(&out).contains("unknown kernel copy back end \"gpu\""),
        "{}",
        text(&out)
    );
}
