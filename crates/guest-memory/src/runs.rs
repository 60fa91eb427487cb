//! Coalescing of frames into mapping runs: consecutive frames on the same
//! tier in consecutive slots are mapped with one `mmap` call (when guest
//! RAM is mapped, and when the remap migrator maps moved frames).

use crate::placement::Location;

/// Consecutive frames backed by consecutive slots of one tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// Index (in the slice given to [`runs`]) of the run's first frame.
    pub first: usize,
    /// Number of frames.
    pub count: usize,
    /// Location of the first frame.
    pub start: Location,
}

/// Splits `locations` (one per consecutive frame) into maximal runs.
pub(crate) fn runs(locations: &[Location]) -> Vec<Run> {
    let frames: Vec<(usize, Location)> = locations.iter().copied().enumerate().collect();
    runs_where(&frames, |_, _| true)
}

/// Splits `frames` (`(frame, location)`, in frame order) into maximal runs
/// of consecutive frames in consecutive slots of one tier for which
/// `joins(first frame, frame count)` also holds (the frames' host range
/// is contiguous, say).
pub(crate) fn runs_where(
    frames: &[(usize, Location)],
    joins: impl Fn(usize, usize) -> bool,
) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (i, &(frame, loc)) in frames.iter().enumerate() {
        if let Some(run) = out.last_mut() {
            let first = frames[run.first].0;
            if frame == first + run.count
                && run.start.tier == loc.tier
                && run.start.slot + run.count == loc.slot
                && joins(first, run.count + 1)
            {
                run.count += 1;
                continue;
            }
        }
        out.push(Run {
            first: i,
            count: 1,
            start: loc,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::loc;

    #[test]
    fn coalesces_consecutive_slots_on_one_tier() {
        let locs = [
            loc(0, 0),
            loc(0, 1),
            loc(0, 2),
            loc(1, 3),
            loc(1, 4),
            loc(1, 9),
            loc(0, 3),
        ];
        assert_eq!(
            runs(&locs),
            vec![
                Run {
                    first: 0,
                    count: 3,
                    start: loc(0, 0)
                },
                Run {
                    first: 3,
                    count: 2,
                    start: loc(1, 3)
                },
                Run {
                    first: 5,
                    count: 1,
                    start: loc(1, 9)
                },
                Run {
                    first: 6,
                    count: 1,
                    start: loc(0, 3)
                },
            ]
        );
    }

    #[test]
    fn descending_slots_do_not_coalesce() {
        assert_eq!(runs(&[loc(0, 1), loc(0, 0)]).len(), 2);
        assert!(runs(&[]).is_empty());
    }
}
