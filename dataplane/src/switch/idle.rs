//! When an idle worker polls and when it sleeps: KVM's halt-polling rule (grow the window when a
//! sleep turned out shorter than the longest window, shrink it when the lull outlasted that),
//! applied to a worker thread. Sans-IO: the worker's loop tells it the time and whether the loop
//! found work; it answers whether to poll again or sleep.
//!
//! Why (issue 17, docs/performance.md "Per-hop latency"): a sleeping worker pays a wake-up and
//! then runs its first packet on cold caches, about 100 µs per traversal after a 10 ms lull on
//! this VM, against a few µs warm. Polling through the gaps of a traffic pattern avoids that, but
//! a fixed window either misses gaps longer than itself or polls one window per sparse frame.
//! The adaptive window covers regular gaps up to `max` (pings at 1 ms, packets of a flow, ACK
//! clocks), and falls back to sleeping at once when the gaps are longer than `max`, so an idle
//! switch, or one that sees a frame every 10 ms, costs no polling.

/// The first window after a sleep that a longer window would have avoided, ns.
pub(crate) const GROW_START_NS: u64 = 10_000;

/// What an idle worker does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Idle {
    /// Look at the ports again (yielding the CPU first if so configured).
    Poll,
    /// Sleep until a frame, a doorbell or a deadline.
    Sleep,
}

/// The adaptive poll window of one worker.
#[derive(Clone, Debug)]
pub(crate) struct PollWindow {
    max_ns: u64,
    window_ns: u64,
    /// When the current lull began (the first loop that found nothing).
    idle_since: Option<u64>,
}

impl PollWindow {
    /// A window that grows up to `max_ns` (0: always sleep at once).
    pub(crate) fn new(max_ns: u64) -> PollWindow {
        PollWindow {
            max_ns,
            window_ns: 0,
            idle_since: None,
        }
    }

    /// The current window, ns.
    #[cfg(test)]
    pub(crate) fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// A loop found work at `now`: ends the lull, if any, and adapts the window to its length.
    pub(crate) fn active(&mut self, now: u64) {
        let Some(since) = self.idle_since.take() else {
            return;
        };
        let lull = now.saturating_sub(since);
        if lull <= self.window_ns {
            // Caught while polling: the window is right.
        } else if lull < self.max_ns {
            // The worker slept, and a window of `lull` would have kept it awake: grow.
            self.window_ns = (self.window_ns * 2).max(GROW_START_NS).min(self.max_ns);
        } else {
            // Longer than any window may be: polling would only have burned the CPU.
            self.window_ns /= 2;
            if self.window_ns < GROW_START_NS {
                self.window_ns = 0;
            }
        }
    }

    /// A loop found nothing at `now`: poll again or sleep.
    pub(crate) fn idle(&mut self, now: u64) -> Idle {
        let since = *self.idle_since.get_or_insert(now);
        if now.saturating_sub(since) < self.window_ns {
            Idle::Poll
        } else {
            Idle::Sleep
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Runs frames `gap` apart through `w` for `n` frames, polling every 1 µs of a lull;
    /// returns how many lulls ended in a sleep and the time spent polling.
    fn drive(w: &mut PollWindow, start: u64, gap: u64, n: usize) -> (usize, u64) {
        let (mut sleeps, mut polled) = (0, 0);
        let mut t = start;
        for _ in 0..n {
            w.active(t);
            let next = t + gap;
            let mut now = t + 1_000;
            loop {
                if now >= next {
                    break;
                }
                match w.idle(now) {
                    Idle::Poll => {
                        polled += 1_000;
                        now += 1_000;
                    }
                    Idle::Sleep => {
                        sleeps += 1;
                        break;
                    }
                }
            }
            t = next;
        }
        (sleeps, polled)
    }

    #[test]
    fn regular_gaps_below_the_maximum_end_up_polled_through() {
        let mut w = PollWindow::new(2 * MS);
        let (sleeps, _) = drive(&mut w, 0, MS, 20);
        // 10 µs, 20, 40, ..., 1.28 ms: eight sleeps before the window covers 1 ms.
        assert_eq!(sleeps, 8);
        let (sleeps, polled) = drive(&mut w, 20 * MS, MS, 100);
        assert_eq!(sleeps, 0);
        assert!(polled > 90 * MS, "polled {polled} ns");
        assert!(w.window_ns() >= MS && w.window_ns() <= 2 * MS);
    }

    #[test]
    fn gaps_above_the_maximum_sleep_at_once_and_cost_no_polling() {
        let mut w = PollWindow::new(2 * MS);
        // A window grown by a burst of close frames...
        drive(&mut w, 0, 50_000, 50);
        assert!(w.window_ns() >= 50_000);
        // ...decays within a few sparse frames, and then they cost nothing.
        drive(&mut w, 10 * MS, 10 * MS, 8);
        assert_eq!(w.window_ns(), 0);
        let (sleeps, polled) = drive(&mut w, 200 * MS, 10 * MS, 50);
        assert_eq!((sleeps, polled), (50, 0));
    }

    #[test]
    fn a_zero_maximum_always_sleeps() {
        let mut w = PollWindow::new(0);
        let (sleeps, polled) = drive(&mut w, 0, 5_000, 100);
        assert_eq!((sleeps, polled), (100, 0));
    }

    #[test]
    fn an_idle_worker_polls_at_most_one_window_per_lull() {
        let mut w = PollWindow::new(2 * MS);
        drive(&mut w, 0, 100_000, 100);
        let window = w.window_ns();
        assert!(window > 0);
        // One long lull: polled for the window, then asleep, however long it lasts.
        w.active(100 * MS);
        let mut polled = 0;
        let mut now = 100 * MS + 1_000;
        while w.idle(now) == Idle::Poll {
            polled += 1_000;
            now += 1_000;
        }
        assert!(polled <= window, "{polled} > {window}");
        assert_eq!(w.idle(now + 1_000 * MS), Idle::Sleep);
    }
}
