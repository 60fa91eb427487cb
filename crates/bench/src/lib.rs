//! tierbench, the benchmark harness of tiervisor.
//!
//! The harness runs *suites*; each measures something and reports it as
//! ratios against baselines measured in the same run, so that numbers from
//! different machines (or from one machine under different load) can be
//! compared. The pieces:
//!
//! * [`cli`] — the `tierbench` command line;
//! * [`suite`] — which suites exist, running one, and the result of each;
//! * [`copy`] — the copy-engine suite (issue 3);
//! * [`migrate`] — the live-migration suite and its soak mode (issue 3);
//! * [`track`] — the access-tracking overhead suite (issue 4);
//! * [`policy`] — the tiering engine against the oracle (DRAM-hit ratio,
//!   convergence after a phase shift, bytes migrated);
//! * [`model`] — modeled DRAM+CXL and DRAM+Optane stall time and
//!   throughput from a run's access shares (this machine has one memory);
//! * [`workloads`] — every payload under the bounds, first-touch and the
//!   engine at several DRAM shares, with modeled CXL/Optane cost;
//! * [`suite_common`] — what the policy and workloads suites share: one
//!   sampled guest run, workload strings, quotas, the per-run error;
//! * [`report`] — the whole run (invocation, machine, suite results) as
//!   text, JSON and markdown; [`output`] writes the files;
//! * shared tools: [`stats`] and [`bandwidth`] (medians, ratios),
//!   [`verdict`] (an issue's target judged against measured values),
//!   [`table`], [`plot`] (SVG line charts) and [`palette`] (their colours),
//!   [`grid_chart`] (SVG time ×
//!   frame grids), [`progress`] (indicatif bars),
//!   [`memory`] (memfd mappings like guest tiers), [`rng`] (seeded
//!   shuffles), [`machine`], [`date`], [`invocation`], [`size`].
//!
//! Adding a suite: a module with a `run` function and a serde result type,
//! one variant in [`suite::Suite`] and in [`suite::SuiteResult`].

pub mod bandwidth;
pub mod cli;
pub mod copy;
pub mod date;
pub mod grid_chart;
pub mod guest_size;
pub mod invocation;
pub mod machine;
pub mod memory;
pub mod migrate;
pub mod model;
pub mod output;
pub mod palette;
pub mod plot;
pub mod policy;
pub mod progress;
pub mod report;
pub mod rng;
pub mod size;
pub mod stats;
pub mod suite;
pub mod suite_common;
pub mod table;
pub mod track;
pub mod verdict;
pub mod workloads;

#[cfg(test)]
mod testing;
