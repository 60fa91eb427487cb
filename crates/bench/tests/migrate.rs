//! End-to-end: `tierbench migrate` and its soak mode run as a user runs
//! them, on real KVM, with a small guest (hidden `--bytes`) so each takes
//! seconds. Timings are never asserted; the structure of the results and
//! every verification are.

mod common;

use std::fs;

use bench::migrate::{GuestLoad, Leg, Protocol};
use bench::report::BenchReport;
use bench::suite::SuiteResult;

use common::{assert_success, quick_suite, scratch, tierbench};

#[test]
fn quick_migrate_suite_measures_and_verifies_every_scenario() {
    // The hook holds the first timed batch of each size under the
    // write-busy guest until a vCPU write waits on it: the stall
    // measurement is then proven without counting on the scheduler.
    let (files, stdout) = quick_suite(
        "migrate",
        "migrate-quick",
        &["--bytes", "64M", "--hold-until-write-waits"],
    );
    let (json, svg, md) = (files.json, files.svg, files.md);
    assert!(stdout.contains("× best copy"), "{stdout}");
    assert!(stdout.contains("host-side"), "stall method is stated");

    let report = BenchReport::from_json(&fs::read_to_string(&json).unwrap()).unwrap();
    let [SuiteResult::Migrate(result)] = report.results.as_slice() else {
        panic!("expected one migrate result, got {:?}", report.results);
    };
    let settings = &result.settings;
    assert_eq!(settings.guest_bytes, 64 << 20);
    assert_eq!(settings.frame_size, 2 << 20);
    assert_eq!(settings.pool_frames, 16);
    assert_eq!(settings.batch_sizes, [1, 16]);
    let best = result.copy_reference.best.median_gbps;
    assert!(best > 0.0);
    assert_eq!(
        result.copy_reference.parallel.len(),
        2 * report.machine.cores
    );

    assert_eq!(result.scenarios.len(), 4);
    for protocol in [Protocol::Remap, Protocol::RemapPrecopy] {
        for guest in [GuestLoad::Idle, GuestLoad::WriteBusy] {
            let s = result
                .scenario(protocol, guest)
                .unwrap_or_else(|| panic!("{protocol:?} {guest:?} missing"));
            assert_eq!(s.pool_frames, 16);
            let sizes: Vec<usize> = s.batch_sizes.iter().map(|b| b.frames_per_batch).collect();
            assert_eq!(sizes, settings.batch_sizes, "{protocol:?} {guest:?}");
            for b in &s.batch_sizes {
                let per_round = settings.batches_per_round(b.frames_per_batch);
                assert_eq!(b.batches, per_round * settings.rounds);
                assert_eq!(b.frames_moved, b.batches * b.frames_per_batch);
                assert_eq!(b.bytes_moved, b.frames_moved as u64 * settings.frame_size);
                assert!(b.gbps > 0.0 && b.gbps.is_finite());
                assert_eq!(b.bandwidth.samples_gbps.len(), settings.rounds);
                let ratio = b.vs_best_copy.unwrap();
                assert!((ratio - b.gbps / best).abs() <= 1e-9 * ratio);
                assert!(b.phases.copy_s > 0.0);
                // Pipelined stages run at once, so their busy times may
                // sum past the total, but never past it plus the overlap.
                let ph = &b.phases;
                let named = ph.protect_s + ph.copy_s + ph.remap_s + ph.dirty_s + ph.commit_s;
                assert!(
                    named <= (ph.total_s + ph.overlap_s) * 1.000_001,
                    "{protocol:?} {guest:?}, {} frames/batch: {ph:?}",
                    b.frames_per_batch
                );
                assert!(b.bytes_copied >= b.bytes_moved);
                let st = &b.stalls;
                if st.count > 0 {
                    let (p50, p99, max) =
                        (st.p50_us.unwrap(), st.p99_us.unwrap(), st.max_us.unwrap());
                    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{st:?}");
                } else {
                    assert_eq!((st.p50_us, st.p99_us, st.max_us), (None, None, None));
                }
            }
            for b in &s.batch_sizes {
                let stalled = b.stalls.count;
                match guest {
                    // Nothing in the idle guest writes the frames that move.
                    GuestLoad::Idle => assert_eq!(stalled, 0, "{protocol:?}"),
                    // memcheck writes every frame of the pool each round,
                    // and the hook waits for one of those writes.
                    GuestLoad::WriteBusy => assert!(
                        stalled > 0,
                        "{protocol:?}, {} frames/batch: no write waited",
                        b.frames_per_batch
                    ),
                }
            }
            let v = &s.verification;
            assert!(v.guest.starts_with("exited 0"), "{v:?}");
            assert_eq!(v.words_checked, 16 * (2 << 20) / 8);
            assert!(v.backing_verified);
            assert_eq!(v.leaked_slots, 0);
        }
    }
    let precopy = result
        .scenario(Protocol::RemapPrecopy, GuestLoad::WriteBusy)
        .unwrap();
    for b in &precopy.batch_sizes {
        // The hook's first pass of each size waits for a dirtied page.
        assert!(
            b.recopied_pages > 0,
            "{} frames/batch: the guest dirtied pages during pre-copy",
            b.frames_per_batch
        );
    }
    assert_eq!(result.targets.min_batch, 64);

    let mut svgs: Vec<String> = fs::read_dir(&svg)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    svgs.sort();
    assert_eq!(
        svgs,
        [
            "migrate-bandwidth.svg",
            "migrate-stalls.svg",
            "migrate-vs-copy.svg"
        ]
    );
    let chart = fs::read_to_string(svg.join("migrate-bandwidth.svg")).unwrap();
    assert!(chart.contains("best copy"));

    let markdown = fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("### migrate: "));
    assert!(markdown.contains("#### remap-precopy, write-busy guest"));
    assert!(markdown.contains("| stall p50 | stall p99 | stall max |"));
}

#[test]
fn small_soak_loses_nothing() {
    let dir = scratch("soak");
    let json = dir.join("soak.json");
    let out = tierbench(&[
        "migrate",
        "--soak",
        "20000",
        "--bytes",
        "32M",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_success(&out);
    let report = BenchReport::from_json(&fs::read_to_string(&json).unwrap()).unwrap();
    let [SuiteResult::MigrateSoak(soak)] = report.results.as_slice() else {
        panic!("expected one soak result, got {:?}", report.results);
    };
    assert_eq!(soak.settings.migrations, 20_000);
    assert_eq!(soak.settings.frame_size, 64 << 10);
    assert!(soak.total_migrations >= 20_000);
    assert_eq!(soak.total_aborted, 0);
    let legs: Vec<Leg> = soak.legs.iter().map(|l| l.leg).collect();
    assert_eq!(legs, Leg::ALL);
    for leg in &soak.legs {
        assert!(leg.migrations >= leg.target, "{leg:?}");
        assert_eq!(leg.aborted, 0);
        assert!(leg.batches > 0 && leg.rate_per_sec > 0.0);
        let v = &leg.verification;
        assert!(v.guest.starts_with("exited 0"), "{v:?}");
        assert!(v.image.starts_with("memcheck buffer intact"), "{v:?}");
        assert_eq!(v.words_checked, soak.settings.buffer_bytes / 8);
        assert!(v.backing_verified);
        assert_eq!(v.leaked_slots, 0);
    }
    let exchange = &soak.legs[2];
    assert_eq!(
        exchange.exchanged, exchange.migrations,
        "full tiers: only swaps"
    );
    assert_eq!(soak.legs[0].exchanged, 0);
}

#[test]
fn soak_belongs_to_the_migrate_suite() {
    let out = tierbench(&["copy", "--soak", "100"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("migrate suite only"));
}

#[test]
fn guest_too_small_for_the_frames_is_refused() {
    let out = tierbench(&["migrate", "--quick", "--bytes", "16M"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("below the"), "{stderr}");
}
