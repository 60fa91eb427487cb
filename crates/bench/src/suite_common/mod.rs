//! The skeleton the `policy` and `workloads` suites share: the shape of
//! their guest runs and why settings are refused ([`GuestRun`],
//! [`SettingsError`]), one measured
//! guest run ([`run_spec`]: a fresh VM, its placement sampled, its ground
//! truth and engine counters read afterwards), the payload's workload
//! string, quotas in whole frames, each phase's oracle and the DRAM-hit
//! arithmetic on it ([`phase_oracles`], [`dram_hit`]), the analysis
//! skeleton that scores every sample ([`Analysis`], [`analyze`]) on the
//! run's emulated clock ([`RunClock`]), the result rows and tables ([`rows`]), what else a run
//! is scored by (throughput, convergence, the engine's counters and
//! migration rate), the error of one
//! run and its scoring ([`CaseError`], [`run_case`]) and of a whole suite
//! ([`SuiteError`]), and shares as they
//! are printed. What each suite measures, scores, reports and draws stays
//! in the suite.

mod clock;
mod guest;
mod guest_run;
mod metrics;
pub mod rows;
mod scoring;

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

use oracle::{Oracle, OracleError};

pub use clock::RunClock;
pub use guest::{RunError, RunSpec, Sample, Trace, run_spec, spec_config};
pub use guest_run::{
    FRAME_SIZE, FULL_GUEST, FULL_PHASE_SECS, FULL_PHASES, GuestRun, MIN_GUEST, QUICK_PHASES,
    RunDefaults, SAMPLE_MS, SettingsError, VCPUS, share_frames, workload_args,
};
pub use metrics::{MinMoves, dram_hit, min_moves, oracle_hit};
pub use rows::{PhaseRow, RunRow, SuiteTables};
pub use scoring::{
    EngineSummary, RatePoint, convergence_secs, engine_summary, longest_convergence,
    migration_rates, phase_mops,
};

/// Why a trace could not be analysed.
#[derive(Debug, Error)]
pub enum AnalysisError {
    /// The payload announced no phase.
    #[error("the guest began no phase")]
    NoPhases,
    /// A phase's ground truth does not fit guest RAM.
    #[error("ground truth of phase {phase}")]
    Oracle {
        /// The phase.
        phase: u64,
        /// What the oracle refused.
        #[source]
        source: OracleError,
    },
}

/// One phase's oracle: access probability per frame and the best
/// DRAM-hit ratio for the room on the fast tier.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseOracle {
    /// Access probability per frame.
    pub access: Vec<f64>,
    /// The oracle's DRAM-hit ratio (the top frames that fit).
    pub best: f64,
}

/// When phase 0 began (the time origin of a run's results), and the oracle
/// of every phase with ground truth for `room` frames of `frame_size` on
/// the fast tier.
pub fn phase_oracles(
    trace: &Trace,
    frame_size: u64,
    room: usize,
) -> Result<(f64, BTreeMap<u64, PhaseOracle>), AnalysisError> {
    let origin = *trace.phase_starts.get(&0).ok_or(AnalysisError::NoPhases)?;
    let mut oracles = BTreeMap::new();
    for (&phase, ranges) in &trace.truths {
        let oracle = Oracle::new(&trace.ram, frame_size, ranges)
            .map_err(|source| AnalysisError::Oracle { phase, source })?;
        let access = oracle.access_probabilities().to_vec();
        let best = oracle_hit(&access, room);
        oracles.insert(phase, PhaseOracle { access, best });
    }
    Ok((origin, oracles))
}

/// One placement sample taken inside a phase that has an oracle, scored
/// against it.
#[derive(Debug, Clone, Copy)]
pub struct ScoredSample<'a> {
    /// Seconds after phase 0 began, on the run's emulated clock.
    pub secs: f64,
    /// The phase running.
    pub phase: u64,
    /// Share of the phase's accesses the placement serves from DRAM.
    pub hit: f64,
    /// The phase's oracle.
    pub oracle: &'a PhaseOracle,
    /// Tier of every frame.
    pub tiers: &'a [u8],
}

/// What a suite's analysis of one run differs in: its configurations,
/// the oracle's room and the guest's emulated speed under one, how it
/// keeps a scored sample, and the result it builds. [`analyze`] is the skeleton around them.
pub trait Analysis {
    /// One configuration of a run.
    type Case;
    /// A scored sample, as the suite keeps it.
    type Point;
    /// One run's result.
    type Run;
    /// The shape of the suite's guest runs.
    fn guest_run(&self) -> &GuestRun;
    /// Frames the fast tier may hold under `case`: the oracle's room.
    fn room(&self, case: &Self::Case) -> usize;
    /// How many times faster than real the guest under `case` is
    /// emulated (`tiering::TieringPolicy::at_guest_speed`): the run's
    /// results are in emulated seconds ([`RunClock`]). 1 unless the suite
    /// says otherwise.
    fn speed(&self, _case: &Self::Case) -> u32 {
        1
    }
    /// The suite's point for a scored sample.
    fn point(sample: ScoredSample<'_>) -> Self::Point;
    /// The run's result from its scored trace.
    fn result(&self, run: ScoredRun<'_, Self>) -> Self::Run;
}

/// One run's trace scored against its oracles, for [`Analysis::result`].
pub struct ScoredRun<'a, S: Analysis + ?Sized> {
    /// The run's configuration.
    pub case: &'a S::Case,
    /// The workload.
    pub workload: &'a str,
    /// What the run recorded.
    pub trace: &'a Trace,
    /// Frames the fast tier may hold: the oracle's room.
    pub room: usize,
    /// When phase 0 began on the trace's clock, and the guest's emulated
    /// speed: real times to the result's seconds.
    pub clock: RunClock,
    /// The oracle of every phase with ground truth.
    pub oracles: BTreeMap<u64, PhaseOracle>,
    /// One point per sample inside a phase with an oracle, in time order.
    pub timeline: Vec<S::Point>,
}

impl<S: Analysis + ?Sized> fmt::Debug for ScoredRun<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScoredRun")
            .field("workload", &self.workload)
            .field("room", &self.room)
            .field("clock", &self.clock)
            .field("oracles", &self.oracles)
            .finish_non_exhaustive()
    }
}

/// Builds the result of `workload` under `case` from its trace: every
/// sample taken inside a phase is scored against that phase's oracle
/// ([`phase_oracles`], [`dram_hit`]) and made one of the suite's points,
/// at its time on the case's emulated clock ([`Analysis::speed`]), and
/// the suite builds its result from them.
pub fn analyze<S: Analysis>(
    settings: &S,
    case: &S::Case,
    workload: &str,
    trace: &Trace,
) -> Result<S::Run, AnalysisError> {
    let room = settings.room(case);
    let (origin, oracles) = phase_oracles(trace, settings.guest_run().frame_size, room)?;
    let clock = RunClock::new(origin, settings.speed(case));
    let timeline = trace
        .samples
        .iter()
        .filter_map(|s| {
            let phase = s.phase?;
            let oracle = oracles.get(&phase)?;
            Some(S::point(ScoredSample {
                secs: clock.secs(s.at_secs),
                phase,
                hit: dram_hit(&oracle.access, &s.tiers),
                oracle,
                tiers: &s.tiers,
            }))
        })
        .collect();
    Ok(settings.result(ScoredRun {
        case,
        workload,
        trace,
        room,
        clock,
        oracles,
        timeline,
    }))
}

/// Why one run of a suite (a workload under one configuration) failed.
#[derive(Debug, Error)]
pub enum CaseError<A: std::error::Error + 'static> {
    /// The guest run failed.
    #[error("{workload} with {case}")]
    Run {
        /// The workload.
        workload: String,
        /// The configuration.
        case: String,
        /// What went wrong (boxed: VM errors are large).
        #[source]
        source: Box<RunError>,
    },
    /// The run's trace could not be scored.
    #[error("{workload} with {case}: analysis")]
    Analysis {
        /// The workload.
        workload: String,
        /// The configuration.
        case: String,
        /// What went wrong.
        #[source]
        source: A,
    },
}

/// Why the policy or the workloads suite failed.
#[derive(Debug, Error)]
pub enum SuiteError {
    /// Bad settings (e.g. a `--bytes` override).
    #[error("{suite} suite settings")]
    Settings {
        /// The suite: `policy`, `workloads`.
        suite: &'static str,
        /// Why they were refused.
        #[source]
        source: SettingsError,
    },
    /// One run (a workload under one configuration, alone or in a mix)
    /// failed.
    #[error(transparent)]
    Case(#[from] CaseError<AnalysisError>),
}

impl SuiteError {
    /// The settings of `suite` were refused: for `map_err`.
    pub fn settings(suite: &'static str) -> impl Fn(SettingsError) -> Self {
        move |source| Self::Settings { suite, source }
    }
}

/// Scores a finished run of `workload` under the configuration labelled
/// `case` with `analyze`, naming both in the error.
pub fn run_case<T, A: std::error::Error + 'static>(
    workload: &str,
    case: &str,
    trace: Result<Trace, RunError>,
    analyze: impl FnOnce(&Trace) -> Result<T, A>,
) -> Result<T, CaseError<A>> {
    let trace = trace.map_err(|source| CaseError::Run {
        workload: workload.to_owned(),
        case: case.to_owned(),
        source: Box::new(source),
    })?;
    analyze(&trace).map_err(|source| CaseError::Analysis {
        workload: workload.to_owned(),
        case: case.to_owned(),
        source,
    })
}

/// `25%`, `12.5%`.
pub fn format_share(share: f64) -> String {
    let percent = share * 100.0;
    if (percent - percent.round()).abs() < 1e-9 {
        format!("{percent:.0}%")
    } else {
        format!("{percent:.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_print_as_percentages() {
        assert_eq!(format_share(0.25), "25%");
        assert_eq!(format_share(0.125), "12.5%");
        assert_eq!(share_frames(1 << 30, 2 << 20, 0.125), 64);
    }

    #[test]
    fn a_failed_case_names_workload_and_configuration() {
        let failed: Result<(), CaseError<RunError>> = run_case(
            "zipf",
            "all-fast",
            Err(RunError::Guest("boom".to_owned())),
            |_| Ok(()),
        );
        let e = failed.unwrap_err();
        assert_eq!(e.to_string(), "zipf with all-fast");
        assert!(matches!(e, CaseError::Run { .. }));
    }
}
