//! The VM-wide write stop: how the remap migrator keeps writers out of
//! frames that userfaultfd cannot write-protect.
//!
//! Linux registers userfaultfd only over anonymous, shmem and hugetlbfs
//! mappings, so a frame mapped from a device-DAX tier (or a regular file)
//! has no per-page write protection. The remap migrator moves such frames
//! under a [`WriteStop`] instead: every writer of guest RAM (the vCPUs and
//! the VMM's own threads) waits from `stop` to `resume`, which covers the
//! copy (pre-copy: the last delta) and the remap. The VMM implements it
//! by parking its vCPUs at their pause gate.

use std::fmt::Debug;

use thiserror::Error;

/// The stop did not take; nothing was stopped. The cause is the
/// implementor's own error (the VMM's: vCPUs that did not park).
#[derive(Debug, Error)]
#[error("stopping the guest's writers")]
pub struct StopError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

/// Stops and resumes every writer of a VM's guest RAM at once.
pub trait WriteStop: Send + Sync + Debug {
    /// Returns once no writer can touch guest RAM: vCPUs out of the guest
    /// and VMM threads outside their writes. They stay stopped until
    /// [`resume`](Self::resume). Stops may nest (each needs its resume).
    /// On error nothing is left stopped.
    fn stop(&self) -> Result<(), StopError>;

    /// Lets the writers of one successful [`stop`](Self::stop) go on.
    fn resume(&self);
}
