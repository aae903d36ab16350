//! A BMv2-style command language for table entries and other control writes, as in the
//! `commands.txt` files BMv2 users load at start (`--entries FILE`), and the switch's admin
//! command.
//!
//! ```text
//! table_add <table> <action> <key...> => <args...> [<priority>]
//! table_modify <table> <action> <key...> => <args...> [<priority>]
//! table_delete <table> <key...> [<priority>]
//! table_set_default <table> <action> <args...>
//! table_indirect_add <table> <key...> => <member_id> [<priority>]
//! table_indirect_add_with_group <table> <key...> => <group_id> [<priority>]
//! act_prof_create_member <profile> <member_id> <action> <args...>
//! act_prof_create_group <profile> <group_id> [<member_id>[:<weight>]...]
//! mc_group_create <group_id> <port>[:<rid>]...
//! mirroring_add <session_id> <port> [<truncate_bytes>]
//! mirroring_add_replicas <session_id> <port>[:<rid>]... [cos=<class of service>]
//! register_write <register> <index> <value>
//! meter_set <meter> <index> <cir> <cburst> <pir> <pburst>
//! meter_set_direct <table> <key...> [<priority>] => <cir> <cburst> <pir> <pburst>
//! ```
//!
//! Priorities are BMv2's: among matching entries the **smallest** number wins, as in BMv2's CLI,
//! where P4Runtime's highest wins. A command's priority `p` becomes the P4Runtime priority
//! [`p4runtime_priority`]`(p)` = 2^31 − 1 − p, so a `commands.txt` written for BMv2 matches in
//! the same order here, and entries written by the text commands and by a P4Runtime controller
//! share one order. [`bmv2_priority`] is the inverse, for writers of commands (the fabric plans).
//!
//! Keys give one value per match field, in order: exact `v`; LPM `v/len`; ternary `v&&&mask`;
//! range `lo->hi`; optional `v` or `*`. Values are decimal, `0x` hex, MAC (`aa:bb:cc:dd:ee:ff`),
//! IPv4 or IPv6. Names may be full (`ingress.ipv4_lpm`) or short (`ipv4_lpm`). `#` starts a
//! comment. Member and group ids are given explicitly (BMv2 assigns them; explicit ids make a
//! file reproducible). Lines with other verbs are returned as [`Command::Other`] for the caller
//! (the data plane handles its queue settings that way).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::control::{ActionSpec, Entity, TableAction, TableEntry, Update, UpdateKind};
use crate::externs::MeterConfig;
use crate::pre::{CloneSession, Replica};
use crate::schema::Schema;
use crate::table::{FieldMatch, MatchKind};

/// One parsed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// A blank or comment line.
    Nothing,
    /// Control writes.
    Write(Vec<Update>),
    /// A verb this module does not know, with its arguments.
    Other(String, Vec<String>),
}

/// A line that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

fn err<T>(msg: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(msg.into()))
}

/// Parses a number, MAC, IPv4 or IPv6 address.
pub fn parse_value(s: &str) -> Result<u128, ParseError> {
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u128::from_str_radix(hex, 16).or_else(|_| err(format!("bad hex value {s}")));
    }
    if let Ok(v) = s.parse::<u128>() {
        return Ok(v);
    }
    if let Ok(ip) = s.parse::<Ipv4Addr>() {
        return Ok(u128::from(u32::from(ip)));
    }
    if let Ok(ip) = s.parse::<Ipv6Addr>() {
        return Ok(u128::from(ip));
    }
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() == 6 && parts.iter().all(|p| p.len() <= 2) {
        let mut v = 0u128;
        for p in parts {
            let b = u8::from_str_radix(p, 16).or_else(|_| err(format!("bad MAC {s}")))?;
            v = (v << 8) | u128::from(b);
        }
        return Ok(v);
    }
    err(format!("cannot read value {s:?}"))
}

fn number<T: TryFrom<u128>>(s: &str, what: &str) -> Result<T, ParseError> {
    T::try_from(parse_value(s)?).or_else(|_| err(format!("{what} {s} out of range")))
}

/// The P4Runtime priority (larger wins) of BMv2 priority `bmv2` (smaller wins).
pub fn p4runtime_priority(bmv2: u32) -> Result<u32, ParseError> {
    // P4Runtime priorities are positive int32s; 0 marks "no priority".
    match (i32::MAX as u32).checked_sub(bmv2) {
        Some(p) if p > 0 => Ok(p),
        _ => err(format!(
            "priority {bmv2} out of range (BMv2 priorities: 0 to {})",
            i32::MAX - 1
        )),
    }
}

/// The BMv2 priority (smaller wins) that [`p4runtime_priority`] maps to P4Runtime priority `p`.
pub fn bmv2_priority(p: u32) -> u32 {
    (i32::MAX as u32).saturating_sub(p)
}

fn mask(width: u8) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

fn key_field(s: &str, kind: MatchKind, width: u8) -> Result<Option<FieldMatch>, ParseError> {
    Ok(match kind {
        MatchKind::Exact => Some(FieldMatch::Exact(parse_value(s)?)),
        MatchKind::Lpm => {
            let (v, len) = s
                .split_once('/')
                .ok_or_else(|| ParseError(format!("LPM key {s} needs /len")))?;
            let len: u8 = number(len, "prefix length")?;
            if len == 0 {
                None
            } else {
                Some(FieldMatch::Lpm {
                    value: parse_value(v)?,
                    prefix_len: len,
                })
            }
        }
        MatchKind::Ternary => {
            let (v, m) = s
                .split_once("&&&")
                .ok_or_else(|| ParseError(format!("ternary key {s} needs &&&mask")))?;
            let (value, m) = (parse_value(v)?, parse_value(m)?);
            if m == 0 {
                None
            } else {
                Some(FieldMatch::Ternary {
                    value: value & m,
                    mask: m,
                })
            }
        }
        MatchKind::Range => {
            let (lo, hi) = s
                .split_once("->")
                .ok_or_else(|| ParseError(format!("range key {s} needs lo->hi")))?;
            let (low, high) = (parse_value(lo)?, parse_value(hi)?);
            if low == 0 && high == mask(width) {
                None
            } else {
                Some(FieldMatch::Range { low, high })
            }
        }
        MatchKind::Optional => {
            if s == "*" {
                None
            } else {
                Some(FieldMatch::Optional(Some(parse_value(s)?)))
            }
        }
    })
}

struct Line<'a> {
    schema: &'a Schema,
    words: Vec<&'a str>,
}

impl<'a> Line<'a> {
    fn table(&self, i: usize) -> Result<usize, ParseError> {
        let name = self
            .words
            .get(i)
            .ok_or_else(|| ParseError("missing table name".into()))?;
        self.schema
            .table_by_name(name)
            .ok_or_else(|| ParseError(format!("no table {name}")))
    }

    fn action(&self, i: usize) -> Result<usize, ParseError> {
        let name = self
            .words
            .get(i)
            .ok_or_else(|| ParseError("missing action name".into()))?;
        self.schema
            .action_by_name(name)
            .ok_or_else(|| ParseError(format!("no action {name}")))
    }

    fn spec(&self, action: usize, args: &[&str]) -> Result<ActionSpec, ParseError> {
        let def = &self.schema.actions[action];
        if args.len() != def.params.len() {
            return err(format!(
                "{} takes {} arguments, got {}",
                def.name,
                def.params.len(),
                args.len()
            ));
        }
        let params = def
            .params
            .iter()
            .zip(args)
            .map(|(p, a)| Ok((p.id, parse_value(a)?)))
            .collect::<Result<_, _>>()?;
        Ok(ActionSpec {
            action_id: def.id,
            params,
        })
    }

    /// The key of `table` from `words`, and a trailing priority if the table needs one.
    fn key(
        &self,
        table: usize,
        words: &[&str],
    ) -> Result<(Vec<(u32, FieldMatch)>, u32), ParseError> {
        let t = &self.schema.tables[table];
        let n = t.fields.len();
        let prio = t.needs_priority();
        let want = n + usize::from(prio);
        if words.len() != want {
            return err(format!(
                "{} takes {n} key fields{}, got {} words",
                t.name,
                if prio { " and a priority" } else { "" },
                words.len()
            ));
        }
        let mut matches = Vec::new();
        for (f, w) in t.fields.iter().zip(words) {
            if let Some(m) = key_field(w, f.kind, f.bitwidth)? {
                matches.push((f.id, m));
            }
        }
        let priority = if prio {
            p4runtime_priority(number(words[n], "priority")?)?
        } else {
            0
        };
        Ok((matches, priority))
    }

    fn split_arrow(&self, from: usize) -> Result<(&[&'a str], &[&'a str]), ParseError> {
        let rest = &self.words[from.min(self.words.len())..];
        let at = rest
            .iter()
            .position(|w| *w == "=>")
            .ok_or_else(|| ParseError("missing =>".into()))?;
        Ok((&rest[..at], &rest[at + 1..]))
    }
}

fn update(kind: UpdateKind, entity: Entity) -> Command {
    Command::Write(vec![Update { kind, entity }])
}

/// Parses one line against `schema`.
pub fn parse_line(schema: &Schema, line: &str) -> Result<Command, ParseError> {
    let text = line.split('#').next().unwrap_or("").trim();
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some(&verb) = words.first() else {
        return Ok(Command::Nothing);
    };
    let l = Line { schema, words };
    let w = &l.words;
    match verb {
        "table_add" | "table_modify" => {
            let (table, action) = (l.table(1)?, l.action(2)?);
            let (key, args) = l.split_arrow(3)?;
            let t = &schema.tables[table];
            let (args, prio_word) =
                if t.needs_priority() && args.len() == schema.actions[action].params.len() + 1 {
                    (&args[..args.len() - 1], Some(args[args.len() - 1]))
                } else {
                    (args, None)
                };
            let mut key_words = key.to_vec();
            key_words.extend(prio_word);
            let (matches, priority) = l.key(table, &key_words)?;
            let kind = if verb == "table_add" {
                UpdateKind::Insert
            } else {
                UpdateKind::Modify
            };
            let entry = TableEntry {
                table_id: t.id,
                matches,
                priority,
                action: Some(TableAction::Action(l.spec(action, args)?)),
                ..TableEntry::default()
            };
            Ok(update(kind, Entity::TableEntry(entry)))
        }
        "table_indirect_add" | "table_indirect_add_with_group" => {
            let table = l.table(1)?;
            let (key, rest) = l.split_arrow(2)?;
            let t = &schema.tables[table];
            let (id_word, prio_word) = match rest {
                [id] => (*id, None),
                [id, p] => (*id, Some(*p)),
                _ => return err("expected => <id> [priority]"),
            };
            let mut key_words = key.to_vec();
            key_words.extend(prio_word);
            let (matches, priority) = l.key(table, &key_words)?;
            let id: u32 = number(id_word, "member/group id")?;
            let action = if verb == "table_indirect_add" {
                TableAction::Member(id)
            } else {
                TableAction::Group(id)
            };
            let entry = TableEntry {
                table_id: t.id,
                matches,
                priority,
                action: Some(action),
                ..TableEntry::default()
            };
            Ok(update(UpdateKind::Insert, Entity::TableEntry(entry)))
        }
        "table_delete" => {
            let table = l.table(1)?;
            let (matches, priority) = l.key(table, &w[2..])?;
            let entry = TableEntry {
                table_id: schema.tables[table].id,
                matches,
                priority,
                ..TableEntry::default()
            };
            Ok(update(UpdateKind::Delete, Entity::TableEntry(entry)))
        }
        "table_set_default" => {
            let (table, action) = (l.table(1)?, l.action(2)?);
            let spec = l.spec(action, &w[3..])?;
            let entry = TableEntry {
                table_id: schema.tables[table].id,
                is_default: true,
                action: Some(TableAction::Action(spec)),
                ..TableEntry::default()
            };
            Ok(update(UpdateKind::Modify, Entity::TableEntry(entry)))
        }
        "act_prof_create_member" => {
            let profile = profile(schema, w.get(1))?;
            let member_id = number(w.get(2).copied().unwrap_or(""), "member id")?;
            let action = l.action(3)?;
            let spec = l.spec(action, &w[4..])?;
            Ok(update(
                UpdateKind::Insert,
                Entity::Member {
                    profile_id: profile,
                    member_id,
                    action: Some(spec),
                },
            ))
        }
        "act_prof_create_group" => {
            let profile = profile(schema, w.get(1))?;
            let group_id = number(w.get(2).copied().unwrap_or(""), "group id")?;
            let members = w[3.min(w.len())..]
                .iter()
                .map(|m| match m.split_once(':') {
                    Some((id, weight)) => Ok((number(id, "member id")?, number(weight, "weight")?)),
                    None => Ok((number(m, "member id")?, 1)),
                })
                .collect::<Result<_, ParseError>>()?;
            Ok(update(
                UpdateKind::Insert,
                Entity::Group {
                    profile_id: profile,
                    group_id,
                    members,
                    max_size: 0,
                },
            ))
        }
        "mc_group_create" => {
            let group_id = number(w.get(1).copied().unwrap_or(""), "group id")?;
            let replicas = w[2.min(w.len())..]
                .iter()
                .map(|r| replica(r))
                .collect::<Result<_, _>>()?;
            Ok(update(
                UpdateKind::Insert,
                Entity::MulticastGroup {
                    group_id,
                    replicas,
                    metadata: vec![],
                },
            ))
        }
        "mirroring_add" => {
            let session_id = number(w.get(1).copied().unwrap_or(""), "session id")?;
            let port = number(w.get(2).copied().unwrap_or(""), "port")?;
            let truncate = w.get(3).map_or(Ok(0), |t| number(t, "truncate length"))?;
            Ok(clone_session(
                session_id,
                vec![Replica { port, rid: 0 }],
                truncate,
                0,
            ))
        }
        "mirroring_add_replicas" => {
            let session_id = number(w.get(1).copied().unwrap_or(""), "session id")?;
            let mut cos = 0u8;
            let mut replicas = Vec::new();
            for r in &w[2.min(w.len())..] {
                match r.strip_prefix("cos=") {
                    Some(c) => {
                        cos = number(c, "class of service")?;
                        if cos > 7 {
                            return err("class of service: 0 to 7");
                        }
                    }
                    None => replicas.push(replica(r)?),
                }
            }
            Ok(clone_session(session_id, replicas, 0, cos))
        }
        "meter_set_direct" => {
            let table = l.table(1)?;
            let (key, rates) = l.split_arrow(2)?;
            let [cir, cburst, pir, pburst] = rates else {
                return err("meter_set_direct: expected => <cir> <cburst> <pir> <pburst>");
            };
            let (matches, priority) = l.key(table, key)?;
            let entry = TableEntry {
                table_id: schema.tables[table].id,
                matches,
                priority,
                ..TableEntry::default()
            };
            let config = MeterConfig {
                cir: number(cir, "cir")?,
                cburst: number(cburst, "cburst")?,
                pir: number(pir, "pir")?,
                pburst: number(pburst, "pburst")?,
            };
            Ok(update(
                UpdateKind::Modify,
                Entity::DirectMeter {
                    entry,
                    config: Some(config),
                },
            ))
        }
        "register_write" => {
            let name = w.get(1).copied().unwrap_or("");
            let r = schema
                .register_by_name(name)
                .ok_or_else(|| ParseError(format!("no register {name}")))?;
            let index = number(w.get(2).copied().unwrap_or(""), "index")?;
            let value = parse_value(w.get(3).copied().unwrap_or(""))?;
            Ok(update(
                UpdateKind::Modify,
                Entity::Register {
                    register_id: r.id,
                    index: Some(index),
                    value,
                },
            ))
        }
        "meter_set" => {
            let name = w.get(1).copied().unwrap_or("");
            let m = schema
                .meter_by_name(name)
                .ok_or_else(|| ParseError(format!("no meter {name}")))?;
            let [idx, cir, cburst, pir, pburst] =
                [2, 3, 4, 5, 6].map(|i| w.get(i).copied().unwrap_or(""));
            let config = MeterConfig {
                cir: number(cir, "cir")?,
                cburst: number(cburst, "cburst")?,
                pir: number(pir, "pir")?,
                pburst: number(pburst, "pburst")?,
            };
            Ok(update(
                UpdateKind::Modify,
                Entity::Meter {
                    meter_id: m.id,
                    index: Some(number(idx, "index")?),
                    config: Some(config),
                },
            ))
        }
        _ => Ok(Command::Other(
            verb.to_string(),
            w[1..].iter().map(|s| s.to_string()).collect(),
        )),
    }
}

fn clone_session(session_id: u32, replicas: Vec<Replica>, truncate: u32, cos: u8) -> Command {
    update(
        UpdateKind::Insert,
        Entity::CloneSession {
            session_id,
            session: CloneSession {
                replicas,
                class_of_service: cos,
                truncate,
            },
        },
    )
}

fn profile(schema: &Schema, name: Option<&&str>) -> Result<u32, ParseError> {
    let name = name.copied().unwrap_or("");
    schema
        .profile_by_name(name)
        .map(|p| p.id)
        .ok_or_else(|| ParseError(format!("no action profile {name}")))
}

fn replica(s: &str) -> Result<Replica, ParseError> {
    match s.split_once(':') {
        Some((p, r)) => Ok(Replica {
            port: number(p, "port")?,
            rid: number(r, "rid")?,
        }),
        None => Ok(Replica {
            port: number(s, "port")?,
            rid: 0,
        }),
    }
}
