//! The windowed sampler: every period it arms the same number of pages in
//! every region ([`Regions`]) and peeks at them until the next period,
//! dating each page's first touch in window-long stretches; per-frame
//! counts of looks (stretches watched) and hits (stretches that ended in
//! the first touch), so a frame's hit ratio estimates how often its pages
//! are touched (frequency), not just whether they were. An armed page
//! costs the guest its fault whenever it is first written before the
//! re-arm, so the whole period is evidence, not only its first window.
//! Looks are timed from each page's own arming (pages are armed
//! [`ARM_CHUNK`] to a call) to when a peek's read returned, so a sampler
//! the host preempts does not date late reads early.
//!
//! The pages looked at stay the same through an aggregation (about
//! [`AGGREGATION`]); then the regions adapt and new pages are picked.
//! Re-arming a page not written since costs nothing, where each fresh page
//! left write-protected after its window costs the guest a fault at its
//! next write, however late.
//!
//! The window (the stretch first touches are counted in) adapts, judged
//! about every [`JUDGE_EVERY`] (at least every window): when the hottest tenth of the regions
//! is caught in nearly every look (saturation: the window is too long to
//! tell hot from hotter) it shrinks, by half or by what the median
//! region's rate says; when even they are rarely caught it grows to the
//! length that would catch them most of the time, up to the period. The
//! budget is the pages armed per window times the windows per second,
//! fixed by [`SamplingSettings`] whatever the guest's RAM.
//!
//! This type does no waiting of its own: [`SamplerThread`] drives it on
//! real time, tests on a simulated guest's [`WindowClock`].
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
/// Time between judgements of the window's length, rounded up to whole
/// windows: the same time at any period, so a longer period does not
/// slow the window's adaptation (every second window at a 200 ms period
/// found the first hot set after boot an interval late).
const JUDGE_EVERY: Duration = Duration::from_millis(200);
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

/// The time a window runs on: real time in the sampler thread, a
/// simulated guest's in tests.
pub trait WindowClock {
    /// The pages were just armed: offsets count from now.
    fn start(&mut self);

    /// Waits until `offset` after the start and returns the offset
    /// reached (later on a busy host; earlier when the sampler stops).
    fn wait_until(&mut self, offset: Duration) -> Duration;

    /// The offset after the start now, without waiting.
    fn now(&mut self) -> Duration;

    /// A peek credited its pages: a clock that hands the evidence on
    /// drains `credits`; what it leaves stays for
    /// [`WindowSampler::take_counts`].
    fn peeked(&mut self, credits: &mut Vec<Credit>) {
        let _ = credits;
    }
}

/// Most peeks a window makes at one look per window length; after them
/// the offsets double.
const LINEAR_PEEKS: u32 = 4;

/// Pages armed per probe call: each call's pages are dated to its middle,
/// so a sampler preempted while arming dates the pages it armed before
/// to then, not to when arming ended. Each call costs the dirty log a
/// `KVM_CLEAR_DIRTY_LOG` (a TLB flush): about seven a window at the
/// default budget.
const ARM_CHUNK: usize = 256;

/// When a window peeks at its pages: after 1, 2, .., [`LINEAR_PEEKS`]
/// window lengths, then at doubling offsets, and last at the period's end
/// (just before the next window re-arms): about ten peeks for a 0.5 ms
/// window in a 100 ms period. A page first seen touched between two
/// peeks is dated to their middle, so the first peeks, where saturated
/// pages are caught, are exact.
fn peek_offsets(window: Duration, period: Duration) -> impl Iterator<Item = Duration> {
    let window = window.max(Duration::from_micros(1));
    let period = period.max(window);
    let mut step = 0u32;
    let mut next = Some(window);
    std::iter::from_fn(move || {
        let now = next?;
        step += 1;
        next = (now < period).then(|| {
            let later = if step < LINEAR_PEEKS {
                now + window
            } else {
                now * 2
            };
            later.min(period)
        });
        Some(now)
    })
}

/// The looks, in windows of length `window`, counted for a page first
/// seen touched at a peek at offset `at` after one at `before` that did
/// not see it: the windows wholly before `before`, and the middle of the
/// ones between (touches as a Poisson process are memoryless, so every
/// window-long stretch of the period is one look, and the first touch
/// ends the page's looks: it stays writable until re-armed).
fn looks_until(before: Duration, at: Duration, window: Duration) -> u32 {
    let w = window.as_secs_f64().max(1e-9);
    let middle = (before.as_secs_f64() + at.as_secs_f64()) / (2.0 * w) + 0.5;
    (middle.round() as u32).max(1)
}

/// The looks of a page not touched by the last peek, at offset `last`.
fn full_looks(last: Duration, window: Duration) -> u32 {
    let w = window.as_secs_f64().max(1e-9);
    ((last.as_secs_f64() / w).round() as u32).max(1)
}

/// Per-frame looks and hits since the counts were last taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// Windows that looked at one of the frame's pages.
    pub looks: Vec<u16>,
    /// Of those, windows whose page was touched.
    pub hits: Vec<u16>,
}

impl FrameCounts {
    /// Zero counts for `frames` frames.
    pub fn new(frames: usize) -> Self {
        FrameCounts {
            looks: vec![0; frames],
            hits: vec![0; frames],
        }
    }

    /// Adds `credits`; a credit for a frame outside the counts is
    /// ignored, and one that would overflow a frame's looks stops that
    /// frame's counts (looks and hits together, so its ratio stays right).
    pub fn add(&mut self, credits: &[Credit]) {
        for c in credits {
            if let (Some(l), Some(h)) = (self.looks.get_mut(c.frame), self.hits.get_mut(c.frame)) {
                let looks = u16::try_from(c.looks).unwrap_or(u16::MAX);
                if let (Some(sum), Some(hits)) =
                    (l.checked_add(looks), h.checked_add(u16::from(c.hit)))
                {
                    *l = sum;
                    *h = hits;
                }
            }
        }
    }
}

/// What one peek credited one armed page with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credit {
    /// The page's frame.
    pub frame: usize,
    /// Looks (window-long stretches) since the page's last credit.
    pub looks: u32,
    /// Whether the last of them saw the page's first touch.
    pub hit: bool,
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
    /// Armed pages found touched before the next window re-armed them
    /// (each one write fault for the guest under the dirty log).
    pub hits: u64,
    /// Looks counted, in windows of the window's length: an armed page
    /// counts one per window-long stretch until its first touch.
    pub looks: u64,
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
    /// Per pick, when it was armed (offset from the window's start).
    armed_at: Vec<Duration>,
    /// Per pick, at the peek running: the looks credited and whether it
    /// was hit; and the looks credited to it so far this window.
    looks: Vec<u32>,
    hit: Vec<bool>,
    credited: Vec<u32>,
    /// Picks not yet seen touched, their pages, and a peek's answer.
    open: Vec<usize>,
    open_pages: Vec<u64>,
    touched: Vec<bool>,
    /// Credits no clock has taken yet.
    credits: Vec<Credit>,
    frames: usize,
    pages_per_frame: u64,
    report: SamplerReport,
    /// Windows per aggregation.
    aggregation: u64,
    /// Windows between judgements of the window's length.
    judge_windows: u64,
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
        let judge_windows = JUDGE_EVERY.as_micros().div_ceil(period.as_micros()) as u64;
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
            armed_at: Vec::new(),
            looks: Vec::new(),
            hit: Vec::new(),
            credited: Vec::new(),
            open: Vec::new(),
            open_pages: Vec::new(),
            touched: Vec::new(),
            credits: Vec::new(),
            frames,
            pages_per_frame: pages_per_frame.max(1),
            aggregation: aggregation.max(MIN_AGGREGATION_WINDOWS),
            judge_windows: judge_windows.max(1),
            unjudged: 0,
        }
    }

    /// The settings in use.
    pub fn settings(&self) -> SamplingSettings {
        self.settings
    }

    /// Frames sampled.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The window length now.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Totals so far.
    pub fn report(&self) -> SamplerReport {
        self.report
    }

    /// Runs one window: arms a page per region (timing each call), then
    /// peeks at the pages not yet seen touched at growing offsets
    /// ([`peek_offsets`]) until the next window's start, waiting on
    /// `clock` in between (the sampler thread sleeps; tests let a
    /// simulated guest run). After each peek every page still watched is
    /// credited the looks (of the window's length) since its last credit,
    /// counted from its arming to the peek's start, a page first seen
    /// touched its looks up to the first touch ([`looks_until`], to the
    /// peek's end) and the hit, and
    /// the clock is handed the credits ([`WindowClock::peeked`]), so the
    /// evidence is out within a peek of being seen, not a period. Every
    /// aggregation (about [`AGGREGATION`]) the regions and the window
    /// adapt.
    /// On an error the window ends; what its earlier peeks credited stands.
    pub fn run_window<P: PageProbe>(
        &mut self,
        probe: &mut P,
        clock: &mut impl WindowClock,
    ) -> Result<(), P::Error> {
        if self.report.windows % self.aggregation == 0 || self.picks.is_empty() {
            self.regions.pick(&mut self.rng, &mut self.picks);
        }
        clock.start();
        self.armed_at.clear();
        for chunk in self.picks.chunks(ARM_CHUNK) {
            let from = clock.now();
            probe.arm(chunk)?;
            let to = clock.now().max(from);
            let at = from + (to - from) / 2;
            self.armed_at.extend(std::iter::repeat_n(at, chunk.len()));
        }
        let n = self.picks.len();
        self.credited.clear();
        self.credited.resize(n, 0);
        self.open.clear();
        self.open.extend(0..n);
        self.report.windows += 1;
        self.report.armed_pages += n as u64;
        // Each page's looks count from its own arming. A peek reads the
        // pages some time during the probe call: a page it finds
        // untouched was untouched when the call began, one it finds
        // touched was touched by the time the call returned (a call the
        // host preempted is long, and dating its touches to its start
        // made a frame's pages look hit in their first look).
        let mut before = Duration::ZERO;
        for offset in peek_offsets(self.window, self.settings.period()) {
            let from = clock.wait_until(offset).max(before);
            self.open_pages.clear();
            self.open_pages
                .extend(self.open.iter().map(|&i| self.picks[i]));
            self.touched.clear();
            self.touched.resize(self.open.len(), false);
            probe.touched(&self.open_pages, &mut self.touched)?;
            let to = clock.now().max(from);
            self.looks.clear();
            self.looks.resize(n, 0);
            self.hit.clear();
            self.hit.resize(n, false);
            let mut still = 0;
            for k in 0..self.open.len() {
                let i = self.open[k];
                let armed = self.armed_at[i];
                if self.touched[k] {
                    let to_hit = looks_until(
                        before.saturating_sub(armed),
                        to.saturating_sub(armed),
                        self.window,
                    );
                    // At least the look that hit.
                    self.looks[i] = to_hit.saturating_sub(self.credited[i]).max(1);
                    self.hit[i] = true;
                } else {
                    let missed = full_looks(from.saturating_sub(armed), self.window);
                    self.looks[i] = missed.saturating_sub(self.credited[i]);
                    self.credited[i] += self.looks[i];
                    self.open[still] = i;
                    still += 1;
                }
            }
            self.open.truncate(still);
            self.credit();
            clock.peeked(&mut self.credits);
            before = from;
            if self.open.is_empty() {
                break;
            }
        }
        self.unjudged += 1;
        let aggregated = self.report.windows % self.aggregation == 0;
        if aggregated || self.unjudged >= self.judge_windows {
            self.judge_window();
        }
        if aggregated {
            self.regions.adapt(&mut self.rng);
            self.report.regions = self.regions.list().len();
        }
        Ok(())
    }

    /// Re-judges the window's length from the windows since the last
    /// judgement (about every [`JUDGE_EVERY`], not every aggregation: its
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

    /// Credits one peek's looks and hits (`self.looks`, `self.hit`, per
    /// pick) to the regions, the report and the credits not yet handed
    /// out.
    fn credit(&mut self) {
        self.regions.record(&self.looks, &self.hit);
        for ((&page, &looks), &hit) in self.picks.iter().zip(&self.looks).zip(&self.hit) {
            if looks == 0 && !hit {
                continue;
            }
            self.credits.push(Credit {
                frame: (page / self.pages_per_frame) as usize,
                looks,
                hit,
            });
            self.report.looks += u64::from(looks);
            self.report.hits += u64::from(hit);
        }
    }

    /// The credits no clock took, as per-frame counts, and forgets them.
    pub fn take_counts(&mut self) -> FrameCounts {
        let mut counts = FrameCounts::new(self.frames);
        counts.add(&self.credits);
        self.credits.clear();
        counts
    }

    /// Records the sampler thread's CPU time.
    pub fn set_cpu_ns(&mut self, cpu_ns: u64) {
        self.report.cpu_ns = cpu_ns;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::HashMap;
    use std::convert::Infallible;
    use std::rc::Rc;

    use super::*;

    /// A simulated guest for tests: page `p` of frame `f`, once armed, is
    /// first touched after an exponentially distributed time of mean
    /// `1 / rate(f)` (accesses as a Poisson process), drawn by a
    /// fixed-seed generator; a peek at offset `t` sees it touched if that
    /// time is at most `t`.
    struct SimulatedGuest {
        rate_per_ms: Vec<f64>,
        pages_per_frame: u64,
        /// The offset since the window's start, set by the clock.
        now: Rc<Cell<Duration>>,
        /// Windows the clock started, and the last one this guest armed in.
        starts: Rc<Cell<u64>>,
        armed_in: u64,
        rng: XorShift,
        armed_per_window: Vec<usize>,
        /// When each armed page is first touched, in ms after the window's
        /// start.
        first_touch: HashMap<u64, f64>,
    }

    impl SimulatedGuest {
        fn new(rate_per_ms: Vec<f64>) -> Self {
            SimulatedGuest {
                rate_per_ms,
                pages_per_frame: 512,
                now: Rc::new(Cell::new(Duration::ZERO)),
                starts: Rc::new(Cell::new(0)),
                armed_in: 0,
                rng: XorShift::new(3),
                armed_per_window: Vec::new(),
                first_touch: HashMap::new(),
            }
        }

        fn clock(&self) -> SimulatedClock {
            SimulatedClock {
                now: self.now.clone(),
                starts: self.starts.clone(),
            }
        }
    }

    impl PageProbe for SimulatedGuest {
        type Error = Infallible;

        fn arm(&mut self, pages: &[u64]) -> Result<(), Infallible> {
            // The sampler arms a window's pages in several calls.
            if self.armed_in != self.starts.get() {
                self.armed_in = self.starts.get();
                self.armed_per_window.push(0);
                self.first_touch.clear();
            }
            if let Some(last) = self.armed_per_window.last_mut() {
                *last += pages.len();
            }
            let armed_ms = self.now.get().as_secs_f64() * 1000.0;
            for &p in pages {
                let rate = self.rate_per_ms[(p / self.pages_per_frame) as usize];
                // Inverse transform: −ln(U) / rate, U uniform in (0, 1].
                let u = (self.rng.below(1 << 20) + 1) as f64 / f64::from(1 << 20);
                let at = if rate > 0.0 {
                    armed_ms - u.ln() / rate
                } else {
                    f64::INFINITY
                };
                self.first_touch.insert(p, at);
            }
            Ok(())
        }

        fn touched(&mut self, pages: &[u64], touched: &mut [bool]) -> Result<(), Infallible> {
            let ms = self.now.get().as_secs_f64() * 1000.0;
            for (t, p) in touched.iter_mut().zip(pages) {
                *t = self.first_touch[p] <= ms;
            }
            Ok(())
        }
    }

    /// The simulated guest's clock: waits take no time, nor does
    /// arming or peeking.
    struct SimulatedClock {
        now: Rc<Cell<Duration>>,
        starts: Rc<Cell<u64>>,
    }

    impl WindowClock for SimulatedClock {
        fn start(&mut self) {
            self.now.set(Duration::ZERO);
            self.starts.set(self.starts.get() + 1);
        }

        fn wait_until(&mut self, offset: Duration) -> Duration {
            let reached = offset.max(self.now.get());
            self.now.set(reached);
            reached
        }

        fn now(&mut self) -> Duration {
            self.now.get()
        }
    }

    fn run(sampler: &mut WindowSampler, guest: &mut SimulatedGuest, windows: usize) {
        let mut clock = guest.clock();
        for _ in 0..windows {
            sampler.run_window(guest, &mut clock).unwrap();
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
        // 1 − e^(−1.5/s × period): 0.26 at the default 200 ms period,
        // twenty times the 10 ms window's evidence.
        let expected = 1.0 - (-0.0015 * settings().period().as_secs_f64() * 1000.0).exp();
        assert!(
            (expected * 0.7..expected * 1.3).contains(&ratio),
            "hot hit ratio {ratio}, expected about {expected}"
        );
    }

    #[test]
    fn a_guest_that_wakes_up_is_told_apart_within_two_windows() {
        // Idle through boot: the window grows to the period. Then every
        // page is touched a hundred times a second and a hot eighth a
        // hundred times more often: under the 100 ms window all are
        // caught in every look. The next judgement cuts the window
        // tenfold, the most it cuts at once.
        let mut guest = SimulatedGuest::new(vec![0.0; 256]);
        let mut s = WindowSampler::new(256, 512, settings(), 1);
        let aggregation = s.aggregation as usize;
        run(&mut s, &mut guest, 2 * aggregation);
        assert_eq!(s.window(), settings().period());
        guest.rate_per_ms = (0..256).map(|f| if f < 32 { 10.0 } else { 0.1 }).collect();
        let judge = s.judge_windows as usize;
        run(&mut s, &mut guest, judge);
        assert_eq!(s.window(), settings().period() / 10);
    }

    #[test]
    fn the_window_is_judged_as_often_at_any_period() {
        // A guest busy enough to saturate any window: the first shrink
        // comes after about JUDGE_EVERY of windows at every period, at
        // least one window, never a whole extra period late.
        for period_ms in [20u32, 50, 100, 200, 400] {
            let settings = SamplingSettings {
                budget_pages_per_sec: 8_192,
                window_period_us: period_ms * 1000,
                min_window_us: 500,
                max_window_us: period_ms * 1000,
            };
            let mut guest = SimulatedGuest::new(vec![1000.0; 256]);
            let mut s = WindowSampler::new(256, 512, settings, 1);
            let start = s.window();
            let mut windows = 0u32;
            while s.window() == start {
                run(&mut s, &mut guest, 1);
                windows += 1;
            }
            let elapsed = settings.period() * windows;
            assert!(
                elapsed >= JUDGE_EVERY.min(settings.period()),
                "{period_ms} ms: {windows} windows"
            );
            assert!(
                elapsed < JUDGE_EVERY + settings.period(),
                "{period_ms} ms: {windows} windows"
            );
        }
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
    fn peeks_are_exact_at_first_then_double_up_to_the_period() {
        let ms = |v: f64| Duration::from_secs_f64(v / 1000.0);
        let offsets = |w: f64, p: f64| -> Vec<f64> {
            peek_offsets(ms(w), ms(p))
                .map(|d| d.as_secs_f64() * 1000.0)
                .collect()
        };
        assert_eq!(offsets(10.0, 100.0), [10.0, 20.0, 30.0, 40.0, 80.0, 100.0]);
        assert_eq!(
            offsets(0.5, 100.0),
            [0.5, 1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 100.0]
        );
        assert_eq!(offsets(100.0, 100.0), [100.0]);
        // A first touch between two peeks is dated to their middle.
        assert_eq!(looks_until(ms(0.0), ms(10.0), ms(10.0)), 1);
        assert_eq!(looks_until(ms(10.0), ms(20.0), ms(10.0)), 2);
        assert_eq!(looks_until(ms(40.0), ms(80.0), ms(10.0)), 7);
        assert_eq!(full_looks(ms(100.0), ms(10.0)), 10);
        // A late peek (a busy host) counts the time that really passed.
        assert_eq!(full_looks(ms(131.0), ms(10.0)), 13);
    }

    #[test]
    fn a_touch_after_the_window_is_evidence_too() {
        // Pages touched twice a second under a 10 ms window every 100 ms:
        // 2 % are touched inside the window, 18 % before the next one.
        // Every window-long stretch until the first touch is a look, so
        // the hit ratio still estimates 1 − e^(−λw) = 2 %, on nine times
        // the hits that the window alone would give.
        let pinned = SamplingSettings {
            budget_pages_per_sec: 16_384,
            window_period_us: 100_000,
            min_window_us: 10_000,
            max_window_us: 10_000,
        };
        let mut guest = SimulatedGuest::new(vec![0.002; 256]);
        let mut s = WindowSampler::new(256, 512, pinned, 1);
        run(&mut s, &mut guest, 100);
        let r = s.report();
        let touched = r.hits as f64 / r.armed_pages as f64;
        let expected = 1.0 - (-0.2f64).exp();
        assert!(
            (touched - expected).abs() < 0.02,
            "touched before re-arming {touched}"
        );
        let ratio = r.hits as f64 / r.looks as f64;
        let truth = 1.0 - (-0.02f64).exp();
        assert!(
            (ratio - truth).abs() < 0.1 * truth,
            "hit ratio {ratio} for {truth}"
        );
        // A page never touched counts ten looks per window.
        let mut idle = SimulatedGuest::new(vec![0.0; 256]);
        let mut s = WindowSampler::new(256, 512, pinned, 1);
        run(&mut s, &mut idle, 10);
        assert_eq!(s.report().looks, 10 * s.report().armed_pages);
    }

    #[test]
    fn each_peek_hands_its_evidence_out_at_once() {
        // A clock that takes the credits at every peek: the hot pages'
        // hits come out at the first peek (10 ms in), not at the period's
        // end, and what it took adds up to what the sampler counted.
        struct Publishing {
            inner: SimulatedClock,
            taken: Vec<(Duration, Vec<Credit>)>,
        }
        impl WindowClock for Publishing {
            fn start(&mut self) {
                self.inner.start();
            }
            fn wait_until(&mut self, offset: Duration) -> Duration {
                self.inner.wait_until(offset)
            }
            fn now(&mut self) -> Duration {
                self.inner.now()
            }
            fn peeked(&mut self, credits: &mut Vec<Credit>) {
                self.taken
                    .push((self.inner.now.get(), std::mem::take(credits)));
            }
        }
        let rates: Vec<f64> = (0..256).map(|f| if f < 32 { 10.0 } else { 0.0 }).collect();
        let mut guest = SimulatedGuest::new(rates);
        let mut clock = Publishing {
            inner: guest.clock(),
            taken: Vec::new(),
        };
        let mut s = WindowSampler::new(256, 512, settings(), 1);
        s.run_window(&mut guest, &mut clock).unwrap();
        let (at, first) = &clock.taken[0];
        assert_eq!(*at, START_WINDOW);
        let hot_hits = first.iter().filter(|c| c.frame < 32 && c.hit).count();
        assert!(hot_hits > 0 && first.iter().all(|c| c.frame < 32 || !c.hit));
        let mut counts = FrameCounts::new(256);
        for (_, credits) in &clock.taken {
            counts.add(credits);
        }
        let r = s.report();
        assert_eq!(
            counts.looks.iter().map(|&l| u64::from(l)).sum::<u64>(),
            r.looks
        );
        assert_eq!(
            counts.hits.iter().map(|&h| u64::from(h)).sum::<u64>(),
            r.hits
        );
        assert_eq!(s.take_counts(), FrameCounts::new(256));
    }

    #[test]
    fn a_preempted_sampler_does_not_make_pages_look_hot() {
        // The host preempts the sampler for 30 ms after its first arm
        // call of each window and inside every peek (the probe reads the
        // pages as the call returns). Pages touched 20 times a second
        // under a pinned 5 ms window must still show 1 − e^(−λw) = 9.5 %
        // hits per look: dating the touches a slow peek finds to when it
        // began, or the pages' looks to when arming ended, credited half
        // the pages a single look (a hit ratio of 16 %), which made
        // equally cold frames look several times hotter than the rest and
        // swap places with them.
        struct Preempted {
            guest: SimulatedGuest,
            delay: Duration,
            arms: u64,
        }
        impl Preempted {
            fn stall(&self) {
                let now = self.guest.now.get();
                self.guest.now.set(now + self.delay);
            }
        }
        impl PageProbe for Preempted {
            type Error = Infallible;
            fn arm(&mut self, pages: &[u64]) -> Result<(), Infallible> {
                self.guest.arm(pages)?;
                if self.arms != self.guest.starts.get() {
                    self.arms = self.guest.starts.get();
                    self.stall();
                }
                Ok(())
            }
            fn touched(&mut self, pages: &[u64], touched: &mut [bool]) -> Result<(), Infallible> {
                self.stall();
                self.guest.touched(pages, touched)
            }
        }
        let pinned = SamplingSettings {
            budget_pages_per_sec: 16_384,
            window_period_us: 100_000,
            min_window_us: 5_000,
            max_window_us: 5_000,
        };
        let guest = SimulatedGuest::new(vec![0.02; 256]);
        let mut clock = guest.clock();
        let mut probe = Preempted {
            guest,
            delay: Duration::from_millis(30),
            arms: 0,
        };
        let mut s = WindowSampler::new(256, 512, pinned, 1);
        for _ in 0..100 {
            s.run_window(&mut probe, &mut clock).unwrap();
        }
        let r = s.report();
        let ratio = r.hits as f64 / r.looks as f64;
        let truth = 1.0 - (-0.1f64).exp();
        assert!(
            (ratio - truth).abs() < 0.15 * truth,
            "hit ratio {ratio} for {truth}"
        );
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
