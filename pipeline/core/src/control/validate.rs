//! Validation: every update is checked against the schema and the current state, and turned into
//! the operations that apply it, before anything changes (the step of a write that can fail).

use super::*;

pub(super) fn table_err(what: &str, e: TableError) -> WriteError {
    match e {
        TableError::AlreadyExists => WriteError::AlreadyExists(format!("{what}: entry exists")),
        TableError::NotFound => WriteError::NotFound(format!("{what}: no such entry")),
        TableError::Full => WriteError::ResourceExhausted(format!("{what}: table full")),
        TableError::InvalidKey(why) | TableError::InvalidPriority(why) => {
            WriteError::InvalidArgument(format!("{what}: {why}"))
        }
    }
}

pub(super) fn profile_err(what: &str, e: ProfileError) -> WriteError {
    let msg = format!("{what}: {e}");
    match e {
        ProfileError::AlreadyExists => WriteError::AlreadyExists(msg),
        ProfileError::NotFound | ProfileError::MemberNotFound(_) => WriteError::NotFound(msg),
        ProfileError::Full | ProfileError::GroupTooLarge => WriteError::ResourceExhausted(msg),
        ProfileError::InUse => WriteError::FailedPrecondition(msg),
        ProfileError::DuplicateMember(_) | ProfileError::InvalidWeight(_) => {
            WriteError::InvalidArgument(msg)
        }
    }
}

pub(super) fn apply_err(what: &str, e: ApplyError) -> WriteError {
    match e {
        ApplyError::Table(e) => table_err(what, e),
        ApplyError::Profile(e) => profile_err(what, e),
        ApplyError::NotFound => WriteError::NotFound(what.to_string()),
        ApplyError::AlreadyExists => WriteError::AlreadyExists(what.to_string()),
    }
}

pub(super) fn fits(value: u128, bitwidth: u8) -> bool {
    bitwidth >= 128 || value >> bitwidth == 0
}

pub(super) fn mask(bitwidth: u8) -> u128 {
    if bitwidth >= 128 {
        u128::MAX
    } else {
        (1u128 << bitwidth) - 1
    }
}

pub(super) fn cells(
    index: Option<u64>,
    size: usize,
    what: &str,
) -> Result<std::ops::Range<usize>, WriteError> {
    match index {
        None => Ok(0..size),
        Some(i) => {
            let i = usize::try_from(i).unwrap_or(usize::MAX);
            if i >= size {
                return Err(WriteError::OutOfRange(format!(
                    "{what}: index {i} >= size {size}"
                )));
            }
            Ok(i..i + 1)
        }
    }
}

impl Control {
    /// Validates one update against `state`, applies its snapshot part to `state` and queues the op
    /// for replay; in-place parts are queued in `in_place`.
    pub(super) fn stage(
        &self,
        state: &mut State,
        u: &Update,
        ops: &mut Vec<Op>,
        in_place: &mut Vec<InPlace>,
    ) -> Result<(), WriteError> {
        let op = match &u.entity {
            Entity::TableEntry(e) => self.table_entry_op(state, u.kind, e, in_place)?,
            Entity::Member {
                profile_id,
                member_id,
                action,
            } => {
                let p = self.profile(*profile_id)?;
                match u.kind {
                    UpdateKind::Delete => Op::DeleteMember {
                        profile: p,
                        id: *member_id,
                    },
                    kind => {
                        let spec = action.as_ref().ok_or_else(|| {
                            WriteError::InvalidArgument("member without an action".into())
                        })?;
                        let call = self.profile_action(p, spec)?;
                        let insert = kind == UpdateKind::Insert;
                        Op::PutMember {
                            profile: p,
                            id: *member_id,
                            call,
                            insert,
                        }
                    }
                }
            }
            Entity::Group {
                profile_id,
                group_id,
                members,
                max_size,
            } => {
                let p = self.profile(*profile_id)?;
                let def = &self.schema.action_profiles[p];
                if !def.selector && u.kind != UpdateKind::Delete {
                    return Err(WriteError::InvalidArgument(format!(
                        "{} is an action profile without a selector: no groups",
                        def.name
                    )));
                }
                match u.kind {
                    UpdateKind::Delete => Op::DeleteGroup {
                        profile: p,
                        id: *group_id,
                    },
                    kind => {
                        if members.iter().any(|&(_, w)| w == 0) {
                            return Err(WriteError::InvalidArgument("member weight 0".into()));
                        }
                        let max = if *max_size == 0 {
                            def.max_group_size as u32
                        } else {
                            *max_size
                        };
                        if max as usize > def.max_group_size {
                            return Err(WriteError::OutOfRange(format!(
                                "max_group_size {max} > {}",
                                def.max_group_size
                            )));
                        }
                        let insert = kind == UpdateKind::Insert;
                        let members = members.clone();
                        Op::PutGroup {
                            profile: p,
                            id: *group_id,
                            members,
                            max_size: max,
                            insert,
                        }
                    }
                }
            }
            Entity::MulticastGroup {
                group_id,
                replicas,
                metadata,
            } => {
                let id = *group_id;
                if id == 0 || id > pre::MAX_GROUP_ID {
                    return Err(WriteError::InvalidArgument(format!(
                        "multicast group id {id}"
                    )));
                }
                check_replicas(replicas)?;
                let exists = state.pre.groups.contains_key(&id);
                self.check_exists(u.kind, exists, &format!("multicast group {id}"))?;
                match u.kind {
                    UpdateKind::Delete => Op::DeleteMulticast { id },
                    _ => {
                        let group = MulticastGroup {
                            replicas: replicas.clone(),
                            metadata: metadata.clone(),
                        };
                        Op::PutMulticast { id, group }
                    }
                }
            }
            Entity::CloneSession {
                session_id,
                session,
            } => {
                let id = *session_id;
                if id == 0 || id > pre::MAX_SESSION_ID {
                    return Err(WriteError::InvalidArgument(format!(
                        "clone session id {id}"
                    )));
                }
                check_replicas(&session.replicas)?;
                if session.class_of_service > 7 {
                    return Err(WriteError::OutOfRange("class_of_service > 7".into()));
                }
                let exists = state.pre.sessions.contains_key(&id);
                self.check_exists(u.kind, exists, &format!("clone session {id}"))?;
                match u.kind {
                    UpdateKind::Delete => Op::DeleteCloneSession { id },
                    _ => Op::PutCloneSession {
                        id,
                        session: session.clone(),
                    },
                }
            }
            Entity::Counter {
                counter_id,
                index,
                data,
            } => {
                self.modify_only(u.kind, "counter")?;
                let idx = self
                    .schema
                    .counter_by_id(*counter_id)
                    .ok_or_else(|| WriteError::NotFound(format!("counter id {counter_id}")))?;
                let c = &self.schema.counters[idx];
                let cells = cells(*index, c.size, c.name)?;
                in_place.push(InPlace::Counter {
                    direct: false,
                    idx,
                    cells,
                    data: *data,
                });
                return Ok(());
            }
            Entity::Meter {
                meter_id,
                index,
                config,
            } => {
                self.modify_only(u.kind, "meter")?;
                let idx = self
                    .schema
                    .meter_by_id(*meter_id)
                    .ok_or_else(|| WriteError::NotFound(format!("meter id {meter_id}")))?;
                let m = &self.schema.meters[idx];
                let cells = cells(*index, m.size, m.name)?;
                check_meter(config.as_ref(), &self.externs.meters[idx])?;
                in_place.push(InPlace::Meter {
                    direct: false,
                    idx,
                    cells,
                    config: *config,
                });
                return Ok(());
            }
            Entity::Register {
                register_id,
                index,
                value,
            } => {
                self.modify_only(u.kind, "register")?;
                let idx = self
                    .schema
                    .register_by_id(*register_id)
                    .ok_or_else(|| WriteError::NotFound(format!("register id {register_id}")))?;
                let r = &self.schema.registers[idx];
                let cells = cells(*index, r.size, r.name)?;
                if !fits(*value, r.bitwidth) {
                    return Err(WriteError::OutOfRange(format!(
                        "{}: value too wide",
                        r.name
                    )));
                }
                in_place.push(InPlace::Register {
                    idx,
                    cells,
                    value: *value,
                });
                return Ok(());
            }
            Entity::DirectCounter { entry, data } => {
                self.modify_only(u.kind, "direct counter")?;
                let (table, id) = self.existing_entry(state, entry)?;
                let idx = self.schema.tables[table].direct_counter.ok_or_else(|| {
                    WriteError::NotFound(format!(
                        "{}: no direct counter",
                        self.schema.tables[table].name
                    ))
                })?;
                let cells = id as usize..id as usize + 1;
                in_place.push(InPlace::Counter {
                    direct: true,
                    idx,
                    cells,
                    data: *data,
                });
                return Ok(());
            }
            Entity::DirectMeter { entry, config } => {
                self.modify_only(u.kind, "direct meter")?;
                let (table, id) = self.existing_entry(state, entry)?;
                let t = &self.schema.tables[table];
                let idx = t
                    .direct_meter
                    .ok_or_else(|| WriteError::NotFound(format!("{}: no direct meter", t.name)))?;
                check_meter(config.as_ref(), &self.externs.direct_meters[idx])?;
                let cells = id as usize..id as usize + 1;
                in_place.push(InPlace::Meter {
                    direct: true,
                    idx,
                    cells,
                    config: *config,
                });
                return Ok(());
            }
        };
        let what = format!("{:?}", u.kind);
        let id = state
            .apply(&self.schema, &op)
            .map_err(|e| apply_err(&what, e))?;
        let op = match (op, id) {
            (
                Op::Insert {
                    table,
                    key,
                    priority,
                    entry,
                    ..
                },
                Some(id),
            ) => {
                if let Entity::TableEntry(e) = &u.entity {
                    in_place.push(InPlace::NewEntry {
                        table,
                        id,
                        counter: e.counter_data,
                        meter: e.meter_config,
                    });
                }
                Op::Insert {
                    table,
                    key,
                    priority,
                    entry,
                    id,
                }
            }
            (op, _) => op,
        };
        ops.push(op);
        Ok(())
    }

    pub(super) fn modify_only(&self, kind: UpdateKind, what: &str) -> Result<(), WriteError> {
        if kind != UpdateKind::Modify {
            return Err(WriteError::InvalidArgument(format!(
                "{what}: only MODIFY is allowed"
            )));
        }
        Ok(())
    }

    pub(super) fn check_exists(
        &self,
        kind: UpdateKind,
        exists: bool,
        what: &str,
    ) -> Result<(), WriteError> {
        match (kind, exists) {
            (UpdateKind::Insert, true) => Err(WriteError::AlreadyExists(what.to_string())),
            (UpdateKind::Modify | UpdateKind::Delete, false) => {
                Err(WriteError::NotFound(what.to_string()))
            }
            _ => Ok(()),
        }
    }

    pub(super) fn profile(&self, id: u32) -> Result<usize, WriteError> {
        self.schema
            .profile_by_id(id)
            .ok_or_else(|| WriteError::NotFound(format!("action profile id {id}")))
    }

    /// A member's action must be allowed in every table of the profile.
    pub(super) fn profile_action(
        &self,
        profile: usize,
        spec: &ActionSpec,
    ) -> Result<ActionCall, WriteError> {
        let def = &self.schema.action_profiles[profile];
        let mut call = None;
        for &t in &def.tables {
            call = Some(self.action_call(t, spec, false)?);
        }
        call.ok_or_else(|| WriteError::InvalidArgument(format!("{}: no table", def.name)))
    }

    /// Validates an action against table `table`'s action refs and the action's parameters.
    pub(super) fn action_call(
        &self,
        table: usize,
        spec: &ActionSpec,
        as_default: bool,
    ) -> Result<ActionCall, WriteError> {
        let t = &self.schema.tables[table];
        let a = self
            .schema
            .action_by_id(spec.action_id)
            .ok_or_else(|| WriteError::NotFound(format!("action id {}", spec.action_id)))?;
        let def = &self.schema.actions[a];
        match t.allows(a, as_default) {
            None => {
                return Err(WriteError::InvalidArgument(format!(
                    "{} is not an action of {}",
                    def.name, t.name
                )));
            }
            Some(false) => {
                return Err(WriteError::PermissionDenied(format!(
                    "{} may not be used {} in {}",
                    def.name,
                    if as_default {
                        "as the default"
                    } else {
                        "in entries"
                    },
                    t.name
                )));
            }
            Some(true) => {}
        }
        if spec.params.len() != def.params.len() {
            return Err(WriteError::InvalidArgument(format!(
                "{} takes {} parameters, got {}",
                def.name,
                def.params.len(),
                spec.params.len()
            )));
        }
        let mut values = vec![0u128; def.params.len()];
        let mut seen = vec![false; def.params.len()];
        for &(pid, v) in &spec.params {
            let i = def.params.iter().position(|p| p.id == pid).ok_or_else(|| {
                WriteError::InvalidArgument(format!("{}: no parameter id {pid}", def.name))
            })?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: parameter id {pid} twice",
                    def.name
                )));
            }
            if !fits(v, def.params[i].bitwidth) {
                return Err(WriteError::OutOfRange(format!(
                    "{}.{}: value wider than {} bits",
                    def.name, def.params[i].name, def.params[i].bitwidth
                )));
            }
            values[i] = v;
        }
        Ok(ActionCall::new(a, &values))
    }

    /// The full key (don't-cares filled in) of a controller's match list, validated.
    pub(super) fn full_key(
        &self,
        table: usize,
        e: &TableEntry,
    ) -> Result<Box<[FieldMatch]>, WriteError> {
        let t = &self.schema.tables[table];
        let mut key: Vec<Option<FieldMatch>> = vec![None; t.fields.len()];
        for (fid, m) in &e.matches {
            let i = t.fields.iter().position(|f| f.id == *fid).ok_or_else(|| {
                WriteError::InvalidArgument(format!("{}: no match field id {fid}", t.name))
            })?;
            let f = &t.fields[i];
            if key[i].is_some() {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: field {} twice",
                    t.name, f.name
                )));
            }
            let bad =
                |why: &str| WriteError::InvalidArgument(format!("{}.{}: {why}", t.name, f.name));
            let wide = || WriteError::OutOfRange(format!("{}.{}: value too wide", t.name, f.name));
            match (f.kind, m) {
                (MatchKind::Exact, FieldMatch::Exact(v)) => {
                    if !fits(*v, f.bitwidth) {
                        return Err(wide());
                    }
                }
                (MatchKind::Lpm, FieldMatch::Lpm { value, prefix_len }) => {
                    if *prefix_len == 0 {
                        return Err(bad("prefix length 0 must be omitted"));
                    }
                    if *prefix_len > f.bitwidth {
                        return Err(bad("prefix longer than the field"));
                    }
                    if !fits(*value, f.bitwidth) {
                        return Err(wide());
                    }
                    let host = mask(f.bitwidth - *prefix_len);
                    if value & host != 0 {
                        return Err(bad("bits set beyond the prefix length"));
                    }
                }
                (MatchKind::Ternary, FieldMatch::Ternary { value, mask: m }) => {
                    if *m == 0 {
                        return Err(bad("mask 0 must be omitted"));
                    }
                    if !fits(*value, f.bitwidth) || !fits(*m, f.bitwidth) {
                        return Err(wide());
                    }
                    if value & !m != 0 {
                        return Err(bad("value has bits outside the mask"));
                    }
                }
                (MatchKind::Range, FieldMatch::Range { low, high }) => {
                    if !fits(*low, f.bitwidth) || !fits(*high, f.bitwidth) {
                        return Err(wide());
                    }
                    if low > high {
                        return Err(bad("range low > high"));
                    }
                    if *low == 0 && *high == mask(f.bitwidth) {
                        return Err(bad("a full range must be omitted"));
                    }
                }
                (MatchKind::Optional, FieldMatch::Optional(Some(v))) => {
                    if !fits(*v, f.bitwidth) {
                        return Err(wide());
                    }
                }
                _ => return Err(bad("match kind differs from the field's")),
            }
            key[i] = Some(m.clone());
        }
        t.fields
            .iter()
            .zip(key)
            .map(|(f, m)| match (m, f.kind) {
                (Some(m), _) => Ok(m),
                (None, MatchKind::Exact) => Err(WriteError::InvalidArgument(format!(
                    "{}: exact field {} omitted",
                    t.name, f.name
                ))),
                (None, MatchKind::Lpm) => Ok(FieldMatch::Lpm {
                    value: 0,
                    prefix_len: 0,
                }),
                (None, MatchKind::Ternary) => Ok(FieldMatch::Ternary { value: 0, mask: 0 }),
                (None, MatchKind::Range) => Ok(FieldMatch::Range {
                    low: 0,
                    high: mask(f.bitwidth),
                }),
                (None, MatchKind::Optional) => Ok(FieldMatch::Optional(None)),
            })
            .collect()
    }

    pub(super) fn table_index(&self, id: u32) -> Result<usize, WriteError> {
        self.schema
            .table_by_id(id)
            .ok_or_else(|| WriteError::NotFound(format!("table id {id}")))
    }

    pub(super) fn check_priority(&self, table: usize, priority: u32) -> Result<(), WriteError> {
        let t = &self.schema.tables[table];
        match (t.needs_priority(), priority) {
            (true, 0) => Err(WriteError::InvalidArgument(format!(
                "{}: priority required",
                t.name
            ))),
            (false, p) if p != 0 => Err(WriteError::InvalidArgument(format!(
                "{}: priority must be 0",
                t.name
            ))),
            _ => Ok(()),
        }
    }

    /// The table index and entry id of an existing entry named by its key.
    pub(super) fn existing_entry(
        &self,
        state: &State,
        e: &TableEntry,
    ) -> Result<(usize, EntryId), WriteError> {
        let table = self.table_index(e.table_id)?;
        self.check_priority(table, e.priority)?;
        let key = self.full_key(table, e)?;
        let id = state.tables[table]
            .matcher
            .find(&key, e.priority)
            .ok_or_else(|| {
                WriteError::NotFound(format!("{}: no such entry", self.schema.tables[table].name))
            })?;
        Ok((table, id))
    }

    pub(super) fn entry_data(&self, table: usize, e: &TableEntry) -> Result<Entry, WriteError> {
        let t = &self.schema.tables[table];
        let action = match (&e.action, t.implementation) {
            (None, _) => {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: entry without action",
                    t.name
                )));
            }
            (Some(TableAction::Action(spec)), None) => {
                EntryAction::Action(self.action_call(table, spec, false)?)
            }
            (Some(TableAction::Action(_)), Some(_)) => {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: uses an action profile; give a member or group",
                    t.name
                )));
            }
            (Some(TableAction::Member(m)), Some(_)) => EntryAction::Member(*m),
            (Some(TableAction::Group(g)), Some(p)) => {
                if !self.schema.action_profiles[p].selector {
                    return Err(WriteError::InvalidArgument(format!(
                        "{}: no selector",
                        t.name
                    )));
                }
                EntryAction::Group(*g)
            }
            (Some(_), None) => {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: has no action profile; give an action",
                    t.name
                )));
            }
        };
        if e.idle_timeout_ns != 0 && !t.idle_timeout {
            return Err(WriteError::InvalidArgument(format!(
                "{}: no idle timeout support",
                t.name
            )));
        }
        if e.counter_data.is_some() && t.direct_counter.is_none() {
            return Err(WriteError::InvalidArgument(format!(
                "{}: no direct counter",
                t.name
            )));
        }
        if let Some(c) = &e.meter_config {
            let m = t.direct_meter.ok_or_else(|| {
                WriteError::InvalidArgument(format!("{}: no direct meter", t.name))
            })?;
            check_meter(Some(c), &self.externs.direct_meters[m])?;
        }
        Ok(Entry {
            action,
            idle_timeout_ns: e.idle_timeout_ns,
            metadata: e.metadata.clone(),
        })
    }

    pub(super) fn table_entry_op(
        &self,
        state: &State,
        kind: UpdateKind,
        e: &TableEntry,
        in_place: &mut Vec<InPlace>,
    ) -> Result<Op, WriteError> {
        let table = self.table_index(e.table_id)?;
        let t = &self.schema.tables[table];
        if e.is_default {
            if kind != UpdateKind::Modify {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: the default entry can only be modified",
                    t.name
                )));
            }
            if !e.matches.is_empty() || e.priority != 0 {
                return Err(WriteError::InvalidArgument(format!(
                    "{}: the default entry has no key and no priority",
                    t.name
                )));
            }
            if t.const_default {
                return Err(WriteError::PermissionDenied(format!(
                    "{}: const default action",
                    t.name
                )));
            }
            let call = match &e.action {
                None => ActionCall::new(t.default_action.0, &t.default_action.1),
                Some(TableAction::Action(spec)) => self.action_call(table, spec, true)?,
                Some(_) => {
                    return Err(WriteError::InvalidArgument(format!(
                        "{}: the default entry takes a direct action",
                        t.name
                    )));
                }
            };
            return Ok(Op::SetDefault { table, call });
        }
        if t.is_const {
            return Err(WriteError::PermissionDenied(format!(
                "{}: const table",
                t.name
            )));
        }
        self.check_priority(table, e.priority)?;
        let key = self.full_key(table, e)?;
        match kind {
            UpdateKind::Insert => {
                let entry = self.entry_data(table, e)?;
                Ok(Op::Insert {
                    table,
                    key,
                    priority: e.priority,
                    entry,
                    id: 0,
                })
            }
            UpdateKind::Modify => {
                let entry = self.entry_data(table, e)?;
                let id = state.tables[table]
                    .matcher
                    .find(&key, e.priority)
                    .ok_or_else(|| WriteError::NotFound(format!("{}: no such entry", t.name)))?;
                // P4Runtime 9.1.7: direct resources written with a MODIFY are updated too.
                if let Some(c) = t.direct_counter.filter(|_| e.counter_data.is_some()) {
                    let data = e.counter_data.unwrap_or_default();
                    let cells = id as usize..id as usize + 1;
                    in_place.push(InPlace::Counter {
                        direct: true,
                        idx: c,
                        cells,
                        data,
                    });
                }
                if let Some(m) = t.direct_meter.filter(|_| e.meter_config.is_some()) {
                    let cells = id as usize..id as usize + 1;
                    let config = e.meter_config;
                    in_place.push(InPlace::Meter {
                        direct: true,
                        idx: m,
                        cells,
                        config,
                    });
                }
                Ok(Op::Modify { table, id, entry })
            }
            UpdateKind::Delete => Ok(Op::Delete {
                table,
                key,
                priority: e.priority,
            }),
        }
    }
}

pub(super) fn check_replicas(replicas: &[Replica]) -> Result<(), WriteError> {
    if replicas.len() > pre::MAX_REPLICAS {
        return Err(WriteError::ResourceExhausted(format!(
            "{} replicas > {}",
            replicas.len(),
            pre::MAX_REPLICAS
        )));
    }
    let mut seen = hashbrown::HashSet::new();
    for r in replicas {
        if r.port >= 1 << crate::metadata::PORT_BITS {
            return Err(WriteError::OutOfRange(format!("replica port {}", r.port)));
        }
        if !seen.insert((r.port, r.rid)) {
            return Err(WriteError::InvalidArgument(format!(
                "duplicate replica (port {}, instance {})",
                r.port, r.rid
            )));
        }
    }
    Ok(())
}

pub(super) fn check_meter(
    config: Option<&MeterConfig>,
    meter: &MeterArray,
) -> Result<(), WriteError> {
    if let Some(c) = config {
        meter
            .validate(c)
            .map_err(|e| WriteError::InvalidArgument(format!("meter config: {e}")))?;
    }
    Ok(())
}
