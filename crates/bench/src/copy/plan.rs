//! The measurements of one copy-suite run. They are run in interleaved
//! rounds (every measurement once per round) so that a burst of load from
//! a neighbour on a shared machine spreads over all of them instead of
//! spoiling one.

use page_copy::CopyMode;

use super::engines::MODES;

/// One thing the copy suite times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measurement {
    /// The whole batch in `threads` contiguous shares, one thread each.
    Parallel {
        /// Copying threads.
        threads: usize,
        /// How each share is copied.
        mode: CopyMode,
    },
    /// The plain memcpy loop over the ranges of range size `size` (an
    /// index into the settings' range sizes).
    MemcpyLoop {
        /// Index of the range size.
        size: usize,
    },
    /// Engine `engine` (an index into the engine list) over the ranges of
    /// range size `size`.
    Engine {
        /// Index of the range size.
        size: usize,
        /// Index of the engine.
        engine: usize,
    },
}

/// Every measurement, in the order a round runs them: the parallel
/// baseline for 1..=`max_threads` threads in both modes, then per range
/// size the memcpy loop and each of `engines` engines.
pub fn measurements(max_threads: usize, range_sizes: usize, engines: usize) -> Vec<Measurement> {
    let parallel = (1..=max_threads.max(1))
        .flat_map(|threads| MODES.map(|mode| Measurement::Parallel { threads, mode }));
    let per_size = (0..range_sizes).flat_map(|size| {
        std::iter::once(Measurement::MemcpyLoop { size })
            .chain((0..engines).map(move |engine| Measurement::Engine { size, engine }))
    });
    parallel.chain(per_size).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_measurement_once() {
        let plan = measurements(2, 3, 8);
        assert_eq!(plan.len(), 2 * 2 + 3 * (1 + 8));
        assert_eq!(
            plan[0],
            Measurement::Parallel {
                threads: 1,
                mode: CopyMode::Memcpy
            }
        );
        assert_eq!(plan[4], Measurement::MemcpyLoop { size: 0 });
        assert_eq!(plan[5], Measurement::Engine { size: 0, engine: 0 });
        assert_eq!(
            plan.last(),
            Some(&Measurement::Engine { size: 2, engine: 7 })
        );
        for (i, m) in plan.iter().enumerate() {
            assert!(!plan[i + 1..].contains(m), "{m:?} twice");
        }
    }

    #[test]
    fn parallel_baseline_scales_with_cpus() {
        let plan = measurements(16, 1, 0);
        let parallel = plan
            .iter()
            .filter(|m| matches!(m, Measurement::Parallel { .. }))
            .count();
        assert_eq!(parallel, 32);
    }
}
