//! Copy engines for frame migration: they copy batches of
//! guest frames from a source tier's mapping to a destination tier's
//! mapping, as fast as possible, while vCPUs may be blocked on them.
//!
//! * [`CpuCopy`] — one thread, the baseline;
//! * [`ThreadedCopy`] — a persistent pool; batches are cut into chunks so
//!   that even one 2 MiB frame uses every thread;
//! * [`KernelCopy`] — the host-kernel offload (`/dev/tiercopy`,
//!   `host-kernel/tiercopy`): kernel threads or DMA engine channels; where
//!   the module is not loaded [`engine_from_spec`] reports
//!   [`CopyError::Unavailable`] saying what to load.
//!
//! Every engine validates a batch (null pointers, wrap-around, overlaps)
//! before touching memory and reports what it did in [`CopyStats`].
//!
//! ```
//! use page_copy::{CopyRange, EngineSpec, engine_from_spec};
//!
//! let engine = engine_from_spec(&"threads:2".parse::<EngineSpec>()?)?;
//! let src = vec![7u8; 2 << 20];
//! let mut dst = vec![0u8; 2 << 20];
//! let frame = CopyRange::new(src.as_ptr(), dst.as_mut_ptr(), src.len());
//! // SAFETY: both buffers outlive the call and do not overlap.
//! let stats = unsafe { engine.copy(&[frame]) }?;
//! assert_eq!(stats.bytes, 2 << 20);
//! assert_eq!(stats.chunks, 8); // 256 KiB chunks
//! assert!(dst == src);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod copy_engine;
mod cpu;
mod engine_spec;
mod error;
mod kernel;
mod mode;
mod nontemporal;
mod plan;
mod range;
mod stats;
mod threaded;
// The uapi header parser the ABI tests share with the other host-kernel
// clients (one file, outside any crate).
#[cfg(test)]
#[path = "../../../host-kernel/rust/uapi_defines.rs"]
mod uapi_defines;

pub use copy_engine::CopyEngine;
pub use cpu::CpuCopy;
pub use engine_spec::{EngineSpec, SpecError, engine_from_spec};
pub use error::CopyError;
pub use kernel::{
    KERNEL_DEVICE, KernelCopy, KernelMode, TIERCOPY_ABI_VERSION, TIERCOPY_IOC_COPY,
    TIERCOPY_MAX_BATCH_BYTES, TIERCOPY_MAX_RANGES, TiercopyBatch, TiercopyRange,
};
pub use mode::CopyMode;
pub use range::{CopyRange, RangeError, Side};
pub use stats::CopyStats;
pub use threaded::{
    DEFAULT_CHUNK_SIZE, MIN_CHUNK_SIZE, PoolError, ThreadedConfig, ThreadedCopy, default_workers,
};
