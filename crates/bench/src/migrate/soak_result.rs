//! What a soak run found: serde types for the JSON file and the table
//! printed and written as markdown.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::settings::SoakSettings;
use super::soak_leg::{Leg, LegTotals};
use super::stalls::{StallSummary, format_micros};
use super::verify::Verification;
use crate::size::format_size;
use crate::table::{Align, RowWidthError, Table};

/// A whole soak run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakResult {
    /// What was run.
    pub settings: SoakSettings,
    /// One entry per leg, in run order.
    pub legs: Vec<SoakLeg>,
    /// Frames moved over all legs.
    pub total_migrations: u64,
    /// Moves aborted over all legs (any is an error, so 0 here).
    pub total_aborted: u64,
    /// Wall time of the whole run (VM boots and checks included), s.
    pub seconds: f64,
    /// Migrations per second of migration driving (boots and checks not
    /// included).
    pub rate_per_sec: f64,
}

/// One leg: one VM, one protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakLeg {
    /// Which leg.
    pub leg: Leg,
    /// Migrations it had to reach.
    pub target: u64,
    /// Batches run.
    pub batches: u64,
    /// Frames moved.
    pub migrations: u64,
    /// Of them, frames that swapped places.
    pub exchanged: u64,
    /// Moves aborted.
    pub aborted: u64,
    /// Pre-copy re-copied pages.
    pub recopied_pages: u64,
    /// Wall time of the migrations, s.
    pub seconds: f64,
    /// Migrations per second.
    pub rate_per_sec: f64,
    /// Guest writes that waited.
    pub stalls: StallSummary,
    /// The end checks, all passed.
    pub verification: Verification,
}

impl SoakLeg {
    /// The leg's entry from its driver's totals and its checks.
    pub fn new(leg: Leg, target: u64, totals: &LegTotals, verification: Verification) -> Self {
        let seconds = totals.elapsed.as_secs_f64();
        Self {
            leg,
            target,
            batches: totals.batches,
            migrations: totals.moved,
            exchanged: totals.exchanged,
            aborted: totals.aborted,
            recopied_pages: totals.recopied_pages,
            seconds,
            rate_per_sec: totals.moved as f64 / seconds.max(1e-9),
            stalls: StallSummary::of(&totals.stalls),
            verification,
        }
    }
}

impl SoakResult {
    /// The run from its legs and its wall time.
    pub fn new(settings: SoakSettings, legs: Vec<SoakLeg>, elapsed: Duration) -> Self {
        let total_migrations = legs.iter().map(|l| l.migrations).sum();
        let driving: f64 = legs.iter().map(|l| l.seconds).sum();
        Self {
            total_aborted: legs.iter().map(|l| l.aborted).sum(),
            seconds: elapsed.as_secs_f64(),
            rate_per_sec: total_migrations as f64 / driving.max(1e-9),
            total_migrations,
            settings,
            legs,
        }
    }

    /// Lines explaining the method and the totals.
    pub fn summary(&self) -> Vec<String> {
        vec![
            self.settings.describe(),
            format!(
                "total: {} migrations, {} aborted, {:.1} s ({:.0} migrations/s while migrating)",
                self.total_migrations, self.total_aborted, self.seconds, self.rate_per_sec
            ),
            "every leg ends with the guest's own final check of its whole buffer, the VMM's \
             check of the memcheck image, the mappings against the placement map, and a check \
             that every released slot was given back; any failure or aborted move ends \
             tierbench with an error"
                .to_owned(),
            "write stalls are host-side (userfaultfd fault read → wake), one sample per 4 KiB \
             page written while protected"
                .to_owned(),
        ]
    }

    /// One table: a row per leg.
    pub fn tables(&self) -> Result<Vec<Table>, RowWidthError> {
        let frame = format_size(self.settings.frame_size);
        let mut table = Table::new(
            format!(
                "Soak legs ({} guest, {frame} frames, memcheck over {})",
                format_size(self.settings.guest_bytes),
                format_size(self.settings.buffer_bytes)
            ),
            &[
                ("leg", Align::Left),
                ("tiers", Align::Left),
                ("migrations", Align::Right),
                ("exchanged", Align::Right),
                ("batches", Align::Right),
                ("aborted", Align::Right),
                ("time", Align::Right),
                ("migrations/s", Align::Right),
                ("stalled writes", Align::Right),
                ("stall p99", Align::Right),
                ("stall max", Align::Right),
                ("guest check", Align::Left),
                ("VMM image check", Align::Left),
                ("leaked slots", Align::Right),
            ],
        );
        for l in &self.legs {
            let v = &l.verification;
            table.push_row(vec![
                l.leg.name().to_owned(),
                match (l.leg.full_tiers(), l.leg.preallocated()) {
                    (true, _) => "both full".to_owned(),
                    (false, true) => "room for all RAM, preallocated".to_owned(),
                    (false, false) => "room for all RAM".to_owned(),
                },
                l.migrations.to_string(),
                l.exchanged.to_string(),
                l.batches.to_string(),
                l.aborted.to_string(),
                format!("{:.1} s", l.seconds),
                format!("{:.0}", l.rate_per_sec),
                l.stalls.count.to_string(),
                format_micros(l.stalls.p99_us),
                format_micros(l.stalls.max_us),
                if v.guest.starts_with("exited 0") {
                    "passed".to_owned()
                } else {
                    v.guest.clone()
                },
                format!("{} ({} words)", v.image, v.words_checked),
                v.leaked_slots.to_string(),
            ])?;
        }
        Ok(vec![table])
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::sample_soak_result;

    #[test]
    fn totals_add_up_over_the_legs() {
        let result = sample_soak_result();
        assert_eq!(result.total_migrations, 20_009);
        assert_eq!(result.total_aborted, 0);
        assert!((result.rate_per_sec - 20_009.0 / 6.0).abs() < 1e-9);
        assert_eq!(result.seconds, 8.0);
        let summary = result.summary();
        assert!(summary[1].starts_with("total: 20009 migrations, 0 aborted, 8.0 s"));
    }

    #[test]
    fn table_has_a_row_per_leg() {
        let tables = sample_soak_result().tables().unwrap();
        assert_eq!(tables.len(), 1);
        let rows = tables[0].rows();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2][0], "exchange");
        assert_eq!(rows[2][1], "both full");
        assert_eq!(rows[0][2], "6671");
        assert_eq!(rows[0][11], "passed");
        assert!(tables[0].title().contains("64 KiB frames"));
    }
}
