//! The engines the copy suite measures: `cpu` and `threads:K` for every K
//! from 1 to the CPU count, `threads:N:pin`, each with both copy modes;
//! and where the host-kernel offload device exists (`/dev/tiercopy`),
//! `kernel:threads`, `kernel:dma` and `kernel:auto` (the module copies its
//! own way: one entry each).

use page_copy::{
    CopyEngine, CopyMode, CpuCopy, EngineSpec, KernelCopy, KernelMode, PoolError, ThreadedConfig,
    ThreadedCopy,
};

/// Both copy modes, memcpy first.
pub const MODES: [CopyMode; 2] = [CopyMode::Memcpy, CopyMode::NonTemporal];

/// One engine under test and how it was built.
#[derive(Debug)]
pub struct EngineUnderTest {
    /// The engine choice as an operator would write it.
    pub spec: EngineSpec,
    /// Its copy mode.
    pub mode: CopyMode,
    /// The running engine (its pool threads sleep between batches).
    pub engine: Box<dyn CopyEngine>,
}

impl EngineUnderTest {
    /// Copying threads, the caller included.
    pub fn threads(&self) -> usize {
        match self.spec {
            EngineSpec::Threads { workers, .. } => workers,
            EngineSpec::Cpu | EngineSpec::Kernel(_) => 1,
        }
    }

    /// Whether pool threads are pinned to CPUs.
    pub fn pinned(&self) -> bool {
        matches!(self.spec, EngineSpec::Threads { pin: true, .. })
    }
}

/// The specs worth measuring on a machine with `max_threads` CPUs:
/// `cpu`, `threads:1` ..= `threads:N`, `threads:N:pin`.
pub fn specs(max_threads: usize) -> Vec<EngineSpec> {
    let max = max_threads.max(1);
    let mut specs = vec![EngineSpec::Cpu];
    specs.extend((1..=max).map(|workers| EngineSpec::Threads {
        workers,
        pin: false,
    }));
    specs.push(EngineSpec::Threads {
        workers: max,
        pin: true,
    });
    specs
}

/// Starts every engine of `specs(max_threads)` in both modes, grouped by
/// spec (memcpy, then non-temporal), then the kernel engines where the
/// offload device opens.
pub fn start_all(max_threads: usize) -> Result<Vec<EngineUnderTest>, PoolError> {
    let mut engines = Vec::new();
    for spec in specs(max_threads) {
        for mode in MODES {
            engines.push(EngineUnderTest {
                spec,
                mode,
                engine: build(spec, mode)?,
            });
        }
    }
    engines.extend(kernel_engines());
    Ok(engines)
}

/// The kernel engines, where `/dev/tiercopy` opens (none elsewhere).
fn kernel_engines() -> Vec<EngineUnderTest> {
    [KernelMode::Threads, KernelMode::Dma, KernelMode::Auto]
        .into_iter()
        .filter_map(|m| {
            let engine = KernelCopy::new(m).ok()?;
            Some(EngineUnderTest {
                spec: EngineSpec::Kernel(m),
                mode: CopyMode::Memcpy,
                engine: Box::new(engine),
            })
        })
        .collect()
}

/// Builds the user-space engine `spec` names with copy mode `mode` (the
/// threaded engine keeps its default chunk size); `kernel` specs are
/// built by [`kernel_engines`] and never reach here.
fn build(spec: EngineSpec, mode: CopyMode) -> Result<Box<dyn CopyEngine>, PoolError> {
    Ok(match spec {
        EngineSpec::Threads { workers, pin } => Box::new(ThreadedCopy::new(ThreadedConfig {
            pin,
            mode,
            ..ThreadedConfig::with_workers(workers)
        })?),
        EngineSpec::Cpu | EngineSpec::Kernel(_) => Box::new(CpuCopy::new(mode)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_scale_with_the_cpu_count() {
        let names: Vec<String> = specs(3).iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "cpu",
                "threads:1",
                "threads:2",
                "threads:3",
                "threads:3:pin"
            ]
        );
        assert_eq!(specs(16).len(), 18);
        assert_eq!(specs(0).len(), 3, "at least one thread");
    }

    #[test]
    fn every_spec_runs_in_both_modes() {
        let engines = start_all(2).unwrap();
        let names: Vec<&str> = engines.iter().map(|e| e.engine.name()).collect();
        assert_eq!(
            names,
            [
                "cpu/memcpy",
                "cpu/nt",
                "threads:1/memcpy",
                "threads:1/nt",
                "threads:2/memcpy",
                "threads:2/nt",
                "threads:2:pin/memcpy",
                "threads:2:pin/nt",
            ]
        );
        assert_eq!(engines[6].threads(), 2);
        assert!(engines[6].pinned());
        assert!(!engines[4].pinned());
        assert_eq!(engines[0].threads(), 1);
    }
}
