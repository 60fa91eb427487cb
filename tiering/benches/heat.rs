//! Heat-model cost for 1 GiB, 64 GiB and 1 TiB of 2 MiB frames (512,
//! 32 Ki and 512 Ki frames): one update from a full-coverage sample (dirty
//! log) and one from a per-frame sampled one (fault sampling). Synthetic
//! samples with a hot tenth of frames. `cargo bench -p tiering` (under a
//! minute); ranking the heats is timed by `cargo bench -p oracle`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

use tiering::{AccessSample, HeatModel, HeatSettings, synthetic};

const PAGES: u32 = 512;
const SIZES: [(usize, &str); 3] = [(512, "1GiB"), (32 << 10, "64GiB"), (512 << 10, "1TiB")];

fn bench_heat(c: &mut Criterion) {
    for (frames, label) in SIZES {
        let samples: Vec<AccessSample> = (1..=4)
            .map(|seed| synthetic::full_coverage(frames, PAGES, Duration::from_secs(1), seed))
            .collect::<Result<_, _>>()
            .expect("valid samples");
        let sampled: Vec<AccessSample> =
            samples.iter().map(|s| synthetic::sampled(s, 32)).collect();
        let mut model =
            HeatModel::new(frames, PAGES, HeatSettings::default()).expect("valid heat model");
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
