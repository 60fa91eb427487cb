//! Guest access tracking (ARCHITECTURE §5).
//!
//! For now this crate holds the owner of the KVM dirty log
//! ([`KvmDirtyLog`]): the EPT/NPT (here: shadow page table) dirty bits of
//! guest RAM, read with manual protection (`KVM_CLEAR_DIRTY_LOG` by range)
//! and fanned out to every consumer, so that no consumer steals another's
//! bits. The pre-copy migrator is its first consumer.

mod dirty_log;

pub use dirty_log::{DirtyConsumer, DirtyLogError, KvmDirtyLog, Memslot, enable_manual_protect};
