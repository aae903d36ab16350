//! Parser value sets: a set of values, of up to 128 bits, that a parser state's `select` matches
//! its key against, filled by the control plane at run time (P4Runtime's `ValueSetEntry`, BMv2's
//! `pvs_add`).
//!
//! The members live behind an [`ArcSwap`]: a parser reads the current set without a lock, and a
//! control-plane change builds a new set and swaps it in (an `rcu`, so two writers never lose
//! each other's change). Members are kept sorted, so that a lookup is a binary search.

use arc_swap::ArcSwap;
use std::sync::Arc;

/// Why a change to a value set was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ValueSetError {
    /// A value wider than the set's width.
    #[error("value of {bits} bits in a value set of {width}")]
    TooWide {
        /// The value's significant bits.
        bits: u32,
        /// The set's width.
        width: u32,
    },
    /// More members than the set holds.
    #[error("{members} members in a value set of {size}")]
    Full {
        /// Members asked for.
        members: usize,
        /// The set's size.
        size: usize,
    },
}

/// A parser value set of `width`-bit values, at most `size` members.
#[derive(Debug)]
pub struct ValueSet {
    members: ArcSwap<Vec<u128>>,
    width: u32,
    size: usize,
}

impl ValueSet {
    /// An empty set of `width`-bit values (1..=128) holding at most `size` members.
    pub fn new(width: u32, size: usize) -> Self {
        ValueSet {
            members: ArcSwap::from_pointee(Vec::new()),
            width: width.clamp(1, 128),
            size,
        }
    }

    /// The members' width in bits.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// The most members the set holds.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether `v` is a member.
    #[inline]
    pub fn contains(&self, v: u128) -> bool {
        self.members.load().binary_search(&v).is_ok()
    }

    /// Whether a member equals `v` under `mask`.
    #[inline]
    pub fn contains_masked(&self, v: u128, mask: u128) -> bool {
        self.members.load().iter().any(|m| m & mask == v & mask)
    }

    /// The members, in ascending order.
    pub fn members(&self) -> Vec<u128> {
        self.members.load().as_ref().clone()
    }

    fn check(&self, v: u128) -> Result<u128, ValueSetError> {
        let bits = 128 - v.leading_zeros();
        if bits > self.width {
            return Err(ValueSetError::TooWide {
                bits,
                width: self.width,
            });
        }
        Ok(v)
    }

    /// Makes `values` the members (P4Runtime's MODIFY of a `ValueSetEntry`); duplicates count
    /// once. Nothing changes on an error.
    pub fn replace(&self, values: &[u128]) -> Result<(), ValueSetError> {
        let mut v = values
            .iter()
            .map(|&x| self.check(x))
            .collect::<Result<Vec<_>, _>>()?;
        v.sort_unstable();
        v.dedup();
        if v.len() > self.size {
            return Err(ValueSetError::Full {
                members: v.len(),
                size: self.size,
            });
        }
        self.members.store(Arc::new(v));
        Ok(())
    }

    /// Adds `v` (BMv2's `pvs_add`); false if it was a member already.
    pub fn add(&self, v: u128) -> Result<bool, ValueSetError> {
        let v = self.check(v)?;
        let mut result = Ok(false);
        self.members.rcu(|m| {
            let mut m = m.as_ref().clone();
            result = match m.binary_search(&v) {
                Ok(_) => Ok(false),
                Err(_) if m.len() >= self.size => Err(ValueSetError::Full {
                    members: m.len() + 1,
                    size: self.size,
                }),
                Err(at) => {
                    m.insert(at, v);
                    Ok(true)
                }
            };
            m
        });
        result
    }

    /// Removes `v` (BMv2's `pvs_remove`); false if it was not a member.
    pub fn remove(&self, v: u128) -> bool {
        let mut found = false;
        self.members.rcu(|m| {
            let mut m = m.as_ref().clone();
            found = match m.binary_search(&v) {
                Ok(at) => {
                    m.remove(at);
                    true
                }
                Err(_) => false,
            };
            m
        });
        found
    }

    /// Removes every member.
    pub fn clear(&self) {
        self.members.store(Arc::new(Vec::new()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_added_removed_replaced_and_bounded() {
        let s = ValueSet::new(16, 3);
        assert!(!s.contains(0x8847));
        assert_eq!(s.add(0x8847), Ok(true));
        assert_eq!(s.add(0x8847), Ok(false));
        assert_eq!(s.add(0x0806), Ok(true));
        assert!(s.contains(0x8847) && s.contains(0x0806) && !s.contains(0x0800));
        assert_eq!(s.members(), [0x0806, 0x8847]);
        assert_eq!(
            s.add(0x1_0000),
            Err(ValueSetError::TooWide {
                bits: 17,
                width: 16
            })
        );
        assert_eq!(s.add(1), Ok(true));
        assert!(matches!(s.add(2), Err(ValueSetError::Full { .. })));
        assert!(s.remove(1));
        assert!(!s.remove(1));
        // A replacement that does not fit changes nothing.
        assert!(s.replace(&[1, 2, 3, 4]).is_err());
        assert_eq!(s.members(), [0x0806, 0x8847]);
        s.replace(&[5, 5, 4]).unwrap();
        assert_eq!(s.members(), [4, 5]);
        assert!(s.contains_masked(0x14, 0x0f) && !s.contains_masked(0x16, 0x0f));
        s.clear();
        assert!(s.members().is_empty());
    }
}
