//! The published table state: what a worker reads, one immutable snapshot per batch.
//!
//! # Contract
//!
//! - Writers: only [`crate::control::Control`], under its writer lock. It mutates a private standby
//!   copy with [`State::apply`] and publishes it with one atomic pointer swap (release); the old
//!   copy becomes the standby once every reader has left it and the same ops are replayed on it.
//! - Readers: workers load the current snapshot (acquire) once per batch and drop it before they
//!   sleep. A reader sees every op of a write batch or none of them.
//! - Registers, counters, meters and idle times are not here: they are atomics in
//!   [`crate::externs`] and [`crate::control::Externs`], read and written in place.
//!
//! [`State::apply`] is deterministic (entry ids included), so applying the same op sequence to both
//! copies keeps them identical.

use crate::pre::{CloneSession, MulticastGroup, Pre};
use crate::schema::Schema;
use crate::table::{ActionProfile, EntryId, FieldMatch, MatchTable, ProfileError, TableError};

/// An action with its arguments, as stored in entries and members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionCall {
    /// Index of the action in the schema.
    pub action: u16,
    /// Arguments in parameter order.
    pub params: Box<[u128]>,
}

impl ActionCall {
    /// `action` with `params`.
    pub fn new(action: usize, params: &[u128]) -> Self {
        ActionCall {
            action: action as u16,
            params: params.into(),
        }
    }

    /// Argument `i` (0 if absent, which validation rules out).
    #[inline]
    pub fn arg(&self, i: usize) -> u128 {
        self.params.get(i).copied().unwrap_or(0)
    }
}

/// What an entry does when it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryAction {
    /// A direct action.
    Action(ActionCall),
    /// An action profile member (by member id).
    Member(u32),
    /// An action selector group (by group id).
    Group(u32),
}

/// A table entry's data (its key lives in the table's [`MatchTable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What it does.
    pub action: EntryAction,
    /// Idle timeout in ns (0 = none).
    pub idle_timeout_ns: u64,
    /// Controller cookie, echoed on read.
    pub metadata: Vec<u8>,
}

/// What the data plane needs of an entry, resolved to dense indices: kept apart from the rest of
/// the entry so that a hit touches one small record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Hot {
    /// No entry at this id.
    #[default]
    Empty,
    /// A direct action.
    Action(ActionCall),
    /// An action profile member, by its dense index in the profile.
    Member(u32),
    /// An action selector group, by its dense index in the profile.
    Group(u32),
}

/// One table: its match structure, entry data by entry id, and its default action.
#[derive(Clone, Debug)]
pub struct TableState {
    /// Keys and lookup.
    pub matcher: MatchTable,
    /// Per entry id: the action to run, for the data plane.
    pub hot: Vec<Hot>,
    /// Per entry id: the entry as the controller wrote it, for reads.
    pub entries: Vec<Option<Entry>>,
    /// The current default action.
    pub default: ActionCall,
}

impl TableState {
    /// Entry data of `id`.
    #[inline]
    pub fn entry(&self, id: EntryId) -> Option<&Entry> {
        self.entries.get(id as usize).and_then(Option::as_ref)
    }

    /// Stores `entry` (and its hot form) at `id`.
    fn put(&mut self, id: EntryId, entry: Entry, hot: Hot) {
        let slot = id as usize;
        if self.entries.len() <= slot {
            self.entries.resize(slot + 1, None);
            self.hot.resize(slot + 1, Hot::Empty);
        }
        self.entries[slot] = Some(entry);
        self.hot[slot] = hot;
    }
}

/// A write that passed validation, in the form that is applied to both copies of the state.
#[derive(Clone, Debug)]
pub enum Op {
    /// Insert an entry; `id` is the entry id it got on the first copy.
    Insert {
        table: usize,
        key: Box<[FieldMatch]>,
        priority: u32,
        entry: Entry,
        id: EntryId,
    },
    /// Replace the data of entry `id`.
    Modify {
        table: usize,
        id: EntryId,
        entry: Entry,
    },
    /// Delete entry `id`.
    Delete {
        table: usize,
        key: Box<[FieldMatch]>,
        priority: u32,
    },
    /// Set a table's default action.
    SetDefault { table: usize, call: ActionCall },
    /// Insert or replace a member.
    PutMember {
        profile: usize,
        id: u32,
        call: ActionCall,
        insert: bool,
    },
    /// Delete a member.
    DeleteMember { profile: usize, id: u32 },
    /// Insert or replace a group.
    PutGroup {
        profile: usize,
        id: u32,
        members: Vec<(u32, u32)>,
        max_size: u32,
        insert: bool,
    },
    /// Delete a group.
    DeleteGroup { profile: usize, id: u32 },
    /// Insert or replace a multicast group.
    PutMulticast { id: u32, group: MulticastGroup },
    /// Delete a multicast group.
    DeleteMulticast { id: u32 },
    /// Insert or replace a clone session.
    PutCloneSession { id: u32, session: CloneSession },
    /// Delete a clone session.
    DeleteCloneSession { id: u32 },
    /// Remove all entries, members, groups and PRE state; restore initial defaults.
    Clear,
    /// End the quarantine of the entry ids freed by earlier batches (issue 10, defect 7): the
    /// control plane applies it at the start of a batch, once no worker reads a snapshot that
    /// still has the removed entries.
    ReleaseFreedIds,
}

/// The error of an op that cannot apply to the current state.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// A table refused it.
    #[error("{0}")]
    Table(#[from] TableError),
    /// An action profile refused it.
    #[error("{0}")]
    Profile(#[from] ProfileError),
    /// The object does not exist.
    #[error("not found")]
    NotFound,
    /// The object exists already.
    #[error("already exists")]
    AlreadyExists,
}

/// All snapshotted state of a program.
#[derive(Clone, Debug)]
pub struct State {
    /// Tables in schema order.
    pub tables: Vec<TableState>,
    /// Action profiles in schema order.
    pub profiles: Vec<ActionProfile<ActionCall>>,
    /// Multicast groups and clone sessions.
    pub pre: Pre,
    /// Per table: the index of its action profile.
    pub table_profile: Vec<Option<usize>>,
}

impl State {
    /// Everything the state holds, in a form that is equal for two copies given the same
    /// operations (no hash order in it), for checking double-buffered copies against each other.
    pub fn canonical(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (i, t) in self.tables.iter().enumerate() {
            let _ = writeln!(
                out,
                "table {i}: {} hot {:?} entries {:?} default {:?}",
                t.matcher.canonical(),
                t.hot,
                t.entries,
                t.default
            );
        }
        for (i, p) in self.profiles.iter().enumerate() {
            let _ = writeln!(out, "profile {i}: {}", p.canonical());
        }
        let mut groups: Vec<_> = self.pre.groups.iter().collect();
        groups.sort_unstable_by_key(|g| *g.0);
        let mut sessions: Vec<_> = self.pre.sessions.iter().collect();
        sessions.sort_unstable_by_key(|s| *s.0);
        let _ = writeln!(out, "multicast {groups:?}\nclone sessions {sessions:?}");
        out
    }

    /// The empty state of `schema`: no entries, initial defaults.
    pub fn new(schema: &Schema) -> Self {
        let tables = schema
            .tables
            .iter()
            .map(|t| {
                let mut ts = TableState {
                    matcher: MatchTable::new(&t.key_fields(), t.size.max(t.const_entries.len())),
                    hot: Vec::new(),
                    entries: Vec::new(),
                    default: ActionCall::new(t.default_action.0, &t.default_action.1),
                };
                // Const entries were validated by `Schema::check`.
                for e in &t.const_entries {
                    if let Ok(id) = ts.matcher.insert(e.key.clone().into(), e.priority) {
                        let call = ActionCall::new(e.action, &e.params);
                        let entry = Entry {
                            action: EntryAction::Action(call.clone()),
                            idle_timeout_ns: 0,
                            metadata: Vec::new(),
                        };
                        ts.put(id, entry, Hot::Action(call));
                    }
                }
                ts
            })
            .collect();
        let profiles = schema
            .action_profiles
            .iter()
            .map(|p| ActionProfile::new(p.size, p.size, p.max_group_size))
            .collect();
        let table_profile = schema.tables.iter().map(|t| t.implementation).collect();
        State {
            tables,
            profiles,
            pre: Pre::default(),
            table_profile,
        }
    }

    /// The action profile of table `table`.
    #[inline]
    pub fn profile_of(&self, table: usize) -> Option<&ActionProfile<ActionCall>> {
        self.table_profile
            .get(table)
            .copied()
            .flatten()
            .map(|p| &self.profiles[p])
    }

    /// Applies one op. On error nothing changed. Returns the entry id of an insert.
    pub fn apply(&mut self, schema: &Schema, op: &Op) -> Result<Option<EntryId>, ApplyError> {
        match op {
            Op::Insert {
                table,
                key,
                priority,
                entry,
                ..
            } => {
                let prof = schema.tables[*table].implementation;
                if let Some(p) = prof {
                    check_ref(&self.profiles[p], &entry.action)?;
                }
                let id = self.tables[*table].matcher.insert(key.clone(), *priority)?;
                let hot = match prof {
                    Some(p) => add_ref(&mut self.profiles[p], &entry.action),
                    None => hot_of(&entry.action),
                };
                self.tables[*table].put(id, entry.clone(), hot);
                Ok(Some(id))
            }
            Op::Modify { table, id, entry } => {
                let prof = schema.tables[*table].implementation;
                let old = self.tables[*table]
                    .entry(*id)
                    .ok_or(ApplyError::NotFound)?
                    .clone();
                let hot = match prof {
                    Some(p) => {
                        check_ref(&self.profiles[p], &entry.action)?;
                        release_ref(&mut self.profiles[p], &old.action);
                        add_ref(&mut self.profiles[p], &entry.action)
                    }
                    None => hot_of(&entry.action),
                };
                self.tables[*table].put(*id, entry.clone(), hot);
                Ok(None)
            }
            Op::Delete {
                table,
                key,
                priority,
            } => {
                let t = &mut self.tables[*table];
                let id = t.matcher.remove(key, *priority)?;
                let old = t.entries.get_mut(id as usize).and_then(Option::take);
                if let Some(h) = t.hot.get_mut(id as usize) {
                    *h = Hot::Empty;
                }
                if let (Some(p), Some(old)) = (schema.tables[*table].implementation, old) {
                    release_ref(&mut self.profiles[p], &old.action);
                }
                Ok(None)
            }
            Op::SetDefault { table, call } => {
                self.tables[*table].default = call.clone();
                Ok(None)
            }
            Op::PutMember {
                profile,
                id,
                call,
                insert,
            } => {
                let p = &mut self.profiles[*profile];
                if *insert {
                    p.insert_member(*id, call.clone())?;
                } else {
                    p.modify_member(*id, call.clone())?;
                }
                Ok(None)
            }
            Op::DeleteMember { profile, id } => {
                self.profiles[*profile].remove_member(*id)?;
                Ok(None)
            }
            Op::PutGroup {
                profile,
                id,
                members,
                max_size,
                insert,
            } => {
                let p = &mut self.profiles[*profile];
                if *insert {
                    p.insert_group(*id, members, *max_size)?;
                } else {
                    p.modify_group(*id, members, *max_size)?;
                }
                Ok(None)
            }
            Op::DeleteGroup { profile, id } => {
                self.profiles[*profile].remove_group(*id)?;
                Ok(None)
            }
            Op::PutMulticast { id, group } => {
                self.pre.groups.insert(*id, group.clone());
                Ok(None)
            }
            Op::DeleteMulticast { id } => self
                .pre
                .groups
                .remove(id)
                .map(|_| None)
                .ok_or(ApplyError::NotFound),
            Op::PutCloneSession { id, session } => {
                self.pre.sessions.insert(*id, session.clone());
                Ok(None)
            }
            Op::DeleteCloneSession { id } => self
                .pre
                .sessions
                .remove(id)
                .map(|_| None)
                .ok_or(ApplyError::NotFound),
            Op::Clear => {
                *self = State::new(schema);
                Ok(None)
            }
            Op::ReleaseFreedIds => {
                for t in &mut self.tables {
                    t.matcher.release_freed();
                }
                Ok(None)
            }
        }
    }
}

/// An entry may refer only to a member or group that exists.
fn check_ref(p: &ActionProfile<ActionCall>, a: &EntryAction) -> Result<(), ApplyError> {
    let exists = match a {
        EntryAction::Action(_) => true,
        EntryAction::Member(m) => p.member(*m).is_some(),
        EntryAction::Group(g) => p.group(*g).is_some(),
    };
    if exists {
        Ok(())
    } else {
        Err(ApplyError::Profile(ProfileError::NotFound))
    }
}

/// The hot form of a direct action.
fn hot_of(a: &EntryAction) -> Hot {
    match a {
        EntryAction::Action(call) => Hot::Action(call.clone()),
        // Unreachable for tables without a profile: validation refuses members and groups there.
        EntryAction::Member(_) | EntryAction::Group(_) => Hot::Empty,
    }
}

/// Counts a table entry's reference, so that a member or group in use cannot be deleted, and
/// returns the entry's hot form with the member's or group's dense index.
fn add_ref(p: &mut ActionProfile<ActionCall>, a: &EntryAction) -> Hot {
    // check_ref ran first: the member or group exists.
    match a {
        EntryAction::Action(call) => Hot::Action(call.clone()),
        EntryAction::Member(m) => p.add_member_ref(*m).map_or(Hot::Empty, Hot::Member),
        EntryAction::Group(g) => p.add_group_ref(*g).map_or(Hot::Empty, Hot::Group),
    }
}

fn release_ref(p: &mut ActionProfile<ActionCall>, a: &EntryAction) {
    let _ = match a {
        EntryAction::Action(_) => return,
        EntryAction::Member(m) => p.release_member(*m),
        EntryAction::Group(g) => p.release_group(*g),
    };
}
