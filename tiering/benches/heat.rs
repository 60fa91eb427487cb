//! Heat-model cost for 1 GiB, 64 GiB and 1 TiB of 2 MiB frames (512,
//! 32 Ki and 512 Ki frames): one update from a full-coverage sample (dirty
//! log), one from a per-frame sampled one (fault sampling), and picking the
//! hottest quarter (a fast tier of ¼ of RAM). Synthetic samples with a hot
//! tenth of frames. `cargo bench -p tiering` (under a minute).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

use tiering::{AccessSample, Coverage, HeatConfig, HeatModel};

const PAGES: u32 = 512;
const SIZES: [(usize, &str); 3] = [(512, "1GiB"), (32 << 10, "64GiB"), (512 << 10, "1TiB")];

/// xorshift64: deterministic synthetic counts.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A sample where a tenth of the frames are hot (most pages touched, a
/// third written) and the rest see a few stray accesses.
fn synthetic(frames: usize, seed: u64) -> AccessSample {
    let mut rng = Rng(seed | 1);
    let mut s = AccessSample::new(frames, PAGES, Duration::from_secs(1)).expect("valid sample");
    for f in 0..frames {
        let touched = if rng.below(10) == 0 {
            256 + rng.below(257)
        } else {
            rng.below(8)
        };
        s.accessed[f] = touched as u16;
        s.dirty[f] = (touched / 3) as u16;
    }
    s
}

/// The same evidence as seen by a sampler looking at 32 pages per frame.
fn sampled(full: &AccessSample) -> AccessSample {
    let mut s = full.clone();
    for f in 0..s.frames() {
        s.accessed[f] /= 16;
        s.dirty[f] /= 16;
    }
    s.coverage = Coverage::PerFrame(vec![32; s.frames()]);
    s
}

fn bench_heat(c: &mut Criterion) {
    for (frames, label) in SIZES {
        let samples: Vec<AccessSample> = (1..=4).map(|seed| synthetic(frames, seed)).collect();
        let sampled: Vec<AccessSample> = samples.iter().map(sampled).collect();
        let mut model =
            HeatModel::new(frames, PAGES, HeatConfig::default()).expect("valid heat model");
        for s in &samples {
            model.update(s).expect("matching sample");
        }

        let mut group = c.benchmark_group("heat");
        group.throughput(Throughput::Elements(frames as u64));
        let mut next = 0;
        group.bench_function(BenchmarkId::new("update_full", label), |b| {
            b.iter(|| {
                next = (next + 1) % samples.len();
                model.update(black_box(&samples[next])).expect("update");
            })
        });
        group.bench_function(BenchmarkId::new("update_sampled", label), |b| {
            b.iter(|| {
                next = (next + 1) % sampled.len();
                model.update(black_box(&sampled[next])).expect("update");
            })
        });
        group.bench_function(BenchmarkId::new("hottest_quarter", label), |b| {
            b.iter(|| black_box(model.hottest(frames / 4)))
        });
        let fast = model.hottest(frames / 4);
        group.bench_function(BenchmarkId::new("coldest_tenth_of_fast", label), |b| {
            b.iter(|| black_box(model.coldest_among(&fast, frames / 40)))
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = bench_heat
}
criterion_main!(benches);
