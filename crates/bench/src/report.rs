//! `BenchReport`: a whole tierbench run (how it was started, the machine,
//! every suite's result) and its three renderings: text for stdout, JSON
//! for machines, a markdown section for docs/benchmarks.md.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::invocation::Invocation;
use crate::machine::MachineInfo;
use crate::suite::SuiteResult;
use crate::table::RowWidthError;

/// Name written in the `tool` field.
pub const TOOL: &str = "tierbench";

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Always `tierbench`.
    pub tool: String,
    /// Version of the `bench` crate that produced the report.
    pub version: String,
    /// How the run was started.
    pub invocation: Invocation,
    /// Where it ran.
    pub machine: MachineInfo,
    /// One entry per suite, in run order.
    pub results: Vec<SuiteResult>,
}

impl BenchReport {
    /// A report with no results yet.
    pub fn new(invocation: Invocation, machine: MachineInfo) -> Self {
        Self {
            tool: TOOL.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            invocation,
            machine,
            results: Vec::new(),
        }
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// Parses a report written by `to_json`.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The header printed before any suite runs.
    pub fn render_header(&self) -> String {
        format!(
            "{} on {}, {}\n\n",
            self.invocation.command_line,
            self.machine.describe(),
            self.invocation.date,
        )
    }

    /// The markdown section: a heading, the exact command line, machine,
    /// date and load, then each suite's summary and tables.
    pub fn render_markdown(&self) -> Result<String, RowWidthError> {
        let suites: Vec<&str> = self.results.iter().map(|r| r.suite().name()).collect();
        let mut out = format!(
            "## tierbench {} — {}\n\n",
            suites.join(", "),
            self.invocation.date
        );
        let _ = writeln!(out, "* Command: `{}`", self.invocation.command_line);
        let _ = writeln!(out, "* Machine: {}", self.machine.describe());
        let _ = writeln!(out, "* Date: {} (UTC)", self.invocation.date);
        let _ = writeln!(out, "* Load: {}", self.invocation.describe_load());
        let _ = writeln!(
            out,
            "* Mode: {}",
            if self.invocation.quick {
                "quick (CI smoke)"
            } else {
                "full"
            }
        );
        for result in &self.results {
            let suite = result.suite();
            let _ = write!(out, "\n### {}: {}\n\n", suite.name(), suite.title());
            for line in result.summary() {
                let _ = writeln!(out, "* {line}");
            }
            for table in result.tables()? {
                let _ = write!(
                    out,
                    "\n#### {}\n\n{}",
                    table.title(),
                    table.render_markdown()
                );
            }
        }
        Ok(out)
    }
}

/// One suite's result as text for stdout: summary lines, then tables.
pub fn render_suite_text(result: &SuiteResult) -> Result<String, RowWidthError> {
    let suite = result.suite();
    let mut out = format!("== {}: {} ==\n", suite.name(), suite.title());
    for line in result.summary() {
        let _ = writeln!(out, "  {line}");
    }
    for table in result.tables()? {
        out.push('\n');
        out.push_str(&table.render_text());
    }
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        sample_copy_result, sample_migrate_result, sample_report, sample_soak_result,
    };

    #[test]
    fn json_round_trips() {
        let report = sample_report();
        let json = report.to_json().unwrap();
        assert_eq!(BenchReport::from_json(&json).unwrap(), report);
    }

    #[test]
    fn json_has_the_documented_shape() {
        let value: serde_json::Value =
            serde_json::from_str(&sample_report().to_json().unwrap()).unwrap();
        assert_eq!(value["tool"], "tierbench");
        assert_eq!(value["invocation"]["date"], "2026-01-02");
        assert_eq!(value["machine"]["cores"], 2);
        let copy = &value["results"][0];
        assert_eq!(copy["suite"], "copy");
        assert_eq!(copy["settings"]["batch_bytes"], 64 << 20);
        assert_eq!(copy["best_parallel"]["mode"], "nt");
        let engine = &copy["range_sizes"][0]["engines"][0];
        assert_eq!(engine["name"], "cpu/memcpy");
        assert!(engine["bandwidth"]["median_gbps"].as_f64().unwrap() > 0.0);
        assert!(engine["vs_memcpy"].as_f64().is_some());
    }

    #[test]
    fn markdown_names_command_machine_and_date() {
        let md = sample_report().render_markdown().unwrap();
        assert!(md.starts_with("## tierbench copy — 2026-01-02\n"));
        assert!(md.contains("* Command: `tierbench copy --quick --markdown out.md`"));
        assert!(md.contains("* Machine: Test CPU 9000, 2 cores, Linux 6.18.0 x86_64"));
        assert!(md.contains("* Date: 2026-01-02 (UTC)"));
        assert!(md.contains("* Load: 0.50 at start, 1.25 at end"));
        assert!(md.contains("| engine | GB/s | GiB/s | spread | × memcpy | × best parallel |"));
        assert!(md.contains("| threads | mode | GB/s |"));
        assert!(md.contains("#### 4 KiB ranges (16384 per batch, shuffled)"));
        assert!(md.contains("| memcpy loop (baseline) | 5.00 | 4.66 | 10% | 1.00× | 0.50× |"));
    }

    #[test]
    fn migrate_and_soak_sections_render() {
        let mut report = sample_report();
        report.results = vec![
            SuiteResult::Migrate(Box::new(sample_migrate_result())),
            SuiteResult::MigrateSoak(sample_soak_result()),
        ];
        let md = report.render_markdown().unwrap();
        assert!(md.starts_with("## tierbench migrate, migrate-soak — 2026-01-02\n"));
        assert!(md.contains("### migrate: live migration in a KVM VM"));
        assert!(md.contains("#### remap-precopy, write-busy guest: memcheck writes"));
        assert!(md.contains(
            "| frames/batch | batches | GB/s | spread | × best copy | × copy under load | per batch \
             | protect | copy | remap | dirty | commit | other | overlap | re-copied \
             | stalled writes \
             | stall p50 | stall p99 \
             | stall max |"
        ));
        assert!(md.contains("### migrate-soak: migration soak"));
        assert!(md.contains("* total: 20009 migrations, 0 aborted"));
        assert_eq!(
            BenchReport::from_json(&report.to_json().unwrap()).unwrap(),
            report
        );
    }

    #[test]
    fn text_has_summary_and_tables() {
        let text = render_suite_text(&SuiteResult::Copy(sample_copy_result())).unwrap();
        assert!(text.starts_with("== copy: "));
        assert!(text.contains(
            "best parallel copy (contiguous shares, same run): 10.00 GB/s with 2 threads (nt)"
        ));
        assert!(text.contains("memcpy loop (baseline)"));
        assert!(text.contains("threads:2/nt"));
    }
}
