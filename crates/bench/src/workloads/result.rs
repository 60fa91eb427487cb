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
use crate::suite_common::rows::{self, KeyedRun, PhaseRow, RunRow, SuiteTables};
use crate::suite_common::{EngineSummary, format_share};
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
    /// Workload, payload string, throughput, convergence (see
    /// [`PhaseRow::convergence_secs`]) and migration rates (flattened:
    /// the JSON keeps its keys).
    #[serde(flatten)]
    pub row: RunRow,
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
    /// Modeled cost over all phases, one per memory model.
    pub modeled: Vec<ModeledCost>,
    /// Per phase.
    pub phases: Vec<PhaseResult>,
    /// The engine's counters over the whole run, when it ran.
    pub engine: Option<EngineSummary>,
    /// DRAM-hit ratio at every placement sample inside a phase.
    pub timeline: Vec<HitPoint>,
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
            self.row.workload,
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
    /// Phase, start, samples, throughput, the oracle's DRAM-hit ratio and
    /// convergence (flattened: the JSON keeps its keys).
    #[serde(flatten)]
    pub row: PhaseRow,
    /// Mean DRAM-hit ratio over its samples.
    pub dram_hit: Option<f64>,
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

fn format_ns(ns: Option<f64>) -> String {
    ns.map_or_else(|| "—".to_owned(), |n| format!("{n:.0}"))
}

/// A convergence time, `never` when the target was not reached, `—` for
/// the bounds (nothing to converge to).
fn format_convergence(config: Config, secs: Option<f64>) -> String {
    if config.is_bound() {
        "—".to_owned()
    } else {
        rows::format_secs(secs)
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
}

impl SuiteTables for WorkloadsResult {
    fn run_table(&self) -> Result<Table, RowWidthError> {
        let headers: Vec<[String; 2]> = MODELS
            .iter()
            .map(|m| {
                [
                    format!("modeled {} stall ns/op", m.name),
                    format!("modeled {} rel. throughput", m.name),
                ]
            })
            .collect();
        let mut right = vec![
            "DRAM",
            "Mops/s",
            "DRAM-hit",
            "oracle",
            "converged after shift",
            "promoted",
            "demoted",
            "MB/s",
        ];
        right.extend(headers.iter().flatten().map(String::as_str));
        rows::table_of(
            format!(
                "Per run ({}): guest throughput, DRAM-hit against the oracle, the longest \
                 convergence after a phase shift, bytes promoted and demoted from phase 0 on and \
                 their rate, and the modeled cost on DRAM+CXL and DRAM+Optane",
                self.settings.tiers.label()
            ),
            &rows::columns(&["workload", "config"], &right),
            &self.runs,
            |r| {
                let mut row = vec![
                    r.row.workload.clone(),
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
                    rows::format_mops(r.row.mops),
                    format_percent(r.dram_hit),
                    format_percent(r.oracle_hit),
                    format_convergence(r.config, r.row.convergence_secs),
                    format_size(r.promoted_bytes),
                    format_size(r.demoted_bytes),
                    r.migrate_mbps
                        .map_or_else(|| "—".to_owned(), |m| format!("{m:.1}")),
                ];
                for model in MODELS {
                    let cost = r.modeled_on(model.name);
                    row.push(format_ns(cost.and_then(ModeledCost::stall_ns_per_op)));
                    row.push(rows::format_times(cost.and_then(|c| c.relative_throughput)));
                }
                row
            },
        )
    }

    fn phase_table(&self) -> Result<Table, RowWidthError> {
        rows::phase_table(
            "Per phase: guest throughput, DRAM-hit and convergence (phase 0 follows boot; \
             later phases shift the hot set)",
            &[
                "phase",
                "start",
                "Mops/s",
                "DRAM-hit",
                "oracle",
                "converged",
            ],
            &self.runs,
            |r, p| {
                vec![
                    p.row.phase.to_string(),
                    format!("{:.1} s", p.row.start_secs),
                    rows::format_mops(p.row.mops),
                    format_percent(p.dram_hit),
                    format_percent(Some(p.row.oracle_hit)),
                    format_convergence(r.config, p.row.convergence_secs),
                ]
            },
        )
    }

    fn engine_table(&self) -> Result<Table, RowWidthError> {
        rows::keyed_table(
            "Engine runs: counters over the whole run (boot included), mean time per interval \
             of each stage, and the engine thread's time in all (collect = the tracker's share)",
            &[
                "intervals",
                "promoted",
                "demoted",
                "aborted",
                "collect",
                "heat",
                "plan",
                "migrate",
                "tracker total",
                "engine total",
            ],
            &self.runs,
            |r| {
                let e = r.engine.as_ref()?;
                let stages = e.collect_us + e.heat_us + e.plan_us + e.migrate_us;
                Some(vec![
                    e.intervals.to_string(),
                    format_size(e.promoted_bytes),
                    format_size(e.demoted_bytes),
                    e.aborted.to_string(),
                    format_us(e.collect_us),
                    format_us(e.heat_us),
                    format_us(e.plan_us),
                    format_us(e.migrate_us),
                    format_us(e.collect_us * e.intervals as f64),
                    format_us(stages * e.intervals as f64),
                ])
            },
        )
    }
}

impl KeyedRun for RunResult {
    type Phase = PhaseResult;
    const KEY: &'static [(&'static str, Align)] =
        &[("workload", Align::Left), ("config", Align::Left)];

    fn key(&self) -> Vec<String> {
        vec![
            self.row.workload.clone(),
            format!("{}{}", self.case().label(), self.beside()),
        ]
    }

    fn phases(&self) -> &[PhaseResult] {
        &self.phases
    }
}
