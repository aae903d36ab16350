//! A hash map keyed by a selection of masked key fields.
//!
//! Each field contributes `(value & mask) >> trailing_zeros(mask)`, i.e. only the bits between
//! the mask's highest and lowest set bit. The pieces are packed into one `u64`/`u128` when
//! they add up to at most 64/128 bits (the common case, e.g. IPv4 src/dst prefixes plus ports
//! in an ACL tuple: one cheap hash, no boxed keys); otherwise the key is stored as a boxed
//! slice hashed field by field (lookups still never allocate).
//!
//! All methods read fields through a closure `f(position) -> u128` returning the raw field
//! value; masking happens here, which is what the tuple-space index needs.

use std::hash::{BuildHasher, Hasher};

use foldhash::fast::FixedState;
use hashbrown::{HashMap, HashTable};

#[derive(Clone, Debug)]
pub(crate) struct KeyMap<V> {
    sel: Box<[Sel]>,
    map: Map<V>,
}

#[derive(Clone, Copy, Debug)]
struct Sel {
    mask: u128,
    pos: u16,
    /// `trailing_zeros(mask)`.
    tz: u8,
    /// Bit offset in the packed key.
    shift: u8,
}

impl Sel {
    #[inline(always)]
    fn field(&self, f: &impl Fn(usize) -> u128) -> u128 {
        (f(self.pos as usize) & self.mask) >> self.tz
    }
}

#[derive(Clone, Debug)]
enum Map<V> {
    U64(HashMap<u64, V, FixedState>),
    U128(HashMap<u128, V, FixedState>),
    Wide(HashTable<(Box<[u128]>, V)>, FixedState),
}

#[inline(always)]
fn pack64(sel: &[Sel], f: impl Fn(usize) -> u128) -> u64 {
    let mut k = 0u64;
    for s in sel {
        k |= (s.field(&f) as u64) << s.shift;
    }
    k
}

#[inline(always)]
fn pack128(sel: &[Sel], f: impl Fn(usize) -> u128) -> u128 {
    let mut k = 0u128;
    for s in sel {
        k |= s.field(&f) << s.shift;
    }
    k
}

#[inline(always)]
fn hash_wide(st: &FixedState, vals: impl Iterator<Item = u128>) -> u64 {
    let mut h = st.build_hasher();
    for v in vals {
        h.write_u128(v);
    }
    h.finish()
}

impl<V> KeyMap<V> {
    /// `fields`: (position in the key, non-zero mask) of each field that makes up the map key.
    pub(crate) fn new(fields: &[(usize, u128)], reserve: usize) -> Self {
        let mut sel = Vec::with_capacity(fields.len());
        let mut total = 0u32;
        for &(pos, mask) in fields {
            let tz = mask.trailing_zeros().min(127);
            let width = (128 - mask.leading_zeros()).saturating_sub(tz);
            sel.push(Sel {
                mask,
                pos: pos as u16,
                tz: tz as u8,
                shift: total.min(127) as u8,
            });
            total += width;
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
            sel: sel.into(),
            map,
        }
    }

    #[inline]
    pub(crate) fn get(&self, f: impl Fn(usize) -> u128) -> Option<&V> {
        match &self.map {
            Map::U64(m) => m.get(&pack64(&self.sel, f)),
            Map::U128(m) => m.get(&pack128(&self.sel, f)),
            Map::Wide(t, st) => {
                let h = hash_wide(st, self.sel.iter().map(|s| s.field(&f)));
                t.find(h, |(k, _)| {
                    k.iter().zip(&*self.sel).all(|(&x, s)| x == s.field(&f))
                })
                .map(|(_, v)| v)
            }
        }
    }

    pub(crate) fn get_mut(&mut self, f: impl Fn(usize) -> u128) -> Option<&mut V> {
        match &mut self.map {
            Map::U64(m) => m.get_mut(&pack64(&self.sel, f)),
            Map::U128(m) => m.get_mut(&pack128(&self.sel, f)),
            Map::Wide(t, st) => {
                let h = hash_wide(st, self.sel.iter().map(|s| s.field(&f)));
                let sel = &self.sel;
                t.find_mut(h, |(k, _)| {
                    k.iter().zip(&**sel).all(|(&x, s)| x == s.field(&f))
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
            Map::U64(m) => m.entry(pack64(&self.sel, f)).or_insert_with(make),
            Map::U128(m) => m.entry(pack128(&self.sel, f)).or_insert_with(make),
            Map::Wide(t, st) => {
                let vals: Box<[u128]> = self.sel.iter().map(|s| s.field(&f)).collect();
                let h = hash_wide(st, vals.iter().copied());
                let st = *st;
                &mut t
                    .entry(
                        h,
                        |(k, _)| *k == vals,
                        |(k, _)| hash_wide(&st, k.iter().copied()),
                    )
                    .or_insert_with(|| (vals.clone(), make()))
                    .into_mut()
                    .1
            }
        }
    }

    pub(crate) fn remove(&mut self, f: impl Fn(usize) -> u128) -> Option<V> {
        match &mut self.map {
            Map::U64(m) => m.remove(&pack64(&self.sel, f)),
            Map::U128(m) => m.remove(&pack128(&self.sel, f)),
            Map::Wide(t, st) => {
                let h = hash_wide(st, self.sel.iter().map(|s| s.field(&f)));
                let sel = &self.sel;
                t.find_entry(h, |(k, _)| {
                    k.iter().zip(&**sel).all(|(&x, s)| x == s.field(&f))
                })
                .ok()
                .map(|e| e.remove().0.1)
            }
        }
    }
}
