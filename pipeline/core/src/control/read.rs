//! Reads: entries (with their counters and meters), defaults, members, groups, indexed externs,
//! the packet replication engine and drop counts, from the current snapshot.

use super::validate::{cells, mask};
use super::*;

/// A group as read: (profile id, group id, (member id, weight)s).
pub type GroupRead = (u32, u32, Vec<(u32, u32)>);

/// One cell of an indexed extern, as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell<T> {
    /// P4Info id of the extern.
    pub id: u32,
    /// Cell index.
    pub index: u64,
    /// Value.
    pub value: T,
}

impl Control {
    /// The controller's form of a stored key: don't-care fields omitted.
    fn controller_key(&self, table: usize, key: &[FieldMatch]) -> Vec<(u32, FieldMatch)> {
        let t = &self.schema.tables[table];
        t.fields
            .iter()
            .zip(key)
            .filter(|(f, m)| match m {
                FieldMatch::Lpm { prefix_len: 0, .. }
                | FieldMatch::Ternary { mask: 0, .. }
                | FieldMatch::Optional(None) => false,
                FieldMatch::Range { low: 0, high } => *high != mask(f.bitwidth),
                _ => true,
            })
            .map(|(f, m)| (f.id, m.clone()))
            .collect()
    }

    fn controller_action(&self, call: &ActionCall) -> ActionSpec {
        let def = &self.schema.actions[usize::from(call.action)];
        ActionSpec {
            action_id: def.id,
            params: def
                .params
                .iter()
                .zip(call.params.iter())
                .map(|(p, v)| (p.id, *v))
                .collect(),
        }
    }

    fn read_entry(
        &self,
        state: &State,
        table: usize,
        id: EntryId,
        with_counter: bool,
        with_meter: bool,
    ) -> Option<TableEntry> {
        let t = &self.schema.tables[table];
        let ts = &state.tables[table];
        let (key, priority) = ts.matcher.key_of(id)?;
        let entry = ts.entry(id)?;
        let action = match &entry.action {
            EntryAction::Action(call) => TableAction::Action(self.controller_action(call)),
            EntryAction::Member(m) => TableAction::Member(*m),
            EntryAction::Group(g) => TableAction::Group(*g),
        };
        let x = &self.externs;
        let now = self.now_ns.load(std::sync::atomic::Ordering::Relaxed);
        Some(TableEntry {
            table_id: t.id,
            matches: self.controller_key(table, key),
            priority,
            action: Some(action),
            is_default: false,
            idle_timeout_ns: entry.idle_timeout_ns,
            metadata: entry.metadata.clone(),
            counter_data: t
                .direct_counter
                .filter(|_| with_counter)
                .map(|c| x.direct_counters[c].read(id as usize).unwrap_or_default()),
            meter_config: t
                .direct_meter
                .filter(|_| with_meter)
                .and_then(|m| x.direct_meters[m].config(id as usize)),
            elapsed_since_hit_ns: x.hit_times[table]
                .as_ref()
                .map(|h| now.saturating_sub(h.last_hit(id).unwrap_or(now))),
        })
    }

    /// Entries of table `table_id` (None = every table), with direct counters and meters if asked.
    pub fn read_entries(
        &self,
        table_id: Option<u32>,
        with_counter: bool,
        with_meter: bool,
    ) -> Result<Vec<TableEntry>, WriteError> {
        let state = self.snapshot();
        let tables = match table_id {
            Some(id) => vec![self.table_index(id)?],
            None => (0..self.schema.tables.len()).collect(),
        };
        let mut out = Vec::new();
        for table in tables {
            for (id, _, _) in state.tables[table].matcher.iter() {
                out.extend(self.read_entry(&state, table, id, with_counter, with_meter));
            }
        }
        Ok(out)
    }

    /// Entries of table `table_id` with their entry ids, in id order. An entry keeps its id
    /// while it exists, in every copy of the state (direct counters are indexed by it), so the
    /// id serves as BMv2's entry handle.
    pub fn read_entries_with_ids(
        &self,
        table_id: u32,
        with_counter: bool,
        with_meter: bool,
    ) -> Result<Vec<(EntryId, TableEntry)>, WriteError> {
        let table = self.table_index(table_id)?;
        let state = self.snapshot();
        Ok(state.tables[table]
            .matcher
            .iter()
            .map(|(id, _, _)| id)
            .filter_map(|id| {
                self.read_entry(&state, table, id, with_counter, with_meter)
                    .map(|e| (id, e))
            })
            .collect())
    }

    /// The entry of table `table_id` whose id is `id`, or NOT_FOUND.
    pub fn read_entry_by_id(
        &self,
        table_id: u32,
        id: EntryId,
        with_counter: bool,
        with_meter: bool,
    ) -> Result<TableEntry, WriteError> {
        let table = self.table_index(table_id)?;
        let state = self.snapshot();
        self.read_entry(&state, table, id, with_counter, with_meter)
            .ok_or_else(|| {
                WriteError::NotFound(format!(
                    "{}: no entry with handle {id}",
                    self.schema.tables[table].name
                ))
            })
    }

    /// The id of the entry with `e`'s key, or NOT_FOUND.
    pub fn entry_id(&self, e: &TableEntry) -> Result<EntryId, WriteError> {
        let state = self.snapshot();
        Ok(self.existing_entry(&state, e)?.1)
    }

    /// The entry with `e`'s key, or NOT_FOUND.
    pub fn read_entry_by_key(
        &self,
        e: &TableEntry,
        with_counter: bool,
        with_meter: bool,
    ) -> Result<TableEntry, WriteError> {
        let state = self.snapshot();
        let (table, id) = self.existing_entry(&state, e)?;
        self.read_entry(&state, table, id, with_counter, with_meter)
            .ok_or_else(|| WriteError::NotFound("entry".into()))
    }

    /// The default entry of table `table_id`.
    pub fn read_default(&self, table_id: u32) -> Result<TableEntry, WriteError> {
        let table = self.table_index(table_id)?;
        let state = self.snapshot();
        let call = &state.tables[table].default;
        Ok(TableEntry {
            table_id,
            action: Some(TableAction::Action(self.controller_action(call))),
            is_default: true,
            ..TableEntry::default()
        })
    }

    /// Members of profile `profile_id` (None = all profiles): (profile id, member id, action).
    pub fn read_members(
        &self,
        profile_id: Option<u32>,
    ) -> Result<Vec<(u32, u32, ActionSpec)>, WriteError> {
        let state = self.snapshot();
        let mut out = Vec::new();
        for p in self.profiles(profile_id)? {
            let pid = self.schema.action_profiles[p].id;
            for (m, call) in state.profiles[p].members() {
                out.push((pid, m, self.controller_action(call)));
            }
        }
        Ok(out)
    }

    /// Groups of profile `profile_id` (None = all): (profile id, group id, (member, weight)s).
    pub fn read_groups(&self, profile_id: Option<u32>) -> Result<Vec<GroupRead>, WriteError> {
        let state = self.snapshot();
        let mut out = Vec::new();
        for p in self.profiles(profile_id)? {
            let pid = self.schema.action_profiles[p].id;
            for (g, members) in state.profiles[p].groups() {
                out.push((pid, g, members.to_vec()));
            }
        }
        Ok(out)
    }

    fn profiles(&self, profile_id: Option<u32>) -> Result<Vec<usize>, WriteError> {
        Ok(match profile_id {
            Some(id) => vec![self.profile(id)?],
            None => (0..self.schema.action_profiles.len()).collect(),
        })
    }

    fn cells_of<T>(
        &self,
        defs: impl Iterator<Item = (u32, usize)>,
        id: Option<u32>,
        index: Option<u64>,
        what: &str,
        read: impl Fn(usize, usize) -> T,
    ) -> Result<Vec<Cell<T>>, WriteError> {
        let defs: Vec<(usize, (u32, usize))> = defs.enumerate().collect();
        let chosen: Vec<_> = match id {
            Some(id) => {
                let d = defs
                    .iter()
                    .find(|(_, (did, _))| *did == id)
                    .ok_or_else(|| WriteError::NotFound(format!("{what} id {id}")))?;
                vec![*d]
            }
            None => defs,
        };
        let mut out = Vec::new();
        for (k, (did, size)) in chosen {
            for i in cells(index, size, what)? {
                out.push(Cell {
                    id: did,
                    index: i as u64,
                    value: read(k, i),
                });
            }
        }
        Ok(out)
    }

    /// Counter cells (id None = all counters, index None = all cells).
    pub fn read_counters(
        &self,
        id: Option<u32>,
        index: Option<u64>,
    ) -> Result<Vec<Cell<CounterData>>, WriteError> {
        let defs = self.schema.counters.iter().map(|c| (c.id, c.size));
        self.cells_of(defs, id, index, "counter", |k, i| {
            self.externs.counters[k].read(i).unwrap_or_default()
        })
    }

    /// Meter cells and their configs.
    pub fn read_meters(
        &self,
        id: Option<u32>,
        index: Option<u64>,
    ) -> Result<Vec<Cell<Option<MeterConfig>>>, WriteError> {
        let defs = self.schema.meters.iter().map(|m| (m.id, m.size));
        self.cells_of(defs, id, index, "meter", |k, i| {
            self.externs.meters[k].config(i)
        })
    }

    /// Register cells.
    pub fn read_registers(
        &self,
        id: Option<u32>,
        index: Option<u64>,
    ) -> Result<Vec<Cell<u128>>, WriteError> {
        let defs = self.schema.registers.iter().map(|r| (r.id, r.size));
        self.cells_of(defs, id, index, "register", |k, i| {
            self.externs.registers[k].read_wide(i).unwrap_or(0)
        })
    }

    /// Multicast groups (id None or 0 = all).
    pub fn read_multicast_groups(
        &self,
        id: Option<u32>,
    ) -> Result<Vec<(u32, MulticastGroup)>, WriteError> {
        let state = self.snapshot();
        let mut out: Vec<_> = match id.filter(|&i| i != 0) {
            Some(i) => {
                let g = state
                    .pre
                    .groups
                    .get(&i)
                    .ok_or_else(|| WriteError::NotFound(format!("multicast group {i}")))?;
                vec![(i, g.clone())]
            }
            None => state
                .pre
                .groups
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
        };
        out.sort_by_key(|(k, _)| *k);
        Ok(out)
    }

    /// Clone sessions (id None or 0 = all).
    pub fn read_clone_sessions(
        &self,
        id: Option<u32>,
    ) -> Result<Vec<(u32, CloneSession)>, WriteError> {
        let state = self.snapshot();
        let mut out: Vec<_> = match id.filter(|&i| i != 0) {
            Some(i) => {
                let s = state
                    .pre
                    .sessions
                    .get(&i)
                    .ok_or_else(|| WriteError::NotFound(format!("clone session {i}")))?;
                vec![(i, s.clone())]
            }
            None => state
                .pre
                .sessions
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
        };
        out.sort_by_key(|(k, _)| *k);
        Ok(out)
    }

    /// Drops by reason, named: the standard reasons, then the program's own.
    pub fn drop_counts(&self) -> Vec<(&'static str, CounterData)> {
        DropReason::NAMES
            .iter()
            .chain(&self.schema.drop_reasons)
            .enumerate()
            .map(|(i, n)| (*n, self.externs.drops.read(i).unwrap_or_default()))
            .collect()
    }
}
