//! What the migrate suite found: the run's serde type for the JSON file
//! (its scenarios' results in `scenario_result`), with the targets of
//! issue 27 judged against them ([`Targets`]), and the tables printed and
//! written as markdown.

use serde::{Deserialize, Serialize};

use super::scenario::{GuestLoad, Protocol};
use super::scenario_result::ScenarioResult;
use super::settings::MigrateSettings;
use super::stalls::format_micros;
use super::targets::Targets;
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
    use crate::testing::sample_migrate_result;

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
