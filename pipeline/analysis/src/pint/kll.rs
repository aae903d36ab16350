//! A small KLL quantile sketch (Karnin, Lang, Liberty, FOCS 2016), the sketch PINT §6.2 uses
//! ("PINT_S", 100 digests), with a **seeded** coin so that the collector's output is a function
//! of its input (docs/pint.md says why this is not the `datasketches` crate).
//!
//! Levels h = 0, 1, …; an item at level h stands for 2^h samples. Level h of H holds up to
//! max(2, ⌈k·c^(H−1−h)⌉) items, c = 2/3. When the sketch holds more items than the levels'
//! capacities together, the lowest level at or over its capacity is *compacted*: sorted, and
//! every other item (odd or even positions, by a fair coin) moves up a level; an odd item out
//! stays. The total weight is always the number of samples; a rank query errs by O(1/k) of it
//! with high probability.
//!
//! The levels' capacities grow by at least 2 items per level, i.e. with log n. An optional hard
//! cap ([`Kll::with_cap`]) keeps the sketch at a fixed size whatever n ("keeps 100 identifiers
//! regardless of the number of samples", PINT §6.2): while the sketch holds more than the cap,
//! the lowest level with two or more items is compacted as well.

use super::hash::mix64;

/// The capacity ratio between adjacent levels.
const C: f64 = 2.0 / 3.0;

/// A KLL sketch of `f64` samples.
#[derive(Clone, Debug)]
pub struct Kll {
    k: usize,
    levels: Vec<Vec<f64>>,
    n: u64,
    rng: u64,
    max_retained: usize,
    cap: usize,
}

impl Kll {
    /// A sketch with accuracy parameter `k` (≥ 2) whose compaction coins come from `seed`.
    pub fn new(k: usize, seed: u64) -> Kll {
        Kll {
            k: k.max(2),
            levels: vec![Vec::new()],
            n: 0,
            rng: mix64(seed ^ 0x4b4c_4c53_4b45_5443),
            max_retained: 0,
            cap: usize::MAX,
        }
    }

    /// The same, holding at most `cap` items (≥ 2) at any time.
    pub fn with_cap(k: usize, cap: usize, seed: u64) -> Kll {
        Kll {
            cap: cap.max(2),
            ..Kll::new(k, seed)
        }
    }

    /// The samples seen.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The items held now.
    pub fn retained(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// The most items held at any time.
    pub fn max_retained(&self) -> usize {
        self.max_retained
    }

    fn capacity(&self, h: usize) -> usize {
        let depth = (self.levels.len() - 1 - h) as i32;
        ((self.k as f64 * C.powi(depth)).ceil() as usize).max(2)
    }

    fn total_capacity(&self) -> usize {
        (0..self.levels.len()).map(|h| self.capacity(h)).sum()
    }

    fn coin(&mut self) -> bool {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.rng) & 1 == 1
    }

    /// Adds a sample (NaN is ignored).
    pub fn update(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.levels[0].push(v);
        self.n += 1;
        if self.retained() > self.total_capacity() {
            self.compact(false);
        }
        while self.retained() > self.cap {
            if !self.compact(true) {
                break;
            }
        }
        self.max_retained = self.max_retained.max(self.retained());
    }

    /// Compacts the lowest level at its capacity or, if `any`, with two or more items; false
    /// if there is none.
    fn compact(&mut self, any: bool) -> bool {
        let full = (0..self.levels.len()).find(|&h| self.levels[h].len() >= self.capacity(h));
        let Some(h) = full.or_else(|| {
            any.then(|| (0..self.levels.len()).find(|&h| self.levels[h].len() >= 2))
                .flatten()
        }) else {
            return false;
        };
        if h + 1 == self.levels.len() {
            self.levels.push(Vec::new());
        }
        let mut items = std::mem::take(&mut self.levels[h]);
        items.sort_by(f64::total_cmp);
        if items.len() % 2 == 1 {
            let odd = items.remove(0);
            self.levels[h].push(odd);
        }
        let offset = usize::from(self.coin());
        let up: Vec<f64> = items.iter().skip(offset).step_by(2).copied().collect();
        self.levels[h + 1].extend(up);
        true
    }

    /// The q-quantile (0 ≤ q ≤ 1) of the samples: the smallest retained item whose weighted rank
    /// reaches q·n; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let mut items: Vec<(f64, u64)> = self
            .levels
            .iter()
            .enumerate()
            .flat_map(|(h, l)| l.iter().map(move |&v| (v, 1u64 << h)))
            .collect();
        if items.is_empty() {
            return None;
        }
        items.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: u64 = items.iter().map(|i| i.1).sum();
        let target = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
        let mut cum = 0;
        for (v, w) in &items {
            cum += w;
            if cum >= target {
                return Some(*v);
            }
        }
        items.last().map(|i| i.0)
    }
}

/// The exact q-quantile of `sorted` (nearest rank: the ⌈q·n⌉-th smallest); `None` when empty.
pub fn exact_quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: u64) -> f64 {
        // Log-uniform-ish, deterministic.
        (mix64(i) >> 11) as f64 / (1u64 << 53) as f64 * 1000.0
    }

    #[test]
    fn small_streams_are_exact() {
        let mut s = Kll::new(200, 1);
        let mut v: Vec<f64> = (0..150).map(sample).collect();
        v.iter().for_each(|&x| s.update(x));
        v.sort_by(f64::total_cmp);
        for q in [0.0, 0.1, 0.5, 0.99, 1.0] {
            assert_eq!(s.quantile(q), exact_quantile(&v, q));
        }
        assert_eq!(s.n(), 150);
    }

    /// The weight is conserved and the rank error stays O(1/k) while the sketch holds about
    /// 3k items.
    #[test]
    fn rank_error_is_small_and_space_bounded() {
        for seed in 0..5 {
            let mut s = Kll::new(34, seed);
            let n = 100_000u64;
            let mut v: Vec<f64> = (0..n).map(|i| sample(i ^ (seed << 40))).collect();
            v.iter().for_each(|&x| s.update(x));
            v.sort_by(f64::total_cmp);
            assert!(s.max_retained() <= 130, "retained {}", s.max_retained());
            for q in [0.1, 0.5, 0.9, 0.99] {
                let est = s.quantile(q).unwrap();
                let rank = v.partition_point(|&x| x < est) as f64 / n as f64;
                assert!((rank - q).abs() < 0.06, "seed {seed} q {q}: rank {rank}");
            }
        }
    }

    /// With a cap the sketch never holds more, however many samples, and stays accurate.
    #[test]
    fn capped_sketch_stays_within_its_cap() {
        let mut s = Kll::with_cap(34, 100, 9);
        let n = 300_000u64;
        let mut v: Vec<f64> = (0..n).map(sample).collect();
        v.iter().for_each(|&x| s.update(x));
        assert!(s.max_retained() <= 100, "{}", s.max_retained());
        assert!(s.max_retained() >= 90, "{}", s.max_retained());
        v.sort_by(f64::total_cmp);
        for q in [0.1, 0.5, 0.9] {
            let est = s.quantile(q).unwrap();
            let rank = v.partition_point(|&x| x < est) as f64 / n as f64;
            assert!((rank - q).abs() < 0.06, "q {q}: rank {rank}");
        }
    }

    #[test]
    fn deterministic_per_seed() {
        let run = |seed| {
            let mut s = Kll::new(20, seed);
            (0..5000).for_each(|i| s.update(sample(i)));
            s.quantile(0.5)
        };
        assert_eq!(run(3), run(3));
        assert_eq!(exact_quantile(&[], 0.5), None);
        assert_eq!(Kll::new(8, 0).quantile(0.5), None);
    }
}
