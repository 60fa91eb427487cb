//! The trackers the suite compares, by name: one table ([`TRACKERS`]),
//! each entry the VMM's tracker kind (which also says what the VM needs:
//! the dirty log, minor faults on the guard's userfaultfd) or none for the
//! untracked baseline. Trackers run at their default settings. The
//! trackers that need something of the host kernel (`damon`, `access-log`)
//! run only when named (`--tracker`): a default run works on any host.

use access_track::TrackerKind;

/// One tracker the suite can run.
#[derive(Clone, Copy, Debug)]
pub struct TrackerSpec {
    /// Its name on the command line and in results.
    pub name: &'static str,
    /// The VMM's tracker; `None` for the untracked baseline.
    pub kind: Option<TrackerKind>,
    /// Whether a run that names no tracker runs it.
    pub by_default: bool,
}

/// Name of the untracked baseline.
pub const NONE: &str = "none";

/// Every tracker, the untracked baseline first.
pub static TRACKERS: &[TrackerSpec] = &[
    TrackerSpec {
        name: NONE,
        kind: None,
        by_default: true,
    },
    TrackerSpec {
        name: "dirty-log",
        kind: Some(TrackerKind::DirtyLog),
        by_default: true,
    },
    TrackerSpec {
        name: "fault-sample",
        kind: Some(TrackerKind::FaultSample),
        by_default: true,
    },
    TrackerSpec {
        name: "combined",
        kind: Some(TrackerKind::Combined),
        by_default: true,
    },
    TrackerSpec {
        name: "damon",
        kind: Some(TrackerKind::Damon),
        by_default: false,
    },
    TrackerSpec {
        name: "access-log",
        kind: Some(TrackerKind::AccessLog),
        by_default: false,
    },
];

/// The names of the trackers (the baseline left out), for messages.
pub const TRACKER_NAMES: [&str; 5] = [
    "dirty-log",
    "fault-sample",
    "combined",
    "damon",
    "access-log",
];

/// The tracker called `name`, if the suite knows it.
pub fn tracker(name: &str) -> Option<&'static TrackerSpec> {
    TRACKERS.iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_first_and_names_unique() {
        assert_eq!(TRACKERS[0].name, NONE);
        assert!(TRACKERS[0].kind.is_none());
        for (i, t) in TRACKERS.iter().enumerate() {
            assert!(TRACKERS[i + 1..].iter().all(|o| o.name != t.name));
            assert!(std::ptr::eq(tracker(t.name).unwrap(), t));
        }
        assert!(tracker("nope").is_none());
        let named: Vec<_> = TRACKERS[1..].iter().map(|t| t.name).collect();
        assert_eq!(named, TRACKER_NAMES);
    }

    #[test]
    fn names_are_the_vmm_names() {
        for t in &TRACKERS[1..] {
            let kind: TrackerKind = t.name.parse().unwrap();
            assert_eq!(Some(kind), t.kind);
        }
    }
}
