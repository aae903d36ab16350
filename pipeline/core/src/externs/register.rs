//! Register arrays: `size` cells of `bitwidth` bits, read and written in place by every worker
//! and by the control plane.
//!
//! Each cell is an `AtomicU64`. All accesses use `Relaxed` ordering: a register cell publishes
//! no other memory, so only per-cell atomicity matters, and a read-modify-write on one location
//! is atomic whatever its ordering. Each cell is therefore linearizable on its own; there is no
//! ordering between different cells (as on a hardware pipeline, where different packets'
//! accesses to different cells are not ordered either). Cells are densely packed; workers that
//! hammer neighbouring cells may false-share, which is accepted to keep large arrays compact.

use std::sync::atomic::{AtomicU64, Ordering};

/// A register array of `bitwidth`-bit cells.
#[derive(Debug)]
pub struct Register {
    cells: Box<[AtomicU64]>,
    bitwidth: u8,
    mask: u64,
}

impl Register {
    /// Creates `size` cells of `bitwidth` bits, all zero.
    ///
    /// # Panics
    /// If `bitwidth` is not in `1..=64` (the program loader validates widths before this).
    pub fn new(size: usize, bitwidth: u8) -> Self {
        assert!(
            (1..=64).contains(&bitwidth),
            "register bitwidth {bitwidth} not in 1..=64"
        );
        let mask = if bitwidth == 64 {
            u64::MAX
        } else {
            (1u64 << bitwidth) - 1
        };
        Self {
            cells: (0..size).map(|_| AtomicU64::new(0)).collect(),
            bitwidth,
            mask,
        }
    }

    /// Number of cells.
    #[inline]
    pub fn size(&self) -> usize {
        self.cells.len()
    }

    /// Width of each cell in bits.
    #[inline]
    pub fn bitwidth(&self) -> u8 {
        self.bitwidth
    }

    /// The value of cell `index`, or `None` if out of range.
    #[inline]
    pub fn read(&self, index: usize) -> Option<u64> {
        self.cells.get(index).map(|c| c.load(Ordering::Relaxed))
    }

    /// Stores `value` truncated to the bitwidth into cell `index`; false if out of range.
    #[inline]
    pub fn write(&self, index: usize, value: u64) -> bool {
        match self.cells.get(index) {
            Some(c) => {
                c.store(value & self.mask, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Atomically replaces cell `index` by `f(old)` (truncated to the bitwidth) and returns
    /// `(old, new)`, or `None` if out of range.
    ///
    /// Implemented as a compare-exchange loop, so concurrent workers lose no update; `f` may run
    /// more than once under contention and should be a pure function of its argument.
    #[inline]
    pub fn rmw(&self, index: usize, mut f: impl FnMut(u64) -> u64) -> Option<(u64, u64)> {
        let cell = self.cells.get(index)?;
        let mut old = cell.load(Ordering::Relaxed);
        loop {
            let new = f(old) & self.mask;
            match cell.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some((old, new)),
                Err(actual) => old = actual,
            }
        }
    }

    /// Sets every cell to zero (not atomic as a whole: concurrent writers may interleave).
    pub fn reset(&self) {
        for c in &*self.cells {
            c.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_write_and_bounds() {
        let r = Register::new(4, 32);
        assert_eq!(r.size(), 4);
        assert_eq!(r.bitwidth(), 32);
        assert!(r.write(3, 17));
        assert_eq!(r.read(3), Some(17));
        assert!(!r.write(4, 1));
        assert_eq!(r.read(4), None);
        assert_eq!(r.rmw(4, |v| v + 1), None);
        r.reset();
        assert_eq!(r.read(3), Some(0));
    }

    #[test]
    fn masks_at_bitwidth() {
        let r = Register::new(2, 8);
        r.write(0, 0x1ff);
        assert_eq!(r.read(0), Some(0xff));
        assert_eq!(r.rmw(0, |v| v + 1), Some((0xff, 0)));
        let one = Register::new(1, 1);
        one.write(0, 3);
        assert_eq!(one.read(0), Some(1));
        let full = Register::new(1, 64);
        full.write(0, u64::MAX);
        assert_eq!(full.read(0), Some(u64::MAX));
        assert_eq!(full.rmw(0, |v| v.wrapping_add(2)), Some((u64::MAX, 1)));
    }

    #[test]
    #[should_panic(expected = "bitwidth")]
    fn zero_bitwidth_rejected() {
        let _ = Register::new(1, 0);
    }

    #[test]
    fn concurrent_rmw_loses_no_update() {
        const THREADS: u64 = 4;
        const PER_THREAD: u64 = 100_000;
        let r = Register::new(2, 64);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for i in 0..PER_THREAD {
                        r.rmw(0, |v| v + 1);
                        r.rmw(1, |v| v + i % 3);
                    }
                });
            }
        });
        assert_eq!(r.read(0), Some(THREADS * PER_THREAD));
        let per: u64 = (0..PER_THREAD).map(|i| i % 3).sum();
        assert_eq!(r.read(1), Some(THREADS * per));
    }
}
