//! What every workload kind implements and is given: the [`Workload`]
//! trait the phase loop (`run.rs`) drives, the [`Region`] and [`Vcpu`] it
//! runs on, and how much work goes between two meter calls.

use core::sync::atomic::AtomicU64;

use crate::ground_truth::GroundTruthArea;
use crate::meter::PhaseMeter;
use crate::platform::Platform;
use crate::run_error::RunError;

/// Operations between two meter calls for the random-access workloads.
pub(crate) const RANDOM_BATCH: u64 = 8192;
/// Words between two meter calls for the sequential workloads (1 MiB).
pub(crate) const SEQUENTIAL_BATCH: usize = 1 << 17;

/// The memory a run works on.
#[derive(Debug)]
pub(crate) struct Region<'m> {
    /// The shared data buffer.
    pub buffer: &'m [AtomicU64],
    /// Its guest-physical address.
    pub buffer_gpa: u64,
    /// Where vCPU 0 builds ground-truth descriptors.
    pub ground_truth: GroundTruthArea<'m>,
}

impl Region<'_> {
    /// Buffer size in bytes.
    pub fn buffer_bytes(&self) -> u64 {
        self.buffer.len() as u64 * 8
    }
}

/// Which vCPU of how many, and the run's seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vcpu {
    pub index: u32,
    pub count: u32,
    pub seed: u64,
}

impl Vcpu {
    /// This vCPU's share `[start, end)` of `len` items split evenly.
    pub fn share(&self, len: usize) -> (usize, usize) {
        let (i, n) = (self.index as usize, self.count as usize);
        let at = |k: usize| (len as u128 * k as u128 / n as u128) as usize;
        (at(i), at(i + 1))
    }
}

/// One workload's behaviour inside the common phase loop.
pub(crate) trait Workload {
    /// Moves to `phase`; phases come in order from 0 and every vCPU makes
    /// the same moves, so all agree on where the hot data is.
    fn begin_phase(&mut self, phase: u32);

    /// Writes the current phase's access distribution into `area`; returns
    /// the number of entries.
    fn ground_truth(&self, area: &GroundTruthArea<'_>) -> u64;

    /// Does the phase's work until the meter says the phase is over (or the
    /// workload's own amount of work is done).
    fn run_phase<P: Platform>(&mut self, meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError>;

    /// Last work of the run, counted in the last phase.
    fn finish<P: Platform>(&mut self, _meter: &mut PhaseMeter<'_, P>) -> Result<(), RunError> {
        Ok(())
    }
}

/// Words per 4 KiB page.
pub(crate) const WORDS_PER_PAGE: usize = 512;
