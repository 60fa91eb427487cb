//! The checks every benchmark VM ends with: the guest's own verdict, the
//! VMM's check of the guest's memory image, the mappings against the
//! placement map, and that no released slot still holds memory. Any
//! failure is an error: a benchmark that loses data must not print a
//! number.

use guest_memory::TierId;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use vmm::vm::VmEnd;
use workloads::{ImageCheck, Spec, check_memcheck_image};

use super::image::{PatternError, WordReader, check_pattern};
use super::runner::GuestVm;

/// Why a run failed verification.
#[derive(Debug, Error)]
pub enum VerifyError {
    /// The guest did not exit cleanly: its own check failed, it crashed,
    /// or it timed out.
    #[error("guest: {end}; last guest log lines: {log:?}")]
    Guest {
        /// How the VM ended.
        end: String,
        /// The guest's last log lines.
        log: Vec<String>,
    },
    /// The VMM's reading of memcheck's buffer found a lost or torn write.
    #[error("memcheck image: {0}")]
    Image(String),
    /// A frame the guest never writes lost its pattern.
    #[error("idle frames")]
    Pattern(#[from] PatternError),
    /// A frame's mapping differs from the placement map.
    #[error("mappings against the placement map")]
    Backing(#[source] guest_memory::Error),
    /// Released slots still hold memory.
    #[error("{count} released slot(s) still hold memory, e.g. tier {tier} slot {slot}")]
    Leaked {
        /// Slots leaked.
        count: usize,
        /// Tier of the first.
        tier: TierId,
        /// Slot of the first.
        slot: usize,
    },
    /// The leak check itself failed.
    #[error("leaked-slot check")]
    LeakCheck(#[source] guest_memory::Error),
}

/// What the VMM checks in the image besides the guest's own verdict.
#[derive(Debug, Clone, Copy)]
pub enum ImageKind<'a> {
    /// memcheck's buffer, against its final round.
    Memcheck,
    /// These frames, against the fill pattern of this seed.
    Pattern {
        /// The frames.
        frames: &'a [usize],
        /// The seed.
        seed: u64,
    },
}

/// The passed checks of one VM, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// The guest's own verdict.
    pub guest: String,
    /// What the VMM checked in the image.
    pub image: String,
    /// Words of guest memory the VMM checked.
    pub words_checked: u64,
    /// Every frame's mapping matched the placement map.
    pub backing_verified: bool,
    /// Released slots still holding memory (always 0 in a passed run).
    pub leaked_slots: usize,
}

/// Checks a finished VM that ended with `end`.
pub fn verify(
    guest: &GuestVm,
    end: &VmEnd,
    image: ImageKind<'_>,
) -> Result<Verification, VerifyError> {
    check_end(guest, end)?;
    let memory = guest.memory();
    let (what, words) = match image {
        ImageKind::Memcheck => {
            let spec = Spec::parse(guest.args())
                .map_err(|e| VerifyError::Image(format!("workload {:?}: {e}", guest.args())))?;
            let mut reader = WordReader::new(memory);
            match check_memcheck_image(&spec, guest.free(), guest.vcpus(), |gpa| reader.read(gpa)) {
                ImageCheck::Intact { words, max_round } => (
                    format!("memcheck buffer intact at its final round ({max_round})"),
                    words,
                ),
                other => return Err(VerifyError::Image(format!("{other:?}"))),
            }
        }
        ImageKind::Pattern { frames, seed } => {
            let words = check_pattern(memory, frames, seed)?;
            (
                format!("fill pattern intact in all {} moved frames", frames.len()),
                words,
            )
        }
    };
    memory.verify_backing().map_err(VerifyError::Backing)?;
    let leaked = memory.leaked_slots().map_err(VerifyError::LeakCheck)?;
    if let Some(first) = leaked.first() {
        return Err(VerifyError::Leaked {
            count: leaked.len(),
            tier: first.tier,
            slot: first.slot,
        });
    }
    Ok(Verification {
        guest: "exited 0 after its own final check".to_owned(),
        image: what,
        words_checked: words,
        backing_verified: true,
        leaked_slots: 0,
    })
}

/// The guest's verdict alone (checked first: when the guest saw a lost
/// write, that is the news, whatever else went wrong).
pub fn check_end(guest: &GuestVm, end: &VmEnd) -> Result<(), VerifyError> {
    if *end == VmEnd::Success {
        Ok(())
    } else {
        Err(VerifyError::Guest {
            end: end.describe(),
            log: guest.log_tail(),
        })
    }
}
