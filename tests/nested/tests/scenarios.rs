//! The tiered-host scenarios (`docs/testing.md`): each boots the QEMU
//! host built by `tests/nested/build.sh`, runs one scenario script there
//! and judges what came back over its serial console. A failure shows the
//! console's tail; the whole log is under `target/nested/logs/`.
//!
//! Needs `TIERVISOR_NESTED_DIR` (the build script's output directory;
//! `scripts/test-all.sh` sets it); without it each test says so and
//! passes. The scenarios run one at a time: each QEMU keeps both cores
//! busy. The payload scenarios run the host's vCPUs on one TCG thread:
//! with a thread per vCPU, QEMU 7.2's nested SVM now and then reset the
//! host or triple-faulted its guest (`docs/testing.md`).

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;

use tiered_host::{Console, Report, Scenario, TieredHost};

/// One QEMU at a time.
static ONE_HOST: Mutex<()> = Mutex::new(());

/// Runs `scenario`, or `None` when no tiered host is configured.
fn run(test: &str, scenario: Scenario) -> Option<Console> {
    let Some(dir) = std::env::var_os("TIERVISOR_NESTED_DIR") else {
        eprintln!("{test}: skipped: set TIERVISOR_NESTED_DIR (scripts/test-all.sh does)");
        return None;
    };
    let _one = ONE_HOST.lock().unwrap_or_else(|e| e.into_inner());
    let host = TieredHost::new(&PathBuf::from(dir)).unwrap();
    let log = host.log_path(&scenario);
    let console = host
        .run(&scenario)
        .unwrap_or_else(|e| panic!("{test}: {e}\n(log: {})", log.display()));
    assert!(
        console.done && console.errors.is_empty(),
        "{test}: the scenario did not finish: {:?}\n{}",
        console.errors,
        console.tail(80)
    );
    check(
        console.facts("module-failed").is_empty(),
        &format!(
            "{test}: the host's kernel modules did not all load: {:?}",
            console.facts("module-failed")
        ),
        &console,
    );
    Some(console)
}

/// Panics with the console's tail unless `ok`.
fn check(ok: bool, what: &str, console: &Console) {
    assert!(ok, "{what}\n--- console tail ---\n{}", console.tail(80));
}

/// The run ended well, the engine moved frames both ways (when `moves`),
/// and the placement check passed; returns the check.
fn tiered_run_passed(console: &Console, moves: bool) -> Value {
    run_passed(console, "", console.rc, moves)
}

/// Like [`tiered_run_passed`], for the run whose exit code is `rc` and
/// whose report is block `{prefix}report` (`what` names it in failures).
fn run_passed(console: &Console, prefix: &str, rc: Option<i32>, moves: bool) -> Value {
    let what = if prefix.is_empty() {
        "tiervisor"
    } else {
        prefix
    };
    check(rc == Some(0), &format!("{what}: tiervisor failed"), console);
    let report = console.report_in(&format!("{prefix}report"));
    check(
        report.is_some(),
        &format!("{what}: no JSON report"),
        console,
    );
    let report = report.unwrap_or_else(|| unreachable!());
    let (promoted, demoted) = report.moved_bytes();
    check(
        !moves || (promoted > 0 && demoted > 0),
        &format!(
            "{what}: the engine must move frames both ways: {promoted} B up, {demoted} B down"
        ),
        console,
    );
    let placement = report.placement_check().cloned();
    check(
        placement.is_some(),
        &format!("{what}: no placement check"),
        console,
    );
    let placement = placement.unwrap_or_default();
    check(
        placement["backing_error"].is_null() && placement["leaked_slots"] == 0,
        &format!("{what}: placement map and backing disagree: {placement}"),
        console,
    );
    placement
}

#[test]
fn numa_tiers_move_with_the_kernel_migrator() {
    let Some(console) = run("numa", Scenario::new("numa", 300).single_threaded()) else {
        return;
    };
    check(
        console.facts("nodes-with-memory") == ["0-1"],
        "the host must have two memory nodes",
        &console,
    );
    let placement = tiered_run_passed(&console, true);
    // Neither tier named a node: tiervisor ranked them (HMAT: node 0 is
    // 80 ns, node 1 250 ns) and put DRAM on 0, CXL on 1.
    let tiers = placement["numa"].as_array().cloned().unwrap_or_default();
    let node_of = |name: &str| {
        tiers
            .iter()
            .find(|t| t["tier"] == name)
            .map(|t| t["node"].clone())
    };
    check(
        node_of("dram") == Some(0.into()) && node_of("cxl") == Some(1.into()),
        &format!("tiers on the wrong nodes: {tiers:?}"),
        &console,
    );
    for t in &tiers {
        let node = t["node"].to_string();
        check(
            t["misplaced_pages"] == 0
                && t["query_error"].is_null()
                && t["pages_by_node"][&node].as_u64().unwrap_or(0) > 0,
            &format!(
                "move_pages says tier {} is not on node {node}: {t}",
                t["tier"]
            ),
            &console,
        );
    }
    // The kernel's own accounting while the guest ran: guest pages on
    // both nodes.
    let maps = console.blocks.get("numa-maps").cloned().unwrap_or_default();
    check(
        maps.contains("N0=") && maps.contains("N1="),
        &format!("numa_maps shows pages on one node only: {maps}"),
        &console,
    );
}

/// A device-DAX tier next to memfd DRAM: the engine moves frames both
/// ways with plain remap and with pre-copy (frames leaving the device
/// under the VM-wide write stop, since userfaultfd cannot register DAX
/// mappings) while hotset verifies its data, and the placement check
/// finds every frame mapped from its tier.
#[test]
fn a_device_dax_tier_moves_frames_with_the_remap_migrators() {
    let Some(console) = run("devdax", Scenario::new("devdax", 420).single_threaded()) else {
        return;
    };
    let dax = console.facts("dax");
    check(
        dax.iter().any(|d| d.contains("align=2097152")),
        &format!("no 2 MiB-aligned device-DAX: {dax:?}"),
        &console,
    );
    let remap_rc = console
        .facts("remap-rc")
        .first()
        .and_then(|rc| rc.parse().ok());
    run_passed(&console, "remap-", remap_rc, true);
    tiered_run_passed(&console, true);
}

/// DAMON in the host as the tracker (6.12's `paddr` monitoring through
/// KVM's aging of its nested page tables): the tracking tests' damon
/// cases pass with DAMON required (hot set found within three intervals
/// of each shift, while frames move too; reads seen; idle frames cold),
/// the engine on the damon tracker moves frames both ways while hotset
/// verifies its data, and every kdamond the tracker made is gone after.
#[test]
fn damon_tracks_the_guest_and_drives_the_engine() {
    let Some(console) = run("damon", Scenario::new("damon", 900).single_threaded()) else {
        return;
    };
    let tests = console
        .blocks
        .get("damon-tests")
        .cloned()
        .unwrap_or_default();
    check(
        console.facts("damon-tests-rc") == ["0"] && !tests.contains("skipped"),
        &format!("the damon tracking tests failed or were skipped:\n{tests}"),
        &console,
    );
    for when in [
        "kdamonds-before",
        "kdamonds-after-tests",
        "kdamonds-after-run",
    ] {
        check(
            console.facts(when) == ["0"],
            &format!(
                "{when}: a kdamond was left behind: {:?}",
                console.facts(when)
            ),
            &console,
        );
    }
    tiered_run_passed(&console, true);
    engine_ran_on(&console, "damon");
}

/// The run's report says the engine ran on `tracker`.
fn engine_ran_on(console: &Console, tracker: &str) {
    let report = console.report().unwrap_or_else(|| panic!("no report"));
    check(
        report.0["tiering"]["tracker"] == tracker,
        &format!(
            "the engine ran on {}, not {tracker}",
            report.0["tiering"]["tracker"]
        ),
        console,
    );
}

/// The Linux guest's init reported a passed data check (a result line
/// ending in `result_suffix`), tiervisor exited `rc`, the guest powered
/// off and tiering moved some of its frames; returns the report.
fn linux_guest_passed(console: &Console, result_suffix: &str, rc: i32) -> Report {
    let guest = console.guest_lines();
    check(
        guest
            .iter()
            .any(|l| l.starts_with("result=pass") && l.ends_with(result_suffix)),
        &format!(
            "the guest's data check did not pass: {guest:?}\n--- guest console ---\n{}",
            console
                .blocks
                .get("guest-console")
                .map_or("", String::as_str)
        ),
        console,
    );
    check(
        console.rc == Some(rc),
        &format!("tiervisor must exit {rc}"),
        console,
    );
    let report = console.report().unwrap_or_else(|| panic!("no report"));
    check(
        report.end_kind() == Some("power-off"),
        &format!("the guest must power off: {:?}", report.end_kind()),
        console,
    );
    let (promoted, demoted) = report.moved_bytes();
    check(
        promoted + demoted > 0,
        "tiering moved none of the guest's frames",
        console,
    );
    report
}

/// A Linux guest that mostly reads (its init reads the first 16 MiB of
/// its buffer eight times per rewrite), tiered on the `access-log`
/// tracker over the access-log KVM: the guest's data check passes, it
/// powers off, and the engine, running on that tracker, moved frames
/// both ways with the placement check passing.
#[test]
fn a_read_mostly_linux_guest_is_tiered_on_the_access_log() {
    let Some(console) = run(
        "access-log-linux",
        Scenario::new("access-log-linux", 600).on_one_host_cpu(),
    ) else {
        return;
    };
    check(
        console.facts("access-log-load") == ["ok"],
        &format!(
            "the access-log KVM did not load: {:?}",
            console.facts("access-log-load")
        ),
        &console,
    );
    let report = linux_guest_passed(&console, "", 0);
    tiered_run_passed(&console, true);
    engine_ran_on(&console, "access-log");
    eprintln!(
        "access-log-linux: fast heat share {}, engine cost {}",
        report.0["tiering"]["cost"]["fast_heat_share"], report.0["tiering"]["cost"]
    );
}

/// Also checks the host's heartbeat and its report of a process that
/// runs long: with `tiervisor.stuck_after=0` the first beat after
/// tiervisor started prints its threads' kernel stacks, and the guest's
/// 40 s of work outlast the 30 s between beats.
#[test]
fn a_linux_guest_boots_verifies_its_data_and_powers_off() {
    let scenario = Scenario::new("linux", 600)
        .on_one_host_cpu()
        .with("guest.seconds=40")
        .with("tiervisor.stuck_after=0");
    let Some(console) = run("linux", scenario) else {
        return;
    };
    linux_guest_passed(&console, "", 0);
    check(
        console.alive.is_some(),
        "the host printed no heartbeat",
        &console,
    );
    let stacks: Vec<&String> = console
        .blocks
        .iter()
        .filter(|(name, _)| name.starts_with("stacks-"))
        .map(|(_, text)| text)
        .collect();
    check(
        stacks.len() == 1,
        &format!("expected one stacks block, got {}", stacks.len()),
        &console,
    );
    let threads = stacks[0]
        .lines()
        .filter(|l| l.starts_with("thread "))
        .count();
    check(
        threads >= 3
            && stacks[0].contains("tiervisor State:")
            && stacks[0].contains("wchan=")
            && stacks[0].contains("[<0>]"),
        &format!(
            "tiervisor's threads and their kernel stacks:\n{}",
            stacks[0]
        ),
        &console,
    );
}

/// SIGTERM to tiervisor while its Linux guest works: the guest's ACPI
/// power button is pressed, its init ends the workload, checks its data
/// and powers off, and tiervisor exits 5 with a report naming the signal.
#[test]
fn sigterm_stops_a_linux_guest_through_its_power_button() {
    let Some(console) = run(
        "linux-stop",
        Scenario::new("linux-stop", 900).on_one_host_cpu(),
    ) else {
        return;
    };
    let guest = console.guest_lines();
    check(
        guest.contains(&"power-button pressed"),
        &format!("the guest saw no power button press: {guest:?}"),
        &console,
    );
    let report = linux_guest_passed(&console, "stopped=power-button", 5);
    check(
        report.0["stopped_by_signal"]
            == serde_json::json!({"signal": "SIGTERM", "hard_stop": false}),
        &format!(
            "the report names the signal: {}",
            report.0["stopped_by_signal"]
        ),
        &console,
    );
}

/// The debug switch (`TIERVISOR_DEBUG_CORRUPT_PROMOTIONS`) garbles the
/// first promoted frame; the guest's data check must catch it and
/// tiervisor must fail.
#[test]
fn a_corrupted_frame_is_caught_by_the_data_check() {
    let name = "numa";
    let Some(console) = run(
        "corrupt",
        Scenario::new(name, 300)
            .single_threaded()
            .with("tiervisor.corrupt=1"),
    ) else {
        return;
    };
    let out = console
        .blocks
        .get("tiervisor-output")
        .cloned()
        .unwrap_or_default();
    check(
        out.contains("corrupted promoted frame"),
        &format!("{name}: the switch corrupted nothing"),
        &console,
    );
    check(
        console.rc.is_some_and(|rc| rc != 0),
        &format!("{name}: tiervisor passed a corrupted guest"),
        &console,
    );
    let end = console.report().map(|r| r.0["end"].clone());
    check(
        end.as_ref()
            .is_some_and(|e| e["kind"] == "guest-exit" && e["code"] == 1),
        &format!("{name}: the guest's data check must fail it (exit 1): {end:?}"),
        &console,
    );
}

/// The access-log KVM (`host-kernel/kvm-access-log`): its self-test fails
/// on the stock modules (no capability), the patched `kvm.ko` and
/// `kvm-amd.ko` replace them, and the self-test passes with the TDP MMU
/// and again with the shadow MMU's rmaps (`tdp_mmu=0`): exactly the pages
/// the guest read or wrote are harvested, a harvest clears them unless
/// `NO_CLEAR`, a huge SPTE counts for every page it maps, and bad
/// arguments are refused. Then, on the patched modules with the TDP MMU,
/// the tracking tests' access-log cases pass with the access log required
/// (hot set found within three intervals of each shift, also while frames
/// move; a read-only working set found; KVM takes no more page faults
/// with the tracker on than off), and the engine on the `access-log`
/// tracker moves frames both ways while hotset verifies its data. The
/// kernel logs no warning meanwhile.
#[test]
fn access_log_ioctl_harvests_accessed_bits_and_drives_the_engine() {
    let Some(console) = run(
        "access-log",
        Scenario::new("access-log", 900).single_threaded(),
    ) else {
        return;
    };
    let block = |name: &str| console.blocks.get(name).cloned().unwrap_or_default();
    check(
        console.facts("access-log-stock-selftest-rc") != ["0"],
        &format!(
            "the self-test passed on the stock KVM:\n{}",
            block("access-log-stock")
        ),
        &console,
    );
    check(
        console.facts("access-log-load") == ["ok", "ok tdp_mmu=0", "ok"],
        &format!(
            "the patched modules did not load: {:?}",
            console.facts("access-log-load")
        ),
        &console,
    );
    check(
        console.facts("access-log-selftest-rc") == ["tdp_mmu=Y 0", "tdp_mmu=N 0"],
        &format!(
            "the self-test failed: {:?}\n--- TDP MMU ---\n{}\n--- shadow MMU ---\n{}",
            console.facts("access-log-selftest-rc"),
            block("access-log-selftest-tdp"),
            block("access-log-selftest-shadow")
        ),
        &console,
    );
    for name in ["access-log-selftest-tdp", "access-log-selftest-shadow"] {
        let out = block(name);
        check(
            out.contains(" 0 failed") && !out.contains("FAIL"),
            &format!("{name}: no clean summary:\n{out}"),
            &console,
        );
    }
    check(
        console.facts("access-log-dmesg-splats") == ["0"],
        &format!(
            "the kernel warned during the scenario:\n{}",
            block("access-log-dmesg")
        ),
        &console,
    );
    check(
        console.facts("access-log-final-tdp-mmu") == ["Y"],
        "the patched modules (TDP MMU) must stay loaded for the tracker",
        &console,
    );
    let tests = block("access-log-tests");
    check(
        console.facts("access-log-tests-rc") == ["0"] && !tests.contains("skipped"),
        &format!("the access-log tracking tests failed or were skipped:\n{tests}"),
        &console,
    );
    tiered_run_passed(&console, true);
    engine_ran_on(&console, "access-log");
}

/// A counter of tiercopy's `stats` (or of the test provider's counters).
fn counter(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

/// tiercopy (`host-kernel/tiercopy`) on the kernel the host booted
/// (`dma`: whether it has dmaengine; the cloud kernel has not, the generic
/// one has): the self-test passes (copies by the kernel threads, by DMA
/// through the test provider where the kernel has dmaengine, bad
/// addresses, injected DMA failures, out-of-order and stalled
/// descriptors, signals, refusals), `/dev/tiercopy` is 0600, rmmod fails
/// while it is open and works after, and the kernel logs no warning.
/// Without dmaengine the provider must fail to load and the DMA checks are
/// skipped. Before the unload, the remap migrator on the kernel copy
/// engine (`--copy-engine kernel:threads`, then `kernel:dma`) moves
/// hotset's frames both ways with its data and the placement check
/// intact, and the module's counters show the bytes. With dmaengine a
/// third run on `kernel:dma` has the provider complete out of order, fail
/// every 2000th descriptor and stall every 5000th: the data and placement
/// checks still pass, and the counters show DMA copies, CPU fallbacks and
/// timeouts; then `tierbench copy --quick` measures the kernel engines
/// beside the user-space ones.
fn tiercopy_judged(console: &Console, dma: bool) {
    let block = |name: &str| console.blocks.get(name).cloned().unwrap_or_default();
    let want_engine = if dma { "y" } else { "n" };
    check(
        console.facts("tiercopy-dma-engine") == [want_engine],
        &format!(
            "the kernel's dmaengine: {:?}, want {want_engine}",
            console.facts("tiercopy-dma-engine")
        ),
        console,
    );
    let (load, channels) = if dma { ("ok", "4") } else { ("failed", "0") };
    check(
        console.facts("tiercopy-testdma-load") == [load]
            && console.facts("tiercopy-channels") == [channels],
        &format!(
            "dmaengine {dma}: the test provider's load {:?} (want {load}), tiercopy's channels {:?} (want {channels})\n{}",
            console.facts("tiercopy-testdma-load"),
            console.facts("tiercopy-channels"),
            block("tiercopy-testdma-load")
        ),
        console,
    );
    check(
        console.facts("tiercopy-load") == ["ok"] && console.facts("tiercopy-dev-mode") == ["600"],
        &format!(
            "tiercopy did not load, or /dev/tiercopy is not 0600: {:?} {:?}",
            console.facts("tiercopy-load"),
            console.facts("tiercopy-dev-mode")
        ),
        console,
    );
    let out = block("tiercopy-selftest");
    let skips = out.lines().filter(|l| l.starts_with("skip ")).count();
    check(
        console.facts("tiercopy-selftest-rc") == ["0"]
            && out.contains(" 0 failed")
            && !out.contains("FAIL")
            && (skips == 0) == dma,
        &format!(
            "the self-test failed (rc {:?}, {skips} skipped, dmaengine {dma}):\n{out}\n{}",
            console.facts("tiercopy-selftest-rc"),
            block("tiercopy-stats")
        ),
        console,
    );
    check(
        console.facts("tiercopy-rmmod-open") != ["0"] && console.facts("tiercopy-rmmod") == ["0"],
        &format!(
            "rmmod with /dev/tiercopy open must fail ({:?}) and then work ({:?})",
            console.facts("tiercopy-rmmod-open"),
            console.facts("tiercopy-rmmod")
        ),
        console,
    );
    if dma {
        check(
            console.facts("tiercopy-testdma-rmmod") == ["0"],
            "the test provider did not unload after tiercopy",
            console,
        );
    }
    let mut runs = vec!["threads", "dma"];
    if dma {
        runs.push("faults");
    }
    for run in runs {
        let rc = console
            .facts(&format!("kernel-{run}-rc"))
            .first()
            .and_then(|rc| rc.parse().ok());
        run_passed(console, &format!("kernel-{run}-"), rc, true);
    }
    // The counters after the self-test, and after the migrations.
    let (before, after) = (
        block("tiercopy-stats"),
        block("tiercopy-stats-after-migration"),
    );
    let grew = |name: &str| counter(&after, name) > counter(&before, name);
    check(
        grew("bytes_threads")
            && (if dma {
                grew("bytes_dma")
            } else {
                grew("dma_no_channel")
            }),
        &format!("the migrations' copies do not show in tiercopy's counters:\n{before}\n{after}"),
        console,
    );
    if dma {
        let faults = block("tiercopy-stats-after-faults");
        let provider = block("tiercopy-testdma-counters");
        let grew = |name: &str| counter(&faults, name) > counter(&after, name);
        check(
            grew("bytes_dma")
                && grew("dma_fallbacks")
                && grew("dma_timeouts")
                && counter(&provider, "failed") > 0
                && counter(&provider, "stalled") > 0,
            &format!(
                "with injected faults the migration must copy by DMA, fall back to the CPU and \
                 time out stalls:\n{after}\n{faults}\n{provider}"
            ),
            console,
        );
        // tierbench's copy suite finds /dev/tiercopy and measures the
        // kernel engines in every range size.
        let copy = block("tierbench-copy");
        let rows = |engine: &str| {
            copy.lines()
                .filter(|l| l.starts_with(&format!("| {engine} |")))
                .count()
        };
        check(
            console.facts("tierbench-copy-rc") == ["0"]
                && ["kernel:threads", "kernel:dma", "kernel:auto"]
                    .iter()
                    .all(|e| rows(e) == 3),
            &format!(
                "tierbench copy must measure the kernel engines at 4 KiB, 64 KiB and 2 MiB \
                 (rc {:?}):\n{copy}\n{}",
                console.facts("tierbench-copy-rc"),
                block("tierbench-copy-output")
            ),
            console,
        );
    }
    check(
        console.facts("tiercopy-dmesg-splats") == ["0"],
        &format!(
            "the kernel warned during the scenario:\n{}",
            block("tiercopy-dmesg")
        ),
        console,
    );
}

/// tiercopy on the generic kernel, which has dmaengine: every DMA check
/// runs ([`tiercopy_judged`]).
#[test]
fn tiercopy_module_copies_with_threads_and_dma() {
    let scenario = Scenario::new("tiercopy", 900)
        .single_threaded()
        .on_generic_kernel();
    let Some(console) = run("tiercopy", scenario) else {
        return;
    };
    tiercopy_judged(&console, true);
}

/// tiercopy on the cloud kernel, the tiered host's own, which has no
/// dmaengine: the module loads, copies with its threads and counts DMA
/// mode's fallbacks ([`tiercopy_judged`]).
#[test]
fn tiercopy_module_without_dmaengine_copies_with_threads() {
    let Some(console) = run("tiercopy", Scenario::new("tiercopy", 900).single_threaded()) else {
        return;
    };
    tiercopy_judged(&console, false);
}

/// A Linux guest whose frames move through tiercopy's DMA back end on the
/// generic kernel, while the test provider completes out of order, fails
/// every 2000th descriptor and stalls every 5000th: the guest's data check
/// passes, the engine moved frames, the placement check holds, tiercopy's
/// counters show DMA copies and CPU fallbacks, both modules unload, and
/// the kernel logs no warning.
#[test]
fn a_linux_guest_moves_through_tiercopy_dma_with_faults() {
    let scenario = Scenario::new("tiercopy-linux", 600)
        .on_one_host_cpu()
        .on_generic_kernel();
    let Some(console) = run("tiercopy-linux", scenario) else {
        return;
    };
    let block = |name: &str| console.blocks.get(name).cloned().unwrap_or_default();
    check(
        console.facts("tiercopy-testdma-load") == ["ok"]
            && console.facts("tiercopy-load") == ["ok"],
        &format!(
            "the modules did not load: provider {:?}, tiercopy {:?}\n{}",
            console.facts("tiercopy-testdma-load"),
            console.facts("tiercopy-load"),
            block("tiercopy-testdma-load")
        ),
        &console,
    );
    linux_guest_passed(&console, "", 0);
    tiered_run_passed(&console, true);
    let (before, after, provider) = (
        block("tiercopy-stats-before"),
        block("tiercopy-stats-after"),
        block("tiercopy-testdma-counters"),
    );
    let grew = |name: &str| counter(&after, name) > counter(&before, name);
    check(
        grew("bytes_dma") && grew("dma_fallbacks") && counter(&provider, "failed") > 0,
        &format!(
            "the guest's frames must move by DMA with CPU fallbacks:\n{before}\n{after}\n{provider}"
        ),
        &console,
    );
    check(
        console.facts("tiercopy-rmmod") == ["0"]
            && console.facts("tiercopy-testdma-rmmod") == ["0"],
        "tiercopy and the test provider must unload after the run",
        &console,
    );
    check(
        console.facts("tiercopy-dmesg-splats") == ["0"],
        &format!(
            "the kernel warned during the scenario:\n{}",
            block("tiercopy-dmesg")
        ),
        &console,
    );
}

/// The runner's report of a frozen host reads every vCPU's registers from
/// QEMU's monitor: on a machine held at reset, both vCPUs sit at the
/// reset vector in both samples, the boot vCPU running and the other
/// halted (waiting for its start-up IPI).
#[test]
fn the_runner_reads_a_held_machines_vcpus_from_its_monitor() {
    let Some(dir) = std::env::var_os("TIERVISOR_NESTED_DIR") else {
        eprintln!("skipped: set TIERVISOR_NESTED_DIR (scripts/test-all.sh does)");
        return;
    };
    let _one = ONE_HOST.lock().unwrap_or_else(|e| e.into_inner());
    let host = TieredHost::new(&PathBuf::from(dir)).unwrap();
    let cpus = host.vcpus_at_reset().unwrap();
    let lines: Vec<&str> = cpus.lines().collect();
    let sample = ["CPU#0", "EIP=0000fff0 HLT=0", "CPU#1", "EIP=0000fff0 HLT=1"];
    assert_eq!(lines.len(), 8, "two vCPUs, two samples:\n{cpus}");
    for (line, want) in lines.iter().zip(sample.iter().cycle()) {
        let ok = want
            .split(' ')
            .all(|w| line.starts_with(w) || line.contains(&format!(" {w}")));
        assert!(ok, "{line:?} should show {want:?}:\n{cpus}");
    }
}
