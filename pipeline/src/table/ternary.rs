//! Tuple-space search for tables with ternary/range/optional fields (or several LPM fields).
//!
//! Every field of an entry becomes a (value, mask): exact = all-ones mask, LPM = prefix mask,
//! optional = all-ones or 0, ternary as given; range fields get mask 0 and are checked on the
//! candidates. Entries are grouped by their mask vector (a *tuple*); per tuple a [`KeyMap`]
//! (over the fields whose mask is not 0) maps the masked value to the candidates, sorted by
//! descending priority (so several entries with the same masked value, e.g. differing only in
//! ranges or priority, are resolved by a short scan). Tuples are visited in order of their
//! highest priority, and the search stops as soon as the best match so far is at least as
//! good as every remaining tuple. A lookup hashes once per visited tuple and never allocates.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use super::keymap::KeyMap;
use super::{EntryId, FieldMatch, KeyField, MatchKind, ones, prefix_mask};

#[derive(Clone, Debug)]
struct Cand {
    prio: u32,
    id: EntryId,
    /// Inclusive bounds for each range field of the table.
    ranges: Box<[(u128, u128)]>,
}

/// The candidates for one masked value, sorted by descending priority then id. The single
/// candidate case (by far the most common) is stored inline in the hash map slot.
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

#[derive(Clone, Debug)]
struct Tuple {
    /// Highest priority in the tuple.
    max: u32,
    /// Creation order, the tie-break between tuples of equal `max` (deterministic).
    seq: u64,
    mask: Box<[u128]>,
    map: KeyMap<Bucket>,
    /// Priority -> number of entries, to keep the maximum up to date on removal.
    prios: BTreeMap<u32, u32>,
}

#[derive(Clone, Debug)]
pub(crate) struct TernaryIndex {
    widths: Box<[u8]>,
    range_pos: Box<[u16]>,
    /// Sorted by descending `max`, then `seq`: the lookup order.
    tuples: Vec<Tuple>,
    /// Mask vector -> position in `tuples`.
    by_mask: HashMap<Box<[u128]>, u32, FixedState>,
    next_seq: u64,
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
            range_pos: fields
                .iter()
                .enumerate()
                .filter(|(_, f)| f.kind == MatchKind::Range)
                .map(|(i, _)| i as u16)
                .collect(),
            tuples: Vec::new(),
            by_mask: HashMap::default(),
            next_seq: 0,
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

    /// Restores the lookup order after a tuple's `max` changed or a tuple was added or
    /// removed. Costs O(tuples), independent of the number of entries.
    fn reorder(&mut self) {
        self.tuples.sort_by_key(|t| (Reverse(t.max), t.seq));
        for (i, t) in self.tuples.iter().enumerate() {
            *self.by_mask.get_mut(&t.mask).expect("tuple registered") = i as u32;
        }
    }

    pub(crate) fn insert(&mut self, key: &[FieldMatch], prio: u32, id: EntryId) {
        let n = self.norm(key);
        let ti = match self.by_mask.get(&*n.mask) {
            Some(&ti) => ti as usize,
            None => {
                let sel: Vec<(usize, u128)> = n
                    .mask
                    .iter()
                    .enumerate()
                    .filter(|&(_, &m)| m != 0)
                    .map(|(i, &m)| (i, m))
                    .collect();
                self.tuples.push(Tuple {
                    max: 0,
                    seq: self.next_seq,
                    mask: n.mask.clone().into(),
                    map: KeyMap::new(&sel, 0),
                    prios: BTreeMap::new(),
                });
                self.next_seq += 1;
                self.by_mask
                    .insert(n.mask.clone().into(), (self.tuples.len() - 1) as u32);
                self.tuples.len() - 1
            }
        };
        let t = &mut self.tuples[ti];
        let mut cand = Some(Cand {
            prio,
            id,
            ranges: n.ranges,
        });
        let bucket = t
            .map
            .get_or_insert_with(|p| n.value[p], || Bucket::One(cand.take().expect("once")));
        if let Some(c) = cand {
            bucket.insert(c);
        }
        *t.prios.entry(prio).or_insert(0) += 1;
        if prio > t.max {
            t.max = prio;
            self.reorder();
        }
    }

    pub(crate) fn remove(&mut self, key: &[FieldMatch], prio: u32, id: EntryId) {
        let n = self.norm(key);
        let ti = *self.by_mask.get(&*n.mask).expect("tuple of a live entry") as usize;
        let t = &mut self.tuples[ti];
        let bucket = t
            .map
            .get_mut(|p| n.value[p])
            .expect("bucket of a live entry");
        if bucket.remove(id) {
            t.map.remove(|p| n.value[p]);
        }
        let c = t.prios.get_mut(&prio).expect("priority count");
        *c -= 1;
        if *c == 0 {
            t.prios.remove(&prio);
        }
        match t.prios.last_key_value() {
            None => {
                self.tuples.remove(ti);
                self.by_mask.remove(&*n.mask);
                self.reorder();
            }
            Some((&max, _)) if max != t.max => {
                t.max = max;
                self.reorder();
            }
            Some(_) => {}
        }
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u128]) -> Option<EntryId> {
        // Priorities are >= 1, so 0 means "nothing found yet".
        let mut best_p = 0u32;
        let mut best = None;
        for t in &self.tuples {
            if t.max <= best_p {
                break;
            }
            let Some(bucket) = t.map.get(|p| key[p]) else {
                continue;
            };
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
