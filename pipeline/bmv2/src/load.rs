//! From the JSON document to a runnable program: the schema the control plane sees (tables,
//! actions, profiles, counters, meters, registers, digests), then every parser, action and
//! control compiled against it.

use std::collections::HashMap;
use std::sync::Arc;

use pipeline::externs::{CounterKind, MAX_REGISTER_BITS, MeterAlgorithm, MeterUnit};
use pipeline::schema::{CounterIx, DigestIx, MeterIx, RegisterIx, SchemaBuilder, TableIx};
use serde::Deserialize;
use serde_json::Value;

use crate::action::{Action, Calc, Names};
use crate::bits;
use crate::control::Control;
use crate::error::{LoadError, Result, invalid, unsupported};
use crate::expr::Scope;
use crate::ids::P4Ids;
use crate::json::{self, Doc};
use crate::layout::{FieldRef, Layout};
use crate::parse::{Errors, Parser};
use crate::program::{Bmv2Program, Checksum};
use crate::tables::{Actions, bound, compile_control, table};

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

pub(crate) fn width8(path: &str, w: u32) -> Result<u8> {
    u8::try_from(w)
        .ok()
        .filter(|w| (1..=128).contains(w))
        .ok_or_else(|| unsupported(path, format!("a width of {w} bits (1 to 128 are run)")))
}

pub(crate) fn hex_u128(path: &str, s: &str, width: u32) -> Result<u128> {
    bits::hexstr(s)
        .map(|v| (v as u128) & bits::mask(width))
        .map_err(|e| invalid(path, e))
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
    let raw: Value = serde_json::from_str(json_text)?;
    let doc = Doc::deserialize(&raw)?;
    if let Some(m) = &doc.meta
        && m.version.first() != Some(&2)
    {
        return Err(unsupported(
            "__meta__.version",
            format!("format version {:?} (2.x is read)", m.version),
        ));
    }
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

    let mut acts = Actions::build(&mut b, &doc)?;

    // Indexed externs.
    let mut registers: HashMap<String, RegisterIx> = HashMap::new();
    for (i, r) in doc.register_arrays.iter().enumerate() {
        let w = u8::try_from(r.bitwidth)
            .ok()
            .filter(|w| (1..=MAX_REGISTER_BITS).contains(w))
            .ok_or_else(|| {
                unsupported(
                    &format!("register_arrays[{i}]"),
                    format!(
                        "registers of {} bits (1 to {MAX_REGISTER_BITS} are run)",
                        r.bitwidth
                    ),
                )
            })?;
        registers.insert(r.name.clone(), b.register(intern(&r.name), w, r.size));
    }
    // Parser value sets: one member field of the compressed width (a P4Info gives the fields
    // and the size); BMv2 bounds no value set.
    let mut value_sets: HashMap<String, (usize, u32)> = HashMap::new();
    for (i, v) in doc.parse_vsets.iter().enumerate() {
        let w = u8::try_from(v.compressed_bitwidth)
            .ok()
            .filter(|w| (1..=128).contains(w))
            .ok_or_else(|| {
                unsupported(
                    &format!("parse_vsets[{i}]"),
                    format!(
                        "value sets of {} bits (1 to 128 are run)",
                        v.compressed_bitwidth
                    ),
                )
            })?;
        let size = v.max_size.filter(|&n| n > 0).unwrap_or(usize::MAX);
        let set = b.value_set(intern(&v.name), &[("", w)], size);
        value_sets.insert(v.name.clone(), (set, u32::from(w)));
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
    let parser = Parser::compile(
        &doc,
        parser_ix,
        &pscope,
        &names,
        &value_sets,
        Errors::of(&doc),
    )?;
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
    let bridged = crate::live::egress_reads(&raw, &l);
    let bridged_bytes = bridged
        .iter()
        .map(|&f| l.fields[f as usize].width.div_ceil(8) as usize)
        .sum();
    let mut is_deparsed = vec![false; l.headers.len()];
    for &h in &deparser {
        is_deparsed[h as usize] = true;
    }
    Ok(Bmv2Program {
        schema: Arc::new(schema),
        l,
        parser,
        deparser,
        is_deparsed,
        bridged,
        bridged_bytes,
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
