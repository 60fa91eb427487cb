//! The payload's main function, minus the raw machine bits: read the boot
//! info and argument string, parse and fit the workload, run it, report
//! errors and exit.

use core::fmt::Write;

use guest_abi::{BootInfo, MAX_ARGS_LEN, MAX_LOG_LEN, Op, Request};

use crate::ground_truth::GroundTruthArea;
use crate::message::MessageBuf;
use crate::number::ByteSize;
use crate::platform::{GuestMemory, Platform};
use crate::run::run_vcpu;
use crate::run_error::{EXIT_OK, RunError};
use crate::spec::Spec;
use crate::workload::{Region, Vcpu};

/// Runs the workload named by the boot info's argument string on this
/// vCPU (entry registers `vcpu`, `vcpus`, `boot_info_gpa`), logs any error,
/// sends `Exit` and returns the exit code it sent.
pub fn guest_main<P: Platform, M: GuestMemory>(
    platform: &P,
    memory: &M,
    vcpu: u64,
    vcpus: u64,
    boot_info_gpa: u64,
) -> u64 {
    let code = match setup_and_run(platform, memory, vcpu, vcpus, boot_info_gpa) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            log_fmt(platform, format_args!("{e}"));
            e.exit_code()
        }
    };
    // The VMM stops this vCPU on Exit; its status is of no further use.
    platform.hypercall(&mut Request::new(Op::Exit, [code, 0, 0, 0]));
    code
}

fn setup_and_run<P: Platform, M: GuestMemory>(
    platform: &P,
    memory: &M,
    vcpu: u64,
    vcpus: u64,
    boot_info_gpa: u64,
) -> Result<(), RunError> {
    let bad_boot = RunError::BadBootInfo { gpa: boot_info_gpa };
    let bytes = memory
        .bytes(boot_info_gpa, BootInfo::SIZE as u64)
        .ok_or(bad_boot)?;
    let info = bytes
        .try_into()
        .ok()
        .and_then(BootInfo::decode)
        .ok_or(bad_boot)?;
    if vcpus == 0 || vcpu >= vcpus || vcpus != u64::from(info.vcpu_count) {
        return Err(RunError::BadVcpu {
            vcpu,
            vcpus,
            boot_vcpus: info.vcpu_count,
        });
    }
    let bad_args = RunError::BadArgs { len: info.args_len };
    if info.args_len > MAX_ARGS_LEN as u64 {
        return Err(bad_args);
    }
    let args = memory
        .bytes(info.args_gpa, info.args_len)
        .and_then(|b| core::str::from_utf8(b).ok())
        .ok_or(bad_args)?;
    let spec = Spec::parse(args)?;
    let free = info.free().first().copied().ok_or(RunError::NoFreeMemory)?;
    let layout = spec.layout(free.len)?;
    let truth_gpa = free.start + layout.buffer_bytes;
    let unmapped = |gpa, len| RunError::Unmapped { gpa, len };
    let region = Region {
        buffer: memory
            .words(free.start, layout.buffer_bytes)
            .ok_or(unmapped(free.start, layout.buffer_bytes))?,
        buffer_gpa: free.start,
        ground_truth: GroundTruthArea::new(
            memory
                .words(truth_gpa, layout.ground_truth_bytes)
                .ok_or(unmapped(truth_gpa, layout.ground_truth_bytes))?,
            truth_gpa,
        ),
    };
    if vcpu == 0 {
        log_fmt(
            platform,
            format_args!(
                "{spec} on {vcpus} vcpus: buffer {:#x}+{}, ground truth at {truth_gpa:#x}",
                free.start,
                ByteSize(layout.buffer_bytes)
            ),
        );
    }
    let vcpu = Vcpu {
        index: vcpu as u32,
        count: info.vcpu_count,
        seed: spec.seed,
    };
    run_vcpu(platform, vcpu, &spec, &region)
}

/// Formats and logs one message (cut to the VMM's limit).
fn log_fmt<P: Platform>(platform: &P, args: core::fmt::Arguments<'_>) {
    let mut msg = MessageBuf::<{ MAX_LOG_LEN as usize }>::new();
    msg.write_fmt(args).ok();
    platform.log(msg.as_bytes());
}

#[cfg(test)]
mod tests {
    use guest_abi::{BootInfo, Op};

    use super::*;
    use crate::run_error::{EXIT_HYPERCALL_REJECTED, EXIT_SETUP_ERROR};
    use crate::test_support::{Event, FakeGuest, Recorder, logs, run_vm};

    fn single(guest: &FakeGuest) -> (u64, Vec<Event>) {
        let rec = Recorder::new(guest, Some(1_000_000));
        let code = guest_main(&rec, guest, 0, 1, guest.boot_info_gpa());
        (code, rec.events())
    }

    #[test]
    fn bad_workload_string_logs_and_exits_2() {
        let guest = FakeGuest::booted(4 << 20, 1, "hotset:hot-frac=2");
        let (code, events) = single(&guest);
        assert_eq!(code, EXIT_SETUP_ERROR);
        assert_eq!(
            logs(&events),
            ["workload: hotset: hot-frac=2 out of range: must be in [0, 1]"]
        );
        assert_eq!(events.last(), Some(&Event::Exit(EXIT_SETUP_ERROR)));
    }

    #[test]
    fn size_beyond_free_memory_exits_2() {
        let guest = FakeGuest::booted(4 << 20, 1, "stream:size=8M");
        let (code, events) = single(&guest);
        assert_eq!(code, EXIT_SETUP_ERROR);
        assert!(logs(&events)[0].contains("needs"), "{events:?}");
    }

    #[test]
    fn bad_boot_info_and_vcpus_exit_2() {
        let mut guest = FakeGuest::booted(4 << 20, 2, "stream");
        let rec = Recorder::new(&guest, None);
        // Registers say 3 vCPUs, boot info says 2.
        assert_eq!(
            guest_main(&rec, &guest, 0, 3, guest.boot_info_gpa()),
            EXIT_SETUP_ERROR
        );
        assert!(logs(&rec.events())[0].contains("bad vcpu index 0 of 3"));
        assert_eq!(
            guest_main(&rec, &guest, 2, 2, guest.boot_info_gpa()),
            EXIT_SETUP_ERROR
        );
        drop(rec);
        guest.corrupt_boot_magic();
        let rec = Recorder::new(&guest, None);
        assert_eq!(
            guest_main(&rec, &guest, 0, 2, guest.boot_info_gpa()),
            EXIT_SETUP_ERROR
        );
        assert!(logs(&rec.events())[0].contains("bad boot info"));
    }

    #[test]
    fn non_utf8_args_and_missing_free_memory_exit_2() {
        let guest = FakeGuest::booted_with(4 << 20, 1, b"stream\xff", |_| {});
        let (code, events) = single(&guest);
        assert_eq!(code, EXIT_SETUP_ERROR);
        assert!(logs(&events)[0].contains("not UTF-8"));
        let guest = FakeGuest::booted_with(4 << 20, 1, b"stream", |info: &mut BootInfo| {
            info.free_count = 0;
        });
        let (code, events) = single(&guest);
        assert_eq!(code, EXIT_SETUP_ERROR);
        assert!(logs(&events)[0].contains("no free memory"));
    }

    #[test]
    fn rejected_hypercall_exits_3() {
        let guest = FakeGuest::booted(4 << 20, 1, "stream:seconds=0.01");
        let rec = Recorder::new(&guest, Some(1_000_000)).rejecting(Op::Report);
        assert_eq!(
            guest_main(&rec, &guest, 0, 1, guest.boot_info_gpa()),
            EXIT_HYPERCALL_REJECTED
        );
        assert!(
            logs(&rec.events())
                .last()
                .unwrap()
                .contains("hypercall Report rejected")
        );
    }

    #[test]
    fn successful_run_logs_a_summary_and_exits_0() {
        let guest = FakeGuest::booted(8 << 20, 2, "stream:seconds=0.01,phases=2");
        let per_vcpu = run_vm(&guest, 2, Some(1_000_000), None);
        for (v, events) in per_vcpu.iter().enumerate() {
            assert_eq!(events.last(), Some(&Event::Exit(0)), "vcpu {v}");
        }
        let summary = logs(&per_vcpu[0]);
        assert_eq!(summary.len(), 1);
        assert!(
            summary[0].starts_with(
                "stream:phases=2,seconds=0.01,seed=0,op=read on 2 vcpus: buffer 0x800000+"
            ),
            "{summary:?}"
        );
        assert!(logs(&per_vcpu[1]).is_empty());
    }
}
