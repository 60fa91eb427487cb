//! Fixed results for unit tests of rendering and serialization (made-up
//! numbers with known renderings; measurement itself is tested on real
//! memory elsewhere).

use crate::bandwidth::{Bandwidth, GB, GIB};
use crate::copy::{
    BestParallel, CopyResult, CopySettings, EngineResult, ParallelResult, RangeSizeResult,
};
use crate::invocation::Invocation;
use crate::machine::{LoadAverage, MachineInfo};
use crate::report::BenchReport;
use crate::stats::ratio;
use crate::suite::SuiteResult;

/// A bandwidth with the given median and a 10% spread.
pub fn bandwidth(median_gbps: f64) -> Bandwidth {
    let samples = vec![median_gbps * 0.95, median_gbps, median_gbps * 1.05];
    Bandwidth {
        median_gbps,
        median_gibps: median_gbps * GB / GIB,
        min_gbps: samples[0],
        max_gbps: samples[2],
        spread: 0.1,
        samples_gbps: samples,
    }
}

/// A copy result for 2 CPUs: memcpy loop 5 GB/s, best parallel 10 GB/s
/// (2 threads, nt), engines between.
pub fn sample_copy_result() -> CopyResult {
    let settings = CopySettings::new(true, None, 2).unwrap();
    let best = 10.0;
    let parallel = [
        (1, "memcpy", 6.0),
        (1, "nt", 7.0),
        (2, "memcpy", 9.0),
        (2, "nt", best),
    ]
    .map(|(threads, mode, gbps)| ParallelResult {
        threads,
        mode: mode.to_owned(),
        bandwidth: bandwidth(gbps),
        vs_best_parallel: ratio(gbps, best),
    })
    .to_vec();
    let engines = [
        ("cpu", 1, false, 4.5),
        ("threads:1", 1, false, 4.4),
        ("threads:2", 2, false, 7.5),
        ("threads:2:pin", 2, true, 7.7),
    ];
    let range_sizes = settings
        .range_sizes
        .iter()
        .map(|&range_size| {
            let memcpy = 5.0;
            let engines = engines
                .iter()
                .flat_map(|&(spec, threads, pinned, gbps)| {
                    [("memcpy", gbps), ("nt", gbps * 1.2)].map(|(mode, gbps)| EngineResult {
                        name: format!("{spec}/{mode}"),
                        spec: spec.to_owned(),
                        mode: mode.to_owned(),
                        threads,
                        pinned,
                        bandwidth: bandwidth(gbps),
                        vs_memcpy: ratio(gbps, memcpy),
                        vs_best_parallel: ratio(gbps, best),
                    })
                })
                .collect();
            RangeSizeResult {
                range_size,
                ranges: (settings.batch_bytes / range_size) as usize,
                memcpy_loop: bandwidth(memcpy),
                memcpy_vs_best_parallel: ratio(memcpy, best),
                engines,
            }
        })
        .collect();
    CopyResult {
        settings,
        parallel,
        best_parallel: BestParallel {
            threads: 2,
            mode: "nt".to_owned(),
            median_gbps: best,
        },
        range_sizes,
    }
}

/// A report of a quick copy run on a made-up 2-core machine.
pub fn sample_report() -> BenchReport {
    let invocation = Invocation {
        command_line: "tierbench copy --quick --markdown out.md".to_owned(),
        args: ["tierbench", "copy", "--quick", "--markdown", "out.md"]
            .map(String::from)
            .to_vec(),
        date: "2026-01-02".to_owned(),
        quick: true,
        load_start: Some(LoadAverage {
            one: 0.5,
            five: 0.4,
            fifteen: 0.3,
        }),
        load_end: Some(LoadAverage {
            one: 1.25,
            five: 0.5,
            fifteen: 0.3,
        }),
    };
    let machine = MachineInfo {
        cores: 2,
        model_name: "Test CPU 9000".to_owned(),
        kernel: "Linux 6.18.0 x86_64".to_owned(),
    };
    let mut report = BenchReport::new(invocation, machine);
    report.results.push(SuiteResult::Copy(sample_copy_result()));
    report
}
