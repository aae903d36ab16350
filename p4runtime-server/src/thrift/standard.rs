//! BMv2's `standard` service: match tables, action profiles (their counters and meters too) and
//! the switch's management calls.

use std::sync::atomic::Ordering;

use pipeline::control::{Entity, TableAction, TableEntry, Update, UpdateKind, WriteError};
use pipeline::externs::CounterData;
use pipeline::schema::TableDef;
use pipeline::table::EntryId;

use super::code::*;
use super::externs::{
    VsetOp, counter_data, counter_read, counter_value, counter_write, meter_config, meter_get,
    meter_set, parse_vset, rates, register_read, register_write,
};
use super::program::View;
use super::value::{Struct, TType, Value};
use super::{Fail, Reply, Runtime};

/// The method `method` of the `standard` service, or None if it is not one.
pub(super) fn call(rt: &Runtime, method: &str, a: &Struct) -> Option<Reply> {
    let v = rt.view();
    let tables = Tables { rt, v: &v };
    Some(match method {
        "bm_get_config" => Ok(Some(Value::str(v.json.clone()))),
        "bm_get_config_md5" => Ok(Some(Value::Bytes(md5::compute(&v.json).0.to_vec()))),
        "bm_mgmt_get_info" => Ok(Some(Value::Struct(
            Struct::new()
                .with(1, Value::I64(rt.opts.device_id as i64))
                .with(2, Value::I32(i32::from(rt.port.load(Ordering::Acquire)))),
        ))),
        "bm_reset_state" => {
            rt.service.reset_state();
            Ok(None)
        }
        "bm_dev_mgr_show_ports" => Ok(Some(Value::structs(rt.opts.ports.iter().map(
            |(n, name)| {
                Struct::new()
                    .with(1, Value::I32(*n as i32))
                    .with(2, Value::str(name.clone()))
                    .with(3, Value::Bool(true))
                    .with(4, Value::Map(TType::String, TType::String, Vec::new()))
            },
        )))),
        "bm_dev_mgr_add_port" | "bm_dev_mgr_remove_port" => Err(Fail::Code(
            DEV_MGR_ERROR,
            "ports are given at start (-i); they cannot be added or removed".into(),
        )),
        "bm_load_new_config" | "bm_swap_configs" => Err(Fail::Code(
            CONFIG_SWAP_DISABLED,
            "programs are loaded with P4Runtime's SetForwardingPipelineConfig".into(),
        )),
        "bm_set_crc16_custom_parameters" | "bm_set_crc32_custom_parameters" => Err(Fail::Code(
            CRC_WRONG_TYPE,
            "the program has no custom-parameter CRC calculation".into(),
        )),
        // The CLI prints (or saves) the answer; it declares no exception.
        "bm_serialize_state" => Ok(Some(Value::str(
            "# pisa-switch does not serialize its state: read it over P4Runtime, or with \
             table_dump, counter_read and register_read\n",
        ))),
        "bm_parse_vset_add" => parse_vset(&v, a, VsetOp::Add),
        "bm_parse_vset_remove" => parse_vset(&v, a, VsetOp::Remove),
        "bm_parse_vset_get" => parse_vset(&v, a, VsetOp::Get),
        "bm_parse_vset_clear" => parse_vset(&v, a, VsetOp::Clear),
        "bm_mt_get_num_entries" => tables.num_entries(a),
        "bm_mt_clear_entries" => tables.clear(a),
        "bm_mt_add_entry" => tables.add(a, |v, t, a| {
            let act = v.action_of(t, &a.string(4)?)?;
            Ok(TableAction::Action(v.action_spec(act, a.list(5)?)?))
        }),
        "bm_mt_indirect_add_entry" => tables.add(a, |v, t, a| {
            indirect(v, t, false)?;
            Ok(TableAction::Member(handle(a.int(4)?, INVALID_MBR_HANDLE)?))
        }),
        "bm_mt_indirect_ws_add_entry" => tables.add(a, |v, t, a| {
            indirect(v, t, true)?;
            Ok(TableAction::Group(handle(a.int(4)?, INVALID_GRP_HANDLE)?))
        }),
        "bm_mt_delete_entry" | "bm_mt_indirect_delete_entry" | "bm_mt_indirect_ws_delete_entry" => {
            tables.delete(a)
        }
        "bm_mt_modify_entry" => tables.modify(a, |v, t, a| {
            let act = v.action_of(t, &a.string(4)?)?;
            Ok(TableAction::Action(v.action_spec(act, a.list(5)?)?))
        }),
        "bm_mt_indirect_modify_entry" => tables.modify(a, |v, t, a| {
            indirect(v, t, false)?;
            Ok(TableAction::Member(handle(a.int(4)?, INVALID_MBR_HANDLE)?))
        }),
        "bm_mt_indirect_ws_modify_entry" => tables.modify(a, |v, t, a| {
            indirect(v, t, true)?;
            Ok(TableAction::Group(handle(a.int(4)?, INVALID_GRP_HANDLE)?))
        }),
        "bm_mt_set_default_action" => tables.set_default(a, |v, t, a| {
            let act = v.action_of(t, &a.string(3)?)?;
            Ok(Some(TableAction::Action(v.action_spec(act, a.list(4)?)?)))
        }),
        "bm_mt_indirect_set_default_member" => tables.set_default(a, |v, t, a| {
            indirect(v, t, false)?;
            Ok(Some(TableAction::Member(handle(
                a.int(3)?,
                INVALID_MBR_HANDLE,
            )?)))
        }),
        "bm_mt_indirect_ws_set_default_group" => tables.set_default(a, |v, t, a| {
            indirect(v, t, true)?;
            Ok(Some(TableAction::Group(handle(
                a.int(3)?,
                INVALID_GRP_HANDLE,
            )?)))
        }),
        "bm_mt_reset_default_entry"
        | "bm_mt_indirect_reset_default_entry"
        | "bm_mt_indirect_ws_reset_default_entry" => tables.set_default(a, |_, _, _| Ok(None)),
        "bm_mt_set_entry_ttl"
        | "bm_mt_indirect_set_entry_ttl"
        | "bm_mt_indirect_ws_set_entry_ttl" => tables.set_ttl(a),
        "bm_mt_get_entries" => tables.entries(a),
        "bm_mt_get_entry" => tables.entry(a),
        "bm_mt_get_entry_from_key" => tables.entry_from_key(a),
        "bm_mt_get_default_entry" => tables.default_entry(a),
        "bm_mt_read_counter" => tables.read_counter(a),
        "bm_mt_write_counter" => tables.write_counter(a),
        "bm_mt_reset_counters" => tables.reset_counters(a),
        "bm_mt_set_meter_rates" => tables.set_meter(a),
        "bm_mt_get_meter_rates" => tables.get_meter(a),
        "bm_mt_act_prof_add_member" => tables.add_member(a),
        "bm_mt_act_prof_delete_member" => tables.delete_member(a),
        "bm_mt_act_prof_modify_member" => tables.modify_member(a),
        "bm_mt_act_prof_create_group" => tables.create_group(a),
        "bm_mt_act_prof_delete_group" => tables.delete_group(a),
        "bm_mt_act_prof_add_member_to_group" => tables.group_member(a, true),
        "bm_mt_act_prof_remove_member_from_group" => tables.group_member(a, false),
        "bm_mt_act_prof_get_members" => tables.members(a, None),
        "bm_mt_act_prof_get_member" => tables.members(a, Some(a.int(3).unwrap_or(-1))),
        "bm_mt_act_prof_get_groups" => tables.groups(a, None),
        "bm_mt_act_prof_get_group" => tables.groups(a, Some(a.int(3).unwrap_or(-1))),
        "bm_counter_read" => counter_read(rt, &v, a),
        "bm_counter_write" => counter_write(rt, &v, a, false),
        "bm_counter_reset_all" => counter_write(rt, &v, a, true),
        "bm_meter_array_set_rates" => meter_set(rt, &v, a, None),
        "bm_meter_set_rates" => meter_set(rt, &v, a, Some(a.int(3).unwrap_or(-1))),
        "bm_meter_get_rates" => meter_get(&v, a),
        "bm_register_read" => register_read(&v, a, false),
        "bm_register_read_all" => register_read(&v, a, true),
        "bm_register_write" => register_write(rt, &v, a, false),
        "bm_register_reset" => register_write(rt, &v, a, true),
        _ => return None,
    })
}

/// A handle argument as an id; negative handles are `invalid`.
fn handle(h: i64, invalid: i32) -> Result<u32, Fail> {
    u32::try_from(h).map_err(|_| Fail::Code(invalid, format!("no handle {h}")))
}

/// Checks that `t` takes members (`groups`: and groups), as the indirect calls need.
fn indirect(v: &View, t: &TableDef, groups: bool) -> Result<(), Fail> {
    match t.implementation.map(|p| &v.schema.action_profiles[p]) {
        None => Err(Fail::Code(
            WRONG_TABLE_TYPE,
            format!("{} has no action profile", t.name),
        )),
        Some(p) if groups && !p.selector => Err(Fail::Code(
            NO_ACTION_PROFILE_SELECTION,
            format!("{} has no selector", p.name),
        )),
        Some(_) => Ok(()),
    }
}

/// A write error as a table operation's error code, `not_found` for a missing object.
fn table_err(e: WriteError, not_found: i32) -> Fail {
    let code = match &e {
        WriteError::AlreadyExists(_) => DUPLICATE_ENTRY,
        WriteError::NotFound(_) => not_found,
        WriteError::ResourceExhausted(_) => TABLE_FULL,
        WriteError::PermissionDenied(m) if m.ends_with("const default action") => {
            DEFAULT_ACTION_IS_CONST
        }
        WriteError::PermissionDenied(m) if m.ends_with("const table") => IMMUTABLE_TABLE_ENTRIES,
        // An action outside its scope (table only, default only).
        WriteError::PermissionDenied(_) => INVALID_ACTION_NAME,
        WriteError::FailedPrecondition(_) => MBR_STILL_USED,
        _ => TABLE_ERROR,
    };
    Fail::Code(code, e.to_string())
}

pub(super) fn update(kind: UpdateKind, entity: Entity) -> Vec<Update> {
    vec![Update { kind, entity }]
}

/// The table calls, on one view of the program.
struct Tables<'a> {
    rt: &'a Runtime,
    v: &'a View,
}

/// A selector group: its id and (member, weight)s.
type Group = (u32, Vec<(u32, u32)>);

type ActionOf = fn(&View, &TableDef, &Struct) -> Result<TableAction, Fail>;

impl Tables<'_> {
    fn table(&self, a: &Struct) -> Result<(usize, &TableDef), Fail> {
        self.v.table(&a.string(2)?)
    }

    /// Writes what `build` makes of the current state, all or none: `build` runs under the
    /// service's write lock, so that what it reads is what the write changes. A refusal is
    /// reported with `not_found` for a missing object.
    fn write(
        &self,
        not_found: i32,
        build: impl FnOnce() -> Result<Vec<Update>, Fail>,
    ) -> Result<(), Fail> {
        self.rt
            .write_with(&self.v.control, build)?
            .map_err(|e| table_err(e, not_found))
    }

    /// The entry of the handle in field 3.
    fn by_handle(
        &self,
        t: &TableDef,
        a: &Struct,
        counter: bool,
        meter: bool,
    ) -> Result<(EntryId, TableEntry), Fail> {
        let h = handle(a.int(3)?, INVALID_HANDLE)?;
        let e = self
            .v
            .control
            .read_entry_by_id(t.id, h, counter, meter)
            .map_err(|e| table_err(e, INVALID_HANDLE))?;
        Ok((h, e))
    }

    /// The table of field 2, which must have a direct counter (or meter).
    fn with_direct(&self, a: &Struct, counter: bool) -> Result<&TableDef, Fail> {
        let (_, t) = self.table(a)?;
        match (counter, t.direct_counter, t.direct_meter) {
            (true, Some(_), _) | (false, _, Some(_)) => Ok(t),
            (true, None, _) => Err(Fail::Code(
                COUNTERS_DISABLED,
                format!("{}: no direct counter", t.name),
            )),
            (false, _, None) => Err(Fail::Code(
                METERS_DISABLED,
                format!("{}: no direct meter", t.name),
            )),
        }
    }

    fn num_entries(&self, a: &Struct) -> Reply {
        let (_, t) = self.table(a)?;
        let n = self
            .v
            .control
            .read_entries_with_ids(t.id, false, false)
            .map_err(|e| table_err(e, INVALID_TABLE_NAME))?
            .len();
        Ok(Some(Value::I64(n as i64)))
    }

    fn clear(&self, a: &Struct) -> Reply {
        let (_, t) = self.table(a)?;
        self.write(INVALID_HANDLE, || {
            let mut updates: Vec<Update> = self
                .v
                .control
                .read_entries_with_ids(t.id, false, false)
                .map_err(|e| table_err(e, INVALID_TABLE_NAME))?
                .into_iter()
                .map(|(_, e)| Update {
                    kind: UpdateKind::Delete,
                    entity: Entity::TableEntry(e),
                })
                .collect();
            if matches!(a.get(3), Some(Value::Bool(true))) {
                updates.push(self.default_update(t, None));
            }
            Ok(updates)
        })?;
        Ok(None)
    }

    fn add(&self, a: &Struct, action: ActionOf) -> Reply {
        let (ti, t) = self.table(a)?;
        let priority = a.strukt(6).ok().and_then(|o| o.int(1).ok());
        let mut e = self.v.key(ti, a.list(3)?, priority)?;
        let action = action(self.v, t, a)?;
        let missing = match action {
            TableAction::Group(_) => INVALID_GRP_HANDLE,
            _ => INVALID_MBR_HANDLE,
        };
        e.action = Some(action);
        self.write(missing, || {
            Ok(update(UpdateKind::Insert, Entity::TableEntry(e.clone())))
        })?;
        let id = self
            .v
            .control
            .entry_id(&e)
            .map_err(|e| table_err(e, INVALID_HANDLE))?;
        Ok(Some(Value::I32(id as i32)))
    }

    fn delete(&self, a: &Struct) -> Reply {
        let (_, t) = self.table(a)?;
        self.write(INVALID_HANDLE, || {
            let (_, e) = self.by_handle(t, a, false, false)?;
            Ok(update(UpdateKind::Delete, Entity::TableEntry(e)))
        })?;
        Ok(None)
    }

    fn modify(&self, a: &Struct, action: ActionOf) -> Reply {
        let (_, t) = self.table(a)?;
        let action = action(self.v, t, a)?;
        self.write(INVALID_MBR_HANDLE, || {
            let (_, mut e) = self.by_handle(t, a, false, false)?;
            e.action = Some(action);
            Ok(update(UpdateKind::Modify, Entity::TableEntry(e)))
        })?;
        Ok(None)
    }

    /// The update setting `t`'s default action (None: the program's initial default).
    fn default_update(&self, t: &TableDef, action: Option<TableAction>) -> Update {
        let action = action.unwrap_or_else(|| {
            let (i, args) = &t.default_action;
            let def = &self.v.schema.actions[*i];
            TableAction::Action(pipeline::control::ActionSpec {
                action_id: def.id,
                params: def
                    .params
                    .iter()
                    .map(|p| p.id)
                    .zip(args.iter().copied())
                    .collect(),
            })
        });
        Update {
            kind: UpdateKind::Modify,
            entity: Entity::TableEntry(TableEntry {
                table_id: t.id,
                is_default: true,
                action: Some(action),
                ..TableEntry::default()
            }),
        }
    }

    fn set_default(
        &self,
        a: &Struct,
        action: fn(&View, &TableDef, &Struct) -> Result<Option<TableAction>, Fail>,
    ) -> Reply {
        let (_, t) = self.table(a)?;
        let action = action(self.v, t, a)?;
        self.write(INVALID_MBR_HANDLE, || {
            Ok(vec![self.default_update(t, action)])
        })?;
        Ok(None)
    }

    fn set_ttl(&self, a: &Struct) -> Reply {
        let (_, t) = self.table(a)?;
        if !t.idle_timeout {
            return Err(Fail::Code(
                AGEING_DISABLED,
                format!("{} does not support idle timeouts", t.name),
            ));
        }
        let ms = u64::try_from(a.int(4)?).unwrap_or(0);
        self.write(INVALID_HANDLE, || {
            let (_, mut e) = self.by_handle(t, a, false, false)?;
            e.idle_timeout_ns = ms.saturating_mul(1_000_000);
            e.elapsed_since_hit_ns = None;
            Ok(update(UpdateKind::Modify, Entity::TableEntry(e)))
        })?;
        Ok(None)
    }

    fn entries(&self, a: &Struct) -> Reply {
        let (ti, t) = self.table(a)?;
        let entries = self
            .v
            .control
            .read_entries_with_ids(t.id, false, false)
            .map_err(|e| table_err(e, INVALID_TABLE_NAME))?;
        Ok(Some(Value::structs(
            entries.iter().map(|(id, e)| self.v.entry(ti, *id, e)),
        )))
    }

    fn entry(&self, a: &Struct) -> Reply {
        let (ti, t) = self.table(a)?;
        let (id, e) = self.by_handle(t, a, false, false)?;
        Ok(Some(Value::Struct(self.v.entry(ti, id, &e))))
    }

    fn entry_from_key(&self, a: &Struct) -> Reply {
        let (ti, t) = self.table(a)?;
        let priority = a.strukt(4).ok().and_then(|o| o.int(1).ok());
        let key = self.v.key(ti, a.list(3)?, priority)?;
        let c = &self.v.control;
        let id = c.entry_id(&key).map_err(|e| table_err(e, BAD_MATCH_KEY))?;
        let e = c
            .read_entry_by_id(t.id, id, false, false)
            .map_err(|e| table_err(e, BAD_MATCH_KEY))?;
        Ok(Some(Value::Struct(self.v.entry(ti, id, &e))))
    }

    fn default_entry(&self, a: &Struct) -> Reply {
        let (ix, t) = self.table(a)?;
        let d = self
            .v
            .control
            .read_default(t.id)
            .map_err(|e| table_err(e, INVALID_TABLE_NAME))?;
        // A table whose JSON gives no default entry has none in BMv2 (type NONE, which
        // simple_switch_CLI prints EMPTY; PI's tests/CLI/testdata/table_dump.out too), not the
        // loader's stand-in action.
        if self.v.is_empty_default(ix, d.action.as_ref()) {
            return Ok(Some(Value::Struct(self.v.action_entry(None))));
        }
        Ok(Some(Value::Struct(self.v.action_entry(d.action.as_ref()))))
    }

    fn read_counter(&self, a: &Struct) -> Reply {
        let t = self.with_direct(a, true)?;
        let (_, e) = self.by_handle(t, a, true, false)?;
        Ok(Some(Value::Struct(counter_value(
            e.counter_data.unwrap_or_default(),
        ))))
    }

    fn write_counter(&self, a: &Struct) -> Reply {
        let t = self.with_direct(a, true)?;
        let data = counter_data(a.strukt(4)?)?;
        self.write(INVALID_HANDLE, || {
            let (_, entry) = self.by_handle(t, a, false, false)?;
            Ok(update(
                UpdateKind::Modify,
                Entity::DirectCounter { entry, data },
            ))
        })?;
        Ok(None)
    }

    fn reset_counters(&self, a: &Struct) -> Reply {
        let t = self.with_direct(a, true)?;
        self.write(INVALID_HANDLE, || {
            Ok(self
                .v
                .control
                .read_entries_with_ids(t.id, false, false)
                .map_err(|e| table_err(e, INVALID_TABLE_NAME))?
                .into_iter()
                .map(|(_, entry)| Update {
                    kind: UpdateKind::Modify,
                    entity: Entity::DirectCounter {
                        entry,
                        data: CounterData::default(),
                    },
                })
                .collect())
        })?;
        Ok(None)
    }

    fn set_meter(&self, a: &Struct) -> Reply {
        let t = self.with_direct(a, false)?;
        // A bad rate list is an INVALID_METER_OPERATION of the table.
        let config = meter_config(a.list(4)?).map_err(|f| match f {
            Fail::Code(_, why) => Fail::Code(INVALID_METER_OPERATION, why),
            f => f,
        })?;
        self.write(INVALID_HANDLE, || {
            let (_, entry) = self.by_handle(t, a, false, false)?;
            Ok(update(
                UpdateKind::Modify,
                Entity::DirectMeter {
                    entry,
                    config: Some(config),
                },
            ))
        })?;
        Ok(None)
    }

    fn get_meter(&self, a: &Struct) -> Reply {
        let t = self.with_direct(a, false)?;
        let (_, e) = self.by_handle(t, a, false, true)?;
        Ok(Some(rates(e.meter_config)))
    }

    fn profile(&self, a: &Struct) -> Result<&pipeline::schema::ActionProfileDef, Fail> {
        let name = a.string(2)?;
        self.v
            .schema
            .action_profiles
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| {
                Fail::Code(
                    INVALID_ACTION_PROFILE_NAME,
                    format!("no action profile {name}"),
                )
            })
    }

    /// The action named `name` that a table of profile `p` allows.
    fn profile_action(
        &self,
        p: &pipeline::schema::ActionProfileDef,
        name: &str,
    ) -> Result<&pipeline::schema::ActionDef, Fail> {
        let t = p
            .tables
            .first()
            .map(|&t| &self.v.schema.tables[t])
            .ok_or_else(|| Fail::Code(INVALID_ACTION_NAME, format!("{}: no table", p.name)))?;
        self.v.action_of(t, name)
    }

    fn add_member(&self, a: &Struct) -> Reply {
        let p = self.profile(a)?;
        let act = self.profile_action(p, &a.string(3)?)?;
        let spec = self.v.action_spec(act, a.list(4)?)?;
        let mut id = 0;
        self.write(INVALID_MBR_HANDLE, || {
            let used: std::collections::HashSet<u32> = self
                .v
                .control
                .read_members(Some(p.id))
                .map_err(|e| table_err(e, INVALID_ACTION_PROFILE_NAME))?
                .into_iter()
                .map(|(_, m, _)| m)
                .collect();
            id = (0u32..).find(|m| !used.contains(m)).unwrap_or(0);
            Ok(update(
                UpdateKind::Insert,
                Entity::Member {
                    profile_id: p.id,
                    member_id: id,
                    action: Some(spec),
                },
            ))
        })?;
        Ok(Some(Value::I32(id as i32)))
    }

    fn delete_member(&self, a: &Struct) -> Reply {
        let p = self.profile(a)?;
        let m = handle(a.int(3)?, INVALID_MBR_HANDLE)?;
        self.write(INVALID_MBR_HANDLE, || {
            Ok(update(
                UpdateKind::Delete,
                Entity::Member {
                    profile_id: p.id,
                    member_id: m,
                    action: None,
                },
            ))
        })?;
        Ok(None)
    }

    fn modify_member(&self, a: &Struct) -> Reply {
        let p = self.profile(a)?;
        let m = handle(a.int(3)?, INVALID_MBR_HANDLE)?;
        let act = self.profile_action(p, &a.string(4)?)?;
        let spec = self.v.action_spec(act, a.list(5)?)?;
        self.write(INVALID_MBR_HANDLE, || {
            Ok(update(
                UpdateKind::Modify,
                Entity::Member {
                    profile_id: p.id,
                    member_id: m,
                    action: Some(spec),
                },
            ))
        })?;
        Ok(None)
    }

    fn selector(&self, a: &Struct) -> Result<&pipeline::schema::ActionProfileDef, Fail> {
        let p = self.profile(a)?;
        if !p.selector {
            return Err(Fail::Code(
                NO_ACTION_PROFILE_SELECTION,
                format!("{} has no selector", p.name),
            ));
        }
        Ok(p)
    }

    fn groups_of(&self, p: u32) -> Result<Vec<Group>, Fail> {
        Ok(self
            .v
            .control
            .read_groups(Some(p))
            .map_err(|e| table_err(e, INVALID_ACTION_PROFILE_NAME))?
            .into_iter()
            .map(|(_, g, m)| (g, m))
            .collect())
    }

    fn group_update(
        &self,
        kind: UpdateKind,
        p: u32,
        g: u32,
        members: Vec<(u32, u32)>,
    ) -> Vec<Update> {
        update(
            kind,
            Entity::Group {
                profile_id: p,
                group_id: g,
                members,
                max_size: 0,
            },
        )
    }

    fn create_group(&self, a: &Struct) -> Reply {
        let p = self.selector(a)?;
        let mut id = 0;
        self.write(INVALID_GRP_HANDLE, || {
            let groups = self.groups_of(p.id)?;
            id = (0u32..)
                .find(|g| !groups.iter().any(|(x, _)| x == g))
                .unwrap_or(0);
            Ok(self.group_update(UpdateKind::Insert, p.id, id, Vec::new()))
        })?;
        Ok(Some(Value::I32(id as i32)))
    }

    fn delete_group(&self, a: &Struct) -> Reply {
        let p = self.selector(a)?;
        let g = handle(a.int(3)?, INVALID_GRP_HANDLE)?;
        self.write(INVALID_GRP_HANDLE, || {
            Ok(self.group_update(UpdateKind::Delete, p.id, g, Vec::new()))
        })
        .map_err(|f| match f {
            Fail::Code(MBR_STILL_USED, why) => Fail::Code(GRP_STILL_USED, why),
            f => f,
        })?;
        Ok(None)
    }

    fn group_member(&self, a: &Struct, add: bool) -> Reply {
        let p = self.selector(a)?;
        let m = handle(a.int(3)?, INVALID_MBR_HANDLE)?;
        let g = handle(a.int(4)?, INVALID_GRP_HANDLE)?;
        self.write(INVALID_MBR_HANDLE, || {
            let (_, mut members) = self
                .groups_of(p.id)?
                .into_iter()
                .find(|(x, _)| *x == g)
                .ok_or_else(|| Fail::Code(INVALID_GRP_HANDLE, format!("no group {g}")))?;
            let at = members.iter().position(|(x, _)| *x == m);
            match (add, at) {
                (true, Some(_)) => {
                    return Err(Fail::Code(
                        MBR_ALREADY_IN_GRP,
                        format!("member {m} is in group {g}"),
                    ));
                }
                (true, None) => members.push((m, 1)),
                (false, None) => {
                    return Err(Fail::Code(
                        MBR_NOT_IN_GRP,
                        format!("member {m} is not in group {g}"),
                    ));
                }
                (false, Some(i)) => {
                    members.remove(i);
                }
            }
            Ok(self.group_update(UpdateKind::Modify, p.id, g, members))
        })?;
        Ok(None)
    }

    fn members(&self, a: &Struct, one: Option<i64>) -> Reply {
        let p = self.profile(a)?;
        let all = self
            .v
            .control
            .read_members(Some(p.id))
            .map_err(|e| table_err(e, INVALID_ACTION_PROFILE_NAME))?;
        let member = |(_, m, spec): &(u32, u32, pipeline::control::ActionSpec)| {
            let (name, data) = self.v.action_data(spec);
            Struct::new()
                .with(1, Value::I32(*m as i32))
                .with(2, Value::str(name))
                .with(3, data)
        };
        match one {
            None => Ok(Some(Value::structs(all.iter().map(member)))),
            Some(h) => all
                .iter()
                .find(|(_, m, _)| i64::from(*m) == h)
                .map(|x| Some(Value::Struct(member(x))))
                .ok_or_else(|| Fail::Code(INVALID_MBR_HANDLE, format!("no member {h}"))),
        }
    }

    fn groups(&self, a: &Struct, one: Option<i64>) -> Reply {
        let p = self.selector(a)?;
        let group = |(g, members): &Group| {
            let ids = members.iter().map(|(m, _)| Value::I32(*m as i32)).collect();
            Struct::new()
                .with(1, Value::I32(*g as i32))
                .with(2, Value::List(TType::I32, ids))
        };
        let all = self.groups_of(p.id)?;
        match one {
            None => Ok(Some(Value::structs(all.iter().map(group)))),
            Some(h) => all
                .iter()
                .find(|(g, _)| i64::from(*g) == h)
                .map(|x| Some(Value::Struct(group(x))))
                .ok_or_else(|| Fail::Code(INVALID_GRP_HANDLE, format!("no group {h}"))),
        }
    }
}
