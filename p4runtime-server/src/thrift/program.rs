//! The running program as BMv2's runtime API names it: objects by their JSON names, match keys
//! and action data as big-endian byte strings, BMv2's priorities, and the JSON `bm_get_config`
//! returns (the program's own, or, for a hard-wired program, one written from its schema with
//! what `simple_switch_CLI` reads).

use std::collections::HashMap;
use std::sync::Arc;

use pipeline::commands::{bmv2_priority, p4runtime_priority};
use pipeline::control::{ActionSpec, Control, TableAction, TableEntry};
use pipeline::schema::{ActionDef, MatchFieldDef, Schema, TableDef};
use pipeline::table::{FieldMatch, MatchKind};
use serde_json::{Value as Json, json};

use super::value::{Struct, TType, Value};
use super::{Fail, code};

/// BMv2's match types, as `BmMatchParamType` numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyType {
    Exact = 0,
    Lpm = 1,
    Ternary = 2,
    Valid = 3,
    Range = 4,
}

impl KeyType {
    fn of_json(s: &str) -> Option<KeyType> {
        Some(match s {
            "exact" => KeyType::Exact,
            "lpm" => KeyType::Lpm,
            "ternary" | "optional" => KeyType::Ternary,
            "valid" => KeyType::Valid,
            "range" => KeyType::Range,
            _ => return None,
        })
    }

    fn of_kind(k: MatchKind) -> KeyType {
        match k {
            MatchKind::Exact => KeyType::Exact,
            MatchKind::Lpm => KeyType::Lpm,
            MatchKind::Ternary | MatchKind::Optional => KeyType::Ternary,
            MatchKind::Range => KeyType::Range,
        }
    }

    fn name(self) -> &'static str {
        match self {
            KeyType::Exact => "exact",
            KeyType::Lpm => "lpm",
            KeyType::Ternary => "ternary",
            KeyType::Valid => "valid",
            KeyType::Range => "range",
        }
    }
}

/// One program instance as the runtime API sees it.
pub(super) struct View {
    pub(super) control: Arc<Control>,
    pub(super) schema: Arc<Schema>,
    /// What `bm_get_config` returns.
    pub(super) json: String,
    /// Per schema table, the BMv2 match type of each key field.
    key_types: Vec<Vec<KeyType>>,
    /// Per schema table, whether its JSON gives it no `default_entry` (p4c-bm's older JSON,
    /// indirect tables): BMv2 then has no default entry until the control plane sets one.
    no_json_default: Vec<bool>,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("program", &self.schema.name)
            .finish_non_exhaustive()
    }
}

fn mask(width: u8) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// A big-endian byte string as a number of at most `width` bits.
pub(super) fn number(b: &[u8], width: u8) -> Option<u128> {
    let lead = b.iter().take_while(|&&x| x == 0).count();
    if b.len() - lead > 16 {
        return None;
    }
    let v = b[lead..]
        .iter()
        .fold(0u128, |v, &x| (v << 8) | u128::from(x));
    (v <= mask(width)).then_some(v)
}

/// `v` as `ceil(width / 8)` big-endian bytes, as BMv2 writes values.
pub(super) fn bytes(v: u128, width: u8) -> Vec<u8> {
    let n = usize::from(width).div_ceil(8).max(1);
    v.to_be_bytes()[16 - n.min(16)..].to_vec()
}

fn bad_key(msg: String) -> Fail {
    Fail::Code(code::BAD_MATCH_KEY, msg)
}

impl View {
    /// The view of `control`'s program, with `device_config` (its BMv2 JSON, or empty).
    pub(super) fn new(control: Arc<Control>, device_config: &[u8]) -> View {
        let schema = control.schema().clone();
        let parsed: Option<Json> = std::str::from_utf8(device_config)
            .ok()
            .and_then(|t| serde_json::from_str(t).ok());
        let json_types = parsed.as_ref().map(json_key_types).unwrap_or_default();
        let key_types = schema
            .tables
            .iter()
            .map(|t| {
                json_types
                    .get(t.name)
                    .filter(|k| k.len() == t.fields.len())
                    .cloned()
                    .unwrap_or_else(|| t.fields.iter().map(|f| KeyType::of_kind(f.kind)).collect())
            })
            .collect();
        let without_default = parsed
            .as_ref()
            .map(json_tables_without_default)
            .unwrap_or_default();
        let no_json_default = schema
            .tables
            .iter()
            .map(|t| without_default.contains(t.name))
            .collect();
        let json = match parsed {
            Some(_) => String::from_utf8_lossy(device_config).into_owned(),
            None => synthesized_json(&schema).to_string(),
        };
        View {
            control,
            schema,
            json,
            key_types,
            no_json_default,
        }
    }

    /// The BMv2 match type of each key field of schema table `table`, as BMv2's runtime API
    /// takes the key.
    pub(super) fn key_types(&self, table: usize) -> &[KeyType] {
        &self.key_types[table]
    }

    pub(super) fn table(&self, name: &str) -> Result<(usize, &TableDef), Fail> {
        self.schema
            .tables
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == name)
            .ok_or_else(|| Fail::Code(code::INVALID_TABLE_NAME, format!("no table {name}")))
    }

    /// The table's action named `name` (a copy p4c made of it, `name$id`, answers to it too).
    pub(super) fn action_of(&self, t: &TableDef, name: &str) -> Result<&ActionDef, Fail> {
        let named = |exact: bool| {
            t.actions
                .iter()
                .map(|r| &self.schema.actions[r.action])
                .find(|a| {
                    a.name == name
                        || (!exact && a.name.split_once('$').is_some_and(|(base, _)| base == name))
                })
        };
        named(true).or_else(|| named(false)).ok_or_else(|| {
            Fail::Code(
                code::INVALID_ACTION_NAME,
                format!("{}: no action {name}", t.name),
            )
        })
    }

    /// Action data (one big-endian string per parameter) as an action spec.
    pub(super) fn action_spec(&self, a: &ActionDef, data: &[Value]) -> Result<ActionSpec, Fail> {
        if data.len() != a.params.len() {
            return Err(Fail::Code(
                code::BAD_ACTION_DATA,
                format!(
                    "{} takes {} parameters, not {}",
                    a.name,
                    a.params.len(),
                    data.len()
                ),
            ));
        }
        let params = a
            .params
            .iter()
            .zip(data)
            .map(|(p, v)| match v {
                Value::Bytes(b) => number(b, p.bitwidth).map(|x| (p.id, x)).ok_or_else(|| {
                    Fail::Code(
                        code::BAD_ACTION_DATA,
                        format!("{}: {} does not fit {} bits", a.name, p.name, p.bitwidth),
                    )
                }),
                _ => Err(Fail::App("action data must be binary".into())),
            })
            .collect::<Result<_, _>>()?;
        Ok(ActionSpec {
            action_id: a.id,
            params,
        })
    }

    /// An action spec as (name, data).
    pub(super) fn action_data(&self, spec: &ActionSpec) -> (String, Value) {
        let Some(a) = self
            .schema
            .action_by_id(spec.action_id)
            .map(|i| &self.schema.actions[i])
        else {
            return (String::new(), Value::List(TType::String, Vec::new()));
        };
        let data = a
            .params
            .iter()
            .map(|p| {
                let v = spec
                    .params
                    .iter()
                    .find(|(id, _)| *id == p.id)
                    .map_or(0, |x| x.1);
                Value::Bytes(bytes(v, p.bitwidth))
            })
            .collect();
        let name = a.name.split_once('$').map_or(a.name, |(base, _)| base);
        (name.to_string(), Value::List(TType::String, data))
    }

    /// A BmMatchParam list and BMv2 priority as a table entry's key.
    pub(super) fn key(
        &self,
        table: usize,
        params: &[Value],
        priority: Option<i64>,
    ) -> Result<TableEntry, Fail> {
        let t = &self.schema.tables[table];
        if params.len() != t.fields.len() {
            return Err(bad_key(format!(
                "{} has {} key fields, not {}",
                t.name,
                t.fields.len(),
                params.len()
            )));
        }
        let mut matches = Vec::new();
        for ((f, &ty), p) in t.fields.iter().zip(&self.key_types[table]).zip(params) {
            let Value::Struct(p) = p else {
                return Err(Fail::App("a match param must be a struct".into()));
            };
            if let Some(m) = field_match(f, ty, p)? {
                matches.push((f.id, m));
            }
        }
        let priority = if t.needs_priority() {
            let p = priority.unwrap_or(0);
            u32::try_from(p)
                .ok()
                .and_then(|p| p4runtime_priority(p).ok())
                .ok_or_else(|| bad_key(format!("priority {p} out of range")))?
        } else {
            0
        };
        Ok(TableEntry {
            table_id: t.id,
            matches,
            priority,
            ..TableEntry::default()
        })
    }

    /// A table entry's key as BmMatchParams, and its BMv2 priority (-1 without one).
    pub(super) fn key_params(&self, table: usize, e: &TableEntry) -> (Value, i32) {
        let t = &self.schema.tables[table];
        let params = t
            .fields
            .iter()
            .zip(&self.key_types[table])
            .map(|(f, &ty)| {
                let m = e.matches.iter().find(|(id, _)| *id == f.id).map(|x| &x.1);
                match_param(f, ty, m)
            })
            .collect::<Vec<_>>();
        let priority = if t.needs_priority() {
            i32::try_from(bmv2_priority(e.priority)).unwrap_or(i32::MAX)
        } else {
            -1
        };
        (Value::structs(params), priority)
    }

    /// A table entry as a BmMtEntry.
    pub(super) fn entry(&self, table: usize, handle: u32, e: &TableEntry) -> Struct {
        let (key, priority) = self.key_params(table, e);
        let mut s = Struct::new()
            .with(1, key)
            .with(
                2,
                Value::Struct(Struct::new().with(1, Value::I32(priority))),
            )
            .with(3, Value::I32(handle as i32))
            .with(4, Value::Struct(self.action_entry(e.action.as_ref())));
        if e.idle_timeout_ns > 0 {
            let ms = |ns: u64| Value::I32(i32::try_from(ns / 1_000_000).unwrap_or(i32::MAX));
            s = s.with(
                5,
                Value::Struct(
                    Struct::new()
                        .with(1, ms(e.idle_timeout_ns))
                        .with(2, ms(e.elapsed_since_hit_ns.unwrap_or(0))),
                ),
            );
        }
        s
    }

    /// Whether `d`, the default entry read of schema table `ix`, is BMv2's "no default entry":
    /// the JSON gives the table none and `d` is still the stand-in action the loader put there
    /// (pipeline/bmv2/src/tables.rs: an empty action, with no arguments). A default the control
    /// plane set to that same action reads as none too: the two are not told apart.
    pub(super) fn is_empty_default(&self, ix: usize, d: Option<&TableAction>) -> bool {
        let t = &self.schema.tables[ix];
        self.no_json_default[ix]
            && matches!(d, Some(TableAction::Action(spec))
                if spec.action_id == self.schema.actions[t.default_action.0].id
                    && spec.params.is_empty())
    }

    /// A BmActionEntry.
    pub(super) fn action_entry(&self, a: Option<&TableAction>) -> Struct {
        match a {
            None => Struct::new().with(1, Value::I32(0)),
            Some(TableAction::Action(spec)) => {
                let (name, data) = self.action_data(spec);
                Struct::new()
                    .with(1, Value::I32(1))
                    .with(2, Value::str(name))
                    .with(3, data)
            }
            Some(TableAction::Member(m)) => Struct::new()
                .with(1, Value::I32(2))
                .with(4, Value::I32(*m as i32)),
            Some(TableAction::Group(g)) => Struct::new()
                .with(1, Value::I32(3))
                .with(5, Value::I32(*g as i32)),
        }
    }
}

fn field_match(f: &MatchFieldDef, ty: KeyType, p: &Struct) -> Result<Option<FieldMatch>, Fail> {
    let kind = p.int(1).map_err(|e| Fail::App(e.to_string()))?;
    if kind != ty as i64 {
        return Err(bad_key(format!(
            "{}: a {} field, sent as match type {kind}",
            f.name,
            ty.name()
        )));
    }
    let sub = p
        .strukt(kind as i16 + 2)
        .map_err(|e| Fail::App(e.to_string()))?;
    let value = |id: i16| -> Result<u128, Fail> {
        let b = sub.bytes(id).map_err(|e| Fail::App(e.to_string()))?;
        number(b, f.bitwidth).ok_or_else(|| {
            bad_key(format!(
                "{}: value does not fit {} bits",
                f.name, f.bitwidth
            ))
        })
    };
    let full = mask(f.bitwidth);
    Ok(match ty {
        KeyType::Exact => Some(FieldMatch::Exact(value(1)?)),
        KeyType::Valid => {
            let on = matches!(sub.get(1), Some(Value::Bool(true)));
            Some(FieldMatch::Exact(u128::from(on)))
        }
        KeyType::Lpm => {
            let len = sub.int(2).map_err(|e| Fail::App(e.to_string()))?;
            let len = u8::try_from(len)
                .ok()
                .filter(|&l| l <= f.bitwidth)
                .ok_or_else(|| bad_key(format!("{}: prefix length {len}", f.name)))?;
            let keep = !mask(f.bitwidth - len) & full;
            if len == 0 {
                None
            } else {
                Some(FieldMatch::Lpm {
                    value: value(1)? & keep,
                    prefix_len: len,
                })
            }
        }
        KeyType::Ternary => {
            let (v, m) = (value(1)?, value(2)?);
            match f.kind {
                MatchKind::Optional if m == 0 => None,
                MatchKind::Optional if m == full => Some(FieldMatch::Optional(Some(v))),
                MatchKind::Optional => {
                    return Err(bad_key(format!(
                        "{}: an optional field takes a mask of all or no bits",
                        f.name
                    )));
                }
                _ if m == 0 => None,
                _ => Some(FieldMatch::Ternary {
                    value: v & m,
                    mask: m,
                }),
            }
        }
        KeyType::Range => {
            let (low, high) = (value(1)?, value(2)?);
            if low > high {
                return Err(bad_key(format!("{}: range {low} -> {high}", f.name)));
            }
            (low != 0 || high != full).then_some(FieldMatch::Range { low, high })
        }
    })
}

fn match_param(f: &MatchFieldDef, ty: KeyType, m: Option<&FieldMatch>) -> Struct {
    let b = |v: u128| Value::Bytes(bytes(v, f.bitwidth));
    let full = mask(f.bitwidth);
    let sub = match (ty, m) {
        (KeyType::Valid, m) => {
            let on = matches!(m, Some(FieldMatch::Exact(v)) if *v != 0);
            Struct::new().with(1, Value::Bool(on))
        }
        (KeyType::Exact, m) => Struct::new().with(
            1,
            b(match m {
                Some(FieldMatch::Exact(v)) => *v,
                _ => 0,
            }),
        ),
        (KeyType::Lpm, m) => {
            let (v, len) = match m {
                Some(FieldMatch::Lpm { value, prefix_len }) => (*value, *prefix_len),
                _ => (0, 0),
            };
            Struct::new()
                .with(1, b(v))
                .with(2, Value::I32(i32::from(len)))
        }
        (KeyType::Ternary, m) => {
            let (v, mk) = match m {
                Some(FieldMatch::Ternary { value, mask }) => (*value, *mask),
                Some(FieldMatch::Optional(Some(v))) => (*v, full),
                _ => (0, 0),
            };
            Struct::new().with(1, b(v)).with(2, b(mk))
        }
        (KeyType::Range, m) => {
            let (lo, hi) = match m {
                Some(FieldMatch::Range { low, high }) => (*low, *high),
                _ => (0, full),
            };
            Struct::new().with(1, b(lo)).with(2, b(hi))
        }
    };
    Struct::new()
        .with(1, Value::I32(ty as i32))
        .with(ty as i16 + 2, Value::Struct(sub))
}

/// The match types of each table's key in a BMv2 JSON document, by table name.
fn json_key_types(doc: &Json) -> HashMap<String, Vec<KeyType>> {
    let mut out = HashMap::new();
    let pipelines = doc["pipelines"].as_array().into_iter().flatten();
    for t in pipelines.flat_map(|p| p["tables"].as_array().into_iter().flatten()) {
        let (Some(name), Some(keys)) = (t["name"].as_str(), t["key"].as_array()) else {
            continue;
        };
        let types: Option<Vec<KeyType>> = keys
            .iter()
            .map(|k| k["match_type"].as_str().and_then(KeyType::of_json))
            .collect();
        if let Some(types) = types {
            out.insert(name.to_string(), types);
        }
    }
    out
}

/// The tables a BMv2 JSON gives no `default_entry`.
fn json_tables_without_default(doc: &Json) -> std::collections::HashSet<String> {
    let pipelines = doc["pipelines"].as_array().into_iter().flatten();
    pipelines
        .flat_map(|p| p["tables"].as_array().into_iter().flatten())
        .filter(|t| t["default_entry"].is_null())
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// A field name split as BMv2 targets name it: (header, field).
fn target(name: &str) -> (&str, &str) {
    name.rsplit_once('.').unwrap_or(("meta", name))
}

/// A BMv2-style JSON description of a hard-wired program: what `simple_switch_CLI` reads
/// (actions, tables with their keys, action profiles, counters, meters, registers, and the
/// header types its key fields' widths come from). It describes the program for a runtime
/// client; it is not a program BMv2 could run.
pub(super) fn synthesized_json(s: &Schema) -> Json {
    let mut headers: Vec<(String, Vec<(String, u8)>)> = Vec::new();
    for f in s.tables.iter().flat_map(|t| &t.fields) {
        let (h, field) = target(f.name);
        if field == "$valid$" {
            continue;
        }
        let at = match headers.iter().position(|(n, _)| n == h) {
            Some(i) => i,
            None => {
                headers.push((h.to_string(), Vec::new()));
                headers.len() - 1
            }
        };
        if !headers[at].1.iter().any(|(n, _)| n == field) {
            headers[at].1.push((field.to_string(), f.bitwidth));
        }
    }
    let header_types: Vec<Json> = headers
        .iter()
        .enumerate()
        .map(|(i, (h, fields))| {
            let fields: Vec<Json> = fields.iter().map(|(n, w)| json!([n, w, false])).collect();
            json!({"name": format!("{h}_t"), "id": i, "fields": fields})
        })
        .collect();
    let header_list: Vec<Json> = headers
        .iter()
        .enumerate()
        .map(|(i, (h, _))| json!({"name": h, "id": i, "header_type": format!("{h}_t")}))
        .collect();
    let actions: Vec<Json> = s
        .actions
        .iter()
        .map(|a| {
            let rd: Vec<Json> = a
                .params
                .iter()
                .map(|p| json!({"name": p.name, "bitwidth": p.bitwidth}))
                .collect();
            json!({"name": a.name, "id": a.id, "runtime_data": rd})
        })
        .collect();
    let tables: Vec<Json> = s
        .tables
        .iter()
        .map(|t| {
            let kinds: Vec<KeyType> = t.fields.iter().map(|f| KeyType::of_kind(f.kind)).collect();
            let overall = [KeyType::Range, KeyType::Ternary, KeyType::Lpm]
                .into_iter()
                .find(|k| kinds.contains(k))
                .unwrap_or(KeyType::Exact);
            let key: Vec<Json> = t
                .fields
                .iter()
                .zip(&kinds)
                .map(|(f, k)| {
                    let (h, field) = target(f.name);
                    json!({"match_type": k.name(), "name": f.name, "target": [h, field]})
                })
                .collect();
            let profile = t.implementation.map(|p| &s.action_profiles[p]);
            let kind = match profile {
                None => "simple",
                Some(p) if p.selector => "indirect_ws",
                Some(_) => "indirect",
            };
            let mut j = json!({
                "name": t.name, "id": t.id, "match_type": overall.name(), "type": kind,
                "max_size": t.size, "support_timeout": t.idle_timeout, "key": key,
                "actions": t.actions.iter().map(|r| s.actions[r.action].name).collect::<Vec<_>>(),
                "action_ids": t.actions.iter().map(|r| s.actions[r.action].id).collect::<Vec<_>>(),
            });
            if let Some(p) = profile {
                j["action_profile"] = json!(p.name);
            }
            j
        })
        .collect();
    let profiles: Vec<Json> = s
        .action_profiles
        .iter()
        .map(|p| {
            let mut j = json!({"name": p.name, "id": p.id, "max_size": p.size});
            if p.selector {
                j["selector"] = json!({"algo": "crc16", "input": []});
            }
            j
        })
        .collect();
    let binding = |t: Option<usize>| t.map(|t| s.tables[t].name);
    let counters: Vec<Json> = s
        .counters
        .iter()
        .map(|c| json!({"name": c.name, "id": c.id, "is_direct": false, "size": c.size}))
        .chain(s.direct_counters.iter().map(|c| {
            json!({"name": c.name, "id": c.id, "is_direct": true, "binding": binding(c.direct_table)})
        }))
        .collect();
    let meters: Vec<Json> = s
        .meters
        .iter()
        .chain(&s.direct_meters)
        .map(|m| {
            let unit = match m.unit {
                pipeline::externs::MeterUnit::Packets => "packets",
                pipeline::externs::MeterUnit::Bytes => "bytes",
            };
            let mut j = json!({"name": m.name, "id": m.id, "type": unit, "rate_count": 2,
                "is_direct": m.direct_table.is_some(), "size": m.size});
            if let Some(t) = binding(m.direct_table) {
                j["binding"] = json!(t);
            }
            j
        })
        .collect();
    let registers: Vec<Json> = s
        .registers
        .iter()
        .map(|r| json!({"name": r.name, "id": r.id, "size": r.size, "bitwidth": r.bitwidth}))
        .collect();
    json!({
        "program": s.name,
        "__meta__": {"version": [2, 18], "compiler": "pisa-switch (hard-wired program)"},
        "header_types": header_types,
        "headers": header_list,
        "actions": actions,
        "pipelines": [{"name": "ingress", "tables": tables, "action_profiles": profiles}],
        "counter_arrays": counters,
        "meter_arrays": meters,
        "register_arrays": registers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_and_write_as_bmv2_bytes() {
        assert_eq!(bytes(0x0a000001, 32), vec![10, 0, 0, 1]);
        assert_eq!(bytes(0x1ff, 9), vec![1, 0xff]);
        assert_eq!(bytes(1, 1), vec![1]);
        assert_eq!(number(&[1, 0xff], 9), Some(0x1ff));
        assert_eq!(number(&[2, 0], 9), None, "10 bits do not fit 9");
        assert_eq!(
            number(&[0, 0, 0, 7], 8),
            Some(7),
            "leading zero bytes are fine"
        );
        assert_eq!(number(&[1; 17], 128), None);
        assert_eq!(number(&[], 8), Some(0));
    }
}
