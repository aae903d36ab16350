//! A fixed-size histogram of `u64` values for monitors on the packet path (the traffic manager's
//! link lateness, the data plane's worker loop times; docs/dataplane.md, "Fidelity monitors").
//!
//! Log-linear buckets: values below 8 have a bucket each; above, every power of two is cut into
//! 8 equal buckets, so a bucket is at most 1/8 of its lower bound wide (a quantile read from it
//! is at most 12.5% above the value), up to the last bucket, which holds everything from
//! 15 x 2^36 (about 1.0 x 10^12; 17 minutes in ns) up. The maximum is kept exactly. Recording is a few integer operations and no allocation.
//!
//! One thread records (the owner of a port, a worker) while any thread reads: with a single
//! writer each counter needs only a load and a store, no read-modify-write. A reader sees each
//! counter whole, but the counters of one snapshot may be a few samples apart.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets per power of two, as a power of two (8).
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// The highest bit position with buckets of its own (values from 2^(TOP_BIT + 1) go to the last).
const TOP_BIT: u32 = 39;
/// How many buckets a histogram has.
pub const BUCKETS: usize = ((TOP_BIT - SUB_BITS + 2) as usize) << SUB_BITS;

/// The bucket of `v`.
#[inline]
pub fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    if e > TOP_BIT {
        return BUCKETS - 1;
    }
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    (((e - SUB_BITS + 1) as usize) << SUB_BITS) + sub as usize
}

/// The largest value bucket `i` holds (for the last bucket, `u64::MAX`).
pub fn upper_bound(i: usize) -> u64 {
    if i < SUB as usize {
        return i as u64;
    }
    if i >= BUCKETS - 1 {
        return u64::MAX;
    }
    let group = (i >> SUB_BITS) as u32;
    let sub = (i as u64) & (SUB - 1);
    let lower = (SUB + sub) << (group - 1);
    lower + (1u64 << (group - 1)) - 1
}

/// A histogram one thread records into and any thread reads.
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

/// Adds `n` to a counter that only the calling thread writes.
#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Histogram {
    /// Records `v`. Only one thread may record into a histogram (a second one could lose counts,
    /// never corrupt memory).
    #[inline]
    pub fn record(&self, v: u64) {
        bump(&self.buckets[bucket(v)], 1);
        bump(&self.sum, v);
        if v > self.max.load(Ordering::Relaxed) {
            self.max.store(v, Ordering::Relaxed);
        }
    }

    /// The counts as they are now.
    pub fn snapshot(&self) -> Snapshot {
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        Snapshot {
            count: buckets.iter().sum(),
            sum: self.sum.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
            buckets,
        }
    }
}

/// A histogram's counts at one time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Values recorded.
    pub count: u64,
    /// Their sum (wrapping).
    pub sum: u64,
    /// The largest.
    pub max: u64,
    buckets: Vec<u64>,
}

impl Snapshot {
    /// The `q` quantile (0 to 1): the upper bound of the bucket holding the value of rank
    /// ceil(q x count), at most the maximum. 0 when nothing was recorded.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return upper_bound(i).min(self.max);
            }
        }
        self.max
    }

    /// The mean (0 when nothing was recorded).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_each_value_is_within_its_bucket() {
        assert_eq!(BUCKETS, 304);
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 40) - 1, 1 << 40, u64::MAX]) {
            let b = bucket(v);
            assert!(
                b == last || b == last + 1 || v >= 5000,
                "{v}: {b} after {last}"
            );
            last = b;
            assert!(v <= upper_bound(b), "{v} above bucket {b}'s bound");
            if b > 0 {
                assert!(v > upper_bound(b - 1), "{v} belongs to bucket {}", b - 1);
            }
            // A bucket is at most 1/8 of its values wide.
            if b < BUCKETS - 1 {
                assert!(upper_bound(b) - v <= v / 8, "{v} in bucket {b}");
            }
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(upper_bound(BUCKETS - 2), (15 << 36) - 1);
        assert_eq!(bucket(15 << 36), BUCKETS - 1);
    }

    #[test]
    fn quantiles_mean_and_max() {
        let h = Histogram::default();
        assert_eq!(h.snapshot().quantile(0.5), 0);
        for v in 1..=100u64 {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!((s.count, s.sum, s.max), (100, 5050, 100));
        assert_eq!(s.quantile(0.0), 1);
        // Rank 50 is 50, in bucket [48, 51].
        assert_eq!(s.quantile(0.5), 51);
        // Rank 99 is 99, in bucket [96, 103]: clamped to the maximum.
        assert_eq!(s.quantile(0.99), 100);
        assert_eq!(s.quantile(1.0), 100);
        assert!((s.mean() - 50.5).abs() < 1e-9);
        // Exact below 8.
        let h = Histogram::default();
        for _ in 0..10 {
            h.record(0);
        }
        h.record(7);
        let s = h.snapshot();
        assert_eq!((s.quantile(0.5), s.quantile(0.99), s.max), (0, 7, 7));
    }
}
