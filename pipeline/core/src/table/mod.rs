//! Match tables (exact, LPM, ternary, range, optional) and action profiles/selectors.
//!
//! [`MatchTable`] owns the entries of one P4 table and picks an index structure from the key
//! spec when it is created:
//!
//! * only `Exact` fields: a hash map from the packed key to the entry ([`exact`]);
//! * `Exact` fields plus exactly one `Lpm` field: a hash map from the exact part to a stride-8
//!   multibit trie over the LPM field ([`lpm`]); longest prefix wins, no priority;
//! * anything with `Ternary`/`Range`/`Optional` fields (or more than one `Lpm`): tuple-space
//!   search ([`ternary`]); highest numeric priority wins.
//!
//! Entry ids are allocated deterministically: an insert always gets the **lowest free id**, so
//! two copies of a table given the same sequence of operations assign the same ids (the
//! control plane relies on this for double buffering).
//!
//! An id freed by a remove is not free at once: workers may still be matching the removed entry
//! in an older snapshot, and counting its packets in the direct counter and meter cells of that
//! id. It waits in quarantine until [`MatchTable::release_freed`] (the control plane calls it at
//! the start of the next write batch, when no worker holds a snapshot with the old entry any
//! more). An id inserted since the last release was never published, so removing it frees it at
//! once. Hence at most `capacity` ids are live and at most `capacity` wait in quarantine: ids are
//! always `< id_space(capacity)`, twice the capacity, and direct resources are sized by
//! [`id_space`].
//!
//! Every structure here is `Clone` and free of interior mutability, except [`HitTimes`] which
//! lives outside the published snapshot and is shared between data-plane threads.

mod exact;
mod idle;
mod keymap;
mod lpm;
mod profile;
mod ternary;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

pub use idle::HitTimes;
pub use profile::{ActionProfile, ProfileError};

/// Dense identifier of a table entry, `< id_space(capacity)`.
pub type EntryId = u32;

/// How many entry ids a table of `capacity` entries may use: its live entries and the ids
/// waiting in quarantine (see the module docs). Direct counters, direct meters and idle times are
/// indexed by entry id and sized by this.
pub const fn id_space(capacity: usize) -> usize {
    capacity.saturating_mul(2)
}

/// The match kind of one key field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchKind {
    /// Value must be equal.
    Exact,
    /// Longest prefix match.
    Lpm,
    /// Value/mask match.
    Ternary,
    /// Inclusive `[low, high]` range.
    Range,
    /// Exact value or don't care.
    Optional,
}

/// Spec of one key field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyField {
    /// Width in bits, `1..=128`.
    pub bitwidth: u8,
    /// How the field is matched.
    pub kind: MatchKind,
}

/// One field of a match key, fully specified (the control layer turns P4Runtime's omitted
/// don't-care fields into: Ternary mask 0, Lpm prefix_len 0, Range full `[0, max]`,
/// `Optional(None)`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FieldMatch {
    /// Exact value.
    Exact(u128),
    /// Prefix: bits below the prefix must be zero.
    Lpm {
        /// Prefix value (left-aligned in the field width, trailing bits zero).
        value: u128,
        /// Prefix length, `0..=bitwidth`.
        prefix_len: u8,
    },
    /// Value/mask, with `value & !mask == 0`.
    Ternary {
        /// Value.
        value: u128,
        /// Mask (1 = must match).
        mask: u128,
    },
    /// Inclusive range, `low <= high`.
    Range {
        /// Lowest matching value.
        low: u128,
        /// Highest matching value.
        high: u128,
    },
    /// `Some(v)`: must equal `v`; `None`: don't care.
    Optional(Option<u128>),
}

/// A full match key: one [`FieldMatch`] per key field.
pub type MatchKey = Box<[FieldMatch]>;

/// Errors of [`MatchTable`] operations. On error nothing was changed.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
pub enum TableError {
    /// An entry with the same key and priority exists.
    #[error("entry already exists")]
    AlreadyExists,
    /// No entry with this key and priority.
    #[error("entry not found")]
    NotFound,
    /// The table holds `capacity` entries.
    #[error("table full")]
    Full,
    /// The key does not fit the table's key spec.
    #[error("invalid match key: {0}")]
    InvalidKey(&'static str),
    /// Priority must be 0 for exact/LPM tables and non-zero for tables that need one.
    #[error("invalid priority: {0}")]
    InvalidPriority(&'static str),
}

/// A stored entry: its key and priority.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) key: MatchKey,
    pub(crate) priority: u32,
}

/// Read access to the entries of a table, handed to the index structures.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entries<'a> {
    entries: &'a [Option<Entry>],
    ids: &'a HashTable<EntryId>,
    hasher: &'a FixedState,
}

impl Entries<'_> {
    pub(crate) fn get(&self, id: EntryId) -> &Entry {
        self.entries[id as usize]
            .as_ref()
            .expect("index refers to a live entry")
    }

    pub(crate) fn find(&self, key: &[FieldMatch], priority: u32) -> Option<EntryId> {
        let h = self.hasher.hash_one((key, priority));
        self.ids
            .find(h, |&id| {
                let e = self.get(id);
                e.priority == priority && *e.key == *key
            })
            .copied()
    }
}

#[derive(Clone, Debug)]
enum Index {
    Exact(exact::ExactIndex),
    Lpm(lpm::LpmIndex),
    Ternary(ternary::TernaryIndex),
}

/// Upper bound on what [`MatchTable::new`] reserves up front (entries beyond it still fit,
/// with amortised growth).
const MAX_RESERVE: usize = 1 << 22;

/// A match table: entries keyed by (match key, priority), with a lookup index chosen from the
/// key spec (see the module docs).
#[derive(Clone, Debug)]
pub struct MatchTable {
    fields: Box<[KeyField]>,
    capacity: usize,
    entries: Vec<Option<Entry>>,
    free: BinaryHeap<Reverse<EntryId>>,
    /// Ids removed since the last [`MatchTable::release_freed`] that were published before:
    /// an older snapshot may still match their entries.
    quarantine: Vec<EntryId>,
    /// Ids inserted since the last [`MatchTable::release_freed`] (never published yet).
    born: hashbrown::HashSet<EntryId, FixedState>,
    len: usize,
    /// Identity map (key, priority) -> id; hashes are recomputed from `entries`.
    ids: HashTable<EntryId>,
    hasher: FixedState,
    index: Index,
}

pub(crate) fn ones(width: u8) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

pub(crate) fn prefix_mask(width: u8, len: u8) -> u128 {
    ones(width) ^ ones(width - len)
}

impl MatchTable {
    /// A table for the given key spec holding at most `capacity` entries.
    ///
    /// Storage for `capacity` entries (up to 4M) is reserved up front so that inserts never
    /// trigger a whole-table reallocation.
    ///
    /// # Panics
    /// If a field's bitwidth is not in `1..=128` or `capacity` exceeds `u32::MAX / 2`.
    pub fn new(fields: &[KeyField], capacity: usize) -> Self {
        assert!(
            fields.iter().all(|f| (1..=128).contains(&f.bitwidth)),
            "key field bitwidth must be 1..=128"
        );
        assert!(capacity <= (u32::MAX / 2) as usize, "capacity too large");
        let reserve = capacity.min(MAX_RESERVE);
        let lpm_count = fields.iter().filter(|f| f.kind == MatchKind::Lpm).count();
        let only_exact_lpm = fields
            .iter()
            .all(|f| matches!(f.kind, MatchKind::Exact | MatchKind::Lpm));
        let index = if only_exact_lpm && lpm_count == 0 {
            Index::Exact(exact::ExactIndex::new(fields, reserve))
        } else if only_exact_lpm && lpm_count == 1 {
            Index::Lpm(lpm::LpmIndex::new(fields))
        } else {
            Index::Ternary(ternary::TernaryIndex::new(fields))
        };
        Self {
            fields: fields.into(),
            capacity,
            entries: Vec::with_capacity(reserve),
            free: BinaryHeap::new(),
            quarantine: Vec::new(),
            born: hashbrown::HashSet::with_hasher(FixedState::default()),
            len: 0,
            ids: HashTable::with_capacity(reserve),
            hasher: FixedState::default(),
            index,
        }
    }

    /// The key spec.
    pub fn fields(&self) -> &[KeyField] {
        &self.fields
    }

    /// Whether entries carry a meaningful priority (any Ternary/Range/Optional field, or more
    /// than one LPM field). If not, priority must be 0.
    pub fn needs_priority(&self) -> bool {
        matches!(self.index, Index::Ternary(_))
    }

    /// Checks `key` and `priority` against the key spec, without touching the table.
    pub fn validate(&self, key: &[FieldMatch], priority: u32) -> Result<(), TableError> {
        use TableError::InvalidKey;
        if key.len() != self.fields.len() {
            return Err(InvalidKey("wrong number of fields"));
        }
        for (f, m) in self.fields.iter().zip(key) {
            let max = ones(f.bitwidth);
            match (f.kind, m) {
                (MatchKind::Exact, FieldMatch::Exact(v))
                | (MatchKind::Optional, FieldMatch::Optional(Some(v))) => {
                    if *v > max {
                        return Err(InvalidKey("value wider than the field"));
                    }
                }
                (MatchKind::Optional, FieldMatch::Optional(None)) => {}
                (MatchKind::Lpm, FieldMatch::Lpm { value, prefix_len }) => {
                    if *prefix_len > f.bitwidth {
                        return Err(InvalidKey("prefix longer than the field"));
                    }
                    if *value > max {
                        return Err(InvalidKey("value wider than the field"));
                    }
                    if value & !prefix_mask(f.bitwidth, *prefix_len) != 0 {
                        return Err(InvalidKey("lpm value has bits set beyond the prefix"));
                    }
                }
                (MatchKind::Ternary, FieldMatch::Ternary { value, mask }) => {
                    if *value > max || *mask > max {
                        return Err(InvalidKey("value wider than the field"));
                    }
                    if value & !mask != 0 {
                        return Err(InvalidKey("ternary value has bits outside the mask"));
                    }
                }
                (MatchKind::Range, FieldMatch::Range { low, high }) => {
                    if *high > max {
                        return Err(InvalidKey("value wider than the field"));
                    }
                    if low > high {
                        return Err(InvalidKey("range low > high"));
                    }
                }
                _ => return Err(InvalidKey("field match kind differs from the key spec")),
            }
        }
        match (self.needs_priority(), priority) {
            (true, 0) => Err(TableError::InvalidPriority(
                "must be non-zero for ternary/range/optional tables",
            )),
            (false, 1..) => Err(TableError::InvalidPriority(
                "must be 0 for exact and lpm tables",
            )),
            _ => Ok(()),
        }
    }

    fn view(&self) -> Entries<'_> {
        Entries {
            entries: &self.entries,
            ids: &self.ids,
            hasher: &self.hasher,
        }
    }

    /// Adds an entry; returns its id (the lowest free one). Nothing changes on error.
    pub fn insert(&mut self, key: MatchKey, priority: u32) -> Result<EntryId, TableError> {
        self.validate(&key, priority)?;
        if self.view().find(&key, priority).is_some() {
            return Err(TableError::AlreadyExists);
        }
        if self.len >= self.capacity {
            return Err(TableError::Full);
        }
        let id = match self.free.pop() {
            Some(Reverse(id)) => id,
            // Live ids and quarantined ones are at most `capacity` each (module docs), so this
            // never refuses; it keeps ids inside what the direct resources hold whatever happens.
            None if self.entries.len() >= id_space(self.capacity) => {
                return Err(TableError::Full);
            }
            None => {
                self.entries.push(None);
                (self.entries.len() - 1) as EntryId
            }
        };
        self.born.insert(id);
        let h = self.hasher.hash_one((&*key, priority));
        self.entries[id as usize] = Some(Entry { key, priority });
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.ids.insert_unique(h, id, |&i| {
            let e = entries[i as usize].as_ref().expect("live entry");
            hasher.hash_one((&*e.key, e.priority))
        });
        self.len += 1;
        let view = Entries {
            entries: &self.entries,
            ids: &self.ids,
            hasher: &self.hasher,
        };
        let key = &view.get(id).key;
        match &mut self.index {
            Index::Exact(x) => x.insert(key, id),
            Index::Lpm(x) => x.insert(key, id, view),
            Index::Ternary(x) => x.insert(key, priority, id),
        }
        Ok(id)
    }

    /// The id of the entry with exactly this key and priority.
    pub fn find(&self, key: &[FieldMatch], priority: u32) -> Option<EntryId> {
        self.view().find(key, priority)
    }

    /// Removes the entry with exactly this key and priority; returns its id (which becomes
    /// free for reuse).
    pub fn remove(&mut self, key: &[FieldMatch], priority: u32) -> Result<EntryId, TableError> {
        let id = self.find(key, priority).ok_or(TableError::NotFound)?;
        let view = Entries {
            entries: &self.entries,
            ids: &self.ids,
            hasher: &self.hasher,
        };
        match &mut self.index {
            Index::Exact(x) => x.remove(key),
            Index::Lpm(x) => x.remove(key, id, view),
            Index::Ternary(x) => x.remove(key, priority, id),
        }
        let h = self.hasher.hash_one((key, priority));
        match self.ids.find_entry(h, |&i| i == id) {
            Ok(e) => {
                e.remove();
            }
            Err(_) => unreachable!("identity map out of sync"),
        }
        self.entries[id as usize] = None;
        if self.born.remove(&id) {
            // Never published: no snapshot can match it.
            self.free.push(Reverse(id));
        } else {
            self.quarantine.push(id);
        }
        self.len -= 1;
        Ok(id)
    }

    /// Ends the quarantine of the ids removed since the last call, and counts every entry as
    /// published. Call it only when no reader holds a snapshot taken before that removal; both
    /// copies of a double-buffered table must call it at the same point of their op sequence.
    pub fn release_freed(&mut self) {
        for id in self.quarantine.drain(..) {
            self.free.push(Reverse(id));
        }
        self.born.clear();
    }

    /// Everything that decides what the table holds and which ids it gives next, in a form
    /// that is equal for two copies given the same operations (entries in id order, sorted id
    /// lists), for checking double-buffered copies against each other.
    pub fn canonical(&self) -> String {
        let mut free: Vec<EntryId> = self.free.iter().map(|r| r.0).collect();
        free.sort_unstable();
        let mut quarantine = self.quarantine.clone();
        quarantine.sort_unstable();
        let mut born: Vec<EntryId> = self.born.iter().copied().collect();
        born.sort_unstable();
        let entries: Vec<_> = self.iter().collect();
        format!(
            "slots {} len {} free {free:?} quarantine {quarantine:?} born {born:?} entries {entries:?}",
            self.entries.len(),
            self.len
        )
    }

    /// Whether [`MatchTable::release_freed`] has anything to do.
    pub fn has_unreleased(&self) -> bool {
        !self.quarantine.is_empty() || !self.born.is_empty()
    }

    /// Key and priority of a live entry.
    pub fn key_of(&self, id: EntryId) -> Option<(&[FieldMatch], u32)> {
        self.entries
            .get(id as usize)?
            .as_ref()
            .map(|e| (&*e.key, e.priority))
    }

    /// All entries in id order.
    pub fn iter(&self) -> impl Iterator<Item = (EntryId, &[FieldMatch], u32)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i as EntryId, &*e.key, e.priority)))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum number of entries.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Removes all entries; ids restart from 0.
    pub fn clear(&mut self) {
        *self = Self::new(&self.fields, self.capacity);
    }

    /// Hot path: one value per key field (already masked to its bitwidth by the caller).
    /// Returns the winning entry: the exact match, the longest prefix, or the highest
    /// priority (ties between overlapping entries of equal priority are unspecified).
    ///
    /// # Panics
    /// May panic if `key` has fewer values than the table has fields.
    #[inline]
    pub fn lookup(&self, key: &[u128]) -> Option<EntryId> {
        match &self.index {
            Index::Exact(x) => x.lookup(key),
            Index::Lpm(x) => x.lookup(key),
            Index::Ternary(x) => x.lookup(key),
        }
    }
}
