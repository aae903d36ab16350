//! Exact-match index: a hash map from the packed key to the entry id.

use super::keymap::KeyMap;
use super::{EntryId, FieldMatch, KeyField, ones};

#[derive(Clone, Debug)]
pub(crate) struct ExactIndex {
    map: KeyMap<EntryId>,
}

pub(crate) fn exact_value(m: &FieldMatch) -> u128 {
    match m {
        FieldMatch::Exact(v) | FieldMatch::Optional(Some(v)) => *v,
        FieldMatch::Lpm { value, .. } => *value,
        _ => unreachable!("validated key"),
    }
}

impl ExactIndex {
    pub(crate) fn new(fields: &[KeyField], reserve: usize) -> Self {
        let sel: Vec<(usize, u128)> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| (i, ones(f.bitwidth)))
            .collect();
        Self {
            map: KeyMap::new(&sel, reserve),
        }
    }

    pub(crate) fn insert(&mut self, key: &[FieldMatch], id: EntryId) {
        *self.map.get_or_insert_with(|p| exact_value(&key[p]), || id) = id;
    }

    pub(crate) fn remove(&mut self, key: &[FieldMatch]) {
        self.map.remove(|p| exact_value(&key[p]));
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u128]) -> Option<EntryId> {
        self.map.get(|p| key[p]).copied()
    }
}
