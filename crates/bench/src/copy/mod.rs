//! The `copy` suite (issue 3): every copy engine on batches of 4 KiB,
//! 64 KiB and 2 MiB ranges with 1..N threads, against a plain memcpy loop
//! and against the machine's best parallel copy, both measured in the same
//! run.
//!
//! Source and destination are two separate memfd `MAP_SHARED` mappings
//! (like two guest tiers), written on every page before timing. A batch is
//! cut into ranges of one size and copied in a seeded shuffled order. Every
//! measurement first runs once untimed into a cleared destination and is
//! checked byte for byte, then runs `repetitions` times in interleaved
//! rounds; the median is reported.

mod baselines;
mod buffers;
mod charts;
mod copy_suite_error;
mod engines;
mod plan;
mod reference;
mod result;
mod runner;
mod settings;
mod start_line;

use std::time::Duration;

use crate::progress;

pub use baselines::BaselineError;
pub use charts::write_svgs;
pub use copy_suite_error::CopySuiteError;
pub use reference::{CopyReference, RepeatedCopy, measure_best_parallel};
pub use result::{
    BestParallel, CopyResult, EngineResult, ParallelResult, RangeSizeResult, format_ratio,
    parallel_table,
};
pub use settings::{CopySettings, RANGE_SIZES, SettingsError};

use plan::measurements;
use runner::Runner;

/// Runs the suite with `settings`, showing progress on stderr.
pub fn run(settings: CopySettings) -> Result<CopyResult, CopySuiteError> {
    let setup = progress::bar("copy", 1);
    setup.set_message("mapping and filling buffers, starting engines");
    let mut runner = Runner::new(&settings)?;
    setup.finish_and_clear();

    let plan = measurements(
        settings.max_threads,
        settings.range_sizes.len(),
        runner.engines().len(),
    );
    let rounds = 1 + settings.repetitions;
    let bar = progress::bar("copy", (plan.len() * rounds) as u64);
    for &m in &plan {
        bar.set_message(format!("verify {}", runner.label(m)));
        runner.verify(m)?;
        bar.inc(1);
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(settings.repetitions); plan.len()];
    for round in 1..rounds {
        for (i, &m) in plan.iter().enumerate() {
            bar.set_message(format!(
                "round {round}/{}: {}",
                settings.repetitions,
                runner.label(m)
            ));
            times[i].push(runner.time(m)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    CopyResult::build(settings, &plan, &times, &runner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_measures_every_engine_against_both_baselines() {
        let settings = CopySettings::new(true, Some(2 << 20), 2).unwrap();
        let result = run(settings.clone()).unwrap();
        assert_eq!(result.settings, settings);
        assert_eq!(result.parallel.len(), 4);
        let fastest = result
            .parallel
            .iter()
            .map(|p| p.bandwidth.median_gbps)
            .fold(0.0, f64::max);
        assert_eq!(result.best_parallel.median_gbps, fastest);
        assert!(
            result
                .parallel
                .iter()
                .any(|p| p.vs_best_parallel == Some(1.0))
        );
        assert_eq!(result.range_sizes.len(), 3);
        for size in &result.range_sizes {
            assert_eq!(size.engines.len(), 8);
            for engine in &size.engines {
                assert_eq!(engine.bandwidth.samples_gbps.len(), settings.repetitions);
                assert!(engine.bandwidth.median_gbps > 0.0);
                let expected = engine.bandwidth.median_gbps / fastest;
                let got = engine.vs_best_parallel.unwrap();
                assert!((got - expected).abs() <= 1e-12 * expected);
            }
        }
        let pinned = result.engine(64 << 10, "threads:2:pin/nt").unwrap();
        assert!(pinned.pinned);
        assert_eq!(
            (pinned.threads, pinned.spec.as_str(), pinned.mode.as_str()),
            (2, "threads:2:pin", "nt")
        );
        assert!(result.engine(64 << 10, "kernel").is_none());
    }
}
