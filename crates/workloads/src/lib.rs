//! Guest workload payloads for tiervisor, and the parser the VMM uses to
//! check `--workload` strings before boot.
//!
//! One static payload (`workloads-payload`, built with `--features
//! payload`) holds every workload; the argument string in the boot info
//! (`NAME[:k=v,...]`) picks one. All vCPUs run the same workload over one
//! shared buffer carved from the first free RAM range, in timed phases, and
//! report to the VMM with hypercalls (see `docs/payload-abi.md`).
//!
//! Host side: [`Spec::parse`] and [`Spec::layout`] validate a workload
//! string and its memory needs. Guest side: [`guest_main`] runs a workload
//! on one vCPU given a [`Platform`] and [`GuestMemory`]; the payload binary
//! provides those with `rdtsc`, `out` and identity-mapped pointers, and the
//! unit tests with recording fakes.

#![cfg_attr(not(test), no_std)]

mod entry;
mod ground_truth;
mod kinds;
mod layout;
mod math;
mod memcheck_image;
mod message;
mod meter;
mod number;
mod parse;
mod parse_error;
mod platform;
mod rng;
mod run;
mod run_error;
mod spec;
#[cfg(test)]
mod test_support;
mod workload;

pub use entry::guest_main;
pub use ground_truth::CHUNK_BYTES;
pub use layout::{Layout, PAGE_BYTES};
pub use memcheck_image::{ImageCheck, check_memcheck_image};
pub use message::MessageBuf;
pub use meter::{FALLBACK_OPS_PER_SECOND, PROGRESS_INTERVAL_NS};
pub use number::ByteSize;
pub use parse_error::{ParseError, Snippet};
pub use platform::{GuestMemory, Platform, SpinBarrier};
pub use rng::{SPLITMIX64_GAMMA, mix, splitmix64};
pub use run_error::{
    EXIT_DATA_ERROR, EXIT_HYPERCALL_REJECTED, EXIT_OK, EXIT_PANIC, EXIT_SETUP_ERROR, RunError,
};
pub use spec::{
    HotsetParams, MemcheckParams, NAMES, PmbenchParams, Spec, StreamOp, StreamParams, Workload,
    ZipfParams,
};
