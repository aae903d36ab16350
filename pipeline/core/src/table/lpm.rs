//! Longest-prefix-match index for tables with exactly one LPM field (plus any number of exact
//! fields).
//!
//! The exact fields select a trie through a [`KeyMap`] (no map at all when there are none).
//! Each trie is a stride-8 multibit trie with controlled prefix expansion: a prefix of length
//! `L` (`8d < L <= 8d + 8`) lives in a node at depth `d`, expanded over the `2^(8d+8-L)` slots
//! it covers, where it overrides shorter prefixes of the same node only. A slot is one `u64`
//! holding both the best entry of its node for that byte (high half) and the child node for
//! that byte, if any (low half), so a lookup reads one word, i.e. one cache line, per level:
//! at most `ceil(W/8)` (4 for IPv4, 16 for IPv6). Inserts and deletes touch one node (at most 256 slots) plus
//! the path to it; deletes restore the next shorter prefix of that node (found through the
//! table's identity map) and free nodes that become empty. Fields whose width is not a
//! multiple of 8 are left-aligned to the next multiple.
//!
//! Nodes live in chunks of 16 so growing the arena never copies the whole trie.

use super::exact::exact_value;
use super::keymap::KeyMap;
use super::{Entries, EntryId, FieldMatch, KeyField, MatchKey, MatchKind, ones, prefix_mask};

/// Largest node index (0 in a slot's child half means "no child"; the root is never a child).
const MAX_NODE: u32 = u32::MAX - 1;
const CHUNK_BITS: u32 = 4;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A slot: `entry (id + 1, 0 = none) << 32 | child node (0 = none)`.
#[inline(always)]
fn slot(entry: u32, child: u32) -> u64 {
    (u64::from(entry) << 32) | u64::from(child)
}

#[inline(always)]
fn entry_of(s: u64) -> u32 {
    (s >> 32) as u32
}

#[inline(always)]
fn child_of(s: u64) -> u32 {
    s as u32
}

#[derive(Clone, Debug)]
struct Node {
    slots: [u64; 256],
    /// Prefixes stored in this node plus child slots; the node is freed when it drops to 0.
    count: u32,
    parent: u32,
    parent_slot: u8,
}

impl Node {
    fn new(parent: u32, parent_slot: u8) -> Self {
        Self {
            slots: [0; 256],
            count: 0,
            parent,
            parent_slot,
        }
    }
}

#[derive(Clone, Debug)]
struct Trie {
    chunks: Vec<Vec<Node>>,
    free: Vec<u32>,
    /// The /0 entry (id + 1, 0 = none).
    default: u32,
}

impl Trie {
    fn new() -> Self {
        let mut t = Self {
            chunks: Vec::new(),
            free: Vec::new(),
            default: 0,
        };
        t.alloc(Node::new(0, 0));
        t
    }

    #[inline(always)]
    fn node(&self, i: u32) -> &Node {
        &self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    fn node_mut(&mut self, i: u32) -> &mut Node {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    fn alloc(&mut self, n: Node) -> u32 {
        if let Some(i) = self.free.pop() {
            *self.node_mut(i) = n;
            return i;
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            let cap = if self.chunks.is_empty() { 1 } else { CHUNK };
            self.chunks.push(Vec::with_capacity(cap));
        }
        let c = self.chunks.len() - 1;
        self.chunks[c].push(n);
        let i = (c * CHUNK + self.chunks[c].len() - 1) as u32;
        assert!(i <= MAX_NODE, "trie too large");
        i
    }

    fn is_empty(&self) -> bool {
        self.node(0).count == 0 && self.default == 0
    }

    /// Entry of slot `s` of node `n`.
    fn eff(&self, n: u32, s: usize) -> u32 {
        entry_of(self.node(n).slots[s])
    }

    fn set_eff(&mut self, n: u32, s: usize, e: u32) {
        let v = &mut self.node_mut(n).slots[s];
        *v = slot(e, child_of(*v));
    }

    #[inline]
    fn lookup(&self, va: u128, aw: u8) -> u32 {
        let mut n = self.node(0);
        let mut best = self.default;
        let mut sh = aw;
        while sh > 0 {
            sh -= 8;
            let s = n.slots[((va >> sh) & 0xff) as usize];
            if entry_of(s) != 0 {
                best = entry_of(s);
            }
            if child_of(s) == 0 {
                break;
            }
            n = self.node(child_of(s));
        }
        best
    }

    /// Node holding prefixes of length `len` (> 0), creating the path if `create`.
    fn walk(&mut self, va: u128, aw: u8, len: u8, create: bool) -> u32 {
        let depth = (len - 1) / 8;
        let mut n = 0u32;
        for d in 0..depth {
            let b = ((va >> (aw - 8 - 8 * d)) & 0xff) as usize;
            let v = self.node(n).slots[b];
            if child_of(v) != 0 {
                n = child_of(v);
            } else {
                assert!(create, "lpm trie path missing");
                let c = self.alloc(Node::new(n, b as u8));
                let p = self.node_mut(n);
                p.slots[b] = slot(entry_of(v), c);
                p.count += 1;
                n = c;
            }
        }
        n
    }

    fn span(va: u128, aw: u8, len: u8) -> std::ops::Range<usize> {
        let depth = (len - 1) / 8;
        let local = len - 8 * depth;
        let b = ((va >> (aw - 8 - 8 * depth)) & 0xff) as usize;
        let span = 1usize << (8 - local);
        let base = b & !(span - 1);
        base..base + span
    }

    /// Adds prefix (`va`, `len`) as `enc` (id + 1); `len_of(enc)` gives stored prefix lengths.
    fn insert(&mut self, va: u128, aw: u8, len: u8, enc: u32, len_of: impl Fn(u32) -> u8) {
        if len == 0 {
            self.default = enc;
            return;
        }
        let n = self.walk(va, aw, len, true);
        for s in Self::span(va, aw, len) {
            let cur = self.eff(n, s);
            if cur == 0 || len_of(cur) < len {
                self.set_eff(n, s, enc);
            }
        }
        self.node_mut(n).count += 1;
    }

    /// Removes prefix (`va`, `len`) stored as `enc`; its slots fall back to `repl`, the next
    /// shorter prefix of the same node (or 0).
    fn remove(&mut self, va: u128, aw: u8, len: u8, enc: u32, repl: u32) {
        if len == 0 {
            self.default = 0;
            return;
        }
        let mut n = self.walk(va, aw, len, false);
        for s in Self::span(va, aw, len) {
            if self.eff(n, s) == enc {
                self.set_eff(n, s, repl);
            }
        }
        self.node_mut(n).count -= 1;
        while n != 0 && self.node(n).count == 0 {
            let (p, ps) = {
                let x = self.node(n);
                (x.parent, x.parent_slot as usize)
            };
            let pn = self.node_mut(p);
            pn.slots[ps] = slot(entry_of(pn.slots[ps]), 0);
            pn.count -= 1;
            self.free.push(n);
            n = p;
        }
    }
}

#[derive(Clone, Debug)]
enum Tries {
    Single(Trie),
    Multi(KeyMap<Trie>),
}

#[derive(Clone, Debug)]
pub(crate) struct LpmIndex {
    lpm_pos: usize,
    width: u8,
    /// Width rounded up to a multiple of 8.
    aw: u8,
    tries: Tries,
}

fn lpm_of(m: &FieldMatch) -> (u128, u8) {
    match m {
        FieldMatch::Lpm { value, prefix_len } => (*value, *prefix_len),
        _ => unreachable!("validated key"),
    }
}

impl LpmIndex {
    pub(crate) fn new(fields: &[KeyField]) -> Self {
        let lpm_pos = fields
            .iter()
            .position(|f| f.kind == MatchKind::Lpm)
            .expect("one lpm field");
        let width = fields[lpm_pos].bitwidth;
        let exact: Vec<(usize, u128)> = fields
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != lpm_pos)
            .map(|(i, f)| (i, ones(f.bitwidth)))
            .collect();
        let tries = if exact.is_empty() {
            Tries::Single(Trie::new())
        } else {
            Tries::Multi(KeyMap::new(&exact, 0))
        };
        Self {
            lpm_pos,
            width,
            aw: width.div_ceil(8) * 8,
            tries,
        }
    }

    pub(crate) fn insert(&mut self, key: &[FieldMatch], id: EntryId, view: Entries<'_>) {
        let (value, len) = lpm_of(&key[self.lpm_pos]);
        let va = value << (self.aw - self.width);
        let pos = self.lpm_pos;
        let trie = match &mut self.tries {
            Tries::Single(t) => t,
            Tries::Multi(m) => m.get_or_insert_with(|p| exact_value(&key[p]), Trie::new),
        };
        trie.insert(va, self.aw, len, id + 1, |enc| {
            lpm_of(&view.get(enc - 1).key[pos]).1
        });
    }

    pub(crate) fn remove(&mut self, key: &[FieldMatch], id: EntryId, view: Entries<'_>) {
        let (value, len) = lpm_of(&key[self.lpm_pos]);
        let va = value << (self.aw - self.width);
        let mut repl = 0;
        if len > 0 {
            let node_min = (len - 1) / 8 * 8;
            let mut k: MatchKey = key.into();
            for l in (node_min + 1..len).rev() {
                k[self.lpm_pos] = FieldMatch::Lpm {
                    value: value & prefix_mask(self.width, l),
                    prefix_len: l,
                };
                if let Some(r) = view.find(&k, 0) {
                    repl = r + 1;
                    break;
                }
            }
        }
        match &mut self.tries {
            Tries::Single(t) => t.remove(va, self.aw, len, id + 1, repl),
            Tries::Multi(m) => {
                let t = m
                    .get_mut(|p| exact_value(&key[p]))
                    .expect("trie for a live entry");
                t.remove(va, self.aw, len, id + 1, repl);
                if t.is_empty() {
                    m.remove(|p| exact_value(&key[p]));
                }
            }
        }
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u128]) -> Option<EntryId> {
        let va = key[self.lpm_pos] << (self.aw - self.width);
        let t = match &self.tries {
            Tries::Single(t) => t,
            Tries::Multi(m) => m.get(|p| key[p])?,
        };
        t.lookup(va, self.aw).checked_sub(1)
    }
}
