//! Ranking cost for 1 GiB, 64 GiB and 1 TiB of 2 MiB frames (512, 32 Ki
//! and 512 Ki frames): picking the hottest quarter (a fast tier of ¼ of
//! RAM) and the coldest tenth of it, over the heats of a heat model fed
//! synthetic samples with a hot tenth of frames (as `cargo bench -p
//! tiering --bench heat` times its updates). `cargo bench -p oracle`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

use oracle::ranking;
use tiering::{HeatModel, HeatSettings, synthetic};

const PAGES: u32 = 512;
const SIZES: [(usize, &str); 3] = [(512, "1GiB"), (32 << 10, "64GiB"), (512 << 10, "1TiB")];

fn bench_ranking(c: &mut Criterion) {
    for (frames, label) in SIZES {
        let mut model =
            HeatModel::new(frames, PAGES, HeatSettings::default()).expect("valid heat model");
        for seed in 1..=4 {
            let sample = synthetic::full_coverage(frames, PAGES, Duration::from_secs(1), seed)
                .expect("valid sample");
            model.update(&sample).expect("matching sample");
        }
        let heat = model.heats();
        let mut group = c.benchmark_group("heat");
        group.throughput(Throughput::Elements(frames as u64));
        group.bench_function(BenchmarkId::new("hottest_quarter", label), |b| {
            b.iter(|| black_box(ranking::hottest(heat, frames / 4)))
        });
        let fast = ranking::hottest(heat, frames / 4);
        group.bench_function(BenchmarkId::new("coldest_tenth_of_fast", label), |b| {
            b.iter(|| black_box(ranking::coldest_among(heat, &fast, frames / 40)))
        });
        group.finish();
    }
}

/// Short runs, as the heat model's bench: the sizes span three orders of
/// magnitude and the medians are all that is read.
fn short_runs() -> Criterion {
    let (warm_up, measure) = (Duration::from_millis(300), Duration::from_secs(1));
    Criterion::default()
        .sample_size(10)
        .warm_up_time(warm_up)
        .measurement_time(measure)
}

criterion_group!(name = benches; config = short_runs(); targets = bench_ranking);
criterion_main!(benches);
