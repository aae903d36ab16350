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

#[derive(Clone, Debug)]
struct Tuple {
    mask: Box<[u128]>,
    map: KeyMap<Vec<Cand>>,
    /// Priority -> number of entries, to keep the maximum up to date on removal.
    prios: BTreeMap<u32, u32>,
}

#[derive(Clone, Debug)]
pub(crate) struct TernaryIndex {
    widths: Box<[u8]>,
    range_pos: Box<[u16]>,
    tuples: Vec<Option<Tuple>>,
    free: Vec<u32>,
    by_mask: HashMap<Box<[u128]>, u32, FixedState>,
    /// (max priority, tuple), sorted by descending priority then tuple index.
    order: Vec<(u32, u32)>,
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
            free: Vec::new(),
            by_mask: HashMap::default(),
            order: Vec::new(),
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

    fn reorder(&mut self, ti: u32) {
        let max = self.tuples[ti as usize]
            .as_ref()
            .and_then(|t| t.prios.last_key_value())
            .map(|(&p, _)| p);
        match max {
            Some(max) => {
                if let Some(o) = self.order.iter_mut().find(|o| o.1 == ti) {
                    o.0 = max;
                } else {
                    self.order.push((max, ti));
                }
            }
            None => self.order.retain(|o| o.1 != ti),
        }
        self.order.sort_unstable_by_key(|&(p, t)| (Reverse(p), t));
    }

    pub(crate) fn insert(&mut self, key: &[FieldMatch], prio: u32, id: EntryId) {
        let n = self.norm(key);
        let ti = match self.by_mask.get(&*n.mask) {
            Some(&ti) => ti,
            None => {
                let sel: Vec<(usize, u8)> = n
                    .mask
                    .iter()
                    .enumerate()
                    .filter(|&(_, &m)| m != 0)
                    .map(|(i, _)| (i, self.widths[i]))
                    .collect();
                let t = Tuple {
                    mask: n.mask.clone().into(),
                    map: KeyMap::new(&sel, 0),
                    prios: BTreeMap::new(),
                };
                let ti = match self.free.pop() {
                    Some(ti) => {
                        self.tuples[ti as usize] = Some(t);
                        ti
                    }
                    None => {
                        self.tuples.push(Some(t));
                        (self.tuples.len() - 1) as u32
                    }
                };
                self.by_mask.insert(n.mask.clone().into(), ti);
                ti
            }
        };
        let t = self.tuples[ti as usize].as_mut().expect("live tuple");
        let bucket = t.map.get_or_insert_with(|p| n.value[p], Vec::new);
        let at = bucket.partition_point(|c| (Reverse(c.prio), c.id) < (Reverse(prio), id));
        bucket.insert(
            at,
            Cand {
                prio,
                id,
                ranges: n.ranges,
            },
        );
        let old_max = t.prios.last_key_value().map(|(&p, _)| p);
        *t.prios.entry(prio).or_insert(0) += 1;
        if old_max.is_none_or(|m| m < prio) {
            self.reorder(ti);
        }
    }

    pub(crate) fn remove(&mut self, key: &[FieldMatch], prio: u32, id: EntryId) {
        let n = self.norm(key);
        let ti = *self.by_mask.get(&*n.mask).expect("tuple of a live entry");
        let t = self.tuples[ti as usize].as_mut().expect("live tuple");
        let bucket = t
            .map
            .get_mut(|p| n.value[p])
            .expect("bucket of a live entry");
        let at = bucket
            .iter()
            .position(|c| c.id == id)
            .expect("candidate of a live entry");
        bucket.remove(at);
        if bucket.is_empty() {
            t.map.remove(|p| n.value[p]);
        }
        let old_max = t.prios.last_key_value().map(|(&p, _)| p);
        let c = t.prios.get_mut(&prio).expect("priority count");
        *c -= 1;
        if *c == 0 {
            t.prios.remove(&prio);
        }
        if t.prios.is_empty() {
            self.tuples[ti as usize] = None;
            self.free.push(ti);
            self.by_mask.remove(&*n.mask);
            self.reorder(ti);
        } else if old_max == Some(prio) {
            self.reorder(ti);
        }
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u128]) -> Option<EntryId> {
        // Priorities are >= 1, so 0 means "nothing found yet".
        let mut best_p = 0u32;
        let mut best = None;
        for &(max, ti) in &self.order {
            if max <= best_p {
                break;
            }
            let Some(t) = &self.tuples[ti as usize] else {
                continue;
            };
            let Some(bucket) = t.map.get(|p| key[p] & t.mask[p]) else {
                continue;
            };
            for c in bucket {
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
