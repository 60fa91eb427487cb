//! `PrecopyConfig`: the pre-copy protocol's settings (its dirty source,
//! rounds and settle threshold).

use std::sync::Arc;

use crate::migrate::dirty::DirtySource;

/// Pre-copy settings.
#[derive(Clone, Debug)]
pub struct PrecopyConfig {
    /// Which pages were written while copying.
    pub dirty: Arc<dyn DirtySource>,
    /// Re-copy rounds before write-protecting.
    pub max_rounds: u32,
    /// Stop re-copying once a round finds at most this many dirty pages.
    pub settle_pages: usize,
}

impl PrecopyConfig {
    /// Defaults: 3 rounds, settle at 32 pages.
    pub fn new(dirty: Arc<dyn DirtySource>) -> Self {
        PrecopyConfig {
            dirty,
            max_rounds: 3,
            settle_pages: 32,
        }
    }
}
