//! `Runner`: owns the buffers, range lists and engines of a copy-suite run
//! and runs one measurement at a time, timed or verified.

use std::time::{Duration, Instant};

use page_copy::CopyRange;

use super::baselines::{memcpy_loop, parallel_copy};
use super::buffers::Buffers;
use super::copy_suite_error::CopySuiteError;
use super::engines::{EngineUnderTest, start_all};
use super::plan::Measurement;
use super::settings::CopySettings;
use crate::size::format_size;

/// Everything a measurement needs.
#[derive(Debug)]
pub struct Runner {
    buffers: Buffers,
    /// Per range size, the batch's shuffled ranges (pointing into
    /// `buffers`, which outlives them: both live in `self`).
    ranges: Vec<Vec<CopyRange>>,
    range_sizes: Vec<u64>,
    engines: Vec<EngineUnderTest>,
}

impl Runner {
    /// Maps and fills the buffers, cuts the range lists and starts every
    /// engine.
    pub fn new(settings: &CopySettings) -> Result<Self, CopySuiteError> {
        let mut buffers = Buffers::new(settings.batch_len(), settings.seed)?;
        let ranges = settings
            .range_sizes
            .iter()
            .map(|&size| {
                let size = usize::try_from(size).unwrap_or(usize::MAX);
                buffers.shuffled_ranges(size, settings.seed ^ size as u64)
            })
            .collect();
        Ok(Self {
            buffers,
            ranges,
            range_sizes: settings.range_sizes.clone(),
            engines: start_all(settings.max_threads)?,
        })
    }

    /// The engines under test.
    pub fn engines(&self) -> &[EngineUnderTest] {
        &self.engines
    }

    /// Ranges per batch for range size `size`.
    pub fn range_count(&self, size: usize) -> usize {
        self.ranges.get(size).map_or(0, Vec::len)
    }

    /// `threads:2/nt, 4 KiB ranges`-style name of a measurement.
    pub fn label(&self, measurement: Measurement) -> String {
        let size = |index: usize| self.range_sizes.get(index).map_or(0, |&s| s);
        match measurement {
            Measurement::Parallel { threads, mode } => {
                format!("parallel {threads}x{mode}, whole batch")
            }
            Measurement::MemcpyLoop { size: s } => {
                format!("memcpy loop, {} ranges", format_size(size(s)))
            }
            Measurement::Engine { size: s, engine } => format!(
                "{}, {} ranges",
                self.engines.get(engine).map_or("?", |e| e.engine.name()),
                format_size(size(s))
            ),
        }
    }

    /// Runs `measurement` once and returns its time.
    pub fn time(&mut self, measurement: Measurement) -> Result<Duration, CopySuiteError> {
        match measurement {
            Measurement::Parallel { threads, mode } => {
                let whole = self.buffers.whole();
                // SAFETY: `whole` spans the two distinct live mappings of
                // `buffers`; nothing else touches them during the call.
                unsafe { parallel_copy(whole, threads, mode) }.map_err(|source| {
                    CopySuiteError::Baseline {
                        measurement: self.label(measurement),
                        source,
                    }
                })
            }
            Measurement::MemcpyLoop { size } => {
                let ranges = self.ranges_for(measurement, size)?;
                // SAFETY: the ranges are disjoint pieces of the two live
                // mappings of `buffers` (built by `shuffled_ranges`).
                Ok(unsafe { memcpy_loop(ranges) })
            }
            Measurement::Engine { size, engine } => {
                let ranges = self.ranges_for(measurement, size)?;
                let under_test = self.engines.get(engine).ok_or_else(|| {
                    CopySuiteError::UnknownMeasurement(format!("{measurement:?}"))
                })?;
                let start = Instant::now();
                // SAFETY: as for the memcpy loop; the engine returns only
                // when every range is copied.
                let copied = unsafe { under_test.engine.copy(ranges) };
                let elapsed = start.elapsed();
                copied.map_err(|source| CopySuiteError::Copy {
                    measurement: self.label(measurement),
                    source,
                })?;
                Ok(elapsed)
            }
        }
    }

    /// Clears the destination, runs `measurement` once (a warm-up: pool
    /// threads wake, TLBs fill) and checks every destination byte.
    pub fn verify(&mut self, measurement: Measurement) -> Result<(), CopySuiteError> {
        self.buffers.clear_destination();
        self.time(measurement)?;
        match self.buffers.first_difference() {
            None => Ok(()),
            Some(offset) => Err(CopySuiteError::Mismatch {
                measurement: self.label(measurement),
                offset,
            }),
        }
    }

    fn ranges_for(
        &self,
        measurement: Measurement,
        size: usize,
    ) -> Result<&[CopyRange], CopySuiteError> {
        self.ranges
            .get(size)
            .map(Vec::as_slice)
            .ok_or_else(|| CopySuiteError::UnknownMeasurement(format!("{measurement:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy::plan::measurements;

    #[test]
    fn every_measurement_copies_the_whole_batch() {
        let settings = CopySettings::new(true, Some(2 << 20), 2).unwrap();
        let mut runner = Runner::new(&settings).unwrap();
        assert_eq!(runner.range_count(0), 512);
        assert_eq!(runner.range_count(2), 1);
        let plan = measurements(2, settings.range_sizes.len(), runner.engines().len());
        for m in plan {
            runner.verify(m).unwrap();
            assert!(runner.time(m).unwrap() > Duration::ZERO);
        }
    }

    #[test]
    fn labels_name_engine_and_size() {
        let settings = CopySettings::new(true, Some(2 << 20), 1).unwrap();
        let runner = Runner::new(&settings).unwrap();
        assert_eq!(
            runner.label(Measurement::Engine { size: 1, engine: 1 }),
            "cpu/nt, 64 KiB ranges"
        );
        assert_eq!(
            runner.label(Measurement::MemcpyLoop { size: 2 }),
            "memcpy loop, 2 MiB ranges"
        );
    }

    #[test]
    fn unknown_indices_are_errors() {
        let settings = CopySettings::new(true, Some(2 << 20), 1).unwrap();
        let mut runner = Runner::new(&settings).unwrap();
        assert!(matches!(
            runner.time(Measurement::Engine {
                size: 0,
                engine: 99
            }),
            Err(CopySuiteError::UnknownMeasurement(_))
        ));
        assert!(matches!(
            runner.time(Measurement::MemcpyLoop { size: 7 }),
            Err(CopySuiteError::UnknownMeasurement(_))
        ));
    }
}
