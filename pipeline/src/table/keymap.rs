//! A hash map keyed by a selection of key fields, packed into one `u64`/`u128` when their
//! widths add up to at most 64/128 bits (the common case: no boxed keys, one cheap hash), and
//! otherwise stored as a boxed slice hashed field by field (lookups still never allocate).
//!
//! Control-path methods read fields through a closure `f(position) -> u128`; the hot-path
//! [`KeyMap::lookup`] reads a full lookup key and applies per-field masks (which is what the
//! tuple-space index needs).

use std::hash::{BuildHasher, Hasher};

use foldhash::fast::FixedState;
use hashbrown::{HashMap, HashTable};

#[derive(Clone, Debug)]
pub(crate) struct KeyMap<V> {
    /// Key field positions, in packing order.
    pos: Box<[u16]>,
    /// Bit offset of each field in the packed key.
    shift: Box<[u8]>,
    /// The same fields with their masks, laid out for [`KeyMap::lookup`].
    sel: Box<[Sel]>,
    map: Map<V>,
}

#[derive(Clone, Copy, Debug)]
struct Sel {
    mask: u128,
    pos: u16,
    shift: u8,
}

#[derive(Clone, Debug)]
enum Map<V> {
    U64(HashMap<u64, V, FixedState>),
    U128(HashMap<u128, V, FixedState>),
    Wide(HashTable<(Box<[u128]>, V)>, FixedState),
}

impl<V> KeyMap<V> {
    /// `fields`: (position in the key, bitwidth, mask applied by [`KeyMap::lookup`]) of each
    /// field that makes up the map key.
    pub(crate) fn new(fields: &[(usize, u8, u128)], reserve: usize) -> Self {
        let total: u32 = fields.iter().map(|&(_, w, _)| u32::from(w)).sum();
        let mut shift = Vec::with_capacity(fields.len());
        let mut s = 0u32;
        for &(_, w, _) in fields {
            shift.push(if total <= 128 { s as u8 } else { 0 });
            s += u32::from(w);
        }
        let st = FixedState::default();
        let map = if total <= 64 {
            Map::U64(HashMap::with_capacity_and_hasher(reserve, st))
        } else if total <= 128 {
            Map::U128(HashMap::with_capacity_and_hasher(reserve, st))
        } else {
            Map::Wide(HashTable::with_capacity(reserve), st)
        };
        Self {
            pos: fields.iter().map(|&(p, _, _)| p as u16).collect(),
            sel: fields
                .iter()
                .zip(&shift)
                .map(|(&(pos, _, mask), &shift)| Sel {
                    mask,
                    pos: pos as u16,
                    shift,
                })
                .collect(),
            shift: shift.into(),
            map,
        }
    }

    /// Hot path: the value for the masked fields of a full lookup key.
    #[inline]
    pub(crate) fn lookup(&self, key: &[u128]) -> Option<&V> {
        match &self.map {
            Map::U64(m) => {
                let mut k = 0u64;
                for s in &*self.sel {
                    k |= ((key[s.pos as usize] & s.mask) as u64) << s.shift;
                }
                m.get(&k)
            }
            Map::U128(m) => {
                let mut k = 0u128;
                for s in &*self.sel {
                    k |= (key[s.pos as usize] & s.mask) << s.shift;
                }
                m.get(&k)
            }
            Map::Wide(t, st) => {
                let v = |s: &Sel| key[s.pos as usize] & s.mask;
                let h = Self::hash_wide(st, self.sel.iter().map(v));
                t.find(h, |(k, _)| {
                    k.iter().zip(&*self.sel).all(|(&x, s)| x == v(s))
                })
                .map(|(_, v)| v)
            }
        }
    }

    #[inline(always)]
    fn hash_wide(st: &FixedState, vals: impl Iterator<Item = u128>) -> u64 {
        let mut h = st.build_hasher();
        for v in vals {
            h.write_u128(v);
        }
        h.finish()
    }

    pub(crate) fn get_mut(&mut self, f: impl Fn(usize) -> u128) -> Option<&mut V> {
        match &mut self.map {
            Map::U64(m) => {
                let k = pack64(&self.pos, &self.shift, f);
                m.get_mut(&k)
            }
            Map::U128(m) => {
                let k = pack128(&self.pos, &self.shift, f);
                m.get_mut(&k)
            }
            Map::Wide(t, st) => {
                let h = Self::hash_wide(st, self.pos.iter().map(|&p| f(p as usize)));
                let pos = &self.pos;
                t.find_mut(h, |(k, _)| {
                    k.iter().zip(&**pos).all(|(&v, &p)| v == f(p as usize))
                })
                .map(|(_, v)| v)
            }
        }
    }

    /// The value for the key, inserting `make()` if absent.
    pub(crate) fn get_or_insert_with(
        &mut self,
        f: impl Fn(usize) -> u128,
        make: impl FnOnce() -> V,
    ) -> &mut V {
        match &mut self.map {
            Map::U64(m) => m
                .entry(pack64(&self.pos, &self.shift, f))
                .or_insert_with(make),
            Map::U128(m) => m
                .entry(pack128(&self.pos, &self.shift, f))
                .or_insert_with(make),
            Map::Wide(t, st) => {
                let vals: Box<[u128]> = self.pos.iter().map(|&p| f(p as usize)).collect();
                let h = Self::hash_wide(st, vals.iter().copied());
                let st = *st;
                &mut t
                    .entry(
                        h,
                        |(k, _)| *k == vals,
                        |(k, _)| Self::hash_wide(&st, k.iter().copied()),
                    )
                    .or_insert_with(|| (vals.clone(), make()))
                    .into_mut()
                    .1
            }
        }
    }

    pub(crate) fn remove(&mut self, f: impl Fn(usize) -> u128) -> Option<V> {
        match &mut self.map {
            Map::U64(m) => m.remove(&pack64(&self.pos, &self.shift, f)),
            Map::U128(m) => m.remove(&pack128(&self.pos, &self.shift, f)),
            Map::Wide(t, st) => {
                let h = Self::hash_wide(st, self.pos.iter().map(|&p| f(p as usize)));
                let pos = &self.pos;
                t.find_entry(h, |(k, _)| {
                    k.iter().zip(&**pos).all(|(&v, &p)| v == f(p as usize))
                })
                .ok()
                .map(|e| e.remove().0.1)
            }
        }
    }
}

#[inline(always)]
fn pack64(pos: &[u16], shift: &[u8], f: impl Fn(usize) -> u128) -> u64 {
    let mut k = 0u64;
    for (&p, &s) in pos.iter().zip(shift) {
        k |= (f(p as usize) as u64) << s;
    }
    k
}

#[inline(always)]
fn pack128(pos: &[u16], shift: &[u8], f: impl Fn(usize) -> u128) -> u128 {
    let mut k = 0u128;
    for (&p, &s) in pos.iter().zip(shift) {
        k |= f(p as usize) << s;
    }
    k
}
