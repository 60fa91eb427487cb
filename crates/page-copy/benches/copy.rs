//! Copy throughput of every engine on 64 MiB batches of 4 KiB, 64 KiB and
//! 2 MiB ranges between two memfd mappings (like two tier backings), next
//! to a plain memcpy loop. `cargo bench -p page-copy` (about a minute).

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::ptr;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use page_copy::{
    CopyEngine, CopyMode, CopyRange, CpuCopy, ThreadedConfig, ThreadedCopy, default_workers,
};

use common::{KIB, MIB, Region};

const BATCH: usize = 64 * MIB;
const RANGE_SIZES: [(usize, &str); 3] = [(4 * KIB, "4KiB"), (64 * KIB, "64KiB"), (2 * MIB, "2MiB")];

/// The engines under test, named as in the report.
fn engines() -> Vec<Box<dyn CopyEngine>> {
    let mut engines: Vec<Box<dyn CopyEngine>> = Vec::new();
    let max = default_workers();
    for mode in [CopyMode::Memcpy, CopyMode::NonTemporal] {
        engines.push(Box::new(CpuCopy::new(mode)));
        for workers in 1..=max {
            let config = ThreadedConfig {
                mode,
                ..ThreadedConfig::with_workers(workers)
            };
            engines.push(Box::new(ThreadedCopy::new(config).expect("start pool")));
        }
        let pinned = ThreadedConfig {
            mode,
            pin: true,
            ..ThreadedConfig::with_workers(max)
        };
        engines.push(Box::new(
            ThreadedCopy::new(pinned).expect("start pinned pool"),
        ));
    }
    engines
}

fn bench_copy(c: &mut Criterion) {
    let src = Region::random(BATCH, 1);
    let dst = Region::new(BATCH);
    let engines = engines();
    for (size, label) in RANGE_SIZES {
        let ranges: Vec<CopyRange> = (0..BATCH / size)
            .map(|i| CopyRange::new(src.at(i * size), dst.at(i * size), size))
            .collect();
        let mut group = c.benchmark_group(format!("copy_64MiB_of_{label}"));
        group.throughput(Throughput::Bytes(BATCH as u64));
        group.bench_function("memcpy-loop", |b| {
            b.iter(|| {
                for range in &ranges {
                    // SAFETY: ranges lie inside two live, distinct regions.
                    unsafe { ptr::copy_nonoverlapping(range.src, range.dst, range.len) };
                }
                black_box(dst.ptr());
            });
        });
        for engine in &engines {
            group.bench_function(BenchmarkId::from_parameter(engine.name()), |b| {
                b.iter(|| {
                    // SAFETY: as above.
                    let stats = unsafe { engine.copy(black_box(&ranges)) };
                    black_box(stats.expect("copy"));
                });
            });
        }
        group.finish();
    }
}

/// Short runs (10 samples, 1 s each, no plots) keep the whole matrix
/// under two minutes on two cores.
fn config() -> Criterion {
    Criterion::default()
        .without_plots()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_copy
}
criterion_main!(benches);
