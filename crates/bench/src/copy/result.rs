//! What the copy suite found: serde types for the JSON file, built from
//! the raw times, and the tables printed and written as markdown.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::copy_suite_error::CopySuiteError;
use super::plan::Measurement;
use super::runner::Runner;
use super::settings::CopySettings;
use crate::bandwidth::Bandwidth;
use crate::size::format_size;
use crate::stats::ratio;
use crate::table::{Align, RowWidthError, Table};

/// The copy suite's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyResult {
    /// What was measured.
    pub settings: CopySettings,
    /// The contiguous parallel copy for every thread count and mode.
    pub parallel: Vec<ParallelResult>,
    /// The fastest of `parallel`: the machine's best parallel copy.
    pub best_parallel: BestParallel,
    /// Per range size: the memcpy baseline and every engine.
    pub range_sizes: Vec<RangeSizeResult>,
}

/// One point of the contiguous parallel copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParallelResult {
    /// Copying threads.
    pub threads: usize,
    /// `memcpy` or `nt`.
    pub mode: String,
    /// Its bandwidth.
    pub bandwidth: Bandwidth,
    /// Median relative to the best parallel copy.
    pub vs_best_parallel: Option<f64>,
}

/// The machine's best parallel copy in this run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestParallel {
    /// Threads of the fastest configuration.
    pub threads: usize,
    /// Its mode.
    pub mode: String,
    /// Its median bandwidth, GB/s.
    pub median_gbps: f64,
}

impl BestParallel {
    /// The fastest of `parallel` (by median), after filling in every
    /// entry's ratio to it; `None` when `parallel` is empty.
    pub fn rate(parallel: &mut [ParallelResult]) -> Option<Self> {
        let best = parallel
            .iter()
            .max_by(|a, b| a.bandwidth.median_gbps.total_cmp(&b.bandwidth.median_gbps))
            .map(|p| BestParallel {
                threads: p.threads,
                mode: p.mode.clone(),
                median_gbps: p.bandwidth.median_gbps,
            })?;
        for p in parallel.iter_mut() {
            p.vs_best_parallel = ratio(p.bandwidth.median_gbps, best.median_gbps);
        }
        Some(best)
    }

    /// `10.00 GB/s with 2 threads (nt)`.
    pub fn describe(&self) -> String {
        format!(
            "{:.2} GB/s with {} thread{} ({})",
            self.median_gbps,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.mode
        )
    }
}

/// Results for one range size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RangeSizeResult {
    /// Bytes per range.
    pub range_size: u64,
    /// Ranges per batch.
    pub ranges: usize,
    /// The plain memcpy loop over these ranges, one thread.
    pub memcpy_loop: Bandwidth,
    /// The memcpy loop relative to the best parallel copy.
    pub memcpy_vs_best_parallel: Option<f64>,
    /// Every engine.
    pub engines: Vec<EngineResult>,
}

/// One engine on one range size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineResult {
    /// Engine name as it reports it, e.g. `threads:4:pin/nt`.
    pub name: String,
    /// Engine spec, e.g. `threads:4:pin`.
    pub spec: String,
    /// `memcpy` or `nt`.
    pub mode: String,
    /// Copying threads, the caller included.
    pub threads: usize,
    /// Whether pool threads were pinned.
    pub pinned: bool,
    /// Its bandwidth.
    pub bandwidth: Bandwidth,
    /// Median relative to the memcpy loop on the same ranges.
    pub vs_memcpy: Option<f64>,
    /// Median relative to the best parallel copy.
    pub vs_best_parallel: Option<f64>,
}

impl CopyResult {
    /// Builds the result from `times[i]`, the timed runs of `plan[i]`.
    pub fn build(
        settings: CopySettings,
        plan: &[Measurement],
        times: &[Vec<Duration>],
        runner: &Runner,
    ) -> Result<Self, CopySuiteError> {
        let bytes = settings.batch_bytes;
        let bandwidth_of = |wanted: Measurement| {
            plan.iter()
                .position(|&m| m == wanted)
                .and_then(|i| Bandwidth::from_runs(bytes, times.get(i)?))
                .ok_or_else(|| CopySuiteError::NoSamples(runner.label(wanted)))
        };
        let mut parallel = Vec::new();
        for &m in plan {
            if let Measurement::Parallel { threads, mode } = m {
                parallel.push(ParallelResult {
                    threads,
                    mode: mode.to_string(),
                    bandwidth: bandwidth_of(m)?,
                    vs_best_parallel: None,
                });
            }
        }
        let best = BestParallel::rate(&mut parallel)
            .ok_or_else(|| CopySuiteError::NoSamples("parallel copy".to_owned()))?;
        let mut range_sizes = Vec::new();
        for (size, &range_size) in settings.range_sizes.iter().enumerate() {
            let memcpy_loop = bandwidth_of(Measurement::MemcpyLoop { size })?;
            let mut engines = Vec::new();
            for (engine, under_test) in runner.engines().iter().enumerate() {
                let bandwidth = bandwidth_of(Measurement::Engine { size, engine })?;
                engines.push(EngineResult {
                    name: under_test.engine.name().to_owned(),
                    spec: under_test.spec.to_string(),
                    mode: under_test.mode.to_string(),
                    threads: under_test.threads(),
                    pinned: under_test.pinned(),
                    vs_memcpy: ratio(bandwidth.median_gbps, memcpy_loop.median_gbps),
                    vs_best_parallel: ratio(bandwidth.median_gbps, best.median_gbps),
                    bandwidth,
                });
            }
            range_sizes.push(RangeSizeResult {
                range_size,
                ranges: runner.range_count(size),
                memcpy_vs_best_parallel: ratio(memcpy_loop.median_gbps, best.median_gbps),
                memcpy_loop,
                engines,
            });
        }
        Ok(Self {
            settings,
            parallel,
            best_parallel: best,
            range_sizes,
        })
    }

    /// Lines explaining the method and the reference numbers.
    pub fn summary(&self) -> Vec<String> {
        let best = &self.best_parallel;
        vec![
            self.settings.describe(),
            format!(
                "best parallel copy (contiguous shares, same run): {}",
                best.describe()
            ),
            "GB = 1e9 bytes; \"× memcpy\" is the engine's median over the plain memcpy loop on the \
             same ranges, \"× best parallel\" over the best parallel copy; spread = (max − min) / median"
                .to_owned(),
        ]
    }

    /// The parallel-copy reference table, then one table per range size.
    pub fn tables(&self) -> Result<Vec<Table>, RowWidthError> {
        let mut tables = vec![self.parallel_table()?];
        for size in &self.range_sizes {
            tables.push(range_size_table(size)?);
        }
        Ok(tables)
    }

    fn parallel_table(&self) -> Result<Table, RowWidthError> {
        parallel_table(self.settings.batch_bytes, &self.parallel)
    }

    /// The engine result for `range_size` and engine `name`, if measured.
    pub fn engine(&self, range_size: u64, name: &str) -> Option<&EngineResult> {
        self.range_sizes
            .iter()
            .find(|r| r.range_size == range_size)?
            .engines
            .iter()
            .find(|e| e.name == name)
    }
}

/// The reference table of the contiguous parallel copy of a `bytes` batch
/// for every thread count and mode.
pub fn parallel_table(bytes: u64, parallel: &[ParallelResult]) -> Result<Table, RowWidthError> {
    let mut table = Table::new(
        format!(
            "Parallel copy of the whole {} batch in contiguous shares (reference)",
            format_size(bytes)
        ),
        &[
            ("threads", Align::Right),
            ("mode", Align::Left),
            ("GB/s", Align::Right),
            ("GiB/s", Align::Right),
            ("spread", Align::Right),
            ("× best parallel", Align::Right),
        ],
    );
    for p in parallel {
        let mut cells = vec![p.threads.to_string(), p.mode.clone()];
        cells.extend(bandwidth_cells(&p.bandwidth));
        cells.push(format_ratio(p.vs_best_parallel));
        table.push_row(cells)?;
    }
    Ok(table)
}

fn range_size_table(size: &RangeSizeResult) -> Result<Table, RowWidthError> {
    let mut table = Table::new(
        format!(
            "{} ranges ({} per batch, shuffled)",
            format_size(size.range_size),
            size.ranges
        ),
        &[
            ("engine", Align::Left),
            ("GB/s", Align::Right),
            ("GiB/s", Align::Right),
            ("spread", Align::Right),
            ("× memcpy", Align::Right),
            ("× best parallel", Align::Right),
        ],
    );
    let mut baseline = vec!["memcpy loop (baseline)".to_owned()];
    baseline.extend(bandwidth_cells(&size.memcpy_loop));
    baseline.push(format_ratio(Some(1.0)));
    baseline.push(format_ratio(size.memcpy_vs_best_parallel));
    table.push_row(baseline)?;
    for engine in &size.engines {
        let mut cells = vec![engine.name.clone()];
        cells.extend(bandwidth_cells(&engine.bandwidth));
        cells.push(format_ratio(engine.vs_memcpy));
        cells.push(format_ratio(engine.vs_best_parallel));
        table.push_row(cells)?;
    }
    Ok(table)
}

/// GB/s, GiB/s and spread cells.
fn bandwidth_cells(bw: &Bandwidth) -> [String; 3] {
    [
        format!("{:.2}", bw.median_gbps),
        format!("{:.2}", bw.median_gibps),
        format!("{:.0}%", bw.spread * 100.0),
    ]
}

/// `1.23×`, or `n/a` when there is no ratio.
pub fn format_ratio(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}×"))
}
