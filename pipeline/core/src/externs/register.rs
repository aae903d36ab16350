//! Register arrays: `size` cells of `bitwidth` bits, read and written in place by every worker
//! and by the control plane.
//!
//! A cell of up to 64 bits is an `AtomicU64`. All accesses use `Relaxed` ordering: a register
//! cell publishes no other memory, so only per-cell atomicity matters, and a read-modify-write on
//! one location is atomic whatever its ordering. Each cell is therefore linearizable on its own;
//! there is no ordering between different cells (as on a hardware pipeline, where different
//! packets' accesses to different cells are not ordered either). Cells are densely packed;
//! workers that hammer neighbouring cells may false-share, which is accepted to keep large arrays
//! compact.
//!
//! A cell of 65 to 128 bits (a P4 program's, loaded from its BMv2 JSON) is a `u128` behind a lock
//! of its own, so that a read never sees half of a write. The hard-wired programs' registers are
//! all narrow; the 64-bit accessors see a wide cell's low 64 bits.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The widest register cell.
pub const MAX_REGISTER_BITS: u8 = 128;

/// A register array of `bitwidth`-bit cells.
#[derive(Debug)]
pub struct Register {
    cells: Cells,
    bitwidth: u8,
    mask: u128,
}

#[derive(Debug)]
enum Cells {
    Narrow(Box<[AtomicU64]>),
    Wide(Box<[Mutex<u128>]>),
}

impl Register {
    /// Creates `size` cells of `bitwidth` bits, all zero.
    ///
    /// # Panics
    /// If `bitwidth` is not in `1..=128` (the program loader validates widths before this).
    pub fn new(size: usize, bitwidth: u8) -> Self {
        assert!(
            (1..=MAX_REGISTER_BITS).contains(&bitwidth),
            "register bitwidth {bitwidth} not in 1..={MAX_REGISTER_BITS}"
        );
        let mask = if bitwidth == 128 {
            u128::MAX
        } else {
            (1u128 << bitwidth) - 1
        };
        let cells = if bitwidth <= 64 {
            Cells::Narrow((0..size).map(|_| AtomicU64::new(0)).collect())
        } else {
            Cells::Wide((0..size).map(|_| Mutex::new(0)).collect())
        };
        Self {
            cells,
            bitwidth,
            mask,
        }
    }

    /// Number of cells.
    #[inline]
    pub fn size(&self) -> usize {
        match &self.cells {
            Cells::Narrow(c) => c.len(),
            Cells::Wide(c) => c.len(),
        }
    }

    /// Width of each cell in bits.
    #[inline]
    pub fn bitwidth(&self) -> u8 {
        self.bitwidth
    }

    /// The value of cell `index` (a wide cell's low 64 bits), or `None` if out of range.
    #[inline]
    pub fn read(&self, index: usize) -> Option<u64> {
        match &self.cells {
            Cells::Narrow(c) => c.get(index).map(|c| c.load(Ordering::Relaxed)),
            Cells::Wide(c) => c.get(index).map(|c| *c.lock() as u64),
        }
    }

    /// The value of cell `index`, or `None` if out of range.
    #[inline]
    pub fn read_wide(&self, index: usize) -> Option<u128> {
        match &self.cells {
            Cells::Narrow(c) => c.get(index).map(|c| u128::from(c.load(Ordering::Relaxed))),
            Cells::Wide(c) => c.get(index).map(|c| *c.lock()),
        }
    }

    /// Stores `value` truncated to the bitwidth into cell `index`; false if out of range.
    #[inline]
    pub fn write(&self, index: usize, value: u64) -> bool {
        match &self.cells {
            Cells::Narrow(c) => c
                .get(index)
                .map(|c| c.store(value & self.mask as u64, Ordering::Relaxed))
                .is_some(),
            Cells::Wide(_) => self.write_wide(index, u128::from(value)),
        }
    }

    /// Stores `value` truncated to the bitwidth into cell `index`; false if out of range.
    #[inline]
    pub fn write_wide(&self, index: usize, value: u128) -> bool {
        let value = value & self.mask;
        match &self.cells {
            Cells::Narrow(c) => c
                .get(index)
                .map(|c| c.store(value as u64, Ordering::Relaxed))
                .is_some(),
            Cells::Wide(c) => c.get(index).map(|c| *c.lock() = value).is_some(),
        }
    }

    /// Atomically replaces cell `index` by `f(old)` (truncated to the bitwidth) and returns
    /// `(old, new)`, or `None` if out of range. A wide cell's `f` sees and replaces its low 64
    /// bits.
    ///
    /// Implemented as a compare-exchange loop, so concurrent workers lose no update; `f` may run
    /// more than once under contention and should be a pure function of its argument.
    #[inline]
    pub fn rmw(&self, index: usize, mut f: impl FnMut(u64) -> u64) -> Option<(u64, u64)> {
        match &self.cells {
            Cells::Narrow(c) => {
                let cell = c.get(index)?;
                let mask = self.mask as u64;
                let mut old = cell.load(Ordering::Relaxed);
                loop {
                    let new = f(old) & mask;
                    match cell.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed)
                    {
                        Ok(_) => return Some((old, new)),
                        Err(actual) => old = actual,
                    }
                }
            }
            Cells::Wide(c) => {
                let mut cell = c.get(index)?.lock();
                let old = *cell as u64;
                let new = f(old);
                *cell = ((*cell & !u128::from(u64::MAX)) | u128::from(new)) & self.mask;
                Some((old, *cell as u64))
            }
        }
    }

    /// Sets every cell to zero (not atomic as a whole: concurrent writers may interleave).
    pub fn reset(&self) {
        match &self.cells {
            Cells::Narrow(c) => c.iter().for_each(|c| c.store(0, Ordering::Relaxed)),
            Cells::Wide(c) => c.iter().for_each(|c| *c.lock() = 0),
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
    fn wide_cells_keep_up_to_128_bits() {
        let r = Register::new(3, 100);
        assert_eq!(r.bitwidth(), 100);
        assert_eq!(r.size(), 3);
        assert!(r.write_wide(1, u128::MAX));
        assert_eq!(r.read_wide(1), Some((1u128 << 100) - 1));
        // The 64-bit accessors see and replace the low 64 bits.
        assert_eq!(r.read(1), Some(u64::MAX));
        assert_eq!(r.rmw(1, |v| v.wrapping_add(1)), Some((u64::MAX, 0)));
        assert_eq!(
            r.read_wide(1),
            Some(((1u128 << 100) - 1) & !u128::from(u64::MAX))
        );
        assert!(!r.write_wide(3, 1));
        assert_eq!(r.read_wide(3), None);
        let full = Register::new(1, 128);
        full.write_wide(0, u128::MAX);
        assert_eq!(full.read_wide(0), Some(u128::MAX));
        full.reset();
        assert_eq!(full.read_wide(0), Some(0));
        // A narrow register's wide accessors are its own.
        let narrow = Register::new(1, 16);
        narrow.write_wide(0, 0x1_2345);
        assert_eq!(narrow.read_wide(0), Some(0x2345));
    }

    #[test]
    #[should_panic(expected = "bitwidth")]
    fn over_128_bits_rejected() {
        let _ = Register::new(1, 129);
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
