//! What the workloads suite found: serde types for the JSON file, and the
//! tables printed and written as markdown. Modeled figures are labelled
//! "modeled" everywhere they are shown.

use serde::{Deserialize, Serialize};

use super::chart_names::chart_kinds;
use super::settings::{Config, RunCase, WorkloadsSettings};
use super::tier_map::TierMap;
use crate::model::Demand;
use crate::model::{CXL, DRAM, MODELS, OPTANE};
use crate::policy::TARGET_AFTER_SHIFT;
use crate::size::format_size;
use crate::suite_common::{EngineSummary, RatePoint, format_share};
use crate::table::{Align, RowWidthError, Table};
use crate::track::{format_percent, format_us};

/// The workloads suite's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadsResult {
    /// What was measured.
    pub settings: WorkloadsSettings,
    /// One entry per workload and run configuration.
    pub runs: Vec<RunResult>,
}

/// One workload under one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The workload's name.
    pub workload: String,
    /// The payload's workload string.
    pub args: String,
    /// Placement and engine.
    pub config: Config,
    /// DRAM share of guest RAM; `None` for the bounds.
    pub share: Option<f64>,
    /// In a two-VM mix, the workload of the VM beside it.
    #[serde(default)]
    pub mix: Option<String>,
    /// Frames the fast tier may hold (the oracle's room).
    pub fast_frames: usize,
    /// Mean DRAM-hit ratio over the placement samples in phases.
    pub dram_hit: Option<f64>,
    /// Mean of the oracle's DRAM-hit ratio over the same samples.
    pub oracle_hit: Option<f64>,
    /// Mean guest throughput over the phases, Mops/s.
    pub mops: Option<f64>,
    /// Bytes the engine moved from phase 0 on (both ways).
    pub moved_bytes: u64,
    /// Bytes the engine promoted from phase 0 on.
    #[serde(default)]
    pub promoted_bytes: u64,
    /// Bytes the engine demoted from phase 0 on.
    #[serde(default)]
    pub demoted_bytes: u64,
    /// `moved_bytes` over the time from phase 0 to the last sample, MB/s.
    pub migrate_mbps: Option<f64>,
    /// The longest convergence time over the phases after a shift (see
    /// [`PhaseResult::convergence_secs`]); `None` for the bounds and when
    /// one of them never converged.
    #[serde(default)]
    pub convergence_secs: Option<f64>,
    /// Modeled cost over all phases, one per memory model.
    pub modeled: Vec<ModeledCost>,
    /// Per phase.
    pub phases: Vec<PhaseResult>,
    /// The engine's counters over the whole run, when it ran.
    pub engine: Option<EngineSummary>,
    /// DRAM-hit ratio at every placement sample inside a phase.
    pub timeline: Vec<HitPoint>,
    /// Migration rate per engine interval from phase 0 on (engine runs
    /// only).
    #[serde(default)]
    pub rates: Vec<RatePoint>,
    /// Where every frame was from phase 0 on, downsampled (every
    /// configuration but the bounds, whose placement never changes).
    #[serde(default)]
    pub tier_map: Option<TierMap>,
}

impl RunResult {
    /// The run's configuration.
    pub fn case(&self) -> RunCase {
        RunCase {
            config: self.config,
            share: self.share,
        }
    }

    /// `hotset, first-touch, DRAM 25%` (`, beside zipf` in a mix).
    pub fn label(&self) -> String {
        format!(
            "{}, {}{}",
            self.workload,
            self.case().label(),
            self.beside()
        )
    }

    /// `, beside zipf` in a mix, else nothing.
    fn beside(&self) -> String {
        self.mix
            .as_ref()
            .map_or_else(String::new, |other| format!(", beside {other}"))
    }

    /// The configuration's name, with the neighbour in a mix.
    fn config_label(&self) -> String {
        format!("{}{}", self.config.name(), self.beside())
    }

    /// The modeled cost on the model named `model`.
    pub fn modeled_on(&self, model: &str) -> Option<&ModeledCost> {
        self.modeled.iter().find(|c| c.model == model)
    }
}

/// One phase of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// The phase.
    pub phase: u64,
    /// When it began, seconds after phase 0 began.
    #[serde(default)]
    pub start_secs: f64,
    /// Seconds from its start until the DRAM-hit ratio first reached
    /// the after-shift target share of the oracle's (as in the policy
    /// suite); `None` when it never did.
    #[serde(default)]
    pub convergence_secs: Option<f64>,
    /// Placement samples taken in it.
    pub samples: usize,
    /// Guest throughput, Mops/s (every vCPU's phase report).
    pub mops: Option<f64>,
    /// Mean DRAM-hit ratio over its samples.
    pub dram_hit: Option<f64>,
    /// The oracle's DRAM-hit ratio.
    pub oracle_hit: f64,
    /// Operations, bytes and vCPU time the guest reported.
    pub demand: Demand,
    /// Modeled cost of the phase, one per memory model.
    pub modeled: Vec<ModeledCost>,
}

/// A placement's modeled cost on one memory model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeledCost {
    /// `DRAM+CXL` or `DRAM+Optane`.
    pub model: String,
    /// Modeled memory-stall time, vCPU seconds.
    pub stall_secs: f64,
    /// Modeled stall beyond all-DRAM's, vCPU seconds.
    pub extra_secs: f64,
    /// Measured vCPU seconds (at this machine's DRAM speed).
    pub measured_secs: f64,
    /// Operations the stall is for.
    pub ops: u64,
    /// `measured / (measured + extra)`: throughput relative to all-DRAM.
    pub relative_throughput: Option<f64>,
}

impl ModeledCost {
    /// Modeled stall per operation, ns.
    pub fn stall_ns_per_op(&self) -> Option<f64> {
        (self.ops > 0).then(|| self.stall_secs * 1e9 / self.ops as f64)
    }
}

/// The DRAM-hit ratio at one placement sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitPoint {
    /// Seconds after phase 0 began.
    pub secs: f64,
    /// The phase running.
    pub phase: u64,
    /// Share of the phase's accesses the placement serves from DRAM.
    pub dram_hit: f64,
    /// The oracle's share with the same room.
    pub oracle_hit: f64,
}

fn format_mops(mops: Option<f64>) -> String {
    mops.map_or_else(|| "—".to_owned(), |m| format!("{m:.2}"))
}

fn format_ns(ns: Option<f64>) -> String {
    ns.map_or_else(|| "—".to_owned(), |n| format!("{n:.0}"))
}

fn format_rel(r: Option<f64>) -> String {
    r.map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"))
}

/// A convergence time, `never` when the target was not reached, `—` for
/// the bounds (nothing to converge to).
fn format_convergence(config: Config, secs: Option<f64>) -> String {
    if config.is_bound() {
        "—".to_owned()
    } else {
        secs.map_or_else(|| "never".to_owned(), |s| format!("{s:.1} s"))
    }
}

impl WorkloadsResult {
    /// Lines explaining the method and the model.
    pub fn summary(&self) -> Vec<String> {
        vec![
            format!("tiers: {}", self.settings.tiers.label()),
            self.settings.describe(),
            format!(
                "two-VM mix: {} side by side, each VM its own guest, DRAM share and engine, \
                 under every configuration but the bounds; rows say \"beside\" the other",
                self.settings
                    .mixes
                    .iter()
                    .map(|[a, b]| format!("{a} + {b}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "DRAM-hit: share of the phase's accesses (the payload's ground truth, per frame) \
             served by frames on the fast tier, mean over the placement samples; oracle: the \
             best share with the same room (all of RAM for all-fast, none for all-slow)"
                .to_owned(),
            format!(
                "modeled (not measured: both tiers here run at DRAM speed): stall = Σ over tiers of \
                 the tier's access share × ops × latency (hotset, zipf, pmbench: each operation \
                 one cache-missing access) or × bytes / bandwidth (stream); {} {} ns {} GB/s, {} {} ns {} GB/s, {} {} ns {} GB/s (Izraelevitz \
                 et al. 2019; Pond, ASPLOS 2023; Sun et al., MICRO 2023); modeled relative \
                 throughput = measured / (measured + stall beyond all-DRAM's)",
                DRAM.name,
                DRAM.latency_ns,
                DRAM.bandwidth_gbps,
                CXL.name,
                CXL.latency_ns,
                CXL.bandwidth_gbps,
                OPTANE.name,
                OPTANE.latency_ns,
                OPTANE.bandwidth_gbps,
            ),
            format!(
                "converged after shift: seconds from a phase's start until DRAM-hit first \
                 reached {:.0}% of the oracle's (the policy suite's measure), longest over the \
                 phases after a shift; promoted/demoted: the engine's moves from phase 0 on; \
                 migration stalls are not reported (the engine's counters hold none; aborted \
                 moves are in the engine table)",
                TARGET_AFTER_SHIFT * 100.0
            ),
            format!("charts (--svg): {}", chart_kinds().join("; ")),
        ]
    }

    /// The run table, the per-phase throughput table and the engine table.
    pub fn tables(&self) -> Result<Vec<Table>, RowWidthError> {
        Ok(vec![
            self.run_table()?,
            self.phase_table()?,
            self.engine_table()?,
        ])
    }

    fn run_table(&self) -> Result<Table, RowWidthError> {
        let mut columns = vec![
            ("workload", Align::Left),
            ("config", Align::Left),
            ("DRAM", Align::Right),
            ("Mops/s", Align::Right),
            ("DRAM-hit", Align::Right),
            ("oracle", Align::Right),
            ("converged after shift", Align::Right),
            ("promoted", Align::Right),
            ("demoted", Align::Right),
            ("MB/s", Align::Right),
        ];
        let headers: Vec<(String, String)> = MODELS
            .iter()
            .map(|m| {
                (
                    format!("modeled {} stall ns/op", m.name),
                    format!("modeled {} rel. throughput", m.name),
                )
            })
            .collect();
        for (stall, rel) in &headers {
            columns.push((stall.as_str(), Align::Right));
            columns.push((rel.as_str(), Align::Right));
        }
        let mut table = Table::new(
            format!(
                "Per run ({}): guest throughput, DRAM-hit against the oracle, the longest \
                 convergence after a phase shift, bytes promoted and demoted from phase 0 on and \
                 their rate, and the modeled cost on DRAM+CXL and DRAM+Optane",
                self.settings.tiers.label()
            ),
            &columns,
        );
        for r in &self.runs {
            let mut row = vec![
                r.workload.clone(),
                r.config_label(),
                r.share.map_or_else(
                    || {
                        if r.config == Config::AllFast {
                            "100%"
                        } else {
                            "0%"
                        }
                        .to_owned()
                    },
                    format_share,
                ),
                format_mops(r.mops),
                format_percent(r.dram_hit),
                format_percent(r.oracle_hit),
                format_convergence(r.config, r.convergence_secs),
                format_size(r.promoted_bytes),
                format_size(r.demoted_bytes),
                r.migrate_mbps
                    .map_or_else(|| "—".to_owned(), |m| format!("{m:.1}")),
            ];
            for model in MODELS {
                let cost = r.modeled_on(model.name);
                row.push(format_ns(cost.and_then(ModeledCost::stall_ns_per_op)));
                row.push(format_rel(cost.and_then(|c| c.relative_throughput)));
            }
            table.push_row(row)?;
        }
        Ok(table)
    }

    fn phase_table(&self) -> Result<Table, RowWidthError> {
        let mut table = Table::new(
            "Per phase: guest throughput, DRAM-hit and convergence (phase 0 follows boot; \
             later phases shift the hot set)",
            &[
                ("workload", Align::Left),
                ("config", Align::Left),
                ("phase", Align::Right),
                ("start", Align::Right),
                ("Mops/s", Align::Right),
                ("DRAM-hit", Align::Right),
                ("oracle", Align::Right),
                ("converged", Align::Right),
            ],
        );
        for r in &self.runs {
            for p in &r.phases {
                table.push_row(vec![
                    r.workload.clone(),
                    format!("{}{}", r.case().label(), r.beside()),
                    p.phase.to_string(),
                    format!("{:.1} s", p.start_secs),
                    format_mops(p.mops),
                    format_percent(p.dram_hit),
                    format_percent(Some(p.oracle_hit)),
                    format_convergence(r.config, p.convergence_secs),
                ])?;
            }
        }
        Ok(table)
    }

    fn engine_table(&self) -> Result<Table, RowWidthError> {
        let mut table = Table::new(
            "Engine runs: counters over the whole run (boot included), mean time per interval \
             of each stage, and the engine thread's time in all (collect = the tracker's share)",
            &[
                ("workload", Align::Left),
                ("config", Align::Left),
                ("intervals", Align::Right),
                ("promoted", Align::Right),
                ("demoted", Align::Right),
                ("aborted", Align::Right),
                ("collect", Align::Right),
                ("heat", Align::Right),
                ("plan", Align::Right),
                ("migrate", Align::Right),
                ("tracker total", Align::Right),
                ("engine total", Align::Right),
            ],
        );
        for r in &self.runs {
            let Some(e) = &r.engine else { continue };
            table.push_row(vec![
                r.workload.clone(),
                format!("{}{}", r.case().label(), r.beside()),
                e.intervals.to_string(),
                format_size(e.promoted_bytes),
                format_size(e.demoted_bytes),
                e.aborted.to_string(),
                format_us(e.collect_us),
                format_us(e.heat_us),
                format_us(e.plan_us),
                format_us(e.migrate_us),
                format_us(e.collect_us * e.intervals as f64),
                format_us(
                    (e.collect_us + e.heat_us + e.plan_us + e.migrate_us) * e.intervals as f64,
                ),
            ])?;
        }
        Ok(table)
    }
}
