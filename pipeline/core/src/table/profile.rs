//! Action profiles and selectors (P4Runtime members and groups).
//!
//! Members and groups get dense slot indices (lowest free, so deterministic) that stay valid
//! for their lifetime: a table entry can store the index and the data plane reaches member
//! data with plain vector indexing ([`ActionProfile::member_by_index`],
//! [`ActionProfile::select_by_index`]). Selection picks the member owning
//! `hash % total_weight`: groups whose total weight is at most [`EXPAND_MAX`] keep an expanded
//! table (one dense member index per unit of weight) so that is a single load; larger groups
//! binary-search their cumulative weights.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use foldhash::fast::FixedState;
use hashbrown::HashMap;

/// Errors of [`ActionProfile`] operations. On error nothing was changed.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
pub enum ProfileError {
    /// A member/group with this id exists.
    #[error("already exists")]
    AlreadyExists,
    /// No member/group with this id.
    #[error("not found")]
    NotFound,
    /// A group refers to a member that does not exist.
    #[error("group member {0} not found")]
    MemberNotFound(u32),
    /// A member appears twice in a group.
    #[error("member {0} listed twice in the group")]
    DuplicateMember(u32),
    /// A member weight of 0.
    #[error("member {0} has weight 0")]
    InvalidWeight(u32),
    /// The profile holds its maximum number of members/groups.
    #[error("action profile full")]
    Full,
    /// The sum of weights exceeds the group's max_size, or max_size exceeds the profile's
    /// max_group_size.
    #[error("group too large")]
    GroupTooLarge,
    /// The member is referenced by a group or table entry, or the group by a table entry.
    #[error("in use")]
    InUse,
}

#[derive(Clone, Debug)]
struct Member<A> {
    id: u32,
    data: A,
    group_refs: u32,
    table_refs: u32,
}

/// Groups with at most this total weight select through an expanded member table.
const EXPAND_MAX: u64 = 4096;

#[derive(Clone, Debug)]
struct Group {
    id: u32,
    members: Box<[(u32, u32)]>,
    max_size: u32,
    /// Cumulative weights; `cum[i]` is the end of member `i`'s share.
    cum: Box<[u64]>,
    /// Dense member indices, parallel to `members`.
    idx: Box<[u32]>,
    /// If the total weight is at most [`EXPAND_MAX`]: the dense member index owning each
    /// unit of weight (member `i` repeated `weight_i` times); empty otherwise.
    expanded: Box<[u32]>,
    table_refs: u32,
}

/// Dense slot storage keyed by a P4Runtime id, with lowest-free slot allocation.
#[derive(Clone, Debug)]
struct Slots<T> {
    ids: HashMap<u32, u32, FixedState>,
    slots: Vec<Option<T>>,
    free: BinaryHeap<Reverse<u32>>,
}

impl<T> Slots<T> {
    fn new() -> Self {
        Self {
            ids: HashMap::default(),
            slots: Vec::new(),
            free: BinaryHeap::new(),
        }
    }

    fn index(&self, id: u32) -> Option<u32> {
        self.ids.get(&id).copied()
    }

    fn get(&self, id: u32) -> Option<&T> {
        self.slots[*self.ids.get(&id)? as usize].as_ref()
    }

    fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        self.slots[*self.ids.get(&id)? as usize].as_mut()
    }

    fn at(&self, idx: u32) -> Option<&T> {
        self.slots.get(idx as usize)?.as_ref()
    }

    fn at_mut(&mut self, idx: u32) -> &mut T {
        self.slots[idx as usize].as_mut().expect("live slot")
    }

    fn insert(&mut self, id: u32, v: T) -> u32 {
        let idx = match self.free.pop() {
            Some(Reverse(i)) => i,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[idx as usize] = Some(v);
        self.ids.insert(id, idx);
        idx
    }

    fn remove(&mut self, id: u32) -> Option<T> {
        let idx = self.ids.remove(&id)?;
        self.free.push(Reverse(idx));
        self.slots[idx as usize].take()
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// Ids, slots and free slots in an order that does not depend on hashing.
    fn canonical(&self) -> String
    where
        T: std::fmt::Debug,
    {
        let mut ids: Vec<(u32, u32)> = self.ids.iter().map(|(&a, &b)| (a, b)).collect();
        ids.sort_unstable();
        let mut free: Vec<u32> = self.free.iter().map(|r| r.0).collect();
        free.sort_unstable();
        format!("ids {ids:?} free {free:?} slots {:?}", self.slots)
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }
}

/// An action profile (members) with selector groups, generic over the action data.
#[derive(Clone, Debug)]
pub struct ActionProfile<A> {
    max_members: usize,
    max_groups: usize,
    max_group_size: usize,
    members: Slots<Member<A>>,
    groups: Slots<Group>,
}

impl<A: std::fmt::Debug> ActionProfile<A> {
    /// Members and groups in a form that is equal for two copies given the same operations
    /// (for checking double-buffered copies against each other).
    pub fn canonical(&self) -> String {
        format!(
            "members {} groups {}",
            self.members.canonical(),
            self.groups.canonical()
        )
    }
}

impl<A: Clone> ActionProfile<A> {
    /// `max_group_size` bounds the sum of weights of a group (0 = unbounded).
    pub fn new(max_members: usize, max_groups: usize, max_group_size: usize) -> Self {
        Self {
            max_members,
            max_groups,
            max_group_size,
            members: Slots::new(),
            groups: Slots::new(),
        }
    }

    /// Adds a member.
    pub fn insert_member(&mut self, id: u32, a: A) -> Result<(), ProfileError> {
        if self.members.index(id).is_some() {
            return Err(ProfileError::AlreadyExists);
        }
        if self.members.len() >= self.max_members {
            return Err(ProfileError::Full);
        }
        self.members.insert(
            id,
            Member {
                id,
                data: a,
                group_refs: 0,
                table_refs: 0,
            },
        );
        Ok(())
    }

    /// Replaces a member's action data (groups referring to it see the change).
    pub fn modify_member(&mut self, id: u32, a: A) -> Result<(), ProfileError> {
        self.members.get_mut(id).ok_or(ProfileError::NotFound)?.data = a;
        Ok(())
    }

    /// Removes a member that no group or table entry refers to.
    pub fn remove_member(&mut self, id: u32) -> Result<(), ProfileError> {
        let m = self.members.get(id).ok_or(ProfileError::NotFound)?;
        if m.group_refs > 0 || m.table_refs > 0 {
            return Err(ProfileError::InUse);
        }
        self.members.remove(id);
        Ok(())
    }

    /// A member's action data.
    pub fn member(&self, id: u32) -> Option<&A> {
        self.members.get(id).map(|m| &m.data)
    }

    /// Dense index of a member, stable while it exists.
    pub fn member_index(&self, id: u32) -> Option<u32> {
        self.members.index(id)
    }

    /// Hot path: member data by dense index.
    #[inline]
    pub fn member_by_index(&self, idx: u32) -> Option<&A> {
        self.members.at(idx).map(|m| &m.data)
    }

    /// All members (id, data), in dense index order.
    pub fn members(&self) -> impl Iterator<Item = (u32, &A)> {
        self.members.iter().map(|m| (m.id, &m.data))
    }

    /// Number of members.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    fn build_group(
        &self,
        id: u32,
        members: &[(u32, u32)],
        max_size: u32,
    ) -> Result<Group, ProfileError> {
        let limit = self.max_group_size as u64;
        if limit != 0 && u64::from(max_size) > limit {
            return Err(ProfileError::GroupTooLarge);
        }
        let cap = if max_size != 0 {
            u64::from(max_size)
        } else {
            limit
        };
        let mut cum = Vec::with_capacity(members.len());
        let mut idx = Vec::with_capacity(members.len());
        let mut total = 0u64;
        for (i, &(m, w)) in members.iter().enumerate() {
            let mi = self
                .members
                .index(m)
                .ok_or(ProfileError::MemberNotFound(m))?;
            if w == 0 {
                return Err(ProfileError::InvalidWeight(m));
            }
            if members[..i].iter().any(|&(o, _)| o == m) {
                return Err(ProfileError::DuplicateMember(m));
            }
            total += u64::from(w);
            cum.push(total);
            idx.push(mi);
        }
        if cap != 0 && total > cap {
            return Err(ProfileError::GroupTooLarge);
        }
        let expanded = if total <= EXPAND_MAX {
            members
                .iter()
                .zip(&idx)
                .flat_map(|(&(_, w), &mi)| std::iter::repeat_n(mi, w as usize))
                .collect()
        } else {
            Box::default()
        };
        Ok(Group {
            id,
            members: members.into(),
            max_size,
            cum: cum.into(),
            idx: idx.into(),
            expanded,
            table_refs: 0,
        })
    }

    fn ref_members(&mut self, idx: &[u32], up: bool) {
        for &i in idx {
            let m = self.members.at_mut(i);
            if up {
                m.group_refs += 1;
            } else {
                m.group_refs -= 1;
            }
        }
    }

    /// Adds a group of (member id, weight >= 1). `max_size` bounds the sum of weights
    /// (0 = the profile's max_group_size).
    pub fn insert_group(
        &mut self,
        id: u32,
        members: &[(u32, u32)],
        max_size: u32,
    ) -> Result<(), ProfileError> {
        if self.groups.index(id).is_some() {
            return Err(ProfileError::AlreadyExists);
        }
        if self.groups.len() >= self.max_groups {
            return Err(ProfileError::Full);
        }
        let g = self.build_group(id, members, max_size)?;
        self.ref_members(&g.idx, true);
        self.groups.insert(id, g);
        Ok(())
    }

    /// Replaces a group's members (and max_size); its dense index and table references stay.
    pub fn modify_group(
        &mut self,
        id: u32,
        members: &[(u32, u32)],
        max_size: u32,
    ) -> Result<(), ProfileError> {
        let old_refs = self
            .groups
            .get(id)
            .ok_or(ProfileError::NotFound)?
            .table_refs;
        let mut g = self.build_group(id, members, max_size)?;
        g.table_refs = old_refs;
        self.ref_members(&g.idx, true);
        let gi = self.groups.index(id).expect("checked");
        let old = std::mem::replace(self.groups.at_mut(gi), g);
        self.ref_members(&old.idx, false);
        Ok(())
    }

    /// Removes a group no table entry refers to.
    pub fn remove_group(&mut self, id: u32) -> Result<(), ProfileError> {
        let g = self.groups.get(id).ok_or(ProfileError::NotFound)?;
        if g.table_refs > 0 {
            return Err(ProfileError::InUse);
        }
        let g = self.groups.remove(id).expect("checked");
        self.ref_members(&g.idx, false);
        Ok(())
    }

    /// A group's (member id, weight) list.
    pub fn group(&self, id: u32) -> Option<&[(u32, u32)]> {
        self.groups.get(id).map(|g| &*g.members)
    }

    /// A group's max_size as given at insert/modify.
    pub fn group_max_size(&self, id: u32) -> Option<u32> {
        self.groups.get(id).map(|g| g.max_size)
    }

    /// Dense index of a group, stable while it exists.
    pub fn group_index(&self, id: u32) -> Option<u32> {
        self.groups.index(id)
    }

    /// All groups (id, members), in dense index order.
    pub fn groups(&self) -> impl Iterator<Item = (u32, &[(u32, u32)])> {
        self.groups.iter().map(|g| (g.id, &*g.members))
    }

    /// Number of groups.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Weighted selection by hash: the member owning `hash % total_weight`. `None` for an
    /// unknown or empty group.
    #[inline]
    pub fn select(&self, group: u32, hash: u64) -> Option<&A> {
        self.select_by_index(self.groups.index(group)?, hash)
    }

    /// Hot path: [`Self::select`] by dense group index (no hash map probe).
    #[inline]
    pub fn select_by_index(&self, idx: u32, hash: u64) -> Option<&A> {
        let g = self.groups.at(idx)?;
        let mi = if !g.expanded.is_empty() {
            g.expanded[(hash % g.expanded.len() as u64) as usize]
        } else {
            let total = *g.cum.last()?;
            let r = hash % total;
            g.idx[g.cum.partition_point(|&c| c <= r)]
        };
        self.member_by_index(mi)
    }

    /// Records a table entry referring to a member; returns its dense index.
    pub fn add_member_ref(&mut self, id: u32) -> Result<u32, ProfileError> {
        let i = self.members.index(id).ok_or(ProfileError::NotFound)?;
        self.members.at_mut(i).table_refs += 1;
        Ok(i)
    }

    /// Drops a reference taken with [`Self::add_member_ref`].
    pub fn release_member(&mut self, id: u32) -> Result<(), ProfileError> {
        let m = self.members.get_mut(id).ok_or(ProfileError::NotFound)?;
        m.table_refs = m.table_refs.checked_sub(1).ok_or(ProfileError::NotFound)?;
        Ok(())
    }

    /// Records a table entry referring to a group; returns its dense index.
    pub fn add_group_ref(&mut self, id: u32) -> Result<u32, ProfileError> {
        let i = self.groups.index(id).ok_or(ProfileError::NotFound)?;
        self.groups.at_mut(i).table_refs += 1;
        Ok(i)
    }

    /// Drops a reference taken with [`Self::add_group_ref`].
    pub fn release_group(&mut self, id: u32) -> Result<(), ProfileError> {
        let g = self.groups.get_mut(id).ok_or(ProfileError::NotFound)?;
        g.table_refs = g.table_refs.checked_sub(1).ok_or(ProfileError::NotFound)?;
        Ok(())
    }
}
