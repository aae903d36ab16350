//! The simulator's event queue: events wait in a slab, and a binary heap orders their keys
//! (time, then the order they were scheduled in). A heap of the events themselves moved each
//! whole event (a frame and its metadata) at every step of a sift; the keys are a third of that.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Events of type `E` by virtual time; events at the same time come out in the order they went
/// in, so a run is deterministic.
#[derive(Debug)]
pub(super) struct EventQueue<E> {
    /// (time, sequence, slot): the sequence is unique, so the slot never decides the order.
    keys: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            keys: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at`.
    pub(super) fn push(&mut self, at: u64, event: E) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(event);
                s
            }
            None => {
                self.slots.push(Some(event));
                // Four billion events waiting at once would be 100s of GB of frames.
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 events waiting")
            }
        };
        self.keys.push(Reverse((at, self.seq, slot)));
    }

    /// The earliest event and its time.
    pub(super) fn pop(&mut self) -> Option<(u64, E)> {
        let Reverse((at, _, slot)) = self.keys.pop()?;
        let event = self.slots[slot as usize]
            .take()
            .expect("a key's slot holds its event until it is popped");
        self.free.push(slot);
        Some((at, event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_in_the_order_they_went_in() {
        let mut q = EventQueue::default();
        q.push(30, "c");
        q.push(10, "a1");
        q.push(20, "b");
        q.push(10, "a2");
        assert_eq!(q.pop(), Some((10, "a1")));
        // A freed slot is reused without disturbing the order.
        q.push(10, "a3");
        q.push(5, "z");
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            rest,
            [(5, "z"), (10, "a2"), (10, "a3"), (20, "b"), (30, "c")]
        );
        assert_eq!(
            q.slots.len(),
            5,
            "six events went in, at most five waited at once"
        );
    }
}
