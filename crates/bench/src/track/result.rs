//! What the track suite found: serde types for the JSON file, built from
//! the measured runs, the issue-4 slowdown target checked against them,
//! and the tables printed and written as markdown.

use serde::{Deserialize, Serialize};

use super::collect_cost::CollectCost;
use super::format::{format_guest, format_interval, format_percent, format_us};
use super::guest::RunMeasurement;
use super::heat::HeatSizeResult;
use super::paired_result::{PairedResult, format_slowdown, paired_cpu_table, paired_table};
use super::settings::{
    TARGET_MAX_SLOWDOWN, TARGET_MAX_UPPER, TARGET_TRACKER, TrackSettings, Variant,
};
use crate::size::format_size;
use crate::stats::{median, ratio, relative_spread};
use crate::table::{Align, RowWidthError, Table};

/// The track suite's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackResult {
    /// What was measured.
    pub settings: TrackSettings,
    /// One entry per workload.
    pub workloads: Vec<WorkloadResult>,
    /// Paired runs: per workload and tracker, tracked against untracked
    /// phases of the same VMs.
    #[serde(default)]
    pub paired: Vec<PairedResult>,
    /// Heat-model cost per size.
    pub heat: Vec<HeatSizeResult>,
    /// The slowdown target of issue 4 against the paired runs.
    pub target: SlowdownTarget,
}

/// Every tracker under one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// The workload's name.
    pub workload: String,
    /// The payload's workload string.
    pub args: String,
    /// One entry per tracker and interval, `none` first.
    pub trackers: Vec<TrackerResult>,
}

/// One tracker at one interval under one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackerResult {
    /// The tracker's name (`none`: no tracking, the baseline).
    pub tracker: String,
    /// Milliseconds between `collect()` calls; `None` for the baseline.
    pub interval_ms: Option<u64>,
    /// Guest throughput over the repetitions.
    pub throughput: Throughput,
    /// `1 − median tracked / median untracked` (negative: faster than
    /// untracked, i.e. noise); `None` for the baseline itself.
    pub slowdown: Option<f64>,
    /// The same per repetition, against that repetition's untracked run.
    pub paired_slowdowns: Vec<f64>,
    /// What `collect()` cost; `None` for the baseline.
    pub cost: Option<CollectCost>,
}

/// Guest throughput of repeated runs, million operations per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Median.
    pub median_mops: f64,
    /// Slowest run.
    pub min_mops: f64,
    /// Fastest run.
    pub max_mops: f64,
    /// `(max − min) / median`.
    pub spread: f64,
    /// Every run, in repetition order.
    pub samples_mops: Vec<f64>,
}

/// The issue-4 target judged against the paired runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowdownTarget {
    /// Largest slowdown allowed.
    pub max_slowdown: f64,
    /// Whether every tracker's mean slowdown kept to it on every workload
    /// at every interval (false when no tracker was measured).
    pub met: bool,
    /// Whether the upper end of every 95 % confidence interval kept to it
    /// too: met beyond the noise of the measurement.
    #[serde(default)]
    pub shown: bool,
    /// The verdict at each interval.
    pub per_interval: Vec<IntervalVerdict>,
    /// The largest spread of the untracked fresh-VM runs: fresh-VM
    /// slowdowns below it are within the run-to-run noise of this machine.
    pub baseline_spread: Option<f64>,
    /// The largest spread of the untracked phases of one paired run.
    #[serde(default)]
    pub phase_spread: Option<f64>,
}

/// The target at one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalVerdict {
    /// Milliseconds between `collect()` calls.
    pub interval_ms: u64,
    /// Whether every tracker's mean slowdown kept to the target on every
    /// workload.
    pub met: bool,
    /// Whether every upper 95 % bound did.
    #[serde(default)]
    pub shown: bool,
    /// The largest slowdown, and where.
    pub worst: Option<JudgedSlowdown>,
    /// The largest upper 95 % bound, and where.
    #[serde(default)]
    pub worst_bound: Option<JudgedSlowdown>,
}

/// A slowdown and where it was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgedSlowdown {
    /// The slowdown.
    pub slowdown: f64,
    /// Half-width of its 95 % confidence interval, when known.
    #[serde(default)]
    pub margin: Option<f64>,
    /// The workload.
    pub workload: String,
    /// The tracker.
    pub tracker: String,
}

impl JudgedSlowdown {
    /// `4.1% ± 1.2% (combined, zipf)`.
    fn describe(&self) -> String {
        format!(
            "{} ({}, {})",
            format_slowdown(Some(self.slowdown), self.margin),
            self.tracker,
            self.workload
        )
    }
}

impl Throughput {
    /// Summarizes `samples` (Mops/s); `None` without samples or with a
    /// non-finite one.
    pub fn of(samples: &[f64]) -> Option<Self> {
        if samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let median_mops = median(samples)?;
        Some(Self {
            median_mops,
            min_mops: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max_mops: samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            spread: relative_spread(samples).unwrap_or(0.0),
            samples_mops: samples.to_vec(),
        })
    }
}

impl WorkloadResult {
    /// Summarizes the runs of `workload`: `runs[v][r]` is variant `v` of
    /// `variants` (the untracked baseline among them) in repetition `r`.
    /// `None` when a variant has no run or there is no baseline.
    pub fn build(
        settings: &TrackSettings,
        workload: &str,
        variants: &[Variant],
        runs: &[Vec<RunMeasurement>],
    ) -> Option<Self> {
        let mops = |runs: &[RunMeasurement]| runs.iter().map(|r| r.mops).collect::<Vec<f64>>();
        let baseline_index = variants.iter().position(|v| v.interval_ms.is_none())?;
        let baseline = mops(runs.get(baseline_index)?);
        let baseline_median = median(&baseline)?;
        if variants.len() != runs.len() {
            return None;
        }
        let trackers = variants
            .iter()
            .zip(runs)
            .map(|(variant, runs)| {
                let samples = mops(runs);
                let throughput = Throughput::of(&samples)?;
                let is_baseline = variant.interval_ms.is_none();
                let slowdown =
                    |tracked: f64, untracked: f64| ratio(tracked, untracked).map(|r| 1.0 - r);
                Some(TrackerResult {
                    tracker: variant.tracker.clone(),
                    interval_ms: variant.interval_ms,
                    slowdown: if is_baseline {
                        None
                    } else {
                        slowdown(throughput.median_mops, baseline_median)
                    },
                    paired_slowdowns: if is_baseline {
                        Vec::new()
                    } else {
                        samples
                            .iter()
                            .zip(&baseline)
                            .filter_map(|(&t, &u)| slowdown(t, u))
                            .collect()
                    },
                    cost: variant.interval_ms.and_then(|ms| {
                        let collects = runs.iter().filter_map(|r| r.collects.as_ref());
                        CollectCost::of(collects, ms, settings)
                    }),
                    throughput,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            workload: workload.to_owned(),
            args: settings.workload_args(workload),
            trackers,
        })
    }

    /// The entry of `tracker` at `interval_ms` (`None` for the
    /// baseline), if measured.
    pub fn tracker(&self, tracker: &str, interval_ms: Option<u64>) -> Option<&TrackerResult> {
        self.trackers
            .iter()
            .find(|t| t.tracker == tracker && t.interval_ms == interval_ms)
    }
}

impl TrackerResult {
    /// `dirty-log every 200 ms`, or `none`.
    pub fn label(&self) -> String {
        Variant {
            tracker: self.tracker.clone(),
            interval_ms: self.interval_ms,
        }
        .label()
    }
}

impl SlowdownTarget {
    /// Judges the default tracker's `paired` runs against the issue-24
    /// target (mean and 95 % upper bound); the untracked `fresh` runs give
    /// the run-to-run noise between VMs.
    pub fn judge(paired: &[PairedResult], fresh: &[WorkloadResult]) -> Self {
        let mut per_interval: Vec<IntervalVerdict> = Vec::new();
        for p in paired.iter().filter(|p| p.tracker == TARGET_TRACKER) {
            let verdict = match per_interval
                .iter()
                .position(|v| v.interval_ms == p.interval_ms)
            {
                Some(i) => &mut per_interval[i],
                None => {
                    per_interval.push(IntervalVerdict {
                        interval_ms: p.interval_ms,
                        met: true,
                        shown: true,
                        worst: None,
                        worst_bound: None,
                    });
                    let last = per_interval.len() - 1;
                    &mut per_interval[last]
                }
            };
            // A slowdown that could not be computed misses; without a
            // margin, nothing is shown.
            let judged = JudgedSlowdown {
                slowdown: p.slowdown.unwrap_or(f64::INFINITY),
                margin: p.margin,
                workload: p.workload.clone(),
                tracker: p.tracker.clone(),
            };
            let bound = judged.slowdown + judged.margin.unwrap_or(f64::INFINITY);
            verdict.met &= judged.slowdown <= TARGET_MAX_SLOWDOWN;
            verdict.shown &= bound <= TARGET_MAX_UPPER;
            if verdict
                .worst_bound
                .as_ref()
                .is_none_or(|j| bound > j.slowdown + j.margin.unwrap_or(f64::INFINITY))
            {
                verdict.worst_bound = Some(judged.clone());
            }
            if verdict
                .worst
                .as_ref()
                .is_none_or(|j| judged.slowdown > j.slowdown)
            {
                verdict.worst = Some(judged);
            }
        }
        let largest = |spreads: Vec<f64>| spreads.into_iter().reduce(f64::max);
        let baseline_spread = largest(
            fresh
                .iter()
                .flat_map(|w| &w.trackers)
                .filter(|t| t.interval_ms.is_none())
                .map(|t| t.throughput.spread)
                .collect(),
        );
        let phase_spread = largest(paired.iter().map(|p| p.untracked_spread).collect());
        let met = !per_interval.is_empty() && per_interval.iter().all(|v| v.met);
        Self {
            max_slowdown: TARGET_MAX_SLOWDOWN,
            met,
            shown: met && per_interval.iter().all(|v| v.shown),
            per_interval,
            baseline_spread,
            phase_spread,
        }
    }

    /// One line per interval: the target, met or missed, with the
    /// deciding numbers; then the noise of each method.
    pub fn describe(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .per_interval
            .iter()
            .map(|v| {
                let worst = v
                    .worst
                    .as_ref()
                    .map_or_else(String::new, JudgedSlowdown::describe);
                let verdict = if !v.met {
                    format!("MISSED: largest {worst}")
                } else if v.shown {
                    format!("met, every 95% interval below the target: largest {worst}")
                } else {
                    let bound = v
                        .worst_bound
                        .as_ref()
                        .map_or_else(String::new, JudgedSlowdown::describe);
                    format!(
                        "met by every mean, not shown beyond noise: largest {worst}; widest \
                         interval {bound}"
                    )
                };
                format!(
                    "target: guest slowdown ≤ {:.0}% on hotset and zipf, collect() every {} ms, \
                     tracked against untracked phases of the same VMs — {verdict}",
                    self.max_slowdown * 100.0,
                    v.interval_ms
                )
            })
            .collect();
        if lines.is_empty() {
            lines.push(format!(
                "target: guest slowdown ≤ {:.0}% — MISSED: no tracker was measured",
                self.max_slowdown * 100.0
            ));
        }
        if let Some(s) = self.phase_spread {
            lines.push(format!(
                "untracked phases of one VM differ by up to {}",
                format_percent(Some(s))
            ));
        }
        if let Some(s) = self.baseline_spread {
            lines.push(format!(
                "fresh VMs: the untracked runs spread up to {} (load from other work on this \
                 machine); their slowdowns are shown for context, slowdowns smaller than that \
                 are within noise",
                format_percent(Some(s))
            ));
        }
        lines
    }
}

impl TrackResult {
    /// Puts the run together and judges it.
    pub fn new(
        settings: TrackSettings,
        workloads: Vec<WorkloadResult>,
        paired: Vec<PairedResult>,
        heat: Vec<HeatSizeResult>,
    ) -> Self {
        let target = SlowdownTarget::judge(&paired, &workloads);
        Self {
            settings,
            workloads,
            paired,
            heat,
            target,
        }
    }

    /// The workload entry called `workload`, if measured.
    pub fn workload(&self, workload: &str) -> Option<&WorkloadResult> {
        self.workloads.iter().find(|w| w.workload == workload)
    }

    /// Lines explaining the method and the target.
    pub fn summary(&self) -> Vec<String> {
        let mut lines = vec![
            self.settings.describe(),
            "throughput: the guest's own phase reports (operations over TSC-measured time per \
             vCPU, summed over vCPUs), Mops/s; fresh VMs: slowdown = 1 − median tracked / median \
             untracked (negative: the tracked runs were faster, i.e. noise), per-run slowdowns \
             pair each repetition's tracked run with its untracked run"
                .to_owned(),
            "paired runs: slowdown = mean over blocks of 1 − tracked / untracked phase \
             throughput of the block, ± the half-width of its 95% confidence interval (Student's \
             t over blocks); the tracker collects from the start of each tracked phase until \
             half an interval before an untracked one"
                .to_owned(),
            "tracker cost: thread CPU time (CLOCK_THREAD_CPUTIME_ID) and wall time of each \
             collect() call; per interval = median call; core share = mean CPU per call / \
             interval"
                .to_owned(),
            "host CPU of the paired runs, per phase and as a share of one core: the process's \
             threads beside the vCPUs (getrusage less the vCPU threads: the collector, the fault \
             sampler's round thread and the userfault handler, the VMM), the vCPU threads' \
             host-kernel time (/proc stime: exits such as write faults, minor faults and TLB \
             flush kicks) and their time runnable but waiting for a CPU (schedstat)"
                .to_owned(),
            format!(
                "heat model: synthetic samples (a hot tenth of frames), median of {} timed \
                 repetitions in this process; the criterion bench `cargo bench -p tiering \
                 --bench heat` measures the same operations",
                self.settings.heat_repetitions
            ),
        ];
        lines.extend(self.target.describe());
        lines
    }

    /// Throughput, tracker cost and heat-model tables.
    /// (A table of what was not measured, `--paired-only`, is left out.)
    pub fn tables(&self) -> Result<Vec<Table>, RowWidthError> {
        let mut tables = vec![
            paired_table(&self.settings, &self.paired)?,
            paired_cpu_table(&self.paired)?,
        ];
        if !self.workloads.is_empty() {
            tables.push(self.throughput_table()?);
            tables.push(self.cost_table()?);
        }
        if !self.heat.is_empty() {
            tables.push(self.heat_table()?);
        }
        Ok(tables)
    }

    fn throughput_table(&self) -> Result<Table, RowWidthError> {
        let mut table = Table::new(
            format!(
                "Guest throughput with each tracker against no tracking (fresh VMs, {} \
                 interleaved runs each)",
                self.settings.repetitions
            ),
            &[
                ("workload", Align::Left),
                ("tracker", Align::Left),
                ("interval", Align::Right),
                ("Mops/s", Align::Right),
                ("spread", Align::Right),
                ("slowest", Align::Right),
                ("fastest", Align::Right),
                ("slowdown", Align::Right),
                ("per-run slowdowns", Align::Right),
            ],
        );
        for w in &self.workloads {
            for t in &w.trackers {
                let paired = if t.paired_slowdowns.is_empty() {
                    "—".to_owned()
                } else {
                    t.paired_slowdowns
                        .iter()
                        .map(|&s| format_percent(Some(s)))
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                table.push_row(vec![
                    w.workload.clone(),
                    t.tracker.clone(),
                    format_interval(t.interval_ms),
                    format!("{:.2}", t.throughput.median_mops),
                    format_percent(Some(t.throughput.spread)),
                    format!("{:.2}", t.throughput.min_mops),
                    format!("{:.2}", t.throughput.max_mops),
                    t.slowdown
                        .map_or_else(|| "(baseline)".to_owned(), |s| format_percent(Some(s))),
                    paired,
                ])?;
            }
        }
        Ok(table)
    }

    fn cost_table(&self) -> Result<Table, RowWidthError> {
        let mut table = Table::new(
            format!(
                "Tracker cost: collect() calls on a {} guest",
                format_size(self.settings.guest_bytes)
            ),
            &[
                ("workload", Align::Left),
                ("tracker", Align::Left),
                ("interval", Align::Right),
                ("calls", Align::Right),
                ("CPU / interval", Align::Right),
                ("CPU / interval / GiB", Align::Right),
                ("CPU mean", Align::Right),
                ("CPU max", Align::Right),
                ("wall / interval", Align::Right),
                ("core share", Align::Right),
                ("dirty pages / interval", Align::Right),
            ],
        );
        for w in &self.workloads {
            for t in &w.trackers {
                let Some(c) = &t.cost else { continue };
                table.push_row(vec![
                    w.workload.clone(),
                    t.tracker.clone(),
                    format_interval(t.interval_ms),
                    c.calls.to_string(),
                    format_us(c.cpu_us_per_interval),
                    format_us(c.cpu_us_per_interval_per_gib),
                    format_us(c.cpu_us_mean),
                    format_us(c.cpu_us_max),
                    format_us(c.wall_us_per_interval),
                    format!("{:.3}%", c.core_share * 100.0),
                    format!("{:.0}", c.dirty_pages_per_interval),
                ])?;
            }
        }
        Ok(table)
    }

    fn heat_table(&self) -> Result<Table, RowWidthError> {
        let mut table = Table::new(
            "Heat model per call, 2 MiB frames (synthetic samples, in-process)",
            &[
                ("guest RAM", Align::Left),
                ("frames", Align::Right),
                ("update, full coverage", Align::Right),
                ("update, sampled (32 pages/frame)", Align::Right),
                ("hottest(n/4)", Align::Right),
                ("update + rank", Align::Right),
            ],
        );
        for h in &self.heat {
            table.push_row(vec![
                format_guest(h.guest_bytes),
                h.frames.to_string(),
                format_us(h.update_full_us),
                format_us(h.update_sampled_us),
                format_us(h.hottest_quarter_us),
                format_us(h.interval_us()),
            ])?;
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::super::trackers::NONE;
    use super::*;
    use crate::testing::sample_track_result;

    #[test]
    fn slowdowns_are_against_the_untracked_median() {
        let r = sample_track_result();
        let hotset = r.workload("hotset").unwrap();
        let none = hotset.tracker(NONE, None).unwrap();
        assert_eq!(none.throughput.median_mops, 100.0);
        assert_eq!(none.slowdown, None);
        assert!(none.cost.is_none());
        let dirty = hotset.tracker("dirty-log", Some(200)).unwrap();
        assert_eq!(dirty.label(), "dirty-log every 200 ms");
        assert!((dirty.slowdown.unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(dirty.paired_slowdowns.len(), 3);
        let cost = dirty.cost.as_ref().unwrap();
        assert_eq!(cost.calls, 9);
        assert!((cost.cpu_us_per_interval - 100.0).abs() < 1e-9);
        assert!(
            (cost.cpu_us_per_interval_per_gib - 400.0).abs() < 1e-9,
            "quarter-GiB guest"
        );
        assert!((cost.core_share - cost.cpu_us_mean / 200e3).abs() < 1e-15);
    }

    #[test]
    fn target_names_the_worst_tracker() {
        let r = sample_track_result();
        assert!(!r.target.met && !r.target.shown, "{:?}", r.target);
        let [verdict] = r.target.per_interval.as_slice() else {
            panic!("{:?}", r.target);
        };
        assert_eq!(verdict.interval_ms, 200);
        assert_eq!(verdict.worst.as_ref().unwrap().workload, "hotset");
        assert_eq!(
            verdict.worst_bound.as_ref().unwrap().workload,
            "zipf",
            "0.0% ± 12.7% reaches further than 2.5% ± 6.4%"
        );
        let lines = r.target.describe();
        assert!(
            lines[0].contains("MISSED: largest 2.5% ± 6.4% (dirty-log, hotset)"),
            "{lines:?}"
        );
        assert!(lines[1].contains("differ by up to 0.0%"), "{lines:?}");
        assert!(lines[2].contains("spread up to 10.0%"), "{lines:?}");

        let mut missed = r.paired.clone();
        missed[1].slowdown = Some(0.031);
        let target = SlowdownTarget::judge(&missed, &r.workloads);
        assert!(!target.met && !target.shown);
        assert!(
            target.describe()[0].contains("MISSED: largest 3.1% ± 12.7% (dirty-log, zipf)"),
            "{:?}",
            target.describe()
        );
        let mut wide = r.paired.clone();
        for p in &mut wide {
            p.slowdown = Some(0.01);
        }
        let target = SlowdownTarget::judge(&wide, &r.workloads);
        assert!(
            target.met && !target.shown,
            "12.7 % reaches past 4 %: {target:?}"
        );
        let mut tight = wide.clone();
        for p in &mut tight {
            p.margin = Some(0.001);
        }
        let target = SlowdownTarget::judge(&tight, &r.workloads);
        assert!(target.met && target.shown, "{target:?}");
        assert!(target.describe()[0].contains("every 95% interval below the target"));
        assert!(
            !SlowdownTarget::judge(&[], &r.workloads).met,
            "nothing measured is not met"
        );
    }

    #[test]
    fn tables_have_every_tracker_and_size() {
        let r = sample_track_result();
        let tables = r.tables().unwrap();
        assert_eq!(tables.len(), 5);
        assert_eq!(tables[0].rows().len(), 2, "one paired row per workload");
        assert_eq!(tables[0].rows()[0][5], "2.5% ± 6.4%");
        assert_eq!(tables[1].rows().len(), 2, "host CPU of each paired row");
        assert_eq!(tables[1].rows()[0][3], "—", "the sample has no CPU figures");
        assert_eq!(tables[2].rows().len(), 4);
        assert_eq!(tables[3].rows().len(), 2, "no cost row for the baseline");
        assert_eq!(tables[4].rows().len(), 3);
        assert_eq!(tables[4].rows()[2][0], "1 TiB");
        assert_eq!(tables[2].rows()[0][7], "(baseline)");
        assert_eq!(tables[2].rows()[1][2], "200 ms");
    }
}
