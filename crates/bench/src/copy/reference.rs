//! The best parallel copy on its own, for suites that compare against it
//! (the `migrate` suite): the copy suite's contiguous parallel baseline
//! ([`parallel_copy`] over two pre-faulted memfd mappings, every thread
//! count and both modes, each checked once, then timed in interleaved
//! rounds) without the engines, and [`RepeatedCopy`], that copy's
//! configuration timed again under another suite's load.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::CopySuiteError;
use super::baselines::parallel_copy;
use super::buffers::Buffers;
use super::engines::MODES;
use super::result::{BestParallel, ParallelResult};
use crate::bandwidth::Bandwidth;

/// The machine's best parallel copy, measured for another suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyReference {
    /// Bytes of each timed copy.
    pub bytes: u64,
    /// Timed runs per configuration (after one checked run).
    pub repetitions: usize,
    /// Every thread count and mode.
    pub parallel: Vec<ParallelResult>,
    /// The fastest of them.
    pub best: BestParallel,
}

/// Measures the contiguous parallel copy of `bytes` with 1..=`max_threads`
/// threads in both modes, `repetitions` timed runs each; source bytes
/// come from `seed`.
pub fn measure_best_parallel(
    bytes: u64,
    max_threads: usize,
    repetitions: usize,
    seed: u64,
) -> Result<CopyReference, CopySuiteError> {
    let len =
        usize::try_from(bytes).map_err(|_| CopySuiteError::NoSamples("copy reference".into()))?;
    let mut buffers = Buffers::new(len, seed)?;
    let configs: Vec<(usize, page_copy::CopyMode)> = (1..=max_threads.max(1))
        .flat_map(|threads| MODES.map(|mode| (threads, mode)))
        .collect();
    let label = |threads: usize, mode| format!("parallel {threads}x{mode}, whole batch");
    let time = |buffers: &mut Buffers, threads, mode| {
        let whole = buffers.whole();
        // SAFETY: `whole` spans the two distinct live mappings of
        // `buffers`; nothing else touches them during the call.
        unsafe { parallel_copy(whole, threads, mode) }.map_err(|source| CopySuiteError::Baseline {
            measurement: label(threads, mode),
            source,
        })
    };
    for &(threads, mode) in &configs {
        buffers.clear_destination();
        time(&mut buffers, threads, mode)?;
        if let Some(offset) = buffers.first_difference() {
            return Err(CopySuiteError::Mismatch {
                measurement: label(threads, mode),
                offset,
            });
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(repetitions); configs.len()];
    for _ in 0..repetitions {
        for (i, &(threads, mode)) in configs.iter().enumerate() {
            times[i].push(time(&mut buffers, threads, mode)?);
        }
    }
    let mut parallel = Vec::with_capacity(configs.len());
    for (&(threads, mode), runs) in configs.iter().zip(&times) {
        parallel.push(ParallelResult {
            threads,
            mode: mode.to_string(),
            bandwidth: Bandwidth::from_runs(bytes, runs)
                .ok_or_else(|| CopySuiteError::NoSamples(label(threads, mode)))?,
            vs_best_parallel: None,
        });
    }
    let best = BestParallel::rate(&mut parallel)
        .ok_or_else(|| CopySuiteError::NoSamples("parallel copy".to_owned()))?;
    Ok(CopyReference {
        bytes,
        repetitions,
        parallel,
        best,
    })
}

/// The best parallel copy's configuration over buffers of its own, timed
/// again and again while something else runs (the `migrate` suite times
/// it between rounds, under the guest's load, so that migrations can also
/// be compared with what a plain copy gets on the same busy machine).
#[derive(Debug)]
pub struct RepeatedCopy {
    buffers: Buffers,
    threads: usize,
    mode: page_copy::CopyMode,
}

impl RepeatedCopy {
    /// Buffers of `bytes` (source bytes from `seed`) copied the way
    /// `best` was; checked once.
    pub fn new(bytes: u64, best: &BestParallel, seed: u64) -> Result<Self, CopySuiteError> {
        let label = repeated_label(best.threads, &best.mode);
        let mode = MODES
            .into_iter()
            .find(|m| m.to_string() == best.mode)
            .ok_or_else(|| CopySuiteError::NoSamples(label.clone()))?;
        let len = usize::try_from(bytes).map_err(|_| CopySuiteError::NoSamples(label.clone()))?;
        let mut copy = Self {
            buffers: Buffers::new(len, seed)?,
            threads: best.threads,
            mode,
        };
        copy.buffers.clear_destination();
        copy.time()?;
        if let Some(offset) = copy.buffers.first_difference() {
            return Err(CopySuiteError::Mismatch {
                measurement: label,
                offset,
            });
        }
        Ok(copy)
    }

    /// Bytes per copy.
    pub fn bytes(&self) -> u64 {
        self.buffers.len() as u64
    }

    /// Copies the whole buffer once; the time of the copy.
    pub fn time(&mut self) -> Result<Duration, CopySuiteError> {
        let whole = self.buffers.whole();
        // SAFETY: `whole` spans the two distinct live mappings of
        // `self.buffers`, which nothing else touches during the call.
        unsafe { parallel_copy(whole, self.threads, self.mode) }.map_err(|source| {
            CopySuiteError::Baseline {
                measurement: repeated_label(self.threads, self.mode),
                source,
            }
        })
    }
}

/// How errors name a [`RepeatedCopy`].
fn repeated_label(threads: usize, mode: impl std::fmt::Display) -> String {
    format!("parallel {threads}x{mode}, repeated")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_every_configuration_and_picks_the_fastest() {
        let reference = measure_best_parallel(2 << 20, 2, 2, 7).unwrap();
        assert_eq!(reference.parallel.len(), 4);
        let fastest = reference
            .parallel
            .iter()
            .map(|p| p.bandwidth.median_gbps)
            .fold(0.0, f64::max);
        assert!(fastest > 0.0);
        assert_eq!(reference.best.median_gbps, fastest);
        for p in &reference.parallel {
            assert_eq!(p.bandwidth.samples_gbps.len(), 2);
            assert!(p.vs_best_parallel.unwrap() <= 1.0);
        }
    }

    #[test]
    fn a_repeated_copy_copies_like_the_best_and_times_each_run() {
        let reference = measure_best_parallel(2 << 20, 2, 1, 7).unwrap();
        let mut copy = RepeatedCopy::new(1 << 20, &reference.best, 9).unwrap();
        assert_eq!(copy.bytes(), 1 << 20);
        assert!(copy.time().unwrap() > Duration::ZERO);
        assert_eq!(copy.buffers.first_difference(), None);
        let unknown = BestParallel {
            threads: 1,
            mode: "teleport".to_owned(),
            median_gbps: 1.0,
        };
        assert!(RepeatedCopy::new(1 << 20, &unknown, 9).is_err());
    }

    #[test]
    fn zero_bytes_is_refused() {
        assert!(measure_best_parallel(0, 1, 1, 7).is_err());
    }
}
