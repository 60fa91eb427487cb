//! `EngineSpec`: the textual engine choice (`cpu`, `threads:4:pin`,
//! `kernel`, ...) and building an engine from it.

use std::fmt;
use std::num::ParseIntError;
use std::str::FromStr;

use thiserror::Error;

use crate::copy_engine::CopyEngine;
use crate::cpu::CpuCopy;
use crate::error::CopyError;
use crate::kernel::{KernelCopy, KernelMode};
use crate::threaded::{PoolError, ThreadedConfig, ThreadedCopy, default_workers};

/// Which copy engine to use.
///
/// Text forms: `cpu`, `threads` (one thread per available CPU),
/// `threads:N`, `threads:N:pin`, `kernel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineSpec {
    /// `CpuCopy`: one thread.
    Cpu,
    /// `ThreadedCopy` with `workers` copying threads (caller included).
    Threads {
        /// Copying threads, the caller included.
        workers: usize,
        /// Pin pool threads to CPUs.
        pin: bool,
    },
    /// The host-kernel offload device, with its back end.
    Kernel(KernelMode),
}

/// Why an engine spec string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    /// The engine name is not `cpu`, `threads` or `kernel`.
    #[error(
        "unknown copy engine {0:?} (expected cpu, threads[:N[:pin]] or kernel[:auto|:threads|:dma])"
    )]
    UnknownEngine(String),
    /// Something other than a back end after `kernel:`.
    #[error("unknown kernel copy back end {0:?} (expected auto, threads or dma)")]
    UnknownKernelMode(String),
    /// The worker count is not a number.
    #[error("bad worker count {text:?}")]
    BadWorkers {
        /// The text after `threads:`.
        text: String,
        /// Why it did not parse.
        #[source]
        source: ParseIntError,
    },
    /// The worker count is 0.
    #[error("worker count must be at least 1")]
    ZeroWorkers,
    /// Something other than `pin` after the worker count.
    #[error("unknown threads option {0:?} (expected pin)")]
    UnknownOption(String),
    /// Fields the engine does not take.
    #[error("{engine} takes no options, got {spec:?}")]
    UnexpectedOptions {
        /// The engine name.
        engine: &'static str,
        /// The whole spec.
        spec: String,
    },
}

impl FromStr for EngineSpec {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        let mut fields = spec.split(':');
        let name = fields.next().unwrap_or_default();
        let rest: Vec<&str> = fields.collect();
        match name {
            "cpu" => {
                if !rest.is_empty() {
                    return Err(SpecError::UnexpectedOptions {
                        engine: "cpu",
                        spec: spec.to_owned(),
                    });
                }
                Ok(EngineSpec::Cpu)
            }
            "kernel" => match rest.as_slice() {
                [] | ["auto"] => Ok(EngineSpec::Kernel(KernelMode::Auto)),
                ["threads"] => Ok(EngineSpec::Kernel(KernelMode::Threads)),
                ["dma"] => Ok(EngineSpec::Kernel(KernelMode::Dma)),
                [other] => Err(SpecError::UnknownKernelMode((*other).to_owned())),
                _ => Err(SpecError::UnexpectedOptions {
                    engine: "kernel",
                    spec: spec.to_owned(),
                }),
            },
            "threads" => parse_threads(spec, &rest),
            _ => Err(SpecError::UnknownEngine(spec.to_owned())),
        }
    }
}

/// `threads`, `threads:N`, `threads:N:pin` (fields after the name).
fn parse_threads(spec: &str, rest: &[&str]) -> Result<EngineSpec, SpecError> {
    let (workers, pin) = match rest {
        [] => (default_workers(), false),
        [count] => (parse_workers(count)?, false),
        [count, option] => {
            let workers = parse_workers(count)?;
            if *option != "pin" {
                return Err(SpecError::UnknownOption((*option).to_owned()));
            }
            (workers, true)
        }
        _ => {
            return Err(SpecError::UnexpectedOptions {
                engine: "threads",
                spec: spec.to_owned(),
            });
        }
    };
    Ok(EngineSpec::Threads { workers, pin })
}

fn parse_workers(text: &str) -> Result<usize, SpecError> {
    let workers: usize = text.parse().map_err(|source| SpecError::BadWorkers {
        text: text.to_owned(),
        source,
    })?;
    if workers == 0 {
        return Err(SpecError::ZeroWorkers);
    }
    Ok(workers)
}

impl fmt::Display for EngineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineSpec::Cpu => f.write_str("cpu"),
            EngineSpec::Threads { workers, pin } => {
                write!(f, "threads:{workers}")?;
                if *pin {
                    f.write_str(":pin")?;
                }
                Ok(())
            }
            EngineSpec::Kernel(KernelMode::Auto) => f.write_str("kernel"),
            EngineSpec::Kernel(mode) => write!(f, "kernel:{}", mode.name()),
        }
    }
}

/// Builds the engine `spec` names, with the default `CopyMode` and chunk
/// size.
///
/// `Kernel` opens the offload device: where it is absent (the module not
/// loaded) that is `CopyError::Unavailable`, saying what to load.
pub fn engine_from_spec(spec: &EngineSpec) -> Result<Box<dyn CopyEngine>, CopyError> {
    match *spec {
        EngineSpec::Cpu => Ok(Box::new(CpuCopy::default())),
        EngineSpec::Threads { workers, pin } => {
            if workers == 0 {
                return Err(PoolError::ZeroWorkers.into());
            }
            let config = ThreadedConfig {
                pin,
                ..ThreadedConfig::with_workers(workers)
            };
            Ok(Box::new(ThreadedCopy::new(config)?))
        }
        EngineSpec::Kernel(mode) => Ok(Box::new(KernelCopy::new(mode)?)),
    }
}
