//! Indirect and direct counters, sharded per data-plane worker.
//!
//! A `Counter` keeps one copy ("shard") of its cells per worker. Worker `w` only ever increments
//! shard `w`, so each shard has a single writer and an increment is a `Relaxed` load plus a
//! `Relaxed` store (no locked read-modify-write). Each shard's storage is a separate allocation
//! of 128-byte-aligned lines, so no two shards share a cache line (or an adjacent-line prefetch
//! pair) and workers never false-share. Readers (the control plane) sum all shards with
//! `Relaxed` loads: every shard value is a value its writer really stored, so a read is a sum of
//! recent per-shard values, exact once traffic stops.
//!
//! The same type serves direct counters: the index is then the table entry id.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterKind {
    /// Packets only; `bytes` stays 0.
    Packets,
    /// Bytes only; `packets` stays 0.
    Bytes,
    /// Packets and bytes.
    Both,
}

/// The value of one counter cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CounterData {
    /// Packet count.
    pub packets: u64,
    /// Byte count.
    pub bytes: u64,
}

/// Cells per line: each cell is a (packets, bytes) pair of `u64`.
const CELLS_PER_LINE: usize = 8;

/// 128 bytes, aligned to 128 so a line never shares a cache line (or the adjacent line the
/// spatial prefetcher pulls in) with another shard's allocation.
#[derive(Debug)]
#[repr(align(128))]
struct Line([AtomicU64; 2 * CELLS_PER_LINE]);

impl Line {
    fn new() -> Self {
        Self(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// An array of `size` counter cells with one shard per worker.
#[derive(Debug)]
pub struct Counter {
    shards: Box<[Box<[Line]>]>,
    size: usize,
    kind: CounterKind,
}

impl Counter {
    /// Creates `size` zeroed cells with `shards` per-worker copies (at least one is created).
    pub fn new(size: usize, kind: CounterKind, shards: usize) -> Self {
        let lines = size.div_ceil(CELLS_PER_LINE);
        let shards = (0..shards.max(1))
            .map(|_| (0..lines).map(|_| Line::new()).collect())
            .collect();
        Self { shards, size, kind }
    }

    /// Number of cells.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// What the cells count.
    #[inline]
    pub fn kind(&self) -> CounterKind {
        self.kind
    }

    /// Number of per-worker shards.
    #[inline]
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The (packets, bytes) atomics of cell `index` in `shard`.
    #[inline]
    fn cell(&self, shard: usize, index: usize) -> Option<(&AtomicU64, &AtomicU64)> {
        if index >= self.size {
            return None;
        }
        let line = self.shards.get(shard)?.get(index / CELLS_PER_LINE)?;
        let slot = (index % CELLS_PER_LINE) * 2;
        Some((&line.0[slot], &line.0[slot + 1]))
    }

    /// Counts one packet of `bytes` bytes into cell `index` of worker `shard`.
    ///
    /// Returns false (and counts nothing) if `shard` or `index` is out of range. The caller must
    /// guarantee that only one thread at a time uses a given `shard` (each worker uses its own
    /// index): the update is a plain load + store, not an atomic read-modify-write, so two
    /// concurrent writers on one shard could lose increments. Counts wrap at 2^64.
    #[inline]
    pub fn count(&self, shard: usize, index: usize, bytes: u32) -> bool {
        let Some((p, b)) = self.cell(shard, index) else {
            return false;
        };
        if self.kind != CounterKind::Bytes {
            p.store(p.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        }
        if self.kind != CounterKind::Packets {
            b.store(
                b.load(Ordering::Relaxed).wrapping_add(u64::from(bytes)),
                Ordering::Relaxed,
            );
        }
        true
    }

    /// The sum over all shards of cell `index`, or `None` if out of range.
    pub fn read(&self, index: usize) -> Option<CounterData> {
        if index >= self.size {
            return None;
        }
        let mut sum = CounterData::default();
        for shard in 0..self.shards.len() {
            let (p, b) = self.cell(shard, index)?;
            sum.packets = sum.packets.wrapping_add(p.load(Ordering::Relaxed));
            sum.bytes = sum.bytes.wrapping_add(b.load(Ordering::Relaxed));
        }
        Some(sum)
    }

    /// Control-plane write: cell `index` becomes `value` (stored in shard 0, other shards zeroed).
    /// Returns false if out of range.
    ///
    /// Benign race: a worker incrementing the same cell concurrently may have loaded its shard's
    /// old value before this store and write back old + n after it, undoing the write for that
    /// shard. Writes while traffic hits the cell are therefore best effort (the cell stays a sane
    /// count, but may not equal `value` plus the later increments); no memory is unsafe and
    /// nothing panics.
    pub fn write(&self, index: usize, value: CounterData) -> bool {
        if index >= self.size {
            return false;
        }
        for shard in 0..self.shards.len() {
            if let Some((p, b)) = self.cell(shard, index) {
                let (vp, vb) = if shard == 0 {
                    (value.packets, value.bytes)
                } else {
                    (0, 0)
                };
                p.store(vp, Ordering::Relaxed);
                b.store(vb, Ordering::Relaxed);
            }
        }
        true
    }

    /// Zeroes every cell of every shard (same benign race as [`Counter::write`]).
    pub fn reset_all(&self) {
        for line in self.shards.iter().flat_map(|s| s.iter()) {
            for a in &line.0 {
                a.store(0, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_bounds() {
        let c = Counter::new(10, CounterKind::Both, 2);
        assert_eq!((c.size(), c.kind(), c.shards()), (10, CounterKind::Both, 2));
        assert!(c.count(0, 9, 100));
        assert!(c.count(1, 9, 50));
        assert!(!c.count(2, 0, 1));
        assert!(!c.count(0, 10, 1));
        assert_eq!(
            c.read(9),
            Some(CounterData {
                packets: 2,
                bytes: 150
            })
        );
        assert_eq!(c.read(10), None);
        assert_eq!(c.read(0), Some(CounterData::default()));

        let p = Counter::new(1, CounterKind::Packets, 1);
        p.count(0, 0, 64);
        assert_eq!(
            p.read(0),
            Some(CounterData {
                packets: 1,
                bytes: 0
            })
        );
        let b = Counter::new(1, CounterKind::Bytes, 1);
        b.count(0, 0, 64);
        assert_eq!(
            b.read(0),
            Some(CounterData {
                packets: 0,
                bytes: 64
            })
        );

        let empty = Counter::new(0, CounterKind::Both, 0);
        assert_eq!(empty.shards(), 1);
        assert!(!empty.count(0, 0, 1));
    }

    #[test]
    fn write_and_reset() {
        let c = Counter::new(3, CounterKind::Both, 4);
        for shard in 0..4 {
            c.count(shard, 1, 10);
        }
        let v = CounterData {
            packets: 7,
            bytes: 700,
        };
        assert!(c.write(1, v));
        assert_eq!(c.read(1), Some(v));
        c.count(3, 1, 1);
        assert_eq!(
            c.read(1),
            Some(CounterData {
                packets: 8,
                bytes: 701
            })
        );
        assert!(!c.write(3, v));
        c.reset_all();
        assert_eq!(c.read(1), Some(CounterData::default()));
    }

    #[test]
    fn concurrent_shards_sum_exactly() {
        const WORKERS: usize = 4;
        const PACKETS: u64 = 100_000;
        let c = Counter::new(20, CounterKind::Both, WORKERS);
        std::thread::scope(|s| {
            for w in 0..WORKERS {
                let c = &c;
                s.spawn(move || {
                    for i in 0..PACKETS {
                        let idx = usize::try_from(i % 20).unwrap();
                        assert!(c.count(w, idx, u32::try_from(w + 1).unwrap()));
                    }
                });
            }
        });
        let total_bytes_per_packet: u64 = (1..=WORKERS as u64).sum();
        for idx in 0..20 {
            let d = c.read(idx).unwrap();
            assert_eq!(d.packets, WORKERS as u64 * PACKETS / 20);
            assert_eq!(d.bytes, total_bytes_per_packet * PACKETS / 20);
        }
    }

    #[test]
    fn shards_do_not_share_lines() {
        let c = Counter::new(1, CounterKind::Both, 2);
        let a = std::ptr::from_ref(c.cell(0, 0).unwrap().0) as usize;
        let b = std::ptr::from_ref(c.cell(1, 0).unwrap().0) as usize;
        assert_eq!(a % 128, 0);
        assert!(a.abs_diff(b) >= 128);
    }
}
