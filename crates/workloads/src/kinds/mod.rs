//! The workloads themselves, one module each, plus their samplers.

mod hotset;
mod idle;
mod memcheck;
mod normal_table;
mod pmbench;
mod scatter;
mod stream;
mod zipf;
mod zipf_sampler;

pub(crate) use hotset::Hotset;
pub(crate) use idle::Idle;
pub(crate) use memcheck::Memcheck;
pub(crate) use pmbench::Pmbench;
pub(crate) use stream::Stream;
pub(crate) use zipf::{Zipf, ZipfSampler};
