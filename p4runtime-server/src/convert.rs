//! Conversions between P4Runtime messages and the pipeline's control API, with the P4Runtime
//! validation rules that belong to the wire form (bytestrings, signed fields, unsupported forms).
//! Every error carries the canonical code P4Runtime names for it.

use pipeline::control::{self, ActionSpec, Entity, TableAction, UpdateKind, WriteError};
use pipeline::externs::{CounterData, MeterAlgorithm, MeterConfig};
use pipeline::pre::{CloneSession, Replica};
use pipeline::schema::Schema;
use pipeline::table::FieldMatch;
use tonic::Code;

use crate::bytestring::{self, BytestringError};
use crate::proto::p4::v1 as p4;

/// Why one update or one read entity was refused: a canonical code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntityError {
    /// The gRPC canonical code.
    pub code: Code,
    /// What was wrong.
    pub message: String,
}

impl EntityError {
    /// An error with `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        EntityError {
            code,
            message: message.into(),
        }
    }

    /// INVALID_ARGUMENT.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }

    /// UNIMPLEMENTED.
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Self::new(Code::Unimplemented, message)
    }

    /// The error as a gRPC status.
    pub fn into_status(self) -> tonic::Status {
        tonic::Status::new(self.code, self.message)
    }
}

impl From<WriteError> for EntityError {
    fn from(e: WriteError) -> Self {
        let code = match &e {
            WriteError::AlreadyExists(_) => Code::AlreadyExists,
            WriteError::NotFound(_) => Code::NotFound,
            WriteError::OutOfRange(_) => Code::OutOfRange,
            WriteError::ResourceExhausted(_) => Code::ResourceExhausted,
            WriteError::InvalidArgument(_) => Code::InvalidArgument,
            WriteError::PermissionDenied(_) => Code::PermissionDenied,
            WriteError::FailedPrecondition(_) => Code::FailedPrecondition,
            WriteError::Aborted(_) => Code::Aborted,
        };
        EntityError::new(code, e.to_string())
    }
}

type Result<T> = std::result::Result<T, EntityError>;

/// A bytestring of `bitwidth` bits as a number; empty and over-wide values are OUT_OF_RANGE
/// (p4runtime.md item 14).
pub fn value(bytes: &[u8], bitwidth: u8, what: &str) -> Result<u128> {
    bytestring::to_u128(bytes, u32::from(bitwidth)).map_err(|e| {
        let why = match e {
            BytestringError::Empty => "empty bytestring".to_string(),
            BytestringError::TooWide(w) => format!("value does not fit in {w} bits"),
        };
        EntityError::new(Code::OutOfRange, format!("{what}: {why}"))
    })
}

fn non_negative(v: i64, what: &str) -> Result<u64> {
    u64::try_from(v).map_err(|_| EntityError::invalid(format!("{what} is negative ({v})")))
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The update type of a P4Runtime update.
pub fn update_kind(t: i32) -> Result<UpdateKind> {
    match p4::update::Type::try_from(t) {
        Ok(p4::update::Type::Insert) => Ok(UpdateKind::Insert),
        Ok(p4::update::Type::Modify) => Ok(UpdateKind::Modify),
        Ok(p4::update::Type::Delete) => Ok(UpdateKind::Delete),
        _ => Err(EntityError::invalid(format!("update type {t} unspecified"))),
    }
}

/// An index of a counter, meter or register (None when the message has none).
pub fn index(i: Option<&p4::Index>) -> Result<Option<u64>> {
    i.map(|i| {
        u64::try_from(i.index)
            .map_err(|_| EntityError::new(Code::OutOfRange, format!("index {}", i.index)))
    })
    .transpose()
}

/// An action by id with its parameters, checked against the action's declared widths.
pub fn action(schema: &Schema, a: &p4::Action) -> Result<ActionSpec> {
    let def = schema
        .action_by_id(a.action_id)
        .map(|i| &schema.actions[i])
        .ok_or_else(|| EntityError::new(Code::NotFound, format!("action id {}", a.action_id)))?;
    let params = a
        .params
        .iter()
        .map(|p| {
            let pd = def
                .params
                .iter()
                .find(|d| d.id == p.param_id)
                .ok_or_else(|| {
                    EntityError::invalid(format!("{}: no parameter id {}", def.name, p.param_id))
                })?;
            let what = format!("{}.{}", def.name, pd.name);
            Ok((p.param_id, value(&p.value, pd.bitwidth, &what)?))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ActionSpec {
        action_id: a.action_id,
        params,
    })
}

/// The P4Runtime form of an action.
pub fn action_msg(a: &ActionSpec) -> p4::Action {
    p4::Action {
        action_id: a.action_id,
        params: a
            .params
            .iter()
            .map(|&(param_id, v)| p4::action::Param {
                param_id,
                value: bytestring::canonical(v),
            })
            .collect(),
    }
}

fn field_match(schema: &Schema, table: usize, m: &p4::FieldMatch) -> Result<(u32, FieldMatch)> {
    use p4::field_match::FieldMatchType as T;
    let t = &schema.tables[table];
    let f = t
        .fields
        .iter()
        .find(|f| f.id == m.field_id)
        .ok_or_else(|| {
            EntityError::invalid(format!("{}: no match field id {}", t.name, m.field_id))
        })?;
    let what = format!("{}.{}", t.name, f.name);
    let v = |b: &[u8]| value(b, f.bitwidth, &what);
    let fm = match &m.field_match_type {
        Some(T::Exact(e)) => FieldMatch::Exact(v(&e.value)?),
        Some(T::Lpm(l)) => {
            let prefix_len = u8::try_from(l.prefix_len)
                .ok()
                .filter(|&p| p <= f.bitwidth)
                .ok_or_else(|| {
                    EntityError::invalid(format!("{what}: prefix length {}", l.prefix_len))
                })?;
            FieldMatch::Lpm {
                value: v(&l.value)?,
                prefix_len,
            }
        }
        Some(T::Ternary(t)) => FieldMatch::Ternary {
            value: v(&t.value)?,
            mask: v(&t.mask)?,
        },
        Some(T::Range(r)) => FieldMatch::Range {
            low: v(&r.low)?,
            high: v(&r.high)?,
        },
        Some(T::Optional(o)) => FieldMatch::Optional(Some(v(&o.value)?)),
        Some(T::Other(_)) => {
            return Err(EntityError::unimplemented(format!(
                "{what}: architecture-specific match kinds"
            )));
        }
        None => return Err(EntityError::invalid(format!("{what}: match kind unset"))),
    };
    Ok((f.id, fm))
}

fn field_match_msg(id: u32, m: &FieldMatch) -> p4::FieldMatch {
    use p4::field_match::{self as fm, FieldMatchType as T};
    let b = bytestring::canonical;
    let kind = match m {
        FieldMatch::Exact(v) => T::Exact(fm::Exact { value: b(*v) }),
        FieldMatch::Lpm { value, prefix_len } => T::Lpm(fm::Lpm {
            value: b(*value),
            prefix_len: i32::from(*prefix_len),
        }),
        FieldMatch::Ternary { value, mask } => T::Ternary(fm::Ternary {
            value: b(*value),
            mask: b(*mask),
        }),
        FieldMatch::Range { low, high } => T::Range(fm::Range {
            low: b(*low),
            high: b(*high),
        }),
        FieldMatch::Optional(v) => T::Optional(fm::Optional {
            value: b(v.unwrap_or(0)),
        }),
    };
    p4::FieldMatch {
        field_id: id,
        field_match_type: Some(kind),
    }
}

/// A value set's members from a `ValueSetEntry`: each member's exact fields concatenated in
/// the P4Info's order, as the parser matches them. A member must give every field once.
pub fn value_set_members(schema: &Schema, set: usize, e: &p4::ValueSetEntry) -> Result<Vec<u128>> {
    use p4::field_match::FieldMatchType as T;
    let d = &schema.value_sets[set];
    let mut members = Vec::with_capacity(e.members.len());
    for (k, m) in e.members.iter().enumerate() {
        let mut parts: Vec<Option<u128>> = vec![None; d.fields.len()];
        for fm in &m.r#match {
            let Some(i) = d.fields.iter().position(|f| f.0 == fm.field_id) else {
                return Err(EntityError::invalid(format!(
                    "{} member {k}: no match field id {}",
                    d.name, fm.field_id
                )));
            };
            let (_, name, width) = d.fields[i];
            let what = format!("{} member {k} field {}", d.name, fm.field_id);
            let v = match &fm.field_match_type {
                Some(T::Exact(x)) => value(&x.value, width, &what)?,
                Some(_) => {
                    return Err(EntityError::unimplemented(format!(
                        "{what} ({name}): value set members match exactly"
                    )));
                }
                None => return Err(EntityError::invalid(format!("{what}: match kind unset"))),
            };
            if parts[i].replace(v).is_some() {
                return Err(EntityError::invalid(format!("{what}: given twice")));
            }
        }
        let mut v: u128 = 0;
        for (part, &(id, _, width)) in parts.iter().zip(&d.fields) {
            let Some(x) = part else {
                return Err(EntityError::invalid(format!(
                    "{} member {k}: field {id} missing",
                    d.name
                )));
            };
            v = v.checked_shl(u32::from(width)).unwrap_or(0) | x;
        }
        members.push(v);
    }
    Ok(members)
}

/// A value set's members as a `ValueSetEntry`.
pub fn value_set_msg(schema: &Schema, set: usize, members: &[u128]) -> p4::ValueSetEntry {
    use p4::field_match::{self as fm, FieldMatchType as T};
    let d = &schema.value_sets[set];
    let member = |v: u128| {
        let mut shift: u32 = d.fields.iter().map(|f| u32::from(f.2)).sum();
        let r#match = d
            .fields
            .iter()
            .map(|&(id, _, width)| {
                shift -= u32::from(width);
                let mask = u128::MAX.checked_shr(128 - u32::from(width)).unwrap_or(0);
                let x = v.checked_shr(shift).unwrap_or(0) & mask;
                p4::FieldMatch {
                    field_id: id,
                    field_match_type: Some(T::Exact(fm::Exact {
                        value: bytestring::canonical(x),
                    })),
                }
            })
            .collect();
        p4::ValueSetMember { r#match }
    };
    p4::ValueSetEntry {
        value_set_id: d.id,
        members: members.iter().map(|&v| member(v)).collect(),
    }
}

/// Counter data from the wire (counts are signed there).
pub fn counter_data(d: &p4::CounterData) -> Result<CounterData> {
    Ok(CounterData {
        packets: non_negative(d.packet_count, "packet_count")?,
        bytes: non_negative(d.byte_count, "byte_count")?,
    })
}

/// Counter data for the wire.
pub fn counter_data_msg(d: CounterData) -> p4::CounterData {
    p4::CounterData {
        packet_count: signed(d.packets),
        byte_count: signed(d.bytes),
    }
}

/// A meter config from the wire. A single-rate meter's excess burst is `eburst` (P4Runtime 1.4+;
/// older clients put it in `pburst`).
pub fn meter_config(c: &p4::MeterConfig, algorithm: MeterAlgorithm) -> Result<MeterConfig> {
    let pburst = match algorithm {
        MeterAlgorithm::SrTcm if c.eburst != 0 => c.eburst,
        _ => c.pburst,
    };
    Ok(MeterConfig {
        cir: non_negative(c.cir, "cir")?,
        cburst: non_negative(c.cburst, "cburst")?,
        pir: non_negative(c.pir, "pir")?,
        pburst: non_negative(pburst, "pburst")?,
    })
}

/// A meter config for the wire.
pub fn meter_config_msg(c: MeterConfig, algorithm: MeterAlgorithm) -> p4::MeterConfig {
    let mut m = p4::MeterConfig {
        cir: signed(c.cir),
        cburst: signed(c.cburst),
        pir: signed(c.pir),
        pburst: signed(c.pburst),
        eburst: 0,
    };
    if algorithm == MeterAlgorithm::SrTcm {
        m.eburst = m.pburst;
    }
    m
}

/// The algorithm of table `table`'s direct meter (trTCM when it has none).
pub fn direct_meter_algorithm(schema: &Schema, table: usize) -> MeterAlgorithm {
    schema.tables[table]
        .direct_meter
        .map_or(MeterAlgorithm::TrTcm, |m| schema.direct_meters[m].algorithm)
}

/// A table entry from the wire (for writes, and as a read filter).
pub fn table_entry(schema: &Schema, te: &p4::TableEntry) -> Result<control::TableEntry> {
    use p4::table_action::Type as A;
    let table = schema
        .table_by_id(te.table_id)
        .ok_or_else(|| EntityError::new(Code::NotFound, format!("table id {}", te.table_id)))?;
    let matches = te
        .r#match
        .iter()
        .map(|m| field_match(schema, table, m))
        .collect::<Result<Vec<_>>>()?;
    let priority = u32::try_from(te.priority)
        .map_err(|_| EntityError::invalid(format!("priority {} is negative", te.priority)))?;
    let action = match te.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        None => None,
        Some(A::Action(a)) => Some(TableAction::Action(action(schema, a)?)),
        Some(A::ActionProfileMemberId(m)) => Some(TableAction::Member(*m)),
        Some(A::ActionProfileGroupId(g)) => Some(TableAction::Group(*g)),
        // One-shot: the caller turns the set into a hidden group (see [`action_set`]).
        Some(A::ActionProfileActionSet(_)) => None,
    };
    let algorithm = direct_meter_algorithm(schema, table);
    Ok(control::TableEntry {
        table_id: te.table_id,
        matches,
        priority,
        action,
        is_default: te.is_default_action,
        idle_timeout_ns: non_negative(te.idle_timeout_ns, "idle_timeout_ns")?,
        metadata: te.metadata.clone(),
        counter_data: te.counter_data.as_ref().map(counter_data).transpose()?,
        meter_config: te
            .meter_config
            .as_ref()
            .map(|c| meter_config(c, algorithm))
            .transpose()?,
        elapsed_since_hit_ns: None,
    })
}

/// The actions and weights of a one-shot action set (spec 9.2.3), if the entry carries one.
pub fn action_set(schema: &Schema, te: &p4::TableEntry) -> Result<Option<Vec<(ActionSpec, u32)>>> {
    let Some(p4::table_action::Type::ActionProfileActionSet(set)) =
        te.action.as_ref().and_then(|a| a.r#type.as_ref())
    else {
        return Ok(None);
    };
    if set.action_profile_actions.is_empty() {
        return Err(EntityError::invalid("an empty one-shot action set"));
    }
    set.action_profile_actions
        .iter()
        .map(|a| {
            if a.watch_kind.is_some() {
                return Err(EntityError::unimplemented("one-shot watch ports"));
            }
            let action = a
                .action
                .as_ref()
                .ok_or_else(|| EntityError::invalid("one-shot action without an action"))?;
            let weight = match a.weight {
                0 => 1,
                w => u32::try_from(w)
                    .map_err(|_| EntityError::invalid(format!("one-shot weight {w}")))?,
            };
            Ok((self::action(schema, action)?, weight))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// A one-shot action set for the wire.
pub fn action_set_msg(actions: &[(ActionSpec, u32)]) -> p4::TableAction {
    p4::TableAction {
        r#type: Some(p4::table_action::Type::ActionProfileActionSet(
            p4::ActionProfileActionSet {
                action_profile_actions: actions
                    .iter()
                    .map(|(a, w)| p4::ActionProfileAction {
                        action: Some(action_msg(a)),
                        weight: i32::try_from(*w).unwrap_or(i32::MAX),
                        watch_kind: None,
                    })
                    .collect(),
                ..Default::default()
            },
        )),
    }
}

/// A table entry for the wire; `with_hit_time` adds `time_since_last_hit` (asked for in reads).
pub fn table_entry_msg(
    schema: &Schema,
    e: &control::TableEntry,
    with_hit_time: bool,
) -> p4::TableEntry {
    use p4::table_action::Type as A;
    let table = schema.table_by_id(e.table_id);
    let algorithm = table.map_or(MeterAlgorithm::TrTcm, |t| direct_meter_algorithm(schema, t));
    let action = e.action.as_ref().map(|a| p4::TableAction {
        r#type: Some(match a {
            TableAction::Action(a) => A::Action(action_msg(a)),
            TableAction::Member(m) => A::ActionProfileMemberId(*m),
            TableAction::Group(g) => A::ActionProfileGroupId(*g),
        }),
    });
    p4::TableEntry {
        table_id: e.table_id,
        r#match: e
            .matches
            .iter()
            .map(|(id, m)| field_match_msg(*id, m))
            .collect(),
        action,
        priority: i32::try_from(e.priority).unwrap_or(i32::MAX),
        is_default_action: e.is_default,
        idle_timeout_ns: signed(e.idle_timeout_ns),
        metadata: e.metadata.clone(),
        counter_data: e.counter_data.map(counter_data_msg),
        meter_config: e.meter_config.map(|c| meter_config_msg(c, algorithm)),
        time_since_last_hit: e.elapsed_since_hit_ns.filter(|_| with_hit_time).map(|ns| {
            p4::table_entry::IdleTimeout {
                elapsed_ns: signed(ns),
            }
        }),
        is_const: table.is_some_and(|t| schema.tables[t].is_const),
        ..Default::default()
    }
}

/// How a replica's port was written (P4Runtime 1.4 moved it from `egress_port` to `port` bytes);
/// reads answer in the same form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PortForm {
    /// Deprecated `uint32 egress_port`.
    #[default]
    Number,
    /// `bytes port`.
    Bytes,
}

/// Replicas from the wire, with the port form they used.
#[expect(
    deprecated,
    reason = "p4runtime-shell still sends the deprecated egress_port (p4runtime.md item 20)"
)]
pub fn replicas(rs: &[p4::Replica]) -> Result<(Vec<Replica>, PortForm)> {
    use p4::replica::PortKind;
    let mut form = PortForm::Number;
    let out = rs
        .iter()
        .map(|r| {
            if !r.backup_replicas.is_empty() {
                return Err(EntityError::unimplemented("backup replicas"));
            }
            let port = match &r.port_kind {
                Some(PortKind::EgressPort(p)) => u128::from(*p),
                Some(PortKind::Port(b)) => {
                    form = PortForm::Bytes;
                    value(b, 32, "replica port")?
                }
                None => return Err(EntityError::invalid("replica without a port")),
            };
            let port = u16::try_from(port)
                .map_err(|_| EntityError::new(Code::OutOfRange, format!("replica port {port}")))?;
            let rid = u16::try_from(r.instance).map_err(|_| {
                EntityError::new(Code::OutOfRange, format!("replica instance {}", r.instance))
            })?;
            Ok(Replica { port, rid })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((out, form))
}

/// Replicas for the wire, in `form`.
#[expect(
    deprecated,
    reason = "a replica written with egress_port is read back the same way"
)]
pub fn replicas_msg(rs: &[Replica], form: PortForm) -> Vec<p4::Replica> {
    use p4::replica::PortKind;
    rs.iter()
        .map(|r| p4::Replica {
            instance: u32::from(r.rid),
            port_kind: Some(match form {
                PortForm::Number => PortKind::EgressPort(u32::from(r.port)),
                PortForm::Bytes => PortKind::Port(bytestring::canonical(u128::from(r.port))),
            }),
            ..Default::default()
        })
        .collect()
}

/// A clone session from the wire.
pub fn clone_session(s: &p4::CloneSessionEntry) -> Result<(CloneSession, PortForm)> {
    let (replicas, form) = replicas(&s.replicas)?;
    let truncate = u32::try_from(s.packet_length_bytes).map_err(|_| {
        EntityError::invalid(format!("packet_length_bytes {}", s.packet_length_bytes))
    })?;
    Ok((
        CloneSession {
            replicas,
            class_of_service: u8::try_from(s.class_of_service).unwrap_or(u8::MAX),
            truncate,
        },
        form,
    ))
}

/// A clone session for the wire.
pub fn clone_session_msg(id: u32, s: &CloneSession, form: PortForm) -> p4::CloneSessionEntry {
    p4::CloneSessionEntry {
        session_id: id,
        replicas: replicas_msg(&s.replicas, form),
        class_of_service: u32::from(s.class_of_service),
        packet_length_bytes: i32::try_from(s.truncate).unwrap_or(i32::MAX),
    }
}

/// A bitstring as P4Data.
pub fn bitstring(v: u128) -> p4::P4Data {
    p4::P4Data {
        data: Some(p4::p4_data::Data::Bitstring(bytestring::canonical(v))),
    }
}

/// A register value from P4Data (only bitstrings: registers hold `bit<W>`).
pub fn register_value(d: Option<&p4::P4Data>, bitwidth: u8, what: &str) -> Result<u128> {
    match d.and_then(|d| d.data.as_ref()) {
        Some(p4::p4_data::Data::Bitstring(b)) => value(b, bitwidth, what),
        Some(_) => Err(EntityError::invalid(format!(
            "{what}: register data must be a bitstring"
        ))),
        None => Err(EntityError::invalid(format!("{what}: no data"))),
    }
}

/// Packs controller-header fields (in wire order, MSB first) into bytes.
pub fn pack_header(fields: &[(u32, &'static str, u8)], values: &[u128]) -> Vec<u8> {
    let bits: usize = fields.iter().map(|f| usize::from(f.2)).sum();
    let mut out = vec![0u8; bits.div_ceil(8)];
    let mut pos = 0usize;
    for (f, &v) in fields.iter().zip(values) {
        for b in (0..usize::from(f.2)).rev() {
            if (v >> b) & 1 == 1 {
                out[pos / 8] |= 0x80 >> (pos % 8);
            }
            pos += 1;
        }
    }
    out
}

/// Unpacks controller-header fields from the front of `bytes` (None if it is too short).
pub fn unpack_header(fields: &[(u32, &'static str, u8)], bytes: &[u8]) -> Option<Vec<u128>> {
    let bits: usize = fields.iter().map(|f| usize::from(f.2)).sum();
    if bytes.len() * 8 < bits {
        return None;
    }
    let mut pos = 0usize;
    Some(
        fields
            .iter()
            .map(|f| {
                let mut v = 0u128;
                for _ in 0..f.2 {
                    let bit = (bytes[pos / 8] >> (7 - pos % 8)) & 1;
                    v = (v << 1) | u128::from(bit);
                    pos += 1;
                }
                v
            })
            .collect(),
    )
}

/// An action selector group for the wire.
pub fn group_msg(
    profile_id: u32,
    group_id: u32,
    members: &[(u32, u32)],
    max_size: u32,
) -> p4::ActionProfileGroup {
    p4::ActionProfileGroup {
        action_profile_id: profile_id,
        group_id,
        members: members
            .iter()
            .map(|&(member_id, w)| p4::action_profile_group::Member {
                member_id,
                weight: i32::try_from(w).unwrap_or(i32::MAX),
                watch_kind: None,
            })
            .collect(),
        max_size: i32::try_from(max_size).unwrap_or(i32::MAX),
    }
}

/// The P4Runtime form of a control-API entity (what a client sends).
pub fn entity_msg(schema: &Schema, e: &Entity) -> p4::entity::Entity {
    use p4::entity::Entity as E;
    use p4::packet_replication_engine_entry::Type as T;
    let index = |i: Option<u64>| {
        i.map(|index| p4::Index {
            index: signed(index),
        })
    };
    match e {
        Entity::TableEntry(t) => E::TableEntry(table_entry_msg(schema, t, false)),
        Entity::Member {
            profile_id,
            member_id,
            action,
        } => E::ActionProfileMember(p4::ActionProfileMember {
            action_profile_id: *profile_id,
            member_id: *member_id,
            action: action.as_ref().map(action_msg),
        }),
        Entity::Group {
            profile_id,
            group_id,
            members,
            max_size,
        } => E::ActionProfileGroup(group_msg(*profile_id, *group_id, members, *max_size)),
        Entity::Counter {
            counter_id,
            index: i,
            data,
        } => E::CounterEntry(p4::CounterEntry {
            counter_id: *counter_id,
            index: index(*i),
            data: Some(counter_data_msg(*data)),
        }),
        Entity::DirectCounter { entry, data } => E::DirectCounterEntry(p4::DirectCounterEntry {
            table_entry: Some(table_entry_msg(schema, entry, false)),
            data: Some(counter_data_msg(*data)),
        }),
        Entity::Meter {
            meter_id,
            index: i,
            config,
        } => {
            let algorithm = schema
                .meter_by_id(*meter_id)
                .map_or(MeterAlgorithm::TrTcm, |m| schema.meters[m].algorithm);
            E::MeterEntry(p4::MeterEntry {
                meter_id: *meter_id,
                index: index(*i),
                config: config.map(|c| meter_config_msg(c, algorithm)),
                counter_data: None,
            })
        }
        Entity::DirectMeter { entry, config } => {
            let algorithm = schema
                .table_by_id(entry.table_id)
                .map_or(MeterAlgorithm::TrTcm, |t| direct_meter_algorithm(schema, t));
            E::DirectMeterEntry(p4::DirectMeterEntry {
                table_entry: Some(table_entry_msg(schema, entry, false)),
                config: config.map(|c| meter_config_msg(c, algorithm)),
                counter_data: None,
            })
        }
        Entity::Register {
            register_id,
            index: i,
            value,
        } => E::RegisterEntry(p4::RegisterEntry {
            register_id: *register_id,
            index: index(*i),
            data: Some(bitstring(*value)),
        }),
        Entity::MulticastGroup {
            group_id,
            replicas,
            metadata,
        } => E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
            r#type: Some(T::MulticastGroupEntry(p4::MulticastGroupEntry {
                multicast_group_id: *group_id,
                replicas: replicas_msg(replicas, PortForm::Bytes),
                metadata: metadata.clone(),
            })),
        }),
        Entity::CloneSession {
            session_id,
            session,
        } => E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
            r#type: Some(T::CloneSessionEntry(clone_session_msg(
                *session_id,
                session,
                PortForm::Bytes,
            ))),
        }),
    }
}

/// The P4Runtime form of a control-API update.
pub fn update_msg(schema: &Schema, u: &control::Update) -> p4::Update {
    let t = match u.kind {
        UpdateKind::Insert => p4::update::Type::Insert,
        UpdateKind::Modify => p4::update::Type::Modify,
        UpdateKind::Delete => p4::update::Type::Delete,
    };
    p4::Update {
        r#type: t as i32,
        entity: Some(p4::Entity {
            entity: Some(entity_msg(schema, &u.entity)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_packing_round_trips() {
        let fields = [(1, "port", 9), (2, "_pad", 7)];
        let bytes = pack_header(&fields, &[0x1ff, 0]);
        assert_eq!(bytes, vec![0xff, 0x80]);
        assert_eq!(unpack_header(&fields, &bytes), Some(vec![0x1ff, 0]));
        assert_eq!(pack_header(&fields, &[3, 0]), vec![0x01, 0x80]);
        assert_eq!(unpack_header(&fields, &[0x01]), None);
    }

    #[test]
    fn bytestring_errors_are_out_of_range() {
        assert_eq!(value(&[], 8, "f").unwrap_err().code, Code::OutOfRange);
        assert_eq!(value(&[1, 0], 8, "f").unwrap_err().code, Code::OutOfRange);
        assert_eq!(value(&[0, 0, 7], 8, "f"), Ok(7));
    }

    #[test]
    fn write_errors_map_to_codes() {
        let c = |e| EntityError::from(e).code;
        assert_eq!(
            c(WriteError::AlreadyExists(String::new())),
            Code::AlreadyExists
        );
        assert_eq!(c(WriteError::NotFound(String::new())), Code::NotFound);
        assert_eq!(c(WriteError::OutOfRange(String::new())), Code::OutOfRange);
        assert_eq!(
            c(WriteError::ResourceExhausted(String::new())),
            Code::ResourceExhausted
        );
        assert_eq!(
            c(WriteError::PermissionDenied(String::new())),
            Code::PermissionDenied
        );
        assert_eq!(
            c(WriteError::FailedPrecondition(String::new())),
            Code::FailedPrecondition
        );
        assert_eq!(c(WriteError::Aborted(String::new())), Code::Aborted);
    }
}
