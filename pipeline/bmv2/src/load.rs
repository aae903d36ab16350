//! From the JSON document to a runnable program: the schema the control plane sees (tables,
//! actions, profiles, counters, meters, registers, digests), then every parser, action and
//! control compiled against it.

use std::collections::HashMap;
use std::sync::Arc;

use pipeline::externs::{CounterKind, MeterAlgorithm, MeterUnit};
use pipeline::schema::{
    ActionScope, ConstEntry, CounterIx, DigestIx, MeterIx, RegisterIx, SchemaBuilder, TableIx,
    TableSpec,
};
use pipeline::table::{FieldMatch, MatchKind};
use serde_json::Value;

use crate::action::{Action, Calc, Names};
use crate::bits;
use crate::control::{Control, Next, NextTables, Node, TableNode};
use crate::error::{LoadError, Result, invalid, unsupported};
use crate::expr::{Expr, Scope};
use crate::json::{self, Doc};
use crate::layout::{FieldRef, Layout};
use crate::parse::{Errors, Parser};
use crate::program::{Bmv2Program, Checksum};

/// Interns a name for the life of the process: the schema's names are `&'static str`, and a
/// switch loads few programs, each with a few hundred names; loading one program again adds
/// nothing.
pub(crate) fn intern(s: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&n) = names.get(s) {
        return n;
    }
    let n: &'static str = Box::leak(s.to_owned().into_boxed_str());
    names.insert(n);
    n
}

fn refuse_nonempty(v: &[Value], path: &str, what: &str) -> Result<()> {
    if v.is_empty() {
        Ok(())
    } else {
        Err(unsupported(&format!("{path}[0]"), what))
    }
}

fn width8(path: &str, w: u32) -> Result<u8> {
    u8::try_from(w)
        .ok()
        .filter(|w| (1..=128).contains(w))
        .ok_or_else(|| unsupported(path, format!("a width of {w} bits (1 to 128 are run)")))
}

fn hex_u128(path: &str, s: &str, width: u32) -> Result<u128> {
    bits::hexstr(s)
        .map(|v| (v as u128) & bits::mask(width))
        .map_err(|e| invalid(path, e))
}

/// The ids a P4Info gives a program's objects, by name: a program loaded with them answers to
/// the P4Info p4c wrote for it. Objects the P4Info does not name (p4c's hidden tables for direct
/// action calls, and their actions) keep ids derived from their names.
#[derive(Debug, Default, Clone)]
pub struct P4Ids {
    /// Tables: name -> (id, match field name -> id).
    pub tables: HashMap<String, (u32, HashMap<String, u32>)>,
    /// Match fields the P4Info declares `optional` (table name, field name): p4c writes them
    /// as ternary in the JSON.
    pub optional_fields: std::collections::HashSet<(String, String)>,
    /// Actions: name -> (id, parameter name -> id).
    pub actions: HashMap<String, (u32, HashMap<String, u32>)>,
    /// Action profiles and selectors.
    pub action_profiles: HashMap<String, u32>,
    /// Indexed counters.
    pub counters: HashMap<String, u32>,
    /// Direct counters.
    pub direct_counters: HashMap<String, u32>,
    /// Indexed meters.
    pub meters: HashMap<String, u32>,
    /// Direct meters.
    pub direct_meters: HashMap<String, u32>,
    /// Registers.
    pub registers: HashMap<String, u32>,
    /// Digests (by the learn list's name).
    pub digests: HashMap<String, u32>,
    /// Controller packet metadata (`packet_in`, `packet_out`).
    pub controller_headers: Vec<ControllerHeader>,
}

/// A controller packet metadata header of a P4Info.
#[derive(Debug, Default, Clone)]
pub struct ControllerHeader {
    /// `packet_in` or `packet_out`.
    pub name: String,
    /// Its id.
    pub id: u32,
    /// Its fields in wire order: (id, name, width).
    pub fields: Vec<(u32, String, u8)>,
}

impl P4Ids {
    /// Gives `schema`'s objects the ids named here.
    fn apply(&self, schema: &mut pipeline::schema::Schema) {
        for t in &mut schema.tables {
            if let Some((id, fields)) = self.tables.get(t.name) {
                t.id = *id;
                for f in &mut t.fields {
                    if let Some(&fid) = fields.get(f.name) {
                        f.id = fid;
                    }
                }
            }
            for (k, f) in t.fields.iter_mut().enumerate() {
                let optional = (t.name.to_owned(), f.name.to_owned());
                if f.kind == MatchKind::Ternary && self.optional_fields.contains(&optional) {
                    f.kind = MatchKind::Optional;
                    // A ternary const entry on it is a value with a full mask, or a wildcard.
                    for e in &mut t.const_entries {
                        if let Some(m @ FieldMatch::Ternary { .. }) = e.key.get_mut(k) {
                            let FieldMatch::Ternary { value, mask } = *m else {
                                continue;
                            };
                            *m = FieldMatch::Optional((mask != 0).then_some(value));
                        }
                    }
                }
            }
        }
        for a in &mut schema.actions {
            if let Some((id, params)) = self.actions.get(a.name) {
                a.id = *id;
                for p in &mut a.params {
                    if let Some(&pid) = params.get(p.name) {
                        p.id = pid;
                    }
                }
            }
        }
        let by_name = |m: &HashMap<String, u32>, name: &str, id: &mut u32| {
            if let Some(&x) = m.get(name) {
                *id = x;
            }
        };
        for p in &mut schema.action_profiles {
            by_name(&self.action_profiles, p.name, &mut p.id);
        }
        for c in &mut schema.counters {
            by_name(&self.counters, c.name, &mut c.id);
        }
        for c in &mut schema.direct_counters {
            by_name(&self.direct_counters, c.name, &mut c.id);
        }
        for m in &mut schema.meters {
            by_name(&self.meters, m.name, &mut m.id);
        }
        for m in &mut schema.direct_meters {
            by_name(&self.direct_meters, m.name, &mut m.id);
        }
        for r in &mut schema.registers {
            by_name(&self.registers, r.name, &mut r.id);
        }
        for d in &mut schema.digests {
            by_name(&self.digests, d.name, &mut d.id);
        }
        schema.controller_headers = self
            .controller_headers
            .iter()
            .map(|h| pipeline::schema::ControllerHeaderDef {
                id: h.id,
                name: intern(&h.name),
                fields: h
                    .fields
                    .iter()
                    .map(|(fid, n, w)| (*fid, intern(n), *w))
                    .collect(),
            })
            .collect();
    }
}

/// Loads p4c's BMv2 JSON for the v1model (simple_switch) as program `name`.
pub fn load(json_text: &str, name: &str) -> std::result::Result<Bmv2Program, LoadError> {
    load_with_ids(json_text, name, None)
}

/// [`load`], with the ids of the program's P4Info ([`P4Ids`]).
pub fn load_with_ids(
    json_text: &str,
    name: &str,
    ids: Option<&P4Ids>,
) -> std::result::Result<Bmv2Program, LoadError> {
    let doc: Doc = serde_json::from_str(json_text)?;
    if let Some(m) = &doc.meta
        && m.version.first() != Some(&2)
    {
        return Err(unsupported(
            "__meta__.version",
            format!("format version {:?} (2.x is read)", m.version),
        ));
    }
    refuse_nonempty(&doc.header_unions, "header_unions", "header unions")?;
    refuse_nonempty(
        &doc.header_union_stacks,
        "header_union_stacks",
        "header union stacks",
    )?;
    refuse_nonempty(&doc.parse_vsets, "parse_vsets", "parser value sets")?;
    refuse_nonempty(
        &doc.extern_instances,
        "extern_instances",
        "extern instances",
    )?;
    for (i, p) in doc.pipelines.iter().enumerate() {
        refuse_nonempty(
            &p.action_calls,
            &format!("pipelines[{i}].action_calls"),
            "action calls",
        )?;
    }
    let l = Layout::build(&doc)?;
    let mut b = SchemaBuilder::new(intern(name), "bmv2");

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
            let ix = register(&mut b, &mut acts, i, &a.name)?;
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
            register(&mut b, &mut acts, i, &format!("{}${}", a.name, a.id))?;
        }
    }

    // Indexed externs.
    let mut registers: HashMap<String, RegisterIx> = HashMap::new();
    for (i, r) in doc.register_arrays.iter().enumerate() {
        let w = u8::try_from(r.bitwidth)
            .ok()
            .filter(|w| (1..=64).contains(w))
            .ok_or_else(|| {
                unsupported(
                    &format!("register_arrays[{i}]"),
                    format!("registers of {} bits (1 to 64 are run)", r.bitwidth),
                )
            })?;
        registers.insert(r.name.clone(), b.register(intern(&r.name), w, r.size));
    }
    let mut counters: HashMap<String, CounterIx> = HashMap::new();
    for c in doc.counter_arrays.iter().filter(|c| !c.is_direct) {
        counters.insert(
            c.name.clone(),
            b.counter(intern(&c.name), CounterKind::Both, c.size),
        );
    }
    let unit = |path: &str, m: &json::MeterArray| -> Result<MeterUnit> {
        if m.rate_count != 2 {
            return Err(unsupported(
                path,
                format!(
                    "meters of {} rates (two-rate three-colour is run)",
                    m.rate_count
                ),
            ));
        }
        match m.unit.as_str() {
            "bytes" => Ok(MeterUnit::Bytes),
            "packets" => Ok(MeterUnit::Packets),
            other => Err(invalid(path, format!("meter type {other}"))),
        }
    };
    let mut meters: HashMap<String, MeterIx> = HashMap::new();
    for (i, m) in doc.meter_arrays.iter().enumerate() {
        if !m.is_direct {
            let u = unit(&format!("meter_arrays[{i}]"), m)?;
            meters.insert(
                m.name.clone(),
                b.meter(intern(&m.name), u, MeterAlgorithm::TrTcm, m.size),
            );
        }
    }

    // Tables of every pipeline, then what hangs off them.
    let mut tables: HashMap<String, TableIx> = HashMap::new();
    let mut profile_tables: HashMap<String, Vec<TableIx>> = HashMap::new();
    for (pi, p) in doc.pipelines.iter().enumerate() {
        for (ti, t) in p.tables.iter().enumerate() {
            let path = format!("pipelines[{pi}].tables[{ti}]");
            let ix = table(&mut b, &l, &doc, &mut acts, &path, t)?;
            if tables.insert(t.name.clone(), ix).is_some() {
                return Err(invalid(&path, format!("a second table named {}", t.name)));
            }
            match t.kind.as_str() {
                "simple" => {}
                "indirect" | "indirect_ws" => {
                    let prof = t
                        .action_profile
                        .clone()
                        .or_else(|| t.act_prof_name.clone())
                        .ok_or_else(|| {
                            invalid(&path, "an indirect table names its action_profile")
                        })?;
                    profile_tables.entry(prof).or_default().push(ix);
                }
                other => {
                    return Err(unsupported(
                        &format!("{path}.type"),
                        format!("tables of type {other}"),
                    ));
                }
            }
        }
    }
    let scope_regs = registers.clone();
    let plain = Scope {
        l: &l,
        registers: &scope_regs,
        params: 0,
        parser: false,
    };
    let mut selectors: HashMap<String, Calc> = HashMap::new();
    for (pi, p) in doc.pipelines.iter().enumerate() {
        for (ai, ap) in p.action_profiles.iter().enumerate() {
            let path = format!("pipelines[{pi}].action_profiles[{ai}]");
            let users = profile_tables.remove(&ap.name).unwrap_or_default();
            let size = ap.max_size.max(1);
            b.action_profile(intern(&ap.name), &users, ap.selector.is_some(), size, size);
            if let Some(s) = &ap.selector {
                let c = Calc::compile(&plain, &format!("{path}.selector"), &s.algo, &s.input)?;
                selectors.insert(ap.name.clone(), c);
            }
        }
    }
    // The older format: a table's own profile, declared in the table.
    for (pi, p) in doc.pipelines.iter().enumerate() {
        for (ti, t) in p.tables.iter().enumerate() {
            let Some(name) = &t.act_prof_name else {
                continue;
            };
            let Some(users) = profile_tables.remove(name) else {
                continue;
            };
            let path = format!("pipelines[{pi}].tables[{ti}]");
            let size = t.max_size.max(1);
            b.action_profile(intern(name), &users, t.selector.is_some(), size, size);
            if let Some(s) = &t.selector {
                let c = Calc::compile(&plain, &format!("{path}.selector"), &s.algo, &s.input)?;
                selectors.insert(name.clone(), c);
            }
        }
    }
    if let Some((name, _)) = profile_tables.into_iter().next() {
        return Err(invalid("pipelines", format!("no action profile {name}")));
    }
    for (i, c) in doc
        .counter_arrays
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_direct)
    {
        let path = format!("counter_arrays[{i}]");
        let t = bound(&tables, &path, &c.binding)?;
        b.direct_counter(intern(&c.name), CounterKind::Both, t);
    }
    let mut meter_targets: HashMap<TableIx, u32> = HashMap::new();
    for (i, m) in doc
        .meter_arrays
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_direct)
    {
        let path = format!("meter_arrays[{i}]");
        let t = bound(&tables, &path, &m.binding)?;
        let u = unit(&path, m)?;
        b.direct_meter(intern(&m.name), u, MeterAlgorithm::TrTcm, t);
        if let Some((h, f)) = &m.result_target
            && let FieldRef::Field(f) = l.field(&format!("{path}.result_target"), h, f)?
        {
            meter_targets.insert(t, f);
        }
    }

    // Field lists (what clones, resubmits and recirculations keep) and learn lists (digests).
    let list_fields = |path: &str, fl: &json::FieldList| -> Result<Vec<u32>> {
        let mut out = Vec::new();
        for (k, e) in fl.elements.iter().enumerate() {
            let epath = format!("{path}.elements[{k}]");
            match e.get("type").and_then(Value::as_str) {
                Some("field") => {
                    match plain.field(&epath, e.get("value").unwrap_or(&Value::Null))? {
                        FieldRef::Field(f) => out.push(f),
                        FieldRef::Valid(_) => {
                            return Err(unsupported(&epath, "a $valid$ bit in a list"));
                        }
                    }
                }
                _ => return Err(unsupported(&epath, "a list element that is not a field")),
            }
        }
        Ok(out)
    };
    let mut field_lists = Vec::new();
    let mut field_list_ix = HashMap::new();
    for (i, fl) in doc.field_lists.iter().enumerate() {
        let path = format!("field_lists[{i}]");
        let fields = list_fields(&path, fl)?;
        if fields
            .iter()
            .any(|&f| !l.headers[l.fields[f as usize].header as usize].metadata)
        {
            return Err(unsupported(
                &path,
                "a field list with header fields (metadata is kept)",
            ));
        }
        field_list_ix.insert(fl.id, field_lists.len());
        field_lists.push(fields);
    }
    let mut learn_lists: Vec<(DigestIx, Vec<u32>)> = Vec::new();
    let mut learn_ix = HashMap::new();
    for (i, ll) in doc.learn_lists.iter().enumerate() {
        let path = format!("learn_lists[{i}]");
        let fields = list_fields(&path, ll)?;
        let named: Vec<(&'static str, u8)> = fields
            .iter()
            .map(|&f| {
                let fd = &l.fields[f as usize];
                let h = &l.headers[fd.header as usize];
                (intern(&format!("{}.{}", h.name, fd.name)), fd.width as u8)
            })
            .collect();
        let d = b.digest(intern(&ll.name), &named);
        learn_ix.insert(ll.id, learn_lists.len());
        learn_lists.push((d, fields));
    }
    let assert_drop = b.drop_reason("p4_assert");
    let bridge_drop = b.drop_reason("bmv2_bridge_lost");
    let mut schema = b.build().map_err(|e| LoadError::Schema(e.to_string()))?;
    if let Some(ids) = ids {
        ids.apply(&mut schema);
        schema = schema
            .check()
            .map_err(|e| LoadError::Schema(e.to_string()))?;
    }

    // Calculations, actions, parser, checksums, controls.
    let mut calcs = Vec::new();
    let mut calc_ix = HashMap::new();
    for (i, c) in doc.calculations.iter().enumerate() {
        let path = format!("calculations[{i}]");
        calc_ix.insert(c.name.clone(), calcs.len());
        calcs.push(Calc::compile(&plain, &path, &c.algo, &c.input)?);
    }
    let names = Names {
        counters: &counters,
        meters: &meters,
        calcs: &calc_ix,
        field_lists: &field_list_ix,
        learn_lists: &learn_ix,
    };
    let mut actions = Vec::new();
    for k in 0..acts.names.len() {
        match acts.first.get(k) {
            Some(&i) => {
                let a = &doc.actions[i];
                let scope = Scope {
                    l: &l,
                    registers: &registers,
                    params: a.runtime_data.len(),
                    parser: false,
                };
                actions.push(Action::compile(
                    &scope,
                    &names,
                    &format!("actions[{i}]"),
                    a,
                )?);
            }
            // The empty action a table without a default entry misses to.
            None => actions.push(Action { prims: Vec::new() }),
        }
    }
    let parser_ix = doc
        .parsers
        .iter()
        .position(|p| p.name == "parser")
        .or(if doc.parsers.len() == 1 {
            Some(0)
        } else {
            None
        })
        .ok_or_else(|| invalid("parsers", "no parser named parser"))?;
    let pscope = Scope {
        l: &l,
        registers: &registers,
        params: 0,
        parser: true,
    };
    let parser = Parser::compile(&doc, parser_ix, &pscope, &names, Errors::of(&doc))?;
    let deparser = match doc
        .deparsers
        .iter()
        .enumerate()
        .find(|(_, d)| d.name == "deparser")
        .or(doc.deparsers.first().map(|d| (0, d)))
    {
        Some((di, d)) => {
            let mut order = Vec::new();
            for (k, h) in d.order.iter().enumerate() {
                order.push(l.header(&format!("deparsers[{di}].order[{k}]"), h)?);
            }
            order
        }
        None => Vec::new(),
    };
    let mut checksums = Vec::new();
    for (i, c) in doc.checksums.iter().enumerate() {
        let path = format!("checksums[{i}]");
        if let Some(k) = c.kind.as_deref().filter(|k| *k != "generic") {
            return Err(unsupported(
                &format!("{path}.type"),
                format!("checksums of type {k}"),
            ));
        }
        let target = match l.field(&format!("{path}.target"), &c.target.0, &c.target.1)? {
            FieldRef::Field(f) => f,
            FieldRef::Valid(_) => return Err(invalid(&path, "a checksum into $valid$")),
        };
        let calc = *calc_ix
            .get(&c.calculation)
            .ok_or_else(|| invalid(&path, format!("no calculation {}", c.calculation)))?;
        let cond = match &c.if_cond {
            Value::Null => None,
            v => Some(plain.expr(&format!("{path}.if_cond"), v)?),
        };
        checksums.push(Checksum {
            target,
            calc,
            cond,
            verify: c.verify.unwrap_or(true),
            update: c.update.unwrap_or(true),
        });
    }
    let control = |want: &str| -> Result<Control> {
        match doc
            .pipelines
            .iter()
            .enumerate()
            .find(|(_, p)| p.name == want)
        {
            Some((pi, p)) => {
                compile_control(&plain, &tables, &selectors, &meter_targets, &acts, pi, p)
            }
            None => Ok(Control {
                nodes: Vec::new(),
                init: None,
            }),
        }
    };
    let ingress = control("ingress")?;
    let egress = control("egress")?;
    Ok(Bmv2Program {
        schema: Arc::new(schema),
        l,
        parser,
        deparser,
        ingress,
        egress,
        actions,
        calcs,
        checksums,
        field_lists,
        learn_lists,
        assert_drop,
        bridge_drop,
        tag: crate::program::new_tag(),
    })
}

fn bound(
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
struct Actions {
    by_id: HashMap<i64, usize>,
    by_name: HashMap<String, usize>,
    /// Schema action -> the first JSON action of its name (none for the synthetic miss action).
    first: Vec<usize>,
    names: Vec<String>,
}

impl Actions {
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

fn table(
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

fn compile_control(
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
