//! A background thread that sleeps in steps it can be woken from, and is
//! stopped and joined on drop: the samplers' threads (fault rounds,
//! dirty-log windows).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

/// What the thread's body polls: whether to stop, and a sleep the drop
/// cuts short.
#[derive(Clone, Debug)]
pub(crate) struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Whether the owner asked the thread to stop.
    pub fn stopping(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Sleeps until `deadline`, or until the owner asks to stop.
    pub fn sleep_until(&self, deadline: Instant) {
        loop {
            let now = Instant::now();
            if now >= deadline || self.stopping() {
                return;
            }
            std::thread::park_timeout(deadline - now);
        }
    }
}

/// The running thread; asks it to stop, wakes it and joins it on drop.
#[derive(Debug)]
pub(crate) struct StoppableThread {
    stop: StopFlag,
    handle: Option<JoinHandle<()>>,
}

impl StoppableThread {
    /// Runs `body` on a thread named `name`.
    pub fn spawn(
        name: &str,
        body: impl FnOnce(StopFlag) + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = StopFlag(Arc::new(AtomicBool::new(false)));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(flag))?;
        Ok(StoppableThread {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for StoppableThread {
    fn drop(&mut self) {
        self.stop.0.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            // The body cleans up before it returns; a panic in it has
            // nothing left to clean.
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn drop_wakes_a_sleeping_thread_and_joins_it() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = StoppableThread::spawn("sleeper", move |stop| {
            // An hour: only the drop ends this sleep.
            stop.sleep_until(Instant::now() + Duration::from_secs(3600));
            tx.send(stop.stopping()).unwrap();
        })
        .unwrap();
        drop(t);
        assert!(rx.recv().unwrap(), "woken by the stop, and joined");
    }
}
