//! What the paired runs found: per workload and tracker, the slowdown of
//! the tracked phases against the untracked phases of the same VMs, block
//! by block, with its 95 % confidence interval and the noise between
//! untracked phases of one VM; and the table of them.

use serde::{Deserialize, Serialize};

use super::collect_cost::CollectCost;
use super::format::format_percent;
use super::host_cpu::PhaseCpu;
use super::paired_run::{PairedMeasurement, PhaseMops};
use super::phase_schedule::{BLOCK_PHASES, PhaseSchedule};
use super::settings::{TrackSettings, Variant};
use crate::stats::{mean, mean_margin_95, ratio, relative_spread};
use crate::table::{Align, RowWidthError, Table};

/// One tracker under one workload, measured in paired runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedResult {
    /// The workload's name.
    pub workload: String,
    /// The tracker's name.
    pub tracker: String,
    /// Milliseconds between `collect()` calls in tracked phases.
    pub interval_ms: u64,
    /// Every run (one VM each), in order.
    pub runs: Vec<PairedRun>,
    /// `1 − tracked / untracked` throughput of each block of every run.
    pub block_slowdowns: Vec<f64>,
    /// Mean of the block slowdowns; `None` without a block.
    pub slowdown: Option<f64>,
    /// Half-width of the 95 % confidence interval of `slowdown`; `None`
    /// with fewer than two blocks.
    pub margin: Option<f64>,
    /// Mean throughput of the untracked phases, Mops/s.
    pub untracked_mops: f64,
    /// Mean throughput of the tracked phases, Mops/s.
    pub tracked_mops: f64,
    /// Largest `(max − min) / median` of the untracked phases of one run:
    /// how much phases differ without any tracker.
    pub untracked_spread: f64,
    /// What `collect()` cost; `None` when it was never called.
    pub cost: Option<CollectCost>,
    /// Mean host CPU use of the tracked and of the untracked phases;
    /// `None` where either kind has no figures.
    #[serde(default)]
    pub cpu: Option<CpuShares>,
}

/// Host CPU use of tracked against untracked phases.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuShares {
    /// Mean over the tracked phases.
    pub tracked: PhaseCpu,
    /// Mean over the untracked phases.
    pub untracked: PhaseCpu,
}

/// One VM of a paired measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedRun {
    /// Every counted phase.
    pub phases: Vec<PhaseMops>,
    /// `1 − mean tracked / mean untracked` phase throughput.
    pub slowdown: Option<f64>,
}

/// `1 − tracked / untracked` over `phases`: mean throughput of the
/// tracked against the untracked ones.
fn slowdown_of<'a>(phases: impl IntoIterator<Item = &'a PhaseMops> + Clone) -> Option<f64> {
    let of = |tracked: bool| {
        mean(
            phases
                .clone()
                .into_iter()
                .filter(|p| p.tracked == tracked)
                .map(|p| p.mops),
        )
    };
    ratio(of(true)?, of(false)?).map(|r| 1.0 - r)
}

impl PairedResult {
    /// `dirty-log every 200 ms`.
    pub fn label(&self) -> String {
        Variant {
            tracker: self.tracker.clone(),
            interval_ms: Some(self.interval_ms),
        }
        .label()
    }

    /// Summarizes the paired runs of `tracker` under `workload`, each
    /// following `schedule`; `None` without a run or with a phase missing.
    pub fn build(
        settings: &TrackSettings,
        workload: &str,
        tracker: &str,
        interval_ms: u64,
        schedule: PhaseSchedule,
        measured: &[PairedMeasurement],
    ) -> Option<Self> {
        let mut block_slowdowns = Vec::new();
        let mut untracked_spread: f64 = 0.0;
        let mut runs = Vec::with_capacity(measured.len());
        for m in measured {
            for block in schedule.blocks() {
                let phases: Vec<&PhaseMops> = block
                    .map(|b| m.phases.iter().find(|p| p.phase == b))
                    .collect::<Option<_>>()?;
                block_slowdowns.push(slowdown_of(phases.iter().copied())?);
            }
            let untracked: Vec<f64> = m
                .phases
                .iter()
                .filter(|p| !p.tracked)
                .map(|p| p.mops)
                .collect();
            untracked_spread = untracked_spread.max(relative_spread(&untracked)?);
            runs.push(PairedRun {
                slowdown: slowdown_of(&m.phases),
                phases: m.phases.clone(),
            });
        }
        let all = || measured.iter().flat_map(|m| &m.phases);
        let mops = |tracked: bool| mean(all().filter(|p| p.tracked == tracked).map(|p| p.mops));
        let cpu = |tracked: bool| {
            PhaseCpu::mean(
                all()
                    .filter(|p| p.tracked == tracked)
                    .filter_map(|p| p.cpu.as_ref()),
            )
        };
        Some(Self {
            workload: workload.to_owned(),
            tracker: tracker.to_owned(),
            interval_ms,
            slowdown: mean(block_slowdowns.iter().copied()),
            margin: mean_margin_95(&block_slowdowns),
            block_slowdowns,
            untracked_mops: mops(false)?,
            tracked_mops: mops(true)?,
            untracked_spread,
            cost: CollectCost::of(measured.iter().map(|m| &m.collects), interval_ms, settings),
            cpu: cpu(true)
                .zip(cpu(false))
                .map(|(tracked, untracked)| CpuShares { tracked, untracked }),
            runs,
        })
    }
}

/// `2.1% ± 1.4%`, `2.1%` without a margin, or `—`.
pub fn format_slowdown(slowdown: Option<f64>, margin: Option<f64>) -> String {
    match (slowdown, margin) {
        (Some(s), Some(m)) => format!("{} ± {}", format_percent(Some(s)), format_percent(Some(m))),
        (s, _) => format_percent(s),
    }
}

/// The table of paired results.
pub fn paired_table(
    settings: &TrackSettings,
    results: &[PairedResult],
) -> Result<Table, RowWidthError> {
    let schedule = settings.paired_schedule();
    let mut table = Table::new(
        format!(
            "Guest throughput in tracked against untracked phases of the same VM ({} VMs per \
             row, {} blocks of 4 phases of {} s each, ABBA/BAAB)",
            settings.paired_repetitions,
            schedule.counted / BLOCK_PHASES,
            settings.phase_seconds
        ),
        &[
            ("workload", Align::Left),
            ("tracker", Align::Left),
            ("interval", Align::Right),
            ("untracked Mops/s", Align::Right),
            ("tracked Mops/s", Align::Right),
            ("slowdown ± 95%", Align::Right),
            ("per-block slowdowns", Align::Right),
            ("untracked phases spread", Align::Right),
        ],
    );
    for r in results {
        table.push_row(vec![
            r.workload.clone(),
            r.tracker.clone(),
            format!("{} ms", r.interval_ms),
            format!("{:.2}", r.untracked_mops),
            format!("{:.2}", r.tracked_mops),
            format_slowdown(r.slowdown, r.margin),
            r.block_slowdowns
                .iter()
                .map(|&s| format_percent(Some(s)))
                .collect::<Vec<_>>()
                .join(" "),
            format_percent(Some(r.untracked_spread)),
        ])?;
    }
    Ok(table)
}

/// The table of host CPU use in the paired runs' tracked and untracked
/// phases.
pub fn paired_cpu_table(results: &[PairedResult]) -> Result<Table, RowWidthError> {
    let mut table = Table::new(
        "Host CPU in tracked / untracked phases of the paired runs (share of one core; the \
         last phase of each VM is left out)",
        &[
            ("workload", Align::Left),
            ("tracker", Align::Left),
            ("interval", Align::Right),
            ("threads beside the vCPUs", Align::Right),
            ("vCPU threads in the host kernel", Align::Right),
            ("vCPU threads waiting for a CPU", Align::Right),
        ],
    );
    for r in results {
        let pair = |of: fn(&PhaseCpu) -> f64| match &r.cpu {
            Some(c) => format!(
                "{} / {}",
                format_percent(Some(of(&c.tracked))),
                format_percent(Some(of(&c.untracked)))
            ),
            None => "—".to_owned(),
        };
        table.push_row(vec![
            r.workload.clone(),
            r.tracker.clone(),
            format!("{} ms", r.interval_ms),
            pair(|c| c.host_threads),
            pair(|c| c.vcpu_kernel),
            pair(|c| c.vcpu_wait),
        ])?;
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::paired_measurement;

    #[test]
    fn blocks_compare_tracked_with_untracked_phases() {
        let settings = TrackSettings::new(true, None).unwrap();
        let schedule = PhaseSchedule::new(1, 2);
        // Untracked phases at 100 Mops/s, tracked at 98 and 96.
        let runs = [
            paired_measurement(schedule, 100.0, 98.0),
            paired_measurement(schedule, 100.0, 96.0),
        ];
        let r =
            PairedResult::build(&settings, "hotset", "dirty-log", 200, schedule, &runs).unwrap();
        assert_eq!(r.block_slowdowns.len(), 4);
        assert!((r.slowdown.unwrap() - 0.03).abs() < 1e-12, "{r:?}");
        assert!(r.margin.unwrap() > 0.0);
        assert!((r.untracked_mops - 100.0).abs() < 1e-12);
        assert!((r.tracked_mops - 97.0).abs() < 1e-12);
        assert_eq!(r.untracked_spread, 0.0);
        assert!((r.runs[1].slowdown.unwrap() - 0.04).abs() < 1e-12);
        assert_eq!(r.cost.as_ref().unwrap().calls, 6);
        assert_eq!(r.label(), "dirty-log every 200 ms");
        let table = paired_table(&settings, &[r]).unwrap();
        assert_eq!(table.rows()[0][5], "3.0% ± 1.8%");
    }

    #[test]
    fn host_cpu_is_averaged_per_kind_of_phase() {
        let settings = TrackSettings::new(true, None).unwrap();
        let schedule = PhaseSchedule::new(1, 1);
        let mut run = paired_measurement(schedule, 100.0, 90.0);
        let r = PairedResult::build(
            &settings,
            "zipf",
            "fault-sample",
            200,
            schedule,
            &[run.clone()],
        );
        assert_eq!(r.unwrap().cpu, None, "no figures, no shares");
        let last = run.phases.len() - 1;
        for (i, p) in run.phases.iter_mut().enumerate() {
            let host = if p.tracked {
                0.1 + i as f64 / 100.0
            } else {
                0.01
            };
            p.cpu = (i != last).then_some(PhaseCpu {
                seconds: 2.0,
                host_threads: host,
                vcpu_kernel: if p.tracked { 0.2 } else { 0.05 },
                vcpu_wait: 0.0,
            });
        }
        let r =
            PairedResult::build(&settings, "zipf", "fault-sample", 200, schedule, &[run]).unwrap();
        let cpu = r.cpu.unwrap();
        // ABBA: phases 1 and 4 untracked, 2 and 3 tracked; 4 (the last)
        // has no figures.
        assert!((cpu.tracked.host_threads - 0.115).abs() < 1e-12, "{cpu:?}");
        assert!((cpu.untracked.host_threads - 0.01).abs() < 1e-12, "{cpu:?}");
        let table = paired_cpu_table(&[r]).unwrap();
        assert_eq!(
            table.rows()[0][3..],
            ["11.5% / 1.0%", "20.0% / 5.0%", "0.0% / 0.0%"]
        );
    }

    #[test]
    fn a_missing_phase_is_no_result() {
        let settings = TrackSettings::new(true, None).unwrap();
        let schedule = PhaseSchedule::new(1, 1);
        let mut run = paired_measurement(schedule, 100.0, 99.0);
        run.phases.pop();
        assert!(
            PairedResult::build(&settings, "zipf", "combined", 200, schedule, &[run]).is_none()
        );
    }

    #[test]
    fn slowdowns_format_with_and_without_margin() {
        assert_eq!(format_slowdown(Some(0.021), Some(0.014)), "2.1% ± 1.4%");
        assert_eq!(format_slowdown(Some(0.021), None), "2.1%");
        assert_eq!(format_slowdown(None, None), "—");
    }
}
