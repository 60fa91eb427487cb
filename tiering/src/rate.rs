//! Rate limits as token buckets: how many bytes the engine may move this
//! interval.

use std::time::Duration;

/// A token bucket of bytes, refilled at a fixed rate and holding at most
/// one interval's worth (at least one frame, so rates below a frame per
/// interval still move a frame now and then). Bytes moved in any interval
/// therefore stay at or below `rate × interval` plus one frame.
#[derive(Clone, Debug)]
pub struct RateBudget {
    bytes_per_sec: f64,
    cap: f64,
    tokens: f64,
}

impl RateBudget {
    /// A full bucket for `mbps` MB/s (10^6 bytes), ticking every
    /// `interval`, spent in units of `frame_size`.
    pub fn new(mbps: f64, interval: Duration, frame_size: u64) -> Self {
        let bytes_per_sec = mbps * 1e6;
        let cap = (bytes_per_sec * interval.as_secs_f64()).max(frame_size as f64);
        RateBudget {
            bytes_per_sec,
            cap,
            tokens: cap,
        }
    }

    /// Adds the tokens of `elapsed` (up to the cap).
    pub fn refill(&mut self, elapsed: Duration) {
        self.tokens = (self.tokens + self.bytes_per_sec * elapsed.as_secs_f64()).min(self.cap);
    }

    /// Whole frames of `frame_size` the bucket pays for now.
    pub fn frames(&self, frame_size: u64) -> usize {
        (self.tokens / frame_size as f64).floor() as usize
    }

    /// Takes `bytes` (the bucket may go below zero when quota enforcement
    /// overrides the limit; it then pays that back first).
    pub fn spend(&mut self, bytes: u64) {
        self.tokens -= bytes as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn holds_one_interval_and_refills_at_the_rate() {
        // 100 MB/s, 200 ms: 20 MB = 9 frames of 2 MiB.
        let mut b = RateBudget::new(100.0, Duration::from_millis(200), 2 * MIB);
        assert_eq!(b.frames(2 * MIB), 9);
        b.spend(9 * 2 * MIB);
        assert_eq!(b.frames(2 * MIB), 0);
        b.refill(Duration::from_millis(100));
        assert_eq!(b.frames(2 * MIB), 5);
        // Never more than one interval's worth, however long it idled.
        b.refill(Duration::from_secs(60));
        assert_eq!(b.frames(2 * MIB), 9);
    }

    #[test]
    fn slow_rates_still_move_a_frame_and_debt_is_paid_back() {
        let mut b = RateBudget::new(1.0, Duration::from_millis(100), 2 * MIB);
        assert_eq!(b.frames(2 * MIB), 1);
        b.spend(10 * 2 * MIB);
        b.refill(Duration::from_secs(1));
        assert_eq!(b.frames(2 * MIB), 0);
    }
}
