//! Tables and controls: each JSON table as a schema table (key, actions, default and const
//! entries), and each pipeline as the graph of tables and conditions the packet walks.

use std::collections::HashMap;

use pipeline::schema::{ActionScope, ConstEntry, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::{FieldMatch, MatchKind};
use serde_json::Value;

use crate::action::Calc;
use crate::bits;
use crate::control::{Control, Next, NextTables, Node, TableNode};
use crate::error::{LoadError, Result, invalid, unsupported};
use crate::expr::{Expr, Scope};
use crate::json::{self, Doc};
use crate::layout::{FieldRef, Layout};
use crate::load::{hex_u128, intern, width8};

pub(crate) fn bound(
    tables: &HashMap<String, TableIx>,
    path: &str,
    binding: &Option<String>,
) -> Result<TableIx> {
    let name = binding
        .as_deref()
        .ok_or_else(|| invalid(path, "a direct extern names its table (binding)"))?;
    tables
        .get(name)
        .copied()
        .ok_or_else(|| invalid(&format!("{path}.binding"), format!("no table {name}")))
}

/// A table's key field: what it matches on, its width and kind, its static mask.
fn key_field(
    l: &Layout,
    path: &str,
    k: &json::KeyField,
) -> Result<(FieldRef, u32, MatchKind, u128)> {
    let r = match (&k.target, k.match_type.as_str()) {
        (Value::String(h), "valid") => FieldRef::Valid(l.header(path, h)?),
        (Value::Array(a), _) => match a.as_slice() {
            [Value::String(h), Value::String(f)] => l.field(path, h, f)?,
            _ => return Err(invalid(path, "a key target is [header, field]")),
        },
        _ => return Err(invalid(path, "a key target is [header, field]")),
    };
    let width = l.width(r);
    let kind = match k.match_type.as_str() {
        "exact" | "valid" => MatchKind::Exact,
        "lpm" => MatchKind::Lpm,
        "ternary" => MatchKind::Ternary,
        "range" => MatchKind::Range,
        "optional" => MatchKind::Optional,
        other => return Err(unsupported(path, format!("match kind {other}"))),
    };
    let mask = match &k.mask {
        Value::Null => bits::mask(width),
        Value::String(m) => hex_u128(path, m, width)?,
        _ => return Err(invalid(path, "a key mask is a hex string")),
    };
    Ok((r, width, kind, mask))
}

/// The schema's actions: one per name.
#[derive(Default)]
pub(crate) struct Actions {
    pub(crate) by_id: HashMap<i64, usize>,
    by_name: HashMap<String, usize>,
    /// Schema action -> the first JSON action of its name (none for the synthetic miss action).
    pub(crate) first: Vec<usize>,
    /// Schema action -> its JSON name.
    pub(crate) names: Vec<String>,
}

impl Actions {
    /// The schema's actions, added to `b`.
    pub(crate) fn build(b: &mut SchemaBuilder, doc: &Doc) -> Result<Actions> {
        // Actions, one per name: p4c may write an action (NoAction) once per table that uses it,
        // under one name and with one body, where the P4Info has one action. It also writes a copy of
        // an action called directly with its arguments bound, under the same name with fewer
        // parameters, for one of its hidden tables: the action with the most parameters keeps the
        // name (the P4Info's), and such a copy becomes an action of its own, `name$id`, that no
        // P4Info names.
        let mut canonical: HashMap<&str, usize> = HashMap::new();
        for (i, a) in doc.actions.iter().enumerate() {
            let c = canonical.entry(a.name.as_str()).or_insert(i);
            if a.runtime_data.len() > doc.actions[*c].runtime_data.len() {
                *c = i;
            }
        }
        let mut acts = Actions::default();
        let register = |b: &mut SchemaBuilder, acts: &mut Actions, i: usize, name: &str| {
            let a = &doc.actions[i];
            let path = format!("actions[{i}]");
            let mut params = Vec::new();
            for (k, r) in a.runtime_data.iter().enumerate() {
                let w = width8(&format!("{path}.runtime_data[{k}]"), r.bitwidth)?;
                params.push((intern(&r.name), w));
            }
            let ix = b.action(intern(name), &params);
            acts.by_id.insert(a.id, ix);
            acts.first.push(i);
            acts.names.push(a.name.clone());
            Ok::<usize, LoadError>(ix)
        };
        for (i, a) in doc.actions.iter().enumerate() {
            if canonical[a.name.as_str()] == i {
                let ix = register(b, &mut acts, i, &a.name)?;
                acts.by_name.insert(a.name.clone(), ix);
            }
        }
        for (i, a) in doc.actions.iter().enumerate() {
            let c = canonical[a.name.as_str()];
            if c == i {
                continue;
            }
            let first = &doc.actions[c];
            if first.runtime_data == a.runtime_data && first.primitives == a.primitives {
                let ix = acts.by_name[&a.name];
                acts.by_id.insert(a.id, ix);
            } else {
                register(b, &mut acts, i, &format!("{}${}", a.name, a.id))?;
            }
        }
        Ok(acts)
    }

    /// The schema actions of table `t`, by its action ids (p4c) or names (older JSON).
    fn of(&self, path: &str, t: &json::Table) -> Result<Vec<usize>> {
        if !t.action_ids.is_empty() {
            t.action_ids
                .iter()
                .enumerate()
                .map(|(k, id)| {
                    self.by_id.get(id).copied().ok_or_else(|| {
                        invalid(
                            &format!("{path}.action_ids[{k}]"),
                            format!("no action with id {id}"),
                        )
                    })
                })
                .collect()
        } else {
            t.actions
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    self.by_name.get(n).copied().ok_or_else(|| {
                        invalid(&format!("{path}.actions[{k}]"), format!("no action {n}"))
                    })
                })
                .collect()
        }
    }

    fn params<'d>(&self, doc: &'d Doc, a: usize) -> &'d [json::RuntimeData] {
        self.first
            .get(a)
            .map_or(&[][..], |&i| &doc.actions[i].runtime_data)
    }

    fn is_empty_action(&self, doc: &Doc, a: usize) -> bool {
        self.first.get(a).is_none_or(|&i| {
            doc.actions[i].runtime_data.is_empty() && doc.actions[i].primitives.is_empty()
        })
    }
}

pub(crate) fn table(
    b: &mut SchemaBuilder,
    l: &Layout,
    doc: &Doc,
    acts: &mut Actions,
    path: &str,
    t: &json::Table,
) -> Result<TableIx> {
    let mut fields = Vec::new();
    for (ki, k) in t.key.iter().enumerate() {
        let kpath = format!("{path}.key[{ki}]");
        let (r, width, kind, _) = key_field(l, &kpath, k)?;
        let name = match (&k.name, r) {
            (Some(n), _) => n.clone(),
            (None, FieldRef::Field(f)) => {
                let h = &l.headers[l.fields[f as usize].header as usize].name;
                format!("{h}.{}", l.fields[f as usize].name)
            }
            (None, FieldRef::Valid(h)) => format!("{}.$valid$", l.headers[h as usize].name),
        };
        fields.push((intern(&name), width8(&kpath, width)?, kind));
    }
    let mut actions: Vec<(usize, ActionScope)> = acts
        .of(path, t)?
        .into_iter()
        .map(|a| (a, ActionScope::TableAndDefault))
        .collect();
    let (default_action, const_default) = match &t.default_entry {
        Some(d) => {
            let dpath = format!("{path}.default_entry");
            let a = *acts
                .by_id
                .get(&d.action_id)
                .ok_or_else(|| invalid(&dpath, format!("no action with id {}", d.action_id)))?;
            (
                (a, params_of(acts, doc, &dpath, a, &d.action_data)?),
                d.action_const,
            )
        }
        None => {
            // BMv2 runs nothing on a miss of a table without a default entry (indirect tables,
            // older JSON): an empty action of the table's, or else an empty `NoAction` allowed
            // only as this table's default.
            let a = match actions
                .iter()
                .map(|&(a, _)| a)
                .find(|&a| acts.is_empty_action(doc, a))
            {
                Some(a) => a,
                None => {
                    let a = match acts.by_name.get("NoAction") {
                        Some(&a) if acts.is_empty_action(doc, a) => a,
                        Some(_) => {
                            return Err(unsupported(
                                path,
                                "a table without a default entry and a NoAction with a body",
                            ));
                        }
                        None => {
                            let a = b.action("NoAction", &[]);
                            acts.by_name.insert("NoAction".into(), a);
                            acts.names.push("NoAction".into());
                            a
                        }
                    };
                    actions.push((a, ActionScope::DefaultOnly));
                    a
                }
            };
            ((a, Vec::new()), false)
        }
    };
    let ix = b.table(TableSpec {
        name: intern(&t.name),
        fields,
        actions,
        default_action,
        const_default,
        size: t.max_size.max(1),
        idle_timeout: t.support_timeout,
    });
    if !t.entries.is_empty() {
        let ternary = t
            .key
            .iter()
            .any(|k| matches!(k.match_type.as_str(), "ternary" | "range" | "optional"));
        let mut entries = Vec::new();
        for (ei, e) in t.entries.iter().enumerate() {
            let epath = format!("{path}.entries[{ei}]");
            if e.match_key.len() != t.key.len() {
                return Err(invalid(
                    &epath,
                    "the match key does not have the table's fields",
                ));
            }
            let mut key = Vec::new();
            for (k, (m, kf)) in e.match_key.iter().zip(&t.key).enumerate() {
                let mpath = format!("{epath}.match_key[{k}]");
                let (_, width, _, _) = key_field(l, &mpath, kf)?;
                key.push(entry_match(&mpath, m, width)?);
            }
            let a = *acts.by_id.get(&e.action_entry.action_id).ok_or_else(|| {
                invalid(
                    &epath,
                    format!("no action with id {}", e.action_entry.action_id),
                )
            })?;
            let params = params_of(acts, doc, &epath, a, &e.action_entry.action_data)?;
            let priority = if ternary {
                // BMv2: the smallest number wins; P4Runtime: the largest.
                let p = u32::try_from(e.priority.unwrap_or(0))
                    .map_err(|_| invalid(&epath, "a negative priority"))?;
                pipeline::commands::p4runtime_priority(p)
                    .map_err(|e| invalid(&epath, e.to_string()))?
            } else {
                0
            };
            entries.push(ConstEntry {
                key,
                priority,
                action: a,
                params,
            });
        }
        b.const_entries(ix, entries);
    }
    Ok(ix)
}

/// The arguments `data` of action `a` in an entry, each masked to its parameter's width.
fn params_of(
    acts: &Actions,
    doc: &Doc,
    path: &str,
    a: usize,
    data: &[String],
) -> Result<Vec<u128>> {
    let rd = acts.params(doc, a);
    if rd.len() != data.len() {
        return Err(invalid(
            path,
            format!("{} arguments for {} parameters", data.len(), rd.len()),
        ));
    }
    data.iter()
        .zip(rd)
        .map(|(d, r)| hex_u128(path, d, r.bitwidth))
        .collect()
}

fn entry_match(path: &str, m: &Value, width: u32) -> Result<FieldMatch> {
    let s = |k: &str| -> Result<u128> {
        match m.get(k) {
            Some(Value::String(v)) => hex_u128(path, v, width),
            _ => Err(invalid(path, format!("a match needs {k}"))),
        }
    };
    match m.get("match_type").and_then(Value::as_str) {
        Some("exact") => Ok(FieldMatch::Exact(s("key")?)),
        Some("valid") => Ok(FieldMatch::Exact(u128::from(
            m.get("key").and_then(Value::as_bool).unwrap_or(false),
        ))),
        Some("lpm") => {
            let len = m
                .get("prefix_length")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n <= width)
                .ok_or_else(|| {
                    invalid(path, "an lpm match needs a prefix_length within the field")
                })?;
            let keep = if len == 0 {
                0
            } else {
                bits::mask(width) & !bits::mask(width - len)
            };
            Ok(FieldMatch::Lpm {
                value: s("key")? & keep,
                prefix_len: len as u8,
            })
        }
        Some("ternary") => {
            let mask = s("mask")?;
            Ok(FieldMatch::Ternary {
                value: s("key")? & mask,
                mask,
            })
        }
        Some("range") => Ok(FieldMatch::Range {
            low: s("start")?,
            high: s("end")?,
        }),
        other => Err(unsupported(path, format!("match type {other:?}"))),
    }
}

pub(crate) fn compile_control(
    scope: &Scope<'_>,
    tables: &HashMap<String, TableIx>,
    selectors: &HashMap<String, Calc>,
    meter_targets: &HashMap<TableIx, u32>,
    acts: &Actions,
    pi: usize,
    p: &json::Pipeline,
) -> Result<Control> {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    for t in &p.tables {
        ids.insert(t.name.as_str(), ids.len() as u32);
    }
    for c in &p.conditionals {
        ids.insert(c.name.as_str(), ids.len() as u32);
    }
    let next = |path: &str, n: &Option<String>| -> Result<Next> {
        match n {
            None => Ok(None),
            Some(n) => ids
                .get(n.as_str())
                .map(|&i| Some(i))
                .ok_or_else(|| invalid(path, format!("no table or condition {n}"))),
        }
    };
    let mut nodes = Vec::new();
    for (ti, t) in p.tables.iter().enumerate() {
        let path = format!("pipelines[{pi}].tables[{ti}]");
        let ix = tables[&t.name];
        let mut key = Vec::new();
        for (ki, k) in t.key.iter().enumerate() {
            let (r, _, _, mask) = key_field(scope.l, &format!("{path}.key[{ki}]"), k)?;
            key.push((r, mask));
        }
        let npath = format!("{path}.next_tables");
        let nt = if t.next_tables.contains_key("__HIT__") || t.next_tables.contains_key("__MISS__")
        {
            NextTables::HitMiss {
                hit: next(&npath, t.next_tables.get("__HIT__").unwrap_or(&None))?,
                miss: next(&npath, t.next_tables.get("__MISS__").unwrap_or(&None))?,
            }
        } else {
            // next_tables is keyed by action name; the table's action ids say which action.
            let mut map = HashMap::new();
            let mine = acts.of(&path, t)?;
            for (name, to) in &t.next_tables {
                let to = next(&format!("{npath}.{name}"), to)?;
                for &a in &mine {
                    if acts.names[a] == *name {
                        map.insert(u16::try_from(a).expect("under 2^16 actions"), to);
                    }
                }
            }
            NextTables::Actions(
                map,
                next(&format!("{path}.base_default_next"), &t.base_default_next)?,
            )
        };
        let selector =
            match (
                t.action_profile.as_ref().or(t.act_prof_name.as_ref()),
                t.kind.as_str(),
            ) {
                (Some(ap), "indirect_ws") => Some(selectors.get(ap).cloned().ok_or_else(|| {
                    invalid(&path, format!("action profile {ap} has no selector"))
                })?),
                _ => None,
            };
        nodes.push(Node::Table(TableNode {
            ix,
            key,
            selector,
            next: nt,
            meter_target: meter_targets.get(&ix).copied(),
        }));
    }
    for (ci, c) in p.conditionals.iter().enumerate() {
        let path = format!("pipelines[{pi}].conditionals[{ci}]");
        let expr: Expr = scope.expr(&format!("{path}.expression"), &c.expression)?;
        nodes.push(Node::Cond {
            name: c.name.clone(),
            expr,
            t: next(&format!("{path}.true_next"), &c.true_next)?,
            f: next(&format!("{path}.false_next"), &c.false_next)?,
        });
    }
    Ok(Control {
        nodes,
        init: next(&format!("pipelines[{pi}].init_table"), &p.init_table)?,
    })
}
