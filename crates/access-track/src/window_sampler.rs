//! The windowed sampler: short windows, each arming the same number of
//! pages in every region ([`Regions`]) and reading which were touched
//! before it closed; per-frame counts of looks and hits, so a frame's hit
//! ratio estimates how often its pages are touched (frequency), not just
//! whether they were.
//!
//! The pages looked at stay the same through an aggregation (about
//! [`AGGREGATION`]); then the regions adapt and new pages are picked.
//! Re-arming a page not written since costs nothing, where each fresh page
//! left write-protected after its window costs the guest a fault at its
//! next write, however late.
//!
//! The window adapts, judged every [`JUDGE_WINDOWS`] windows: when the
//! hottest tenth of the regions is caught in
//! nearly every look (saturation: the window is too long to tell hot from
//! hotter) it shrinks, by half or by what the median region's rate
//! says; when even they are rarely caught it grows to the
//! length that would catch them most of the time, up to the period. The
//! budget is the pages armed per window times the windows per second,
//! fixed by [`SamplingSettings`] whatever the guest's RAM.
//!
//! This type does no waiting of its own: [`SamplerThread`] drives it on
//! a clock, tests drive it window by window.
//!
//! [`SamplerThread`]: crate::sampler_thread::SamplerThread

use std::time::Duration;

use crate::regions::Regions;
use crate::sampling_settings::{MIN_REGIONS, SamplingSettings};
use crate::xorshift::XorShift;

/// How often regions adapt and the window is re-judged: after the windows
/// of this long, at least [`MIN_AGGREGATION_WINDOWS`].
pub const AGGREGATION: Duration = Duration::from_millis(500);
/// Fewest windows per aggregation.
pub const MIN_AGGREGATION_WINDOWS: u64 = 2;
/// Hottest-tenth hit ratio at or above which the window is saturated.
const SATURATED: f64 = 0.9;
/// Hottest-tenth hit ratio below which the window grows.
const STARVED: f64 = 0.5;
/// Hottest-tenth hit ratio a starved window grows towards.
const TARGET: f64 = 0.7;
/// Hit ratio of the median region a saturated window shrinks towards.
const TYPICAL: f64 = 0.25;
/// Most a window grows, or shrinks, at one judgement.
const MAX_GROWTH: f64 = 10.0;
/// Windows between judgements of the window's length.
const JUDGE_WINDOWS: u64 = 2;
/// The first window (within the settings' bounds): long enough to catch a
/// fast guest's hot pages, short enough not to saturate them for long.
const START_WINDOW: Duration = Duration::from_millis(10);

/// How a tracker arms pages and reads them back. Pages are numbered
/// `frame × pages_per_frame + page`.
pub trait PageProbe {
    /// The probe's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Arms `pages`: from now on an access to one of them is recorded.
    fn arm(&mut self, pages: &[u64]) -> Result<(), Self::Error>;

    /// Sets `touched[i]` to whether `pages[i]` was accessed since it was
    /// armed (`touched` has `pages.len()` entries).
    fn touched(&mut self, pages: &[u64], touched: &mut [bool]) -> Result<(), Self::Error>;
}

/// Per-frame looks and hits since the counts were last taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// Windows that looked at one of the frame's pages.
    pub looks: Vec<u16>,
    /// Of those, windows whose page was touched.
    pub hits: Vec<u16>,
}

/// Running totals of a sampler, for the stats.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SamplerReport {
    /// The budget in force, pages armed per second.
    pub budget_pages_per_sec: u32,
    /// Windows run.
    pub windows: u64,
    /// Pages armed, all windows together.
    pub armed_pages: u64,
    /// Armed pages found touched (each one write fault for the guest
    /// under the dirty log).
    pub hits: u64,
    /// The current window length.
    pub window: Duration,
    /// The current number of regions.
    pub regions: usize,
    /// Times the window shrank because it saturated.
    pub saturated: u64,
    /// CPU time the sampler's thread used, in nanoseconds.
    pub cpu_ns: u64,
}

/// The sampler's state.
#[derive(Debug)]
pub struct WindowSampler {
    settings: SamplingSettings,
    regions: Regions,
    rng: XorShift,
    window: Duration,
    picks: Vec<u64>,
    touched: Vec<bool>,
    counts: FrameCounts,
    pages_per_frame: u64,
    report: SamplerReport,
    /// Windows per aggregation.
    aggregation: u64,
    /// Windows since the window's length was last judged.
    unjudged: u64,
}

impl WindowSampler {
    /// A sampler over `frames` frames of `pages_per_frame` pages with
    /// valid `settings`, the window starting at [`START_WINDOW`] (within
    /// the settings' bounds).
    pub fn new(frames: usize, pages_per_frame: u64, settings: SamplingSettings, seed: u64) -> Self {
        let pages = usize::try_from(settings.pages_per_window()).unwrap_or(usize::MAX);
        let regions = Regions::new(frames, pages_per_frame, MIN_REGIONS, pages);
        // Aggregations cover the same time at any period (a slowed clock
        // included: AGGREGATION is one default interval).
        let period = settings.period().max(Duration::from_micros(1));
        let aggregation = (AGGREGATION.as_micros() / period.as_micros()) as u64;
        let window = START_WINDOW.clamp(
            Duration::from_micros(u64::from(settings.min_window_us)),
            Duration::from_micros(u64::from(settings.max_window_us)),
        );
        WindowSampler {
            settings,
            report: SamplerReport {
                budget_pages_per_sec: settings.budget_pages_per_sec,
                window,
                regions: regions.list().len(),
                ..SamplerReport::default()
            },
            regions,
            rng: XorShift::new(seed),
            window,
            picks: Vec::new(),
            touched: Vec::new(),
            counts: FrameCounts {
                looks: vec![0; frames],
                hits: vec![0; frames],
            },
            pages_per_frame: pages_per_frame.max(1),
            aggregation: aggregation.max(MIN_AGGREGATION_WINDOWS),
            unjudged: 0,
        }
    }

    /// The settings in use.
    pub fn settings(&self) -> SamplingSettings {
        self.settings
    }

    /// The window length now.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Totals so far.
    pub fn report(&self) -> SamplerReport {
        self.report
    }

    /// Runs one window: arms a page per region, calls `wait` with the
    /// window length (the caller sleeps; tests let the simulated guest
    /// run), reads the pages back and counts them. Every
    /// aggregation (about [`AGGREGATION`]) the regions and the window
    /// adapt.
    /// On an error the window is lost and nothing is counted.
    pub fn run_window<P: PageProbe>(
        &mut self,
        probe: &mut P,
        wait: impl FnOnce(Duration),
    ) -> Result<(), P::Error> {
        if self.report.windows % self.aggregation == 0 || self.picks.is_empty() {
            self.regions.pick(&mut self.rng, &mut self.picks);
        }
        probe.arm(&self.picks)?;
        wait(self.window);
        self.touched.clear();
        self.touched.resize(self.picks.len(), false);
        probe.touched(&self.picks, &mut self.touched)?;
        self.regions.record(&self.touched);
        for (&page, &hit) in self.picks.iter().zip(&self.touched) {
            let frame = (page / self.pages_per_frame) as usize;
            if let (Some(l), Some(h)) = (
                self.counts.looks.get_mut(frame),
                self.counts.hits.get_mut(frame),
            ) {
                // A full count stops both, so the ratio stays right.
                if *l < u16::MAX {
                    *l += 1;
                    *h += u16::from(hit);
                }
            }
        }
        let hits = self.touched.iter().filter(|&&t| t).count() as u64;
        self.report.windows += 1;
        self.report.armed_pages += self.picks.len() as u64;
        self.report.hits += hits;
        self.unjudged += 1;
        let aggregated = self.report.windows % self.aggregation == 0;
        if aggregated || self.unjudged >= JUDGE_WINDOWS {
            self.judge_window();
        }
        if aggregated {
            self.regions.adapt(&mut self.rng);
            self.report.regions = self.regions.list().len();
        }
        Ok(())
    }

    /// Re-judges the window's length from the windows since the last
    /// judgement (every [`JUDGE_WINDOWS`], not every aggregation: its
    /// length costs nothing to change, and a guest that went from idle to
    /// busy under a long window should not be sampled saturated for long).
    fn judge_window(&mut self) {
        let min = Duration::from_micros(u64::from(self.settings.min_window_us));
        let max = Duration::from_micros(u64::from(self.settings.max_window_us));
        match self.regions.hottest_ratio() {
            Some(r) if r >= SATURATED => {
                // Saturated pages say nothing of their rate: at least
                // halve. The median region's rate bounds theirs from
                // below: shrink until a typical page would be caught
                // TYPICAL of the time (a guest that went from idle to
                // busy under a 100 ms window had its cold pages caught
                // 68 % of the time), at most MAX_GROWTH at once.
                let median = self.regions.median_ratio().unwrap_or(0.0);
                let shrink = if median > 0.0 {
                    (1.0 - median).ln() / (1.0 - TYPICAL).ln()
                } else {
                    1.0
                };
                self.window = self.window.div_f64(shrink.clamp(2.0, MAX_GROWTH)).max(min);
                self.report.saturated += 1;
            }
            Some(r) if r < STARVED => {
                // Touches as a Poisson process: a page touched λ times a
                // second is caught with chance 1 − e^(−λw), so the window
                // that catches the hottest tenth TARGET of the time is
                // w · ln(1 − TARGET) / ln(1 − r): one step for a slow
                // guest (an emulated one is caught 1 % of the time in
                // 10 ms), not many of ×1.5.
                let growth = if r > 0.0 {
                    (1.0 - TARGET).ln() / (1.0 - r).ln()
                } else {
                    MAX_GROWTH
                };
                self.window = self.window.mul_f64(growth.min(MAX_GROWTH)).min(max);
            }
            _ => {}
        }
        self.regions.judged();
        self.unjudged = 0;
        self.report.window = self.window;
    }

    /// The counts since the last call, zeroing them.
    pub fn take_counts(&mut self) -> FrameCounts {
        let frames = self.counts.looks.len();
        std::mem::replace(
            &mut self.counts,
            FrameCounts {
                looks: vec![0; frames],
                hits: vec![0; frames],
            },
        )
    }

    /// Records the sampler thread's CPU time.
    pub fn set_cpu_ns(&mut self, cpu_ns: u64) {
        self.report.cpu_ns = cpu_ns;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::convert::Infallible;
    use std::rc::Rc;

    use super::*;

    /// A simulated guest for tests: page `p` of frame `f` is touched in a
    /// window of length `w` with probability `1 − e^(−rate(f) · w)`
    /// (accesses as a Poisson process), decided by a fixed-seed generator.
    struct SimulatedGuest {
        rate_per_ms: Vec<f64>,
        pages_per_frame: u64,
        /// The window being waited, set by the wait callback.
        armed_for: Rc<Cell<Duration>>,
        rng: XorShift,
        armed_per_window: Vec<usize>,
    }

    impl SimulatedGuest {
        fn new(rate_per_ms: Vec<f64>) -> Self {
            SimulatedGuest {
                rate_per_ms,
                pages_per_frame: 512,
                armed_for: Rc::new(Cell::new(Duration::ZERO)),
                rng: XorShift::new(3),
                armed_per_window: Vec::new(),
            }
        }
    }

    impl PageProbe for SimulatedGuest {
        type Error = Infallible;

        fn arm(&mut self, pages: &[u64]) -> Result<(), Infallible> {
            self.armed_per_window.push(pages.len());
            Ok(())
        }

        fn touched(&mut self, pages: &[u64], touched: &mut [bool]) -> Result<(), Infallible> {
            let ms = self.armed_for.get().as_secs_f64() * 1000.0;
            for (t, &p) in touched.iter_mut().zip(pages) {
                let rate = self.rate_per_ms[(p / self.pages_per_frame) as usize];
                let chance = 1.0 - (-rate * ms).exp();
                *t = (self.rng.below(1 << 20) as f64) < chance * f64::from(1 << 20);
            }
            Ok(())
        }
    }

    fn run(sampler: &mut WindowSampler, guest: &mut SimulatedGuest, windows: usize) {
        let clock = guest.armed_for.clone();
        for _ in 0..windows {
            sampler.run_window(guest, |w| clock.set(w)).unwrap();
        }
    }

    fn settings() -> SamplingSettings {
        SamplingSettings::default()
    }

    #[test]
    fn saturation_is_detected_and_the_window_shrinks() {
        // Every page touched a thousand times a millisecond: caught in
        // every window however short, so the window shrinks to its floor.
        let mut guest = SimulatedGuest::new(vec![1000.0; 256]);
        let mut s = WindowSampler::new(256, 512, settings(), 1);
        run(&mut s, &mut guest, 100);
        assert_eq!(s.window(), Duration::from_micros(500));
        assert!(s.report().saturated >= 4);
    }

    #[test]
    fn an_idle_guest_gets_the_longest_window() {
        let mut guest = SimulatedGuest::new(vec![0.0; 256]);
        let mut s = WindowSampler::new(256, 512, settings(), 1);
        run(&mut s, &mut guest, 50);
        assert_eq!(s.window(), settings().period());
        assert_eq!(s.report().hits, 0);
    }

    #[test]
    fn a_slow_guest_gets_a_window_that_catches_its_hot_pages() {
        // Hot pages touched 1.5 times a second (an emulated guest):
        // caught 1.5 % of the time in the first 10 ms window. Within two
        // aggregations the window catches them about TARGET of the time.
        let rates: Vec<f64> = (0..256)
            .map(|f| if f < 32 { 0.0015 } else { 0.0 })
            .collect();
        let mut guest = SimulatedGuest::new(rates);
        let mut s = WindowSampler::new(256, 512, settings(), 1);
        assert_eq!(s.window(), START_WINDOW);
        let aggregation = s.aggregation as usize;
        run(&mut s, &mut guest, 2 * aggregation);
        assert_eq!(s.window(), settings().period());
        s.take_counts();
        run(&mut s, &mut guest, 4 * aggregation);
        let c = s.take_counts();
        let (looks, hits) = (0..32).fold((0u64, 0u64), |(l, h), f| {
            (l + u64::from(c.looks[f]), h + u64::from(c.hits[f]))
        });
        let ratio = hits as f64 / looks as f64;
        // 1 − e^(−0.15) = 0.14 at the 100 ms period: ten times the 10 ms
        // window's evidence.
        assert!((0.09..0.2).contains(&ratio), "hot hit ratio {ratio}");
    }

    #[test]
    fn a_guest_that_wakes_up_is_told_apart_within_two_windows() {
        // Idle through boot: the window grows to the period. Then every
        // page is touched ten times a second and a hot eighth a hundred
        // times more often: under the 100 ms window all are caught in
        // every look. The next judgement cuts the window tenfold, to
        // where the cold pages are caught 63 % of the time.
        let mut guest = SimulatedGuest::new(vec![0.0; 256]);
        let mut s = WindowSampler::new(256, 512, settings(), 1);
        let aggregation = s.aggregation as usize;
        run(&mut s, &mut guest, 2 * aggregation);
        assert_eq!(s.window(), settings().period());
        guest.rate_per_ms = (0..256).map(|f| if f < 32 { 10.0 } else { 0.1 }).collect();
        run(&mut s, &mut guest, JUDGE_WINDOWS as usize);
        assert_eq!(s.window(), Duration::from_millis(10));
    }

    #[test]
    fn the_budget_holds_whatever_the_guest_ram() {
        // 128 MiB to 64 GiB of 2 MiB frames: never more pages per window
        // than the budget affords, so never more per second.
        let per_window = settings().pages_per_window() as usize;
        for frames in [64, 2048, 32_768] {
            let mut guest = SimulatedGuest::new(vec![0.01; frames]);
            let mut s = WindowSampler::new(frames, 512, settings(), 1);
            run(&mut s, &mut guest, 200);
            let most = *guest.armed_per_window.iter().max().unwrap();
            assert!(
                most <= per_window,
                "{frames} frames: {most} pages in a window"
            );
            assert_eq!(
                s.report().armed_pages,
                guest.armed_per_window.iter().sum::<usize>() as u64
            );
        }
    }

    #[test]
    fn hit_ratios_order_frames_by_access_frequency() {
        // Four bands of 64 frames, each ten times less often touched than
        // the one before; the window adapts, the order must come out.
        let rates: Vec<f64> = (0..256).map(|f: i32| 1.0 / 10f64.powi(f / 64)).collect();
        let mut guest = SimulatedGuest::new(rates);
        let mut s = WindowSampler::new(256, 512, settings(), 1);
        run(&mut s, &mut guest, 500);
        let c = s.take_counts();
        let band = |b: usize| {
            let (l, h) = (b * 64..(b + 1) * 64).fold((0u64, 0u64), |(l, h), f| {
                (l + u64::from(c.looks[f]), h + u64::from(c.hits[f]))
            });
            assert!(l > 0, "band {b} never looked at");
            h as f64 / l as f64
        };
        let ratios: Vec<f64> = (0..4).map(band).collect();
        assert!(
            ratios.windows(2).all(|w| w[0] > w[1]),
            "hit ratios by band: {ratios:?}"
        );
        assert_eq!(
            s.take_counts()
                .looks
                .iter()
                .map(|&l| u64::from(l))
                .sum::<u64>(),
            0
        );
    }
}
