//! The trackers the suite compares, by name: one table ([`TRACKERS`]).
//!
//! Adding a tracker is one entry: its name, what it changes in the VM
//! configuration, and a constructor taking the created VM, e.g.
//!
//! ```text
//! TrackerSpec { name: "fault-sample", configure: |_| {}, attach: Some(|vm| boxed(FaultSampleTracker::new(vm)?)) },
//! ```

use std::error::Error;
use std::fmt;

use thiserror::Error;

use access_track::{AccessTracker, DirtyLogTracker};
use vmm::vm::{Vm, VmConfig};

/// Why a tracker could not be attached to a VM.
#[derive(Debug, Error)]
pub enum AttachError {
    /// The VM lacks what the tracker needs (its `configure` was not
    /// applied, or the host lacks the facility).
    #[error("{tracker}: {what}")]
    Unavailable {
        /// The tracker.
        tracker: &'static str,
        /// What is missing.
        what: &'static str,
    },
    /// The tracker's constructor failed.
    #[error("{tracker}: set up")]
    Setup {
        /// The tracker.
        tracker: &'static str,
        /// What failed.
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
}

/// Builds a tracker for a created (not yet running) VM.
pub type Attach = fn(&Vm) -> Result<Box<dyn AccessTracker>, AttachError>;

/// One tracker the suite can run.
#[derive(Clone, Copy)]
pub struct TrackerSpec {
    /// Its name on the command line and in results.
    pub name: &'static str,
    /// What it needs in the VM's configuration (e.g. the dirty log on).
    pub configure: fn(&mut VmConfig),
    /// Its constructor; `None` for the untracked baseline.
    pub attach: Option<Attach>,
}

impl fmt::Debug for TrackerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackerSpec")
            .field("name", &self.name)
            .field("tracks", &self.attach.is_some())
            .finish()
    }
}

/// Name of the untracked baseline.
pub const NONE: &str = "none";

/// Every tracker, the untracked baseline first.
pub static TRACKERS: &[TrackerSpec] = &[
    TrackerSpec {
        name: NONE,
        configure: |_| {},
        attach: None,
    },
    TrackerSpec {
        name: "dirty-log",
        configure: |config| config.dirty_log_tracking = true,
        attach: Some(dirty_log),
    },
    // fault-sample and combined: one entry each here.
];

/// The tracker called `name`, if the suite knows it.
pub fn tracker(name: &str) -> Option<&'static TrackerSpec> {
    TRACKERS.iter().find(|t| t.name == name)
}

/// The dirty-log tracker on the VM's dirty log.
fn dirty_log(vm: &Vm) -> Result<Box<dyn AccessTracker>, AttachError> {
    let log = vm.dirty_log().ok_or(AttachError::Unavailable {
        tracker: "dirty-log",
        what: "the VM's dirty log is off",
    })?;
    Ok(Box::new(DirtyLogTracker::new(log, vm.memory().clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_first_and_names_unique() {
        assert_eq!(TRACKERS[0].name, NONE);
        assert!(TRACKERS[0].attach.is_none());
        for (i, t) in TRACKERS.iter().enumerate() {
            assert!(TRACKERS[i + 1..].iter().all(|o| o.name != t.name));
            assert!(std::ptr::eq(tracker(t.name).unwrap(), t));
        }
        assert!(tracker("nope").is_none());
    }

    #[test]
    fn dirty_log_turns_the_log_on() {
        let mut config = VmConfig {
            vcpus: 1,
            memory: Default::default(),
            payload: vmm::vm::PayloadSource::Embedded,
            args: String::new(),
            timeout: None,
            migration: Default::default(),
            dirty_log_tracking: false,
        };
        (tracker(NONE).unwrap().configure)(&mut config);
        assert!(!config.dirty_log_tracking);
        (tracker("dirty-log").unwrap().configure)(&mut config);
        assert!(config.dirty_log_tracking);
    }
}
