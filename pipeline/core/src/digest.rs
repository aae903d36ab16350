//! Digests: small messages from the data plane to the controller, through a bounded queue.
//!
//! Workers push without blocking; when the queue is full the digest is dropped and counted (the
//! controller is too slow, and the data plane must not wait for it). The control side drains it,
//! batches by digest id and acknowledges per P4Runtime's DigestList/DigestListAck.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam::queue::ArrayQueue;

/// Most fields a digest may carry.
pub const MAX_DIGEST_FIELDS: usize = 8;

/// One digest message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DigestMsg {
    /// Index of the digest in the schema.
    pub digest: u16,
    /// Number of valid values.
    pub len: u8,
    /// Field values in schema order.
    pub values: [u128; MAX_DIGEST_FIELDS],
    /// When it was generated, ns.
    pub timestamp: u64,
}

impl DigestMsg {
    /// The field values.
    pub fn values(&self) -> &[u128] {
        &self.values[..usize::from(self.len)]
    }
}

/// The bounded queue between workers and the controller side.
#[derive(Debug)]
pub struct DigestQueue {
    queue: ArrayQueue<DigestMsg>,
    dropped: AtomicU64,
}

impl DigestQueue {
    /// A queue of `capacity` messages.
    pub fn new(capacity: usize) -> Self {
        DigestQueue {
            queue: ArrayQueue::new(capacity.max(1)),
            dropped: AtomicU64::new(0),
        }
    }

    /// Sends a digest; returns false (and counts it) when the queue is full.
    pub fn push(&self, digest: u16, values: &[u128], timestamp: u64) -> bool {
        let mut msg = DigestMsg {
            digest,
            len: 0,
            values: [0; MAX_DIGEST_FIELDS],
            timestamp,
        };
        let n = values.len().min(MAX_DIGEST_FIELDS);
        msg.values[..n].copy_from_slice(&values[..n]);
        msg.len = n as u8; // n <= MAX_DIGEST_FIELDS = 8
        if self.queue.push(msg).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Takes the oldest digest.
    pub fn pop(&self) -> Option<DigestMsg> {
        self.queue.pop()
    }

    /// Digests dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Digests waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether none are waiting.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_counted() {
        let q = DigestQueue::new(2);
        assert!(q.push(0, &[1, 2], 5));
        assert!(q.push(0, &[3], 6));
        assert!(!q.push(0, &[4], 7));
        assert_eq!(q.dropped(), 1);
        let m = q.pop().unwrap();
        assert_eq!(m.values(), &[1, 2]);
        assert_eq!(m.timestamp, 5);
        assert_eq!(q.len(), 1);
    }
}
