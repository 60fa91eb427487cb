//! What the migrate suite found: serde types for the JSON file, built from
//! the measured totals, with the targets of issue 27 judged against them
//! ([`Targets`]), and the tables printed and written as markdown.

use serde::{Deserialize, Serialize};

use super::measure::SizeTotals;
use super::scenario::{GuestLoad, Protocol, Scenario};
use super::settings::MigrateSettings;
use super::stalls::{StallSummary, format_micros};
use super::targets::Targets;
use super::verify::Verification;
use crate::bandwidth::{Bandwidth, GB};
use crate::copy::{CopyReference, format_ratio, parallel_table};
use crate::size::format_size;
use crate::stats::ratio;
use crate::table::{Align, RowWidthError, Table};

/// Bytes per pre-copy re-copied page.
const PAGE: u64 = 4096;

/// The migrate suite's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigrateResult {
    /// What was measured.
    pub settings: MigrateSettings,
    /// The best copy bandwidth of this machine, measured in the same run
    /// right before the VMs.
    pub copy_reference: CopyReference,
    /// One entry per protocol × guest load.
    pub scenarios: Vec<ScenarioResult>,
    /// The targets of issue 27 against these numbers.
    pub targets: Targets,
}

/// One protocol under one guest load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// The protocol.
    pub protocol: Protocol,
    /// The guest load.
    pub guest: GuestLoad,
    /// The guest's workload string.
    pub workload: String,
    /// Frames the batches were drawn from.
    pub pool_frames: usize,
    /// First and last frame index of the pool.
    pub pool_range: (usize, usize),
    /// The best copy's configuration timed once per round while the
    /// guest ran its load (`None` in results from before it was measured).
    #[serde(default)]
    pub loaded_copy: Option<Bandwidth>,
    /// One entry per batch size.
    pub batch_sizes: Vec<BatchSizeResult>,
    /// The end checks, all passed.
    pub verification: Verification,
}

/// One batch size in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchSizeResult {
    /// Frames per batch.
    pub frames_per_batch: usize,
    /// Timed batches.
    pub batches: usize,
    /// Frames moved.
    pub frames_moved: usize,
    /// `frames_moved` × frame size.
    pub bytes_moved: u64,
    /// Summed wall time of the `migrate()` calls, seconds.
    pub migrate_seconds: f64,
    /// `bytes_moved / migrate_seconds`, GB/s: the headline number.
    pub gbps: f64,
    /// Per round (each a bandwidth sample): median, spread, samples.
    pub bandwidth: Bandwidth,
    /// `gbps` relative to the best copy of the same run.
    pub vs_best_copy: Option<f64>,
    /// `gbps` relative to the same copy under this scenario's guest load.
    #[serde(default)]
    pub vs_loaded_copy: Option<f64>,
    /// Mean wall time of one batch, µs.
    pub mean_batch_us: f64,
    /// Where the migrator's time went.
    pub phases: PhaseTimes,
    /// Bytes the copy engine copied, pre-copy re-copies included.
    pub bytes_copied: u64,
    /// Pre-copy: 4 KiB pages copied again because the guest wrote them.
    pub recopied_pages: u64,
    /// Guest writes that waited on a batch.
    pub stalls: StallSummary,
}

/// Summed phase times of the migrator's reports, seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseTimes {
    /// Write-protecting.
    pub protect_s: f64,
    /// Copying (pre-copy: every round).
    pub copy_s: f64,
    /// `mmap(MAP_FIXED)`, userfaultfd re-registration and waking.
    pub remap_s: f64,
    /// Pre-copy: resetting and reading the dirty log (results written
    /// before it was named count it in `protect_s` and `other_s`).
    #[serde(default)]
    pub dirty_s: f64,
    /// Committing to the placement map, punching out and releasing the
    /// source slots (earlier results count it in `other_s`).
    #[serde(default)]
    pub commit_s: f64,
    /// The rest of `migrate()`: reserving slots, planning the copies.
    /// With the stages pipelined this is what is left of the total once
    /// the overlap is added back.
    pub other_s: f64,
    /// How long stages ran at once: their summed busy times beyond the
    /// wall time they spanned (pipelined batches; 0 before they were).
    #[serde(default)]
    pub overlap_s: f64,
    /// The migrator's own total.
    pub total_s: f64,
}

impl PhaseTimes {
    /// Each phase as a share of the total.
    pub fn shares(&self) -> [Option<f64>; 7] {
        [
            self.protect_s,
            self.copy_s,
            self.remap_s,
            self.dirty_s,
            self.commit_s,
            self.other_s,
            self.overlap_s,
        ]
        .map(|s| ratio(s, self.total_s))
    }
}

impl BatchSizeResult {
    /// Summarizes `totals` of `frame_size` frames against the best copy
    /// `best_gbps` and the copy under the guest's load `loaded_gbps`;
    /// `None` without timed rounds.
    pub fn build(
        totals: &SizeTotals,
        frame_size: u64,
        best_gbps: f64,
        loaded_gbps: Option<f64>,
    ) -> Option<Self> {
        let rounds = totals.round_times.len();
        if rounds == 0 || totals.batches == 0 {
            return None;
        }
        let bytes_moved = totals.frames as u64 * frame_size;
        let seconds = totals.wall.as_secs_f64();
        let gbps = bytes_moved as f64 / seconds.max(1e-9) / GB;
        let per_round = bytes_moved / rounds as u64;
        let phase = |d: std::time::Duration| d.as_secs_f64();
        let named = totals.protect + totals.copy + totals.remap + totals.dirty + totals.commit;
        Some(Self {
            frames_per_batch: totals.frames_per_batch,
            batches: totals.batches,
            frames_moved: totals.frames,
            bytes_moved,
            migrate_seconds: seconds,
            gbps,
            bandwidth: Bandwidth::from_runs(per_round, &totals.round_times)?,
            vs_best_copy: ratio(gbps, best_gbps),
            vs_loaded_copy: loaded_gbps.and_then(|l| ratio(gbps, l)),
            mean_batch_us: seconds * 1e6 / totals.batches as f64,
            phases: PhaseTimes {
                protect_s: phase(totals.protect),
                copy_s: phase(totals.copy),
                remap_s: phase(totals.remap),
                dirty_s: phase(totals.dirty),
                commit_s: phase(totals.commit),
                other_s: phase((totals.total + totals.overlap).saturating_sub(named)),
                overlap_s: phase(totals.overlap),
                total_s: phase(totals.total),
            },
            bytes_copied: totals.bytes_copied,
            recopied_pages: totals.recopied_pages,
            stalls: StallSummary::of(&totals.stalls),
        })
    }
}

impl ScenarioResult {
    /// The label of its scenario.
    pub fn scenario(&self) -> Scenario {
        Scenario {
            protocol: self.protocol,
            guest: self.guest,
        }
    }

    /// The batch size entry of `frames_per_batch`, if measured.
    pub fn batch_size(&self, frames_per_batch: usize) -> Option<&BatchSizeResult> {
        self.batch_sizes
            .iter()
            .find(|b| b.frames_per_batch == frames_per_batch)
    }
}

impl MigrateResult {
    /// Puts the run together and judges it.
    pub fn new(
        settings: MigrateSettings,
        copy_reference: CopyReference,
        scenarios: Vec<ScenarioResult>,
    ) -> Self {
        let targets = Targets::judge(&scenarios);
        Self {
            settings,
            copy_reference,
            scenarios,
            targets,
        }
    }

    /// The scenario of `protocol` under `guest`, if measured.
    pub fn scenario(&self, protocol: Protocol, guest: GuestLoad) -> Option<&ScenarioResult> {
        self.scenarios
            .iter()
            .find(|s| s.protocol == protocol && s.guest == guest)
    }

    /// Lines explaining the method, the reference and the targets.
    pub fn summary(&self) -> Vec<String> {
        let mut lines = vec![
            self.settings.describe(),
            format!(
                "best copy (contiguous parallel copy between two pre-faulted memfd mappings, \
                 measured in this run right before the VMs): {}",
                self.copy_reference.best.describe()
            ),
            "write stalls are host-side measurements: from the moment the VMM's userfaultfd \
             handler reads a write-protect fault to the moment the migrator closes the window \
             after waking the writer; one sample per 4 KiB page written while protected"
                .to_owned(),
            "× copy under load = migration bandwidth against the best copy's configuration timed \
             once per round in the same VM while its guest runs its load (the CPU and memory the \
             busy machine leaves a copy; an idle guest leaves nearly all)"
                .to_owned(),
            "GB = 1e9 bytes; protect / copy / remap / dirty / commit / other are shares of the time \
             in migrate() (dirty: pre-copy's dirty-log resets and reads; commit: placement map \
             and freeing the source slots), and overlap the time stages ran at once (the plain \
             protocol pipelines batches of 16 frames or more, pre-copy of 32 or more), so the \
             stages add up to 100% plus overlap; \
             re-copied = pre-copy bytes copied again because the guest wrote them, as a share \
             of the bytes moved"
                .to_owned(),
        ];
        lines.extend(self.targets.describe());
        lines
    }

    /// The copy reference, one table per scenario, then the verification.
    pub fn tables(&self) -> Result<Vec<Table>, RowWidthError> {
        let mut tables = vec![parallel_table(
            self.copy_reference.bytes,
            &self.copy_reference.parallel,
        )?];
        for s in &self.scenarios {
            tables.push(self.scenario_table(s)?);
        }
        tables.push(self.verification_table()?);
        Ok(tables)
    }

    fn scenario_table(&self, s: &ScenarioResult) -> Result<Table, RowWidthError> {
        let moved = format_size(s.pool_frames as u64 * self.settings.frame_size);
        let what = match s.guest {
            GuestLoad::Idle => format!(
                "the guest idles; {} untouched frames ({moved}) move",
                s.pool_frames
            ),
            GuestLoad::WriteBusy => format!(
                "memcheck writes and checks the {} frames ({moved}) that move",
                s.pool_frames
            ),
        };
        let loaded = s.loaded_copy.as_ref().map_or_else(String::new, |b| {
            format!(
                "; copy under this load {:.2} GB/s (spread {:.0}%)",
                b.median_gbps,
                b.spread * 100.0
            )
        });
        let mut table = Table::new(
            format!("{}: {what}{loaded}", s.scenario().label()),
            &[
                ("frames/batch", Align::Right),
                ("batches", Align::Right),
                ("GB/s", Align::Right),
                ("spread", Align::Right),
                ("× best copy", Align::Right),
                ("× copy under load", Align::Right),
                ("per batch", Align::Right),
                ("protect", Align::Right),
                ("copy", Align::Right),
                ("remap", Align::Right),
                ("dirty", Align::Right),
                ("commit", Align::Right),
                ("other", Align::Right),
                ("overlap", Align::Right),
                ("re-copied", Align::Right),
                ("stalled writes", Align::Right),
                ("stall p50", Align::Right),
                ("stall p99", Align::Right),
                ("stall max", Align::Right),
            ],
        );
        for b in &s.batch_sizes {
            let mut cells = vec![
                b.frames_per_batch.to_string(),
                b.batches.to_string(),
                format!("{:.2}", b.gbps),
                format!("{:.0}%", b.bandwidth.spread * 100.0),
                format_ratio(b.vs_best_copy),
                format_ratio(b.vs_loaded_copy),
                format_micros(Some(b.mean_batch_us)),
            ];
            cells.extend(b.phases.shares().map(format_share));
            cells.push(match s.protocol {
                Protocol::Remap => "—".to_owned(),
                Protocol::RemapPrecopy => format_share(ratio(
                    (b.recopied_pages * PAGE) as f64,
                    b.bytes_moved as f64,
                )),
            });
            cells.push(b.stalls.count.to_string());
            cells.push(format_micros(b.stalls.p50_us));
            cells.push(format_micros(b.stalls.p99_us));
            cells.push(format_micros(b.stalls.max_us));
            table.push_row(cells)?;
        }
        Ok(table)
    }

    fn verification_table(&self) -> Result<Table, RowWidthError> {
        let mut table = Table::new(
            "Verification at the end of every run (a failure ends tierbench with an error)",
            &[
                ("protocol", Align::Left),
                ("guest", Align::Left),
                ("guest's own check", Align::Left),
                ("VMM image check", Align::Left),
                ("words", Align::Right),
                ("mappings", Align::Left),
                ("leaked slots", Align::Right),
            ],
        );
        for s in &self.scenarios {
            let v = &s.verification;
            table.push_row(vec![
                s.protocol.name().to_owned(),
                s.guest.name().to_owned(),
                v.guest.clone(),
                v.image.clone(),
                v.words_checked.to_string(),
                if v.backing_verified {
                    "match the placement map".to_owned()
                } else {
                    "not checked".to_owned()
                },
                v.leaked_slots.to_string(),
            ])?;
        }
        Ok(table)
    }
}

/// `12%`, or `—` without a share.
fn format_share(share: Option<f64>) -> String {
    share.map_or_else(|| "—".to_owned(), |s| format!("{:.0}%", s * 100.0))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::sample_migrate_result;

    #[test]
    fn batch_size_result_is_computed_from_the_totals() {
        let totals = SizeTotals {
            frames_per_batch: 16,
            batches: 4,
            frames: 64,
            round_times: vec![Duration::from_millis(60), Duration::from_millis(40)],
            wall: Duration::from_millis(100),
            total: Duration::from_millis(96),
            protect: Duration::from_millis(6),
            copy: Duration::from_millis(60),
            remap: Duration::from_millis(10),
            dirty: Duration::from_millis(2),
            commit: Duration::from_millis(8),
            overlap: Duration::ZERO,
            bytes_copied: 64 << 21,
            recopied_pages: 0,
            stalls: vec![Duration::from_micros(300), Duration::from_micros(900)],
        };
        let b = BatchSizeResult::build(&totals, 2 << 20, 2.0, Some(1.0)).unwrap();
        assert_eq!(b.bytes_moved, 64 << 21);
        let expected = (64u64 << 21) as f64 / 0.1 / 1e9;
        assert!((b.gbps - expected).abs() < 1e-9, "{}", b.gbps);
        assert_eq!(b.bandwidth.samples_gbps.len(), 2);
        assert!((b.vs_best_copy.unwrap() - expected / 2.0).abs() < 1e-9);
        assert!((b.vs_loaded_copy.unwrap() - expected).abs() < 1e-9);
        let unloaded = BatchSizeResult::build(&totals, 2 << 20, 2.0, None).unwrap();
        assert_eq!(unloaded.vs_loaded_copy, None);
        assert!((b.mean_batch_us - 25_000.0).abs() < 1e-6);
        assert!((b.phases.other_s - 0.010).abs() < 1e-9);
        assert!((b.phases.commit_s - 0.008).abs() < 1e-9);
        let shares = b.phases.shares();
        assert!((shares[1].unwrap() - 0.625).abs() < 1e-9);
        assert_eq!(b.stalls.count, 2);
        assert_eq!(b.stalls.max_us, Some(900.0));
        assert!(BatchSizeResult::build(&SizeTotals::default(), 2 << 20, 2.0, None).is_none());
    }

    #[test]
    fn summary_states_method_reference_and_verdicts() {
        let lines = sample_migrate_result().summary();
        assert!(lines[0].contains("256 MiB guest on 2 vCPUs"));
        assert!(lines[1].contains("10.00 GB/s with 2 threads (nt)"));
        assert!(lines[2].contains("host-side"));
        assert!(lines[3].starts_with("× copy under load = "));
        assert!(lines.iter().any(|l| l.contains(
            "target: remap-precopy, write-busy guest, batches of ≥ 64 frames at ≥ 0.80× of the \
             same copy timed under that load — met (1 of 1 batch sizes); worst 1.440×"
        )));
        assert!(
            lines
                .iter()
                .any(|l| l.contains("≤ 1.00 ms — met (6 of 6 batch sizes); worst 800 µs"))
        );
    }

    #[test]
    fn tables_have_a_row_per_batch_size() {
        let result = sample_migrate_result();
        let tables = result.tables().unwrap();
        assert_eq!(tables.len(), 1 + 4 + 1);
        assert!(tables[0].title().contains("reference"));
        let busy = &tables[2];
        assert!(
            busy.title()
                .starts_with("remap, write-busy guest: memcheck writes")
        );
        assert_eq!(busy.rows().len(), 3);
        assert_eq!(
            busy.rows()[2],
            [
                "64", "3", "8.00", "10%", "0.80×", "1.60×", "16.78 ms", "10%", "60%", "15%", "0%",
                "5%", "10%", "0%", "—", "40", "1.50 ms", "2.00 ms", "5.00 ms"
            ]
        );
        let idle_precopy = &tables[3];
        assert_eq!(
            idle_precopy.rows()[0][14],
            "0%",
            "re-copied is shown for pre-copy"
        );
        assert_eq!(idle_precopy.rows()[0][16], "—", "no stall, no percentile");
        assert_eq!(
            idle_precopy.rows()[0][5],
            idle_precopy.rows()[0][4],
            "the sample's idle guest leaves the copy all of its bandwidth"
        );
        assert!(
            busy.title()
                .ends_with("; copy under this load 5.00 GB/s (spread 10%)")
        );
        let md = tables[5].render_markdown();
        assert!(md.contains("| remap | write-busy | exited 0 after its own final check |"));
    }
}
