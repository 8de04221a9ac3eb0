//! How many messages of one aggregate the publisher keeps in flight at once.
//!
//! A run is published *chained*: its first message plainly, each next one
//! with `Nats-Expected-Last-Msg-Id` = the previous message's id, so the
//! stream stores it only if its predecessor is the last message stored.
//! That holds while nothing else is published to the stream in between;
//! when other runs interleave, the chain breaks at once (the stream refuses
//! the message, nothing out of order is stored) and the rest of the run goes
//! one message at a time. The window grows while chains succeed and falls
//! back to one when they break, probing again after a growing number of
//! runs, so a busy stream with many aggregates in flight wastes at most one
//! refused publish per probe.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest window.
pub(crate) const MAX_WINDOW: usize = 64;
/// The most runs published one message at a time before probing again.
const MAX_PAUSE: usize = 64;

/// The window, shared by the clones of one publisher.
#[derive(Debug, Clone)]
pub(crate) struct RunWindow(Arc<State>);

#[derive(Debug)]
struct State {
    /// Messages to chain in the next run (1: one at a time).
    window: AtomicUsize,
    /// Runs to publish one at a time before the next probe.
    pause: AtomicUsize,
    /// Runs left before the next probe.
    until_probe: AtomicUsize,
}

impl Default for RunWindow {
    fn default() -> Self {
        Self(Arc::new(State {
            window: AtomicUsize::new(2),
            pause: AtomicUsize::new(1),
            until_probe: AtomicUsize::new(0),
        }))
    }
}

impl RunWindow {
    /// How many messages to chain now (1: publish one at a time).
    pub(crate) fn current(&self) -> usize {
        let window = self.0.window.load(Ordering::Relaxed);
        if window > 1 {
            return window;
        }
        // One at a time: probe again once the pause has passed.
        let left = self.0.until_probe.load(Ordering::Relaxed);
        if left == 0 {
            self.0.window.store(2, Ordering::Relaxed);
            return 2;
        }
        self.0.until_probe.store(left - 1, Ordering::Relaxed);
        1
    }

    /// A whole chain of `len` was stored in order: chain more next time.
    pub(crate) fn held(&self, len: usize) {
        if len >= self.0.window.load(Ordering::Relaxed) {
            let grown = (len * 2).min(MAX_WINDOW);
            self.0.window.store(grown, Ordering::Relaxed);
            self.0.pause.store(1, Ordering::Relaxed);
        }
    }

    /// A chain broke because other messages interleaved: one at a time for
    /// a while, twice as long as last time.
    pub(crate) fn broke(&self) {
        let pause = self.0.pause.load(Ordering::Relaxed);
        self.0.window.store(1, Ordering::Relaxed);
        self.0.until_probe.store(pause, Ordering::Relaxed);
        self.0
            .pause
            .store((pause * 2).min(MAX_PAUSE), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_WINDOW, RunWindow};

    #[test]
    fn grows_while_chains_hold_and_backs_off_when_they_break() {
        let window = RunWindow::default();
        assert_eq!(window.current(), 2);
        window.held(2);
        assert_eq!(window.current(), 4);
        for _ in 0..10 {
            let now = window.current();
            window.held(now);
        }
        assert_eq!(window.current(), MAX_WINDOW);

        window.broke();
        assert_eq!(window.current(), 1, "one run one at a time");
        assert_eq!(window.current(), 2, "then a probe");
        window.broke();
        assert_eq!(window.current(), 1);
        assert_eq!(window.current(), 1, "the pause doubled");
        assert_eq!(window.current(), 2);
        window.held(2);
        assert_eq!(window.current(), 4, "a chain that held resets the pause");
    }
}
