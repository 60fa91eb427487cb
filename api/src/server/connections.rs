//! The open connections: at most a cap of them, each with a handle the
//! server keeps to shut it down when it stops.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::server::stream::Stream;

/// Why a connection was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The cap is reached.
    Full,
    /// The server is stopping.
    Closing,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    open: HashMap<u64, Stream>,
    closing: bool,
}

/// The registry.
#[derive(Debug)]
pub(crate) struct Connections {
    state: Mutex<State>,
    left: Condvar,
    cap: usize,
}

impl Connections {
    /// A registry admitting at most `cap` connections at once.
    pub fn new(cap: usize) -> Self {
        Connections {
            state: Mutex::new(State::default()),
            left: Condvar::new(),
            cap,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a connection, keeping `handle` to shut it down later.
    pub fn admit(&self, handle: Stream) -> Result<u64, Refused> {
        let mut state = self.lock();
        if state.closing {
            return Err(Refused::Closing);
        }
        if state.open.len() >= self.cap {
            return Err(Refused::Full);
        }
        let id = state.next_id;
        state.next_id += 1;
        state.open.insert(id, handle);
        Ok(id)
    }

    /// The connection `id` has ended.
    pub fn leave(&self, id: u64) {
        self.lock().open.remove(&id);
        self.left.notify_all();
    }

    /// How many are open.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// Admits no more, shuts every open connection down and waits up to
    /// `grace` for their threads to end (a handler still inside the VMM
    /// finishes on its own).
    pub fn close_all(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        let mut state = self.lock();
        state.closing = true;
        for stream in state.open.values() {
            // A connection that already went away is fine.
            let _ = stream.shutdown();
        }
        while !state.open.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            state = self
                .left
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}
