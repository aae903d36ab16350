//! Per-entry last-hit timestamps for idle timeouts.

use std::sync::atomic::{AtomicU64, Ordering};

use super::EntryId;

/// Skip the store when the recorded hit is more recent than this (keeps hot entries from
/// bouncing their cache line between cores).
const RESOLUTION_NS: u64 = 1_000_000;

/// Last-hit time (ns, caller's clock) of each entry id of one table. Lives outside the table
/// snapshot and is shared by the data-plane threads; all accesses are relaxed.
#[derive(Debug)]
pub struct HitTimes {
    times: Box<[AtomicU64]>,
}

impl HitTimes {
    /// Slots for ids `0..capacity`, all 0.
    pub fn new(capacity: usize) -> Self {
        Self {
            times: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether there are no slots.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Records a hit at `now_ns`. Reads first and skips the write if the stored time is less
    /// than 1 ms older. Out-of-range ids are ignored.
    #[inline]
    pub fn touch(&self, id: EntryId, now_ns: u64) {
        if let Some(t) = self.times.get(id as usize)
            && now_ns.saturating_sub(t.load(Ordering::Relaxed)) >= RESOLUTION_NS
        {
            t.store(now_ns, Ordering::Relaxed);
        }
    }

    /// Last recorded hit (or reset) time of `id`.
    pub fn last_hit(&self, id: EntryId) -> Option<u64> {
        self.times
            .get(id as usize)
            .map(|t| t.load(Ordering::Relaxed))
    }

    /// Sets the time unconditionally (on insert, or when the idle timeout is re-armed).
    pub fn reset(&self, id: EntryId, now_ns: u64) {
        if let Some(t) = self.times.get(id as usize) {
            t.store(now_ns, Ordering::Relaxed);
        }
    }
}

impl Clone for HitTimes {
    fn clone(&self) -> Self {
        Self {
            times: self
                .times
                .iter()
                .map(|t| AtomicU64::new(t.load(Ordering::Relaxed)))
                .collect(),
        }
    }
}
