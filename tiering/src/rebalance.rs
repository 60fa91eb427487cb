//! A live rebalance: a new fast-tier quota with a deadline. The engine
//! paces its moves so the fast tier reaches the quota by the deadline
//! (above the rate limits if need be) and records how far it got.

use std::time::{Duration, Instant};

use crate::stats::{RebalanceProgress, RebalanceState};

/// One rebalance in progress or finished.
#[derive(Clone, Debug)]
pub(crate) struct Rebalance {
    target_bytes: u64,
    start_bytes: u64,
    started: Instant,
    deadline: Duration,
    moved: u64,
    state: RebalanceState,
    /// How long it ran, once it ended (done or failed): its elapsed time
    /// stops there.
    ran: Option<Duration>,
}

impl Rebalance {
    pub fn new(target_bytes: u64, start_bytes: u64, deadline: Duration) -> Self {
        Rebalance {
            target_bytes,
            start_bytes,
            started: Instant::now(),
            deadline,
            moved: 0,
            state: RebalanceState::Running,
            ran: None,
        }
    }

    pub fn running(&self) -> bool {
        self.state == RebalanceState::Running
    }

    /// Frames to move this interval to finish in time: what is left,
    /// spread over the intervals left (all of it in the last one).
    pub fn pace(&self, fast: usize, quota_max: usize, interval: Duration) -> usize {
        self.pace_after(fast, quota_max, interval, self.started.elapsed())
    }

    /// [`pace`](Self::pace) once `elapsed` of the deadline has passed.
    fn pace_after(
        &self,
        fast: usize,
        quota_max: usize,
        interval: Duration,
        elapsed: Duration,
    ) -> usize {
        let left = fast.abs_diff(quota_max);
        let time_left = self.deadline.saturating_sub(elapsed);
        let intervals = (time_left.as_secs_f64() / interval.as_secs_f64().max(1e-3)).floor();
        if intervals < 1.0 {
            left
        } else {
            left.div_ceil(intervals as usize)
        }
    }

    /// Records an interval: `fast` frames on the fast tier afterwards,
    /// `slow_movable` unpinned frames elsewhere, `moved` frames moved.
    /// Done once the fast tier is within the quota and filled to it (less
    /// the headroom) or nothing is left to fill it with.
    pub fn advance(
        &mut self,
        fast: usize,
        slow_movable: usize,
        moved: usize,
        frame_size: u64,
        headroom_bytes: u64,
    ) {
        if !self.running() {
            return;
        }
        self.moved += moved as u64;
        let bytes = fast as u64 * frame_size;
        let fill_to = self
            .target_bytes
            .saturating_sub(headroom_bytes.div_ceil(frame_size) * frame_size);
        let within = bytes <= self.target_bytes;
        let filled = bytes + frame_size > fill_to || slow_movable == 0;
        let elapsed = self.started.elapsed();
        if within && filled {
            self.state = RebalanceState::Done;
            self.ran = Some(elapsed);
        } else if elapsed > self.deadline {
            self.ran = Some(elapsed);
            self.state = RebalanceState::Failed {
                reason: format!(
                    "deadline passed with {bytes} bytes on the fast tier for a quota of {} \
                     (moves aborted or frames pinned? see last_error)",
                    self.target_bytes
                ),
            };
        }
    }

    pub fn progress(&self, fast_bytes: u64) -> RebalanceProgress {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        RebalanceProgress {
            target_bytes: self.target_bytes,
            start_bytes: self.start_bytes,
            fast_bytes,
            moved_frames: self.moved,
            elapsed_ms: ms(self.ran.unwrap_or_else(|| self.started.elapsed())),
            deadline_ms: ms(self.deadline),
            state: self.state.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn pace_spreads_what_is_left_over_the_time_left() {
        let r = Rebalance::new(64 * MIB, 128 * MIB, Duration::from_secs(2));
        let interval = Duration::from_millis(200);
        // 32 frames over 10 intervals of 200 ms, then over the 5 left.
        assert_eq!(r.pace_after(64, 32, interval, Duration::ZERO), 4);
        assert_eq!(r.pace_after(64, 32, interval, Duration::from_secs(1)), 7);
        // From the clock: at most 10 intervals are left.
        assert!(r.pace(64, 32, interval) >= 4);
        let late = Rebalance::new(64 * MIB, 128 * MIB, Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(late.pace(64, 32, Duration::from_millis(200)), 32);
    }

    #[test]
    fn elapsed_time_stops_when_it_ends() {
        let mut r = Rebalance::new(64 * MIB, 128 * MIB, Duration::from_secs(60));
        r.advance(32, 100, 32, 2 * MIB, 0);
        let done = r.progress(64 * MIB);
        assert_eq!(done.state, RebalanceState::Done);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(r.progress(64 * MIB).elapsed_ms, done.elapsed_ms);

        let mut late = Rebalance::new(64 * MIB, 128 * MIB, Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(2));
        late.advance(40, 100, 0, 2 * MIB, 0);
        let failed = late.progress(80 * MIB);
        assert!(matches!(failed.state, RebalanceState::Failed { .. }));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(late.progress(80 * MIB).elapsed_ms, failed.elapsed_ms);
    }

    #[test]
    fn done_when_within_and_filled_failed_after_the_deadline() {
        let mut shrink = Rebalance::new(64 * MIB, 128 * MIB, Duration::from_secs(60));
        shrink.advance(40, 100, 24, 2 * MIB, 0);
        assert!(shrink.running());
        shrink.advance(32, 100, 8, 2 * MIB, 0);
        assert_eq!(shrink.progress(64 * MIB).state, RebalanceState::Done);
        assert_eq!(shrink.progress(64 * MIB).moved_frames, 32);

        // Growing with nothing left to promote is done too.
        let mut grow = Rebalance::new(256 * MIB, 64 * MIB, Duration::from_secs(60));
        grow.advance(40, 0, 8, 2 * MIB, 0);
        assert_eq!(grow.progress(80 * MIB).state, RebalanceState::Done);

        let mut late = Rebalance::new(64 * MIB, 128 * MIB, Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(2));
        late.advance(60, 100, 0, 2 * MIB, 0);
        assert!(matches!(
            late.progress(120 * MIB).state,
            RebalanceState::Failed { .. }
        ));
    }
}
