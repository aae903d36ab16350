//! A small, seedable, per-worker pseudo-random number generator.
//!
//! xoshiro256** (Blackman & Vigna) with its state expanded from a 64-bit seed by splitmix64, so
//! any seed, including 0, gives a usable non-zero state. It is not cryptographic: it backs the
//! v1model `random()` extern, the `Random` hash algorithm and sampling decisions, where speed and
//! reproducibility (a seed per worker gives replayable tests) matter more than unpredictability.
//!
//! Each data-plane worker owns one `Rng` and passes it by `&mut`, so it needs no atomics and
//! there is no contention between workers.

/// One step of splitmix64: advances `state` and returns a well-mixed output.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seedable xoshiro256** generator owned by one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// Creates a generator whose whole output sequence is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Self { s }
    }

    /// Returns the next 64 uniformly distributed bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform value in `lo..=hi`, like v1model `random(out, lo, hi)`.
    ///
    /// Unbiased (Lemire's multiply-and-reject). If `lo >= hi` the result is `lo`; the full range
    /// `0..=u64::MAX` is allowed.
    #[inline]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if lo >= hi {
            return lo;
        }
        let span = (hi - lo).wrapping_add(1);
        if span == 0 {
            return self.next_u64();
        }
        let mut m = u128::from(self.next_u64()) * u128::from(span);
        // `m as u64` is the low half of the product: truncation intended.
        if (m as u64) < span {
            let threshold = span.wrapping_neg() % span;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(span);
            }
        }
        lo + (m >> 64) as u64
    }

    /// True with probability `p_num / p_den`: always false if `p_num == 0` or `p_den == 0`,
    /// always true if `p_num >= p_den > 0`.
    #[inline]
    pub fn bernoulli(&mut self, p_num: u64, p_den: u64) -> bool {
        if p_num == 0 || p_den == 0 {
            return false;
        }
        if p_num >= p_den {
            return true;
        }
        self.range(0, p_den - 1) < p_num
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_for_a_seed() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let va: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
        // Seed 0 still yields a live generator.
        let mut z = Rng::new(0);
        assert!((0..4).map(|_| z.next_u64()).any(|v| v != 0));
    }

    #[test]
    fn range_bounds() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let v = r.range(10, 20);
            assert!((10..=20).contains(&v));
        }
        assert_eq!(r.range(7, 7), 7);
        assert_eq!(r.range(9, 3), 9);
        // Full range must not overflow.
        let _ = r.range(0, u64::MAX);
        let v = r.range(u64::MAX - 1, u64::MAX);
        assert!(v >= u64::MAX - 1);
        // Both ends are reachable.
        let mut seen = [false; 3];
        for _ in 0..1000 {
            seen[usize::try_from(r.range(0, 2)).unwrap()] = true;
        }
        assert_eq!(seen, [true; 3]);
    }

    #[test]
    fn rough_uniformity() {
        let mut r = Rng::new(7);
        let mut buckets = [0u32; 10];
        let n = 100_000;
        for _ in 0..n {
            buckets[usize::try_from(r.range(0, 9)).unwrap()] += 1;
        }
        for &b in &buckets {
            // Expected 10_000 each; 5 % tolerance is > 15 sigma.
            assert!((9_500..=10_500).contains(&b), "{buckets:?}");
        }
    }

    #[test]
    fn bernoulli_rate() {
        let mut r = Rng::new(3);
        let hits = (0..100_000).filter(|_| r.bernoulli(1, 4)).count();
        assert!((24_000..=26_000).contains(&hits), "{hits}");
        assert!(!r.bernoulli(0, 4));
        assert!(!r.bernoulli(3, 0));
        assert!(r.bernoulli(5, 4));
    }
}
