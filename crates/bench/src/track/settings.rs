//! What the track suite measures, from `--quick` and the hidden `--bytes`
//! override (guest RAM).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::size::format_size;

use super::phase_schedule::PhaseSchedule;
use super::trackers::{NONE, TRACKERS};
use crate::guest_size::{GuestSizeError, check_guest_size};

/// Frame size of the benchmark VMs: the VMM's default, huge-page frames.
pub const FRAME_SIZE: u64 = 2 << 20;
/// Guest RAM in the full run.
pub const FULL_GUEST: u64 = 1 << 30;
/// Guest RAM in `--quick` mode.
pub const QUICK_GUEST: u64 = 256 << 20;
/// Smallest guest RAM accepted (the payload needs a few MiB of its own).
pub const MIN_GUEST: u64 = 64 << 20;
/// vCPUs of every benchmark guest: both cores of the development machine,
/// so the tracker's thread competes with the guest as it would on a busy
/// host.
pub const VCPUS: u32 = 2;
/// The workloads of issue 4.
pub const WORKLOADS: [&str; 2] = ["hotset", "zipf"];
/// Milliseconds between two `collect()` calls in the full run: the
/// interval the accuracy tests track the hot set with
/// (vmm/tests/tracking/) and the fault sampler's default interval. (With
/// sampling, a tracker's cost per interval no longer grows with the pages
/// the guest writes, so one interval is measured.)
pub const FULL_INTERVALS_MS: [u64; 1] = [200];
/// Intervals in `--quick` mode (runs too short for 1 s intervals).
pub const QUICK_INTERVALS_MS: [u64; 1] = [200];
/// Phases of each guest run; the first is warm-up and not counted.
pub const FULL_PHASES: u32 = 4;
/// Phases in `--quick` mode.
pub const QUICK_PHASES: u32 = 2;
/// Phases at the start of each run left out of the throughput.
pub const WARMUP_PHASES: u32 = 1;
/// Seconds per phase in the full run.
pub const FULL_PHASE_SECS: f64 = 2.0;
/// Seconds per phase in `--quick` mode.
pub const QUICK_PHASE_SECS: f64 = 0.5;
/// Interleaved repetitions (each runs every tracker once) in the full run.
pub const FULL_REPETITIONS: usize = 5;
/// Repetitions in `--quick` mode.
pub const QUICK_REPETITIONS: usize = 2;
/// Timed repetitions of each heat-model operation (full run).
pub const FULL_HEAT_REPETITIONS: usize = 7;
/// Timed repetitions of each heat-model operation (`--quick`).
pub const QUICK_HEAT_REPETITIONS: usize = 3;
/// Frames of the heat-model measurement: 1 GiB, 64 GiB and 1 TiB of 2 MiB
/// frames, as issue 4 asks.
pub const HEAT_FRAMES: [usize; 3] = [512, 32 << 10, 512 << 10];
/// Blocks of four phases (ABBA, BAAB) per paired run, full run: 12 blocks
/// per row over two VMs; blocks here differ by 5–10 % among themselves, so
/// fewer left the 95 % intervals too wide to judge a 3 % target.
pub const FULL_PAIRED_BLOCKS: u32 = 6;
/// Blocks per paired run in `--quick` mode.
pub const QUICK_PAIRED_BLOCKS: u32 = 1;
/// Paired runs (fresh VMs) per workload and tracker, full run.
pub const FULL_PAIRED_REPETITIONS: usize = 2;
/// Paired runs per workload and tracker in `--quick` mode.
pub const QUICK_PAIRED_REPETITIONS: usize = 1;
/// The issue-24 target: the default tracker's mean guest slowdown, at
/// most.
pub const TARGET_MAX_SLOWDOWN: f64 = 0.02;
/// The issue-24 target: the upper end of that slowdown's 95 % interval,
/// at most.
pub const TARGET_MAX_UPPER: f64 = 0.04;
/// The tracker the targets judge: the engine's default.
pub const TARGET_TRACKER: &str = "dirty-log";

/// Why the settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingsError {
    /// The guest size was refused.
    #[error(transparent)]
    GuestSize(#[from] GuestSizeError),
}

/// What the track suite measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackSettings {
    /// Guest RAM in bytes.
    pub guest_bytes: u64,
    /// Bytes per frame.
    pub frame_size: u64,
    /// vCPUs of the guest.
    pub vcpus: u32,
    /// The workload's buffer, bytes (half of guest RAM).
    pub buffer_bytes: u64,
    /// Workload names, in run order.
    pub workloads: Vec<String>,
    /// Tracker names, in run order (`none` first: the baseline).
    pub trackers: Vec<String>,
    /// Milliseconds between two `collect()` calls; every tracker runs
    /// at each.
    pub intervals_ms: Vec<u64>,
    /// Phases of each guest run.
    pub phases: u32,
    /// Leading phases not counted.
    pub warmup_phases: u32,
    /// Seconds per phase.
    pub phase_seconds: f64,
    /// Interleaved repetitions.
    pub repetitions: usize,
    /// Blocks of four phases in each paired run (tracked and untracked
    /// phases in one VM).
    #[serde(default)]
    pub paired_blocks: u32,
    /// Paired runs per workload and tracker.
    #[serde(default)]
    pub paired_repetitions: usize,
    /// Frame counts of the heat-model measurement.
    pub heat_frames: Vec<usize>,
    /// Timed repetitions of each heat-model operation.
    pub heat_repetitions: usize,
}

impl TrackSettings {
    /// Settings for a full or `quick` run, guest RAM overridden by
    /// `guest_bytes` when given.
    pub fn new(quick: bool, guest_bytes: Option<u64>) -> Result<Self, SettingsError> {
        let guest = guest_bytes.unwrap_or(if quick { QUICK_GUEST } else { FULL_GUEST });
        check_guest_size(guest, FRAME_SIZE, MIN_GUEST)?;
        Ok(Self {
            guest_bytes: guest,
            frame_size: FRAME_SIZE,
            vcpus: VCPUS,
            buffer_bytes: guest / 2,
            workloads: WORKLOADS.map(str::to_owned).to_vec(),
            trackers: TRACKERS
                .iter()
                .filter(|t| t.by_default)
                .map(|t| t.name.to_owned())
                .collect(),
            intervals_ms: if quick {
                QUICK_INTERVALS_MS.to_vec()
            } else {
                FULL_INTERVALS_MS.to_vec()
            },
            phases: if quick { QUICK_PHASES } else { FULL_PHASES },
            warmup_phases: WARMUP_PHASES,
            phase_seconds: if quick {
                QUICK_PHASE_SECS
            } else {
                FULL_PHASE_SECS
            },
            repetitions: if quick {
                QUICK_REPETITIONS
            } else {
                FULL_REPETITIONS
            },
            paired_blocks: if quick {
                QUICK_PAIRED_BLOCKS
            } else {
                FULL_PAIRED_BLOCKS
            },
            paired_repetitions: if quick {
                QUICK_PAIRED_REPETITIONS
            } else {
                FULL_PAIRED_REPETITIONS
            },
            heat_frames: HEAT_FRAMES.to_vec(),
            heat_repetitions: if quick {
                QUICK_HEAT_REPETITIONS
            } else {
                FULL_HEAT_REPETITIONS
            },
        })
    }

    /// Runs the paired runs alone: no fresh-VM repetitions, no heat-model
    /// timing.
    pub fn keep_paired_only(&mut self) {
        self.repetitions = 0;
        self.heat_frames.clear();
    }

    /// Measures only the tracker called `name` against the baseline.
    pub fn keep_only(&mut self, name: &str) {
        self.trackers.retain(|t| t == NONE || t == name);
    }

    /// The payload's workload string for `workload` (`hotset` or `zipf`
    /// with their default parameters) over the suite's buffer.
    pub fn workload_args(&self, workload: &str) -> String {
        self.workload_args_of(workload, self.phases)
    }

    /// The same with `phases` phases.
    pub fn workload_args_of(&self, workload: &str, phases: u32) -> String {
        format!(
            "{workload}:size={}M,phases={phases},seconds={}",
            self.buffer_bytes >> 20,
            self.phase_seconds
        )
    }

    /// Which phases of a paired run are tracked.
    pub fn paired_schedule(&self) -> PhaseSchedule {
        PhaseSchedule::new(self.warmup_phases, self.paired_blocks)
    }

    /// What each repetition runs per workload: the untracked baseline,
    /// then every tracker at every interval.
    pub fn variants(&self) -> Vec<Variant> {
        let mut variants = Vec::new();
        for tracker in &self.trackers {
            if tracker == NONE {
                variants.insert(0, Variant::baseline());
            } else {
                variants.extend(self.intervals_ms.iter().map(|&ms| Variant {
                    tracker: tracker.clone(),
                    interval_ms: Some(ms),
                }));
            }
        }
        variants
    }

    /// Guest RAM in GiB (for per-GiB costs).
    pub fn guest_gib(&self) -> f64 {
        self.guest_bytes as f64 / (1u64 << 30) as f64
    }

    /// One line describing the method, for reports.
    pub fn describe(&self) -> String {
        let fresh = if self.repetitions == 0 {
            "no fresh-VM runs (--paired-only)".to_owned()
        } else {
            format!(
                "{} interleaved repetitions, each running every tracker and interval once (order \
                 alternating), a fresh VM per run",
                self.repetitions
            )
        };
        format!(
            "{} guest on {} vCPUs, {} frames, one memfd tier, no migration; workloads {} over a \
             {} buffer ({} phases of {} s, the first not counted); trackers {} at their default \
             settings, collect() every {} ms from one host thread that also feeds the heat \
             model; {}; then {} paired runs per workload and \
             tracker, each a fresh VM of {} blocks of 4 phases in which the tracker runs in \
             half (ABBA, BAAB)",
            format_size(self.guest_bytes),
            self.vcpus,
            format_size(self.frame_size),
            self.workloads.join(" and "),
            format_size(self.buffer_bytes),
            self.phases,
            self.phase_seconds,
            self.trackers.join(", "),
            self.intervals_ms
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" and "),
            fresh,
            self.paired_repetitions,
            self.paired_blocks,
        )
    }
}

/// One configuration a repetition runs: a tracker at an interval, or the
/// untracked baseline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    /// The tracker's name (`none` for the baseline).
    pub tracker: String,
    /// Milliseconds between `collect()` calls; `None` for the baseline.
    pub interval_ms: Option<u64>,
}

impl Variant {
    /// The untracked baseline.
    pub fn baseline() -> Self {
        Self {
            tracker: NONE.to_owned(),
            interval_ms: None,
        }
    }

    /// `dirty-log every 200 ms`, or `none`.
    pub fn label(&self) -> String {
        match self.interval_ms {
            Some(ms) => format!("{} every {ms} ms", self.tracker),
            None => self.tracker.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_is_smaller_than_full() {
        let full = TrackSettings::new(false, None).unwrap();
        let quick = TrackSettings::new(true, None).unwrap();
        assert_eq!(full.guest_bytes, 1 << 30);
        assert_eq!(full.buffer_bytes, 512 << 20);
        assert!(quick.guest_bytes < full.guest_bytes);
        assert!(quick.repetitions < full.repetitions);
        assert!(quick.phases > quick.warmup_phases, "a phase is counted");
        assert_eq!(full.trackers[0], "none");
        assert!(full.trackers.contains(&"dirty-log".to_owned()));
        assert_eq!(full.heat_frames, [512, 32768, 524288]);
        let labels: Vec<String> = full.variants().iter().map(Variant::label).collect();
        assert_eq!(
            labels,
            [
                "none",
                "dirty-log every 200 ms",
                "fault-sample every 200 ms",
                "combined every 200 ms"
            ]
        );
        assert_eq!(quick.variants().len(), 4);
    }

    #[test]
    fn workload_strings_parse() {
        let s = TrackSettings::new(true, Some(128 << 20)).unwrap();
        for w in &s.workloads {
            let args = s.workload_args(w);
            assert!(workloads::Spec::parse(&args).is_ok(), "{args}");
        }
        assert_eq!(
            s.workload_args("hotset"),
            "hotset:size=64M,phases=2,seconds=0.5"
        );
    }

    #[test]
    fn bad_guest_sizes_are_refused() {
        assert!(matches!(
            TrackSettings::new(true, Some((64 << 20) + 4096)),
            Err(SettingsError::GuestSize(
                GuestSizeError::NotWholeFrames { .. }
            ))
        ));
        assert!(matches!(
            TrackSettings::new(true, Some(0)),
            Err(SettingsError::GuestSize(
                GuestSizeError::NotWholeFrames { .. }
            ))
        ));
        assert!(matches!(
            TrackSettings::new(true, Some(32 << 20)),
            Err(SettingsError::GuestSize(GuestSizeError::TooSmall { .. }))
        ));
    }

    #[test]
    fn description_names_sizes_and_method() {
        let text = TrackSettings::new(false, None).unwrap().describe();
        for part in ["1 GiB guest", "2 vCPUs", "hotset and zipf", "every 200 ms"] {
            assert!(text.contains(part), "{part} missing from {text}");
        }
    }
}
