//! What became of a batch: each frame that moved (from which tier to
//! which), each move that failed with the step and the error that failed
//! it, and the batch's counts and costs ([`BatchReport`]).

use std::io;
use std::ops::Range;
use std::sync::Arc;

use page_copy::CopyError;
use thiserror::Error;

use super::dirty::DirtyError;
use super::kernel_pages::PageError;
use super::report::BatchReport;
use super::stop::StopError;
use crate::backend_error::BackendError;
use crate::error::Error as MemoryError;
use crate::ids::{FrameId, TierId};
use crate::uffd::UffdError;

/// The step of a move that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MoveStep {
    /// Checking the move against the memory (frame, tier, partner).
    Check,
    /// Reserving the destination.
    Reserve,
    /// Keeping writers out (write-protection or the VM-wide write stop).
    Hold,
    /// Pre-copy's rounds while the guest runs.
    Precopy,
    /// Copying the data.
    Copy,
    /// Putting the destination under the frame (`mmap`, or the NUMA policy
    /// for the kernel migrator).
    Remap,
    /// Registering the new mapping with the write guard.
    Register,
    /// Recording the move in the placement map and freeing the source.
    Commit,
    /// Moving the pages of the batch (kernel migrator).
    MovePages,
    /// Putting a failed move back.
    Rollback,
}

impl std::fmt::Display for MoveStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MoveStep::Check => "check",
            MoveStep::Reserve => "reserve",
            MoveStep::Hold => "hold writers",
            MoveStep::Precopy => "pre-copy",
            MoveStep::Copy => "copy",
            MoveStep::Remap => "remap",
            MoveStep::Register => "register",
            MoveStep::Commit => "commit",
            MoveStep::MovePages => "move pages",
            MoveStep::Rollback => "rollback",
        })
    }
}

/// Why a step failed. Errors shared by every frame of a failed run are
/// behind an `Arc`, so each frame's [`MoveError`] carries the one cause.
#[derive(Clone, Debug, Error)]
pub enum StepError {
    /// A test or soak run made the step fail on purpose.
    #[error("injected failure")]
    Injected,
    /// The frame does not exist.
    #[error("no such frame (memory has {frames})")]
    NoSuchFrame {
        /// Frames the memory has.
        frames: usize,
    },
    /// The tier does not exist.
    #[error("no tier {0}")]
    NoSuchTier(TierId),
    /// The two frames of an exchange are on the same tier.
    #[error("frames {a} and {b} of an exchange are both on tier '{tier}'")]
    SameTier {
        /// One frame.
        a: FrameId,
        /// The other.
        b: FrameId,
        /// Their tier.
        tier: String,
    },
    /// The destination is full and nothing in the batch makes room.
    #[error("tier '{tier}' is full (quota {quota} frames) and no frame leaves it in this batch")]
    TierFull {
        /// The tier.
        tier: String,
        /// Its quota or slot count.
        quota: usize,
    },
    /// The move depended on another one (its exchange partner, or the move
    /// whose room it took), which failed.
    #[error("aborted with frame {0}, whose move it depended on")]
    PartnerFailed(FrameId),
    /// The memory's bookkeeping (slots, placement map, mappings) refused.
    #[error("tiered memory")]
    Memory(#[source] Arc<MemoryError>),
    /// userfaultfd refused (write-protect, register, wake).
    #[error("userfaultfd")]
    Uffd(#[source] Arc<UffdError>),
    /// The VM-wide write stop did not take.
    #[error("write stop")]
    Stop(#[source] Arc<StopError>),
    /// A frame of a tier userfaultfd cannot protect, and no write stop.
    #[error("no write stop for a tier userfaultfd cannot write-protect")]
    NoWriteStop,
    /// The copy engine failed.
    #[error("copy engine")]
    Copy(#[source] Arc<CopyError>),
    /// The dirty log failed during pre-copy.
    #[error("dirty log")]
    Dirty(#[source] Arc<DirtyError>),
    /// An OS call of the migrator failed.
    #[error("{call}")]
    Os {
        /// The call, in words.
        call: &'static str,
        /// What the OS said.
        #[source]
        source: Arc<io::Error>,
    },
    /// The exchange bounce area could not be created.
    #[error("creating the exchange bounce area")]
    Bounce(#[source] Arc<BackendError>),
    /// The page work of the kernel migrator failed.
    #[error("pages")]
    Pages(#[source] PageError),
    /// Pages of the frame stayed behind (kernel migrator): the frame is
    /// not on its destination.
    #[error("pages stayed behind")]
    PagesStayed,
    /// An exchange's second frame could not be mapped onto its new slot
    /// after repeated tries: it stays on the bounce mapping with all its
    /// data, which the placement map cannot describe.
    #[error("left on the exchange bounce mapping after repeated remap failures")]
    LeftOnBounce,
    /// Pages of aborted frames could not be moved back.
    #[error("{0} pages of aborted frames stayed on the destination node")]
    PagesStuck(u64),
    /// Pages not on their target after one retry, by status.
    #[error("{failed} pages not moved after one retry ({by_status})")]
    PagesNotMoved {
        /// Pages.
        failed: u64,
        /// "EBUSY x3, ENOMEM x1".
        by_status: String,
    },
}

impl StepError {
    /// Wraps a tiered-memory error.
    pub fn memory(e: MemoryError) -> Self {
        StepError::Memory(Arc::new(e))
    }

    /// Wraps a userfaultfd error.
    pub fn uffd(e: UffdError) -> Self {
        StepError::Uffd(Arc::new(e))
    }

    /// Wraps an OS error of `call`.
    pub fn os(call: &'static str, e: io::Error) -> Self {
        StepError::Os {
            call,
            source: Arc::new(e),
        }
    }
}

/// A move of a batch that failed (and was rolled back), or something that
/// went wrong for frames that still moved or were put back.
#[derive(Clone, Debug, Error)]
#[error("{} -> tier {to_tier}: {step} failed", frames_text(frames))]
pub struct MoveError {
    /// The frames concerned: one frame, or a run that failed as one.
    pub frames: Range<usize>,
    /// Their destination tier.
    pub to_tier: TierId,
    /// The step that failed.
    pub step: MoveStep,
    /// Why.
    #[source]
    pub source: StepError,
}

impl MoveError {
    /// A failure of one frame's move.
    pub fn frame(frame: FrameId, to_tier: TierId, step: MoveStep, source: StepError) -> Self {
        MoveError {
            frames: frame.index()..frame.index() + 1,
            to_tier,
            step,
            source,
        }
    }
}

fn frames_text(frames: &Range<usize>) -> String {
    if frames.len() == 1 {
        format!("frame {}", frames.start)
    } else {
        format!("frames {}..{}", frames.start, frames.end)
    }
}

/// A frame that moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MovedFrame {
    /// The frame.
    pub frame: FrameId,
    /// Its tier before.
    pub from_tier: TierId,
    /// Its tier now.
    pub to_tier: TierId,
    /// Whether it swapped places with another frame.
    pub exchanged: bool,
}

/// Outcome of [`super::Migrator::migrate`].
#[derive(Clone, Debug, Default)]
pub struct BatchOutcome {
    /// Frames now on their destination tier.
    pub moved: Vec<MovedFrame>,
    /// Moves not done, each rolled back (the frame is where it was).
    pub failed: Vec<MoveError>,
    /// What went wrong without undoing a move: a moved run that could not
    /// be registered, pages a rollback left behind.
    pub warnings: Vec<MoveError>,
    /// Counts and costs.
    pub report: BatchReport,
}

impl BatchOutcome {
    /// An outcome for a batch of `requested` frames, nothing done yet.
    pub fn new(requested: usize) -> Self {
        BatchOutcome {
            report: BatchReport {
                requested,
                ..BatchReport::default()
            },
            ..BatchOutcome::default()
        }
    }

    /// Records that `frame` moved.
    pub fn record_moved(
        &mut self,
        frame: FrameId,
        from_tier: TierId,
        to_tier: TierId,
        exchanged: bool,
    ) {
        self.moved.push(MovedFrame {
            frame,
            from_tier,
            to_tier,
            exchanged,
        });
        self.report.moved += 1;
        if exchanged {
            self.report.exchanged += 1;
        }
    }

    /// Records a failed (rolled back) move of each frame of `frames`.
    pub fn record_failed(&mut self, error: MoveError) {
        self.report.aborted += error.frames.len();
        self.failed.push(error);
    }

    /// Records a skipped move (already there, or named twice).
    pub fn record_skipped(&mut self) {
        self.report.skipped += 1;
    }

    /// Adds `other` to `self` (for totals over many batches).
    pub fn absorb(&mut self, other: BatchOutcome) {
        self.moved.extend(other.moved);
        self.failed.extend(other.failed);
        self.warnings.extend(other.warnings);
        self.report.absorb(&other.report);
    }

    /// Every error of the batch, failures first.
    pub fn errors(&self) -> impl Iterator<Item = &MoveError> {
        self.failed.iter().chain(&self.warnings)
    }
}
