//! Tuple-space search for tables with ternary/range/optional fields (or several LPM fields).
//!
//! Every field of an entry becomes a (value, mask): exact = all-ones mask, LPM = prefix mask,
//! optional = all-ones or 0, ternary as given; range fields get mask 0 and are checked on the
//! candidates. Entries are grouped by their mask vector (a *tuple*); per tuple a hash table
//! maps the masked value to the candidates, sorted by descending priority (so several entries
//! with the same masked value, e.g. differing only in ranges or priority, are resolved by a
//! short scan). Tuples are visited in order of their highest priority, and the search stops
//! as soon as the best match so far is at least as good as every remaining tuple.
//!
//! A lookup packs the non-range fields of the key once into a few `u64` words (the
//! [`Layout`]); each tuple keeps the mask of every word it looks at, so probing a tuple is a
//! few ANDs and multiplies to get the hash, then a check of the tuple's blocked Bloom filter
//! (two bits of one `u64`, all tuples' filters in one contiguous array) and only if that
//! passes the hash table probe. A miss thus costs a few nanoseconds per tuple.
//!
//! Filters are sized at about 16 bits per distinct masked value and rebuilt (from the hashes
//! kept in the tuple's table, O(keys of that tuple)) when the tuple outgrows its filter or
//! when deletions left too many stale bits. Tuples with more than [`FILTER_MAX_KEYS`] keys
//! use a shared always-pass filter, which bounds every rebuild and keeps inserts incremental.
//! Lookups never allocate unless the packed key exceeds [`INLINE_WORDS`] words.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use foldhash::fast::FixedState;
use hashbrown::{HashMap, HashTable};

use super::{EntryId, FieldMatch, KeyField, MatchKind, ones, prefix_mask};

#[derive(Clone, Debug)]
struct Cand {
    prio: u32,
    id: EntryId,
    /// Inclusive bounds for each range field of the table.
    ranges: Box<[(u128, u128)]>,
}

/// The candidates for one masked value, sorted by descending priority then id. The single
/// candidate case (by far the most common) is stored inline.
#[derive(Clone, Debug)]
enum Bucket {
    One(Cand),
    Many(Vec<Cand>),
}

impl Bucket {
    #[inline(always)]
    fn as_slice(&self) -> &[Cand] {
        match self {
            Bucket::One(c) => std::slice::from_ref(c),
            Bucket::Many(v) => v,
        }
    }

    fn insert(&mut self, c: Cand) {
        let mut v = match std::mem::replace(self, Bucket::Many(Vec::new())) {
            Bucket::One(x) => vec![x],
            Bucket::Many(v) => v,
        };
        let at = v.partition_point(|x| (Reverse(x.prio), x.id) < (Reverse(c.prio), c.id));
        v.insert(at, c);
        *self = Bucket::Many(v);
    }

    /// Removes candidate `id`; true if the bucket is now empty.
    fn remove(&mut self, id: EntryId) -> bool {
        match self {
            Bucket::One(c) => {
                debug_assert_eq!(c.id, id);
                true
            }
            Bucket::Many(v) => {
                let at = v
                    .iter()
                    .position(|c| c.id == id)
                    .expect("candidate of a live entry");
                v.remove(at);
                if let [_] = &v[..] {
                    *self = Bucket::One(v.pop().expect("one left"));
                }
                false
            }
        }
    }
}

/// Packed keys up to this many words live on the stack during a lookup.
const INLINE_WORDS: usize = 16;
/// Filters hold at most this many keys (at most 16 KiB); larger tuples always pass.
const FILTER_MAX_KEYS: usize = 4096;
/// Smallest filter: one cache line.
const FILTER_MIN_WORDS: usize = 8;
/// Keys per filter word at the maximum load (16 bits per key).
const KEYS_PER_WORD: usize = 4;

/// One piece (up to 64 bits) of a field inside the packed key.
#[derive(Clone, Copy, Debug)]
struct Piece {
    pos: u16,
    /// Shift applied to the field value before truncating to 64 bits (0 or 64).
    src: u8,
    /// Bit offset inside the word.
    dst: u8,
    word: u16,
    mask: u64,
}

/// Where every non-range field lives in the packed key: fields of up to 64 bits go whole
/// into the first word with room (first fit), wider fields are split in a low 64-bit piece
/// and a high piece.
#[derive(Clone, Debug)]
struct Layout {
    pieces: Box<[Piece]>,
    words: usize,
}

impl Layout {
    fn new(fields: &[KeyField]) -> Self {
        let mut used: Vec<u32> = Vec::new();
        let mut pieces = Vec::new();
        for (pos, f) in fields.iter().enumerate() {
            if f.kind == MatchKind::Range {
                continue;
            }
            let w = u32::from(f.bitwidth);
            let parts: &[(u8, u32)] = if w > 64 {
                &[(0, 64), (64, w - 64)]
            } else {
                &[(0, w)]
            };
            for &(src, width) in parts {
                let word = match used.iter().position(|&u| u + width <= 64) {
                    Some(i) => i,
                    None => {
                        used.push(0);
                        used.len() - 1
                    }
                };
                pieces.push(Piece {
                    pos: pos as u16,
                    src,
                    dst: used[word] as u8,
                    word: word as u16,
                    mask: if width == 64 {
                        u64::MAX
                    } else {
                        (1 << width) - 1
                    },
                });
                used[word] += width;
            }
        }
        Self {
            pieces: pieces.into(),
            words: used.len(),
        }
    }

    /// Packs `f(position)` (one value per field) into `out` (`self.words` long, zeroed).
    #[inline(always)]
    fn pack(&self, f: impl Fn(usize) -> u128, out: &mut [u64]) {
        for p in &*self.pieces {
            let v = f(p.pos as usize);
            // `src` is 0 or 64: pick the half instead of a variable 128-bit shift.
            let half = if p.src == 0 {
                v as u64
            } else {
                (v >> 64) as u64
            };
            out[p.word as usize] |= (half & p.mask) << p.dst;
        }
    }
}

#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Per-word seeds (hex digits of pi).
const SEEDS: [u64; 8] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
    0xbe54_66cf_34e9_0c6c,
    0xc0ac_29b7_c97c_50dd,
    0x3f84_d5b5_b547_0917,
];

/// Hash of a packed key under a tuple's word masks (`m` and `key` equally long): one
/// 64x64->128 folded multiply per pair of words, so a lookup of a 3-word key costs two
/// independent multiplies per tuple.
#[inline(always)]
fn hash_masked(m: &[u64], key: &[u64]) -> u64 {
    let mut h = 0u64;
    let mut i = 0;
    while i + 1 < m.len() {
        let a = (key[i] & m[i]) ^ SEEDS[i % 8];
        let b = (key[i + 1] & m[i + 1]) ^ SEEDS[(i + 1) % 8];
        h ^= fold_mul(a, b).rotate_left(i as u32);
        i += 2;
    }
    if i < m.len() {
        h ^= fold_mul((key[i] & m[i]) ^ SEEDS[i % 8], SEEDS[(i + 1) % 8]);
    }
    h
}

/// The filter word index and the two bits a hash sets in it.
#[inline(always)]
fn filter_pos(h: u64, wmask: u32) -> (usize, u64) {
    let bits = (1u64 << (h & 63)) | (1u64 << ((h >> 6) & 63));
    (((h >> 24) as u32 & wmask) as usize, bits)
}

/// The part of a tuple a lookup reads first, kept in one array in lookup order.
#[derive(Clone, Copy, Debug)]
struct Probe {
    max: u32,
    foff: u32,
    fmask: u32,
}

#[derive(Clone, Debug)]
struct Tuple {
    /// Highest priority in the tuple.
    max: u32,
    /// Offset of the tuple's filter in [`TernaryIndex::filters`] (0 = the always-pass word).
    foff: u32,
    /// Filter length in words minus one (a power of two minus one).
    fmask: u32,
    /// The tuple's mask of each packed key word.
    wm: Box<[u64]>,
    /// Masked key words of each slot, `wm.len()` per slot.
    keys: Vec<u64>,
    /// Candidates of each slot (`None`: free slot).
    buckets: Vec<Option<Bucket>>,
    free_slots: Vec<u32>,
    /// (hash, slot) per distinct masked value.
    table: HashTable<(u64, u32)>,
    /// Creation order, the tie-break between tuples of equal `max` (deterministic).
    seq: u64,
    mask: Box<[u128]>,
    /// Priority -> number of entries, to keep the maximum up to date on removal.
    prios: BTreeMap<u32, u32>,
    /// Keys removed since the filter was last built (their bits are still set).
    stale: usize,
}

impl Tuple {
    #[inline(always)]
    fn find(&self, h: u64, key: &[u64]) -> Option<u32> {
        let n = self.wm.len();
        self.table
            .find(h, |&(_, s)| {
                let k = &self.keys[s as usize * n..][..n];
                k.iter()
                    .zip(&*self.wm)
                    .zip(key)
                    .all(|((&x, &m), &v)| x == v & m)
            })
            .map(|&(_, s)| s)
    }
}

#[derive(Clone, Debug)]
pub(crate) struct TernaryIndex {
    widths: Box<[u8]>,
    layout: Layout,
    range_pos: Box<[u16]>,
    /// Sorted by descending `max`, then `seq`: the lookup order.
    tuples: Vec<Tuple>,
    /// Mask vector -> position in `tuples`.
    by_mask: HashMap<Box<[u128]>, u32, FixedState>,
    next_seq: u64,
    /// All tuples' Bloom filters; word 0 is all ones (the always-pass filter).
    filters: Vec<u64>,
    /// Words of `filters` no tuple uses any more.
    garbage: usize,
    /// Copy of each tuple's lookup data, in lookup order.
    probes: Vec<Probe>,
    /// Each tuple's `wm`, in lookup order (`layout.words` per tuple).
    pmasks: Vec<u64>,
    /// `probes`/`pmasks` must be rebuilt.
    dirty: bool,
}

struct Norm {
    value: Vec<u128>,
    mask: Vec<u128>,
    ranges: Box<[(u128, u128)]>,
}

impl TernaryIndex {
    pub(crate) fn new(fields: &[KeyField]) -> Self {
        Self {
            widths: fields.iter().map(|f| f.bitwidth).collect(),
            layout: Layout::new(fields),
            range_pos: fields
                .iter()
                .enumerate()
                .filter(|(_, f)| f.kind == MatchKind::Range)
                .map(|(i, _)| i as u16)
                .collect(),
            tuples: Vec::new(),
            by_mask: HashMap::default(),
            next_seq: 0,
            filters: vec![u64::MAX],
            garbage: 0,
            probes: Vec::new(),
            pmasks: Vec::new(),
            dirty: false,
        }
    }

    fn norm(&self, key: &[FieldMatch]) -> Norm {
        let mut value = Vec::with_capacity(key.len());
        let mut mask = Vec::with_capacity(key.len());
        let mut ranges = Vec::with_capacity(self.range_pos.len());
        for (m, &w) in key.iter().zip(&*self.widths) {
            let (v, k) = match *m {
                FieldMatch::Exact(v) | FieldMatch::Optional(Some(v)) => (v, ones(w)),
                FieldMatch::Optional(None) => (0, 0),
                FieldMatch::Lpm { value, prefix_len } => (value, prefix_mask(w, prefix_len)),
                FieldMatch::Ternary { value, mask } => (value, mask),
                FieldMatch::Range { low, high } => {
                    ranges.push((low, high));
                    (0, 0)
                }
            };
            value.push(v);
            mask.push(k);
        }
        Norm {
            value,
            mask,
            ranges: ranges.into(),
        }
    }

    fn pack_vec(&self, vals: &[u128]) -> Vec<u64> {
        let mut out = vec![0; self.layout.words];
        self.layout.pack(|p| vals[p], &mut out);
        out
    }

    /// Restores the lookup order after a tuple's `max` changed or a tuple was added or
    /// removed. Costs O(tuples), independent of the number of entries.
    fn reorder(&mut self) {
        self.dirty = true;
        self.tuples.sort_by_key(|t| (Reverse(t.max), t.seq));
        for (i, t) in self.tuples.iter().enumerate() {
            *self.by_mask.get_mut(&t.mask).expect("tuple registered") = i as u32;
        }
    }

    /// Releases the filter of tuple `ti` (it becomes garbage).
    fn drop_filter(&mut self, ti: usize) {
        self.dirty = true;
        let t = &mut self.tuples[ti];
        if t.foff != 0 {
            self.garbage += t.fmask as usize + 1;
        }
        t.foff = 0;
        t.fmask = 0;
    }

    /// Rebuilds tuple `ti`'s filter sized for its current keys (or the always-pass filter if
    /// it has too many). O(keys of the tuple) plus, rarely, compacting the filter array.
    fn rebuild_filter(&mut self, ti: usize) {
        self.drop_filter(ti);
        let n = self.tuples[ti].table.len();
        self.tuples[ti].stale = 0;
        if n > FILTER_MAX_KEYS {
            return;
        }
        if self.garbage > 1024 && self.garbage * 2 > self.filters.len() {
            self.compact_filters();
        }
        let words = (n.max(1) * 2)
            .div_ceil(KEYS_PER_WORD)
            .next_power_of_two()
            .max(FILTER_MIN_WORDS);
        let off = self.filters.len();
        self.filters.resize(off + words, 0);
        let t = &mut self.tuples[ti];
        t.foff = off as u32;
        t.fmask = (words - 1) as u32;
        for &(h, _) in t.table.iter() {
            let (w, bits) = filter_pos(h, t.fmask);
            self.filters[off + w] |= bits;
        }
    }

    /// Rebuilds `probes` and `pmasks` if needed. O(tuples x words).
    fn sync(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.probes.clear();
        self.pmasks.clear();
        for t in &self.tuples {
            self.probes.push(Probe {
                max: t.max,
                foff: t.foff,
                fmask: t.fmask,
            });
            self.pmasks.extend_from_slice(&t.wm);
        }
    }

    /// Copies the live filters into a fresh array. O(total filter size).
    fn compact_filters(&mut self) {
        let mut f = Vec::with_capacity(self.filters.len() - self.garbage);
        f.push(u64::MAX);
        for t in &mut self.tuples {
            if t.foff != 0 {
                let off = t.foff as usize;
                let new = f.len();
                f.extend_from_slice(&self.filters[off..off + t.fmask as usize + 1]);
                t.foff = new as u32;
            }
        }
        self.filters = f;
        self.garbage = 0;
        self.dirty = true;
    }

    pub(crate) fn insert(&mut self, key: &[FieldMatch], prio: u32, id: EntryId) {
        let n = self.norm(key);
        let ti = match self.by_mask.get(&*n.mask) {
            Some(&ti) => ti as usize,
            None => {
                let wm: Box<[u64]> = self.pack_vec(&n.mask).into();
                self.tuples.push(Tuple {
                    max: 0,
                    foff: 0,
                    fmask: 0,
                    wm,
                    keys: Vec::new(),
                    buckets: Vec::new(),
                    free_slots: Vec::new(),
                    table: HashTable::new(),
                    seq: self.next_seq,
                    mask: n.mask.clone().into(),
                    prios: BTreeMap::new(),
                    stale: 0,
                });
                self.next_seq += 1;
                self.by_mask
                    .insert(n.mask.clone().into(), (self.tuples.len() - 1) as u32);
                let ti = self.tuples.len() - 1;
                self.rebuild_filter(ti);
                ti
            }
        };
        let pk = self.pack_vec(&n.value);
        let cand = Cand {
            prio,
            id,
            ranges: n.ranges,
        };
        let t = &mut self.tuples[ti];
        let h = hash_masked(&t.wm, &pk);
        match t.find(h, &pk) {
            Some(s) => t.buckets[s as usize]
                .as_mut()
                .expect("live slot")
                .insert(cand),
            None => {
                let s = match t.free_slots.pop() {
                    Some(s) => {
                        let nw = t.wm.len();
                        for (j, (&m, &v)) in t.wm.iter().zip(&pk).enumerate() {
                            t.keys[s as usize * nw + j] = v & m;
                        }
                        t.buckets[s as usize] = Some(Bucket::One(cand));
                        s
                    }
                    None => {
                        t.keys.extend(t.wm.iter().zip(&pk).map(|(&m, &v)| v & m));
                        t.buckets.push(Some(Bucket::One(cand)));
                        (t.buckets.len() - 1) as u32
                    }
                };
                t.table.insert_unique(h, (h, s), |&(h, _)| h);
                let keys = t.table.len();
                if t.foff != 0 && keys <= (t.fmask as usize + 1) * KEYS_PER_WORD {
                    let (w, bits) = filter_pos(h, t.fmask);
                    self.filters[t.foff as usize + w] |= bits;
                } else if keys <= FILTER_MAX_KEYS {
                    self.rebuild_filter(ti);
                } else if t.foff != 0 {
                    self.drop_filter(ti);
                }
            }
        }
        let t = &mut self.tuples[ti];
        *t.prios.entry(prio).or_insert(0) += 1;
        if prio > t.max {
            t.max = prio;
            self.reorder();
        }
        self.sync();
    }

    pub(crate) fn remove(&mut self, key: &[FieldMatch], prio: u32, id: EntryId) {
        let n = self.norm(key);
        let ti = *self.by_mask.get(&*n.mask).expect("tuple of a live entry") as usize;
        let pk = self.pack_vec(&n.value);
        let t = &mut self.tuples[ti];
        let h = hash_masked(&t.wm, &pk);
        let s = t.find(h, &pk).expect("bucket of a live entry");
        let bucket = t.buckets[s as usize].as_mut().expect("live slot");
        if bucket.remove(id) {
            t.buckets[s as usize] = None;
            t.free_slots.push(s);
            match t.table.find_entry(h, |&(_, x)| x == s) {
                Ok(e) => {
                    e.remove();
                }
                Err(_) => unreachable!("slot in the table"),
            }
            t.stale += 1;
            let keys = t.table.len();
            // Too many stale bits, or a formerly huge tuple is small enough again.
            let stale = t.foff != 0 && t.stale > keys.max(FILTER_MIN_WORDS * KEYS_PER_WORD);
            if stale || (t.foff == 0 && keys <= FILTER_MAX_KEYS / 2) {
                self.rebuild_filter(ti);
            }
        }
        let t = &mut self.tuples[ti];
        let c = t.prios.get_mut(&prio).expect("priority count");
        *c -= 1;
        if *c == 0 {
            t.prios.remove(&prio);
        }
        match t.prios.last_key_value() {
            None => {
                self.drop_filter(ti);
                self.tuples.remove(ti);
                self.by_mask.remove(&*n.mask);
                self.reorder();
                if self.tuples.is_empty() {
                    self.filters.truncate(1);
                    self.garbage = 0;
                }
            }
            Some((&max, _)) if max != t.max => {
                t.max = max;
                self.reorder();
            }
            Some(_) => {}
        }
        self.sync();
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u128]) -> Option<EntryId> {
        if self.probes.is_empty() {
            return None;
        }
        match self.layout.words {
            0 => self.lookup_n::<0>(key),
            1 => self.lookup_n::<1>(key),
            2 => self.lookup_n::<2>(key),
            3 => self.lookup_n::<3>(key),
            4 => self.lookup_n::<4>(key),
            w if w <= INLINE_WORDS => {
                let mut buf = [0u64; INLINE_WORDS];
                self.layout.pack(|p| key[p], &mut buf[..w]);
                self.lookup_packed(key, &buf[..w])
            }
            w => {
                let mut buf = vec![0u64; w];
                self.layout.pack(|p| key[p], &mut buf);
                self.lookup_packed(key, &buf)
            }
        }
    }

    /// Lookup with a key of exactly `W` words (so hashing unrolls completely).
    #[inline(always)]
    fn lookup_n<const W: usize>(&self, key: &[u128]) -> Option<EntryId> {
        let mut pk = [0u64; W];
        self.layout.pack(|p| key[p], &mut pk);
        self.lookup_packed(key, &pk)
    }

    #[inline(always)]
    fn lookup_packed(&self, key: &[u128], pk: &[u64]) -> Option<EntryId> {
        let w = pk.len();
        // Priorities are >= 1, so 0 means "nothing found yet".
        let mut best_p = 0u32;
        let mut best = None;
        for (i, p) in self.probes.iter().enumerate() {
            if p.max <= best_p {
                break;
            }
            let h = hash_masked(&self.pmasks[i * w..][..w], pk);
            let (fw, bits) = filter_pos(h, p.fmask);
            if self.filters[p.foff as usize + fw] & bits != bits {
                continue;
            }
            let t = &self.tuples[i];
            let Some(s) = t.find(h, pk) else {
                continue;
            };
            let bucket = t.buckets[s as usize].as_ref().expect("live slot");
            for c in bucket.as_slice() {
                if c.prio <= best_p {
                    break;
                }
                if c.ranges
                    .iter()
                    .zip(&*self.range_pos)
                    .all(|(&(lo, hi), &p)| (lo..=hi).contains(&key[p as usize]))
                {
                    best_p = c.prio;
                    best = Some(c.id);
                    break;
                }
            }
        }
        best
    }
}
