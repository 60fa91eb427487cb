//! The clock a run's results are read on: seconds since phase 0 began, on
//! the emulated guest's clock. A guest emulated `speed` times faster
//! (`tiering::TieringPolicy::at_guest_speed`) runs its phases `speed`
//! times longer in real time, so one emulated second is `speed` real
//! ones; at speed 1 the two clocks agree.

use tiering::stats::IntervalRecord;

use super::{RatePoint, migration_rates};

/// Converts a trace's real times into a run's emulated seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunClock {
    /// When phase 0 began, real seconds on the trace's clock.
    pub origin: f64,
    /// How many times faster than real the guest is emulated (≥ 1).
    pub speed: u32,
}

impl RunClock {
    /// The clock of a run whose phase 0 began at `origin` (real seconds),
    /// its guest emulated `speed` times faster (0 counts as 1).
    pub fn new(origin: f64, speed: u32) -> Self {
        Self {
            origin,
            speed: speed.max(1),
        }
    }

    fn factor(&self) -> f64 {
        f64::from(self.speed)
    }

    /// Emulated seconds since phase 0 began at `real_secs` (real seconds
    /// on the trace's clock).
    pub fn secs(&self, real_secs: f64) -> f64 {
        (real_secs - self.origin) / self.factor()
    }

    /// Emulated seconds since phase 0 began at the engine's `at_ms`
    /// (milliseconds on the same clock: both start at VM creation).
    pub fn ms_secs(&self, at_ms: u64) -> f64 {
        self.secs(at_ms as f64 / 1e3)
    }

    /// The engine's migration rate per interval from phase 0 on
    /// ([`migration_rates`]), at emulated seconds and in MB per emulated
    /// second: what a guest `speed` times faster would see moved.
    pub fn rates(&self, recent: &[IntervalRecord]) -> Vec<RatePoint> {
        let f = self.factor();
        migration_rates(recent, self.origin)
            .into_iter()
            .map(|p| RatePoint {
                secs: p.secs / f,
                mbps: p.mbps * f,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(at_ms: u64, bytes: u64) -> IntervalRecord {
        IntervalRecord {
            at_ms,
            bytes,
            ..IntervalRecord::default()
        }
    }

    #[test]
    fn real_time_is_divided_by_the_speed() {
        let real = RunClock::new(10.0, 1);
        assert_eq!(real.secs(13.0), 3.0);
        let fast = RunClock::new(10.0, 4);
        assert_eq!(fast.secs(22.0), 3.0, "12 real seconds are 3 emulated");
        assert_eq!(fast.ms_secs(14_000), 1.0);
        assert_eq!(fast.secs(8.0), -0.5, "before phase 0");
        assert_eq!(RunClock::new(0.0, 0).speed, 1);
    }

    #[test]
    fn rates_are_per_emulated_second() {
        // 4 MB in each 0.8 s real interval: 5 MB/s real, 20 MB per
        // emulated second (0.2 emulated s).
        let recent = [record(10_800, 4_000_000), record(11_600, 4_000_000)];
        let fast = RunClock::new(10.0, 4).rates(&recent);
        assert_eq!(fast.len(), 2);
        assert!((fast[0].secs - 0.2).abs() < 1e-12);
        assert!((fast[1].secs - 0.4).abs() < 1e-12);
        assert!((fast[1].mbps - 20.0).abs() < 1e-9);
        // The same moves by a real guest 4× faster: the same points.
        let recent = [record(2_700, 4_000_000), record(2_900, 4_000_000)];
        let real = RunClock::new(2.5, 1).rates(&recent);
        assert!((real[1].secs - fast[1].secs).abs() < 1e-12);
        assert!((real[1].mbps - fast[1].mbps).abs() < 1e-9);
    }
}
