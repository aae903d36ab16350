//! `simple_switch_CLI`'s command language, run in process: each line becomes the call the CLI
//! would send for it (names resolved as the CLI resolves them, values packed as it packs them)
//! and is answered by the handlers the Thrift server runs, so a `commands.txt` written for
//! BMv2 means here what it means there: handles are the ones the calls return (an entry's, a
//! member's, a group's, a node's), priorities are BMv2's, nodes build groups.
//!
//! Commands that only read (`table_dump`, `register_read`, ...) are skipped with a note; the
//! switch's own command language (`--program`'s `--entries`) is not taken, except its settings
//! the CLI has no verb for (`set_port_rate`, ...), which go to the switch's admin commands.

use pipeline::schema::{ActionDef, ActionProfileDef, TableDef};

use super::program::{KeyType, View};
use super::value::{Struct, TType, Value};
use super::{Fail, Runtime, pre};
use words::*;

mod words;

/// What a command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// A blank or comment line.
    Nothing,
    /// Done; with what `simple_switch_CLI` prints of its result, if it prints one (a handle).
    Done(Option<String>),
    /// A command that only reads state, not run; the note says so.
    Skipped(String),
}

/// The verbs that only read (or only print help): skipped.
const READS: &[&str] = &[
    "show_tables",
    "show_actions",
    "table_show_actions",
    "table_info",
    "table_num_entries",
    "table_dump",
    "table_dump_entry",
    "table_dump_entry_from_key",
    "table_dump_member",
    "table_dump_group",
    "act_prof_dump",
    "act_prof_dump_member",
    "act_prof_dump_group",
    "counter_read",
    "meter_get_rates",
    "register_read",
    "mc_dump",
    "mirroring_get",
    "get_time_elapsed",
    "get_time_since_epoch",
    "show_ports",
    "switch_info",
    "show_pvs",
    "pvs_get",
    "write_config_to_file",
    "serialize_state",
    "greet",
    "help",
    "EOF",
];

/// The switch's own table verbs that `simple_switch_CLI` does not have, with what to write
/// instead.
const OWN: &[(&str, &str)] = &[
    (
        "mc_group_create",
        "mc_mgrp_create, mc_node_create and mc_node_associate",
    ),
    (
        "mirroring_add_replicas",
        "mirroring_add or mirroring_add_mc",
    ),
    (
        "meter_set",
        "meter_set_rates <meter> <index> <rate>:<burst> <rate>:<burst>",
    ),
    (
        "meter_set_direct",
        "meter_set_rates <direct meter> <entry handle> <rate>:<burst> <rate>:<burst>",
    ),
];

/// The deprecated `table_indirect_*` verbs that name a table for its action profile, with the
/// `act_prof_*` verb they stand for and whether it needs a selector.
const BY_TABLE: &[(&str, &str, bool)] = &[
    (
        "table_indirect_create_member",
        "act_prof_create_member",
        false,
    ),
    (
        "table_indirect_delete_member",
        "act_prof_delete_member",
        false,
    ),
    (
        "table_indirect_modify_member",
        "act_prof_modify_member",
        false,
    ),
    ("table_indirect_create_group", "act_prof_create_group", true),
    ("table_indirect_delete_group", "act_prof_delete_group", true),
    (
        "table_indirect_add_member_to_group",
        "act_prof_add_member_to_group",
        true,
    ),
    (
        "table_indirect_remove_member_from_group",
        "act_prof_remove_member_from_group",
        true,
    ),
];

/// Runs one line; an error says why (the verb first).
pub(super) fn run_line(rt: &Runtime, line: &str) -> Result<Said, String> {
    let text = line.split('#').next().unwrap_or("");
    let mut words = text.split_whitespace();
    let Some(verb) = words.next() else {
        return Ok(Said::Nothing);
    };
    let view = rt.view();
    let l = Line {
        rt,
        v: &view,
        verb,
        args: words.collect(),
    };
    l.run().map_err(|e| format!("{verb}: {e}"))
}

struct Line<'a> {
    rt: &'a Runtime,
    v: &'a View,
    verb: &'a str,
    args: Vec<&'a str>,
}

impl Line<'_> {
    fn exactly(&self, n: usize, usage: &str) -> Result<(), String> {
        if self.args.len() == n {
            return Ok(());
        }
        Err(format!(
            "Wrong number of args, expected {n} but got {} ({} {usage})",
            self.args.len(),
            self.verb
        ))
    }

    fn at_least(&self, n: usize, usage: &str) -> Result<(), String> {
        if self.args.len() >= n {
            return Ok(());
        }
        Err(format!(
            "Insufficient number of args, {} at least {n} ({} {usage})",
            self.args.len(),
            self.verb
        ))
    }

    /// Calls `method` of the runtime API, as the Thrift server answers it.
    fn call(&self, method: &str, args: Struct) -> Result<Option<Value>, String> {
        self.rt.call(method, &args).map_err(|f| match f {
            Fail::Code(code, why) => format!("{why} ({})", code_name(method, code)),
            Fail::App(why) => why,
            Fail::Unknown(m) => format!("the runtime API has no method {m}"),
        })
    }

    /// A call that returns a handle.
    fn handle(&self, method: &str, args: Struct) -> Result<i64, String> {
        match self.call(method, args)? {
            Some(Value::I32(h)) => Ok(i64::from(h)),
            other => Err(format!("{method} answered {other:?}, not a handle")),
        }
    }

    fn table(&self, name: &str) -> Result<(usize, &TableDef), String> {
        let s = &self.v.schema;
        let full = resolve("table", s.tables.iter().map(|t| t.name), name)?;
        s.tables
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == full)
            .ok_or_else(|| format!("Invalid table name ({name})"))
    }

    fn profile(&self, name: &str) -> Result<&ActionProfileDef, String> {
        let s = &self.v.schema;
        let full = resolve(
            "action profile",
            s.action_profiles.iter().map(|p| p.name),
            name,
        )?;
        s.action_profiles
            .iter()
            .find(|p| p.name == full)
            .ok_or_else(|| format!("Invalid action profile name ({name})"))
    }

    /// The action `name` among the actions of `tables` (a table's, or a profile's tables').
    /// A copy p4c made of an action (`name$id`) answers to the action's name.
    fn action(&self, tables: &[usize], owner: &str, name: &str) -> Result<&ActionDef, String> {
        let s = &self.v.schema;
        let mut actions: Vec<&ActionDef> = Vec::new();
        for r in tables.iter().flat_map(|&t| &s.tables[t].actions) {
            let a = &s.actions[r.action];
            if !actions.iter().any(|x| x.name == a.name) {
                actions.push(a);
            }
        }
        let base = |a: &ActionDef| a.name.split_once('$').map_or(a.name, |(b, _)| b);
        if let Some(a) = actions.iter().find(|a| a.name == name || base(a) == name) {
            return Ok(*a);
        }
        let found: Vec<&&ActionDef> = actions
            .iter()
            .filter(|a| names(a.name, name) || names(base(a), name))
            .collect();
        match found.as_slice() {
            [one] => Ok(**one),
            [] => Err(format!("{owner} has no action {name}")),
            many => Err(format!(
                "action name {name} is ambiguous in {owner}: {}",
                many.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Action data for `a`, one packed value per parameter.
    fn data(&self, a: &ActionDef, words: &[&str]) -> Result<Value, String> {
        if words.len() != a.params.len() {
            return Err(format!(
                "Action {} needs {} parameters, got {}",
                a.name,
                a.params.len(),
                words.len()
            ));
        }
        let data = a
            .params
            .iter()
            .zip(words)
            .map(|(p, w)| packed(w, p.bitwidth, &format!("{}'s {}", a.name, p.name)))
            .collect::<Result<_, _>>()?;
        Ok(Value::List(TType::String, data))
    }

    /// A match key of table `ti` from one word per field, as BmMatchParams.
    fn key(&self, ti: usize, words: &[&str]) -> Result<Value, String> {
        let t = &self.v.schema.tables[ti];
        if words.len() != t.fields.len() {
            return Err(format!(
                "Table {} needs {} key fields, got {}",
                t.name,
                t.fields.len(),
                words.len()
            ));
        }
        let mut params = Vec::new();
        for ((f, &ty), &w) in t.fields.iter().zip(self.v.key_types(ti)).zip(words) {
            let val = |s: &str| packed(s, f.bitwidth, f.name);
            let split = |sep: &str, form: &str| {
                w.split_once(sep)
                    .ok_or_else(|| format!("{}: invalid {form} value {w}", f.name))
            };
            let sub = match ty {
                KeyType::Exact => Struct::new().with(1, val(w)?),
                KeyType::Lpm => {
                    let (v, len) = split("/", "LPM (<value>/<prefix length>)")?;
                    Struct::new()
                        .with(1, val(v)?)
                        .with(2, Value::I32(int(len, "prefix length")?))
                }
                KeyType::Ternary => {
                    let (v, m) = split("&&&", "ternary (<value>&&&<mask>)")?;
                    Struct::new().with(1, val(v)?).with(2, val(m)?)
                }
                KeyType::Valid => Struct::new().with(1, Value::Bool(int(w, "valid bit")? != 0)),
                KeyType::Range => {
                    let (lo, hi) = split("->", "range (<low>-><high>)")?;
                    Struct::new().with(1, val(lo)?).with(2, val(hi)?)
                }
            };
            params.push(
                Struct::new()
                    .with(1, Value::I32(ty as i32))
                    .with(ty as i16 + 2, Value::Struct(sub)),
            );
        }
        Ok(Value::structs(params))
    }

    /// Takes the priority off the end of `args` when table `ti` has one (a ternary or range
    /// field), as the CLI does; BmAddEntryOptions with it (0 otherwise).
    fn priority(&self, ti: usize, args: &mut Vec<&str>) -> Result<Value, String> {
        let ternary = self
            .v
            .key_types(ti)
            .iter()
            .any(|k| matches!(k, KeyType::Ternary | KeyType::Range));
        let p = if ternary {
            let w = args.pop().unwrap_or("");
            int(w, "priority").map_err(|_| {
                format!(
                    "{} has ternary or range fields: its entries end with a priority, not '{w}'",
                    self.v.schema.tables[ti].name
                )
            })?
        } else {
            0
        };
        Ok(Value::Struct(Struct::new().with(1, Value::I32(p))))
    }

    /// Checks that table `t` takes members (`groups`: and groups).
    fn indirect<'t>(
        &'t self,
        t: &'t TableDef,
        groups: bool,
    ) -> Result<&'t ActionProfileDef, String> {
        let p = t.implementation.map(|p| &self.v.schema.action_profiles[p]);
        match p {
            None => Err(format!(
                "Cannot run this command on non-indirect table {}",
                t.name
            )),
            Some(p) if groups && !p.selector => Err(format!(
                "Cannot run this command on {}: its action profile {} has no selector",
                t.name, p.name
            )),
            Some(p) => Ok(p),
        }
    }

    fn run(&self) -> Result<Said, String> {
        let done = |s: Option<String>| -> Result<Said, String> { Ok(Said::Done(s)) };
        let a = &self.args;
        let v = self.v;
        let handle_said = |what: &str, h: i64| -> Result<Said, String> {
            Ok(Said::Done(Some(format!("{what} {h}"))))
        };
        match self.verb {
            verb if READS.contains(&verb) => Ok(Said::Skipped(format!(
                "{verb} only reads: skipped (run it with simple_switch_CLI)"
            ))),
            "table_add" => {
                let usage = "<table> <action> <key...> => <parameters...> [priority]";
                self.at_least(3, usage)?;
                let (ti, t) = self.table(a[0])?;
                let act = self.action(&[ti], t.name, a[1])?;
                let mut rest = a[2..].to_vec();
                let options = self.priority(ti, &mut rest)?;
                let arrow = rest
                    .iter()
                    .position(|w| *w == "=>")
                    .ok_or_else(|| format!("missing => ({} {usage})", self.verb))?;
                let key = self.key(ti, &rest[..arrow])?;
                let data = self.data(act, &rest[arrow + 1..])?;
                let args = vec![Value::str(t.name), key, Value::str(act.name), data, options];
                let h = self.handle("bm_mt_add_entry", numbered(args))?;
                handle_said("Entry has been added with handle", h)
            }
            "table_modify" => {
                self.at_least(3, "<table> <action> <entry handle> [=>] <parameters...>")?;
                let (ti, t) = self.table(a[0])?;
                let act = self.action(&[ti], t.name, a[1])?;
                let h = int(a[2], "entry handle")?;
                let params = match &a[3..] {
                    ["=>", rest @ ..] => rest,
                    rest => rest,
                };
                let data = self.data(act, params)?;
                let args = vec![
                    Value::str(t.name),
                    Value::I32(h),
                    Value::str(act.name),
                    data,
                ];
                self.call("bm_mt_modify_entry", numbered(args))?;
                done(None)
            }
            "table_delete" | "table_indirect_delete" => {
                self.exactly(2, "<table> <entry handle>")?;
                let (_, t) = self.table(a[0])?;
                let method = if self.verb == "table_delete" {
                    "bm_mt_delete_entry"
                } else {
                    self.indirect(t, false)?;
                    "bm_mt_indirect_delete_entry"
                };
                let h = int(a[1], "entry handle")?;
                self.call(method, numbered(vec![Value::str(t.name), Value::I32(h)]))?;
                done(None)
            }
            "table_set_default" => {
                self.at_least(2, "<table> <action> <parameters...>")?;
                let (ti, t) = self.table(a[0])?;
                let act = self.action(&[ti], t.name, a[1])?;
                let data = self.data(act, &a[2..])?;
                let args = vec![Value::str(t.name), Value::str(act.name), data];
                self.call("bm_mt_set_default_action", numbered(args))?;
                done(None)
            }
            "table_reset_default" | "table_indirect_reset_default" | "table_clear" => {
                self.exactly(1, "<table>")?;
                let (_, t) = self.table(a[0])?;
                let mut args = vec![Value::str(t.name)];
                let method = match self.verb {
                    "table_clear" => {
                        args.push(Value::Bool(false));
                        "bm_mt_clear_entries"
                    }
                    "table_reset_default" => "bm_mt_reset_default_entry",
                    _ => "bm_mt_indirect_reset_default_entry",
                };
                self.call(method, numbered(args))?;
                done(None)
            }
            "table_set_timeout" => {
                self.exactly(3, "<table> <entry handle> <timeout ms>")?;
                let (_, t) = self.table(a[0])?;
                let args = vec![
                    Value::str(t.name),
                    Value::I32(int(a[1], "entry handle")?),
                    Value::I32(int(a[2], "timeout")?),
                ];
                self.call("bm_mt_set_entry_ttl", numbered(args))?;
                done(None)
            }
            "table_indirect_add" | "table_indirect_add_with_group" => {
                let groups = self.verb == "table_indirect_add_with_group";
                let what = if groups { "group" } else { "member" };
                let usage = format!("<table> <key...> => <{what} handle> [priority]");
                self.at_least(2, &usage)?;
                let (ti, t) = self.table(a[0])?;
                self.indirect(t, groups)?;
                let mut rest = a[1..].to_vec();
                let options = self.priority(ti, &mut rest)?;
                let (key, h) = match rest.iter().position(|w| *w == "=>") {
                    Some(i) if i + 2 == rest.len() => (&rest[..i], rest[i + 1]),
                    _ => {
                        return Err(format!(
                            "Invalid arguments, could not find the {what} handle ({} {usage})",
                            self.verb
                        ));
                    }
                };
                let key = self.key(ti, key)?;
                let h = int(h, &format!("{what} handle"))?;
                let method = if groups {
                    "bm_mt_indirect_ws_add_entry"
                } else {
                    "bm_mt_indirect_add_entry"
                };
                let args = vec![Value::str(t.name), key, Value::I32(h), options];
                let h = self.handle(method, numbered(args))?;
                handle_said("Entry has been added with handle", h)
            }
            "table_indirect_set_default" | "table_indirect_set_default_with_group" => {
                let groups = self.verb == "table_indirect_set_default_with_group";
                self.exactly(2, "<table> <handle>")?;
                let (_, t) = self.table(a[0])?;
                self.indirect(t, groups)?;
                let h = int(a[1], "handle")?;
                let method = if groups {
                    "bm_mt_indirect_ws_set_default_group"
                } else {
                    "bm_mt_indirect_set_default_member"
                };
                self.call(method, numbered(vec![Value::str(t.name), Value::I32(h)]))?;
                done(None)
            }
            verb if let Some(&(_, instead, groups)) =
                BY_TABLE.iter().find(|(v, _, _)| *v == verb) =>
            {
                self.at_least(1, "<table> ...")?;
                let (_, t) = self.table(a[0])?;
                let p = self.indirect(t, groups)?;
                if p.tables.len() > 1 {
                    return Err(format!(
                        "Legacy command does not work with shared action profiles: use {instead} {}",
                        p.name
                    ));
                }
                let mut args = vec![p.name];
                args.extend(&a[1..]);
                let l = Line {
                    rt: self.rt,
                    v,
                    verb: instead,
                    args,
                };
                l.run()
            }
            "act_prof_create_member" | "act_prof_modify_member" => {
                let modify = self.verb == "act_prof_modify_member";
                let usage = if modify {
                    "<action profile> <action> <member handle> [=>] <parameters...>"
                } else {
                    "<action profile> <action> <parameters...>"
                };
                self.at_least(if modify { 3 } else { 2 }, usage)?;
                let p = self.profile(a[0])?;
                let act = self.action(&p.tables, p.name, a[1])?;
                if modify {
                    let m = int(a[2], "member handle")?;
                    let params = match &a[3..] {
                        ["=>", rest @ ..] => rest,
                        rest => rest,
                    };
                    let data = self.data(act, params)?;
                    let args = vec![
                        Value::str(p.name),
                        Value::I32(m),
                        Value::str(act.name),
                        data,
                    ];
                    self.call("bm_mt_act_prof_modify_member", numbered(args))?;
                    return done(None);
                }
                let data = self.data(act, &a[2..])?;
                let args = vec![Value::str(p.name), Value::str(act.name), data];
                let h = self.handle("bm_mt_act_prof_add_member", numbered(args))?;
                handle_said("Member has been created with handle", h)
            }
            "act_prof_delete_member" => {
                self.exactly(2, "<action profile> <member handle>")?;
                let p = self.profile(a[0])?;
                let m = int(a[1], "member handle")?;
                let args = vec![Value::str(p.name), Value::I32(m)];
                self.call("bm_mt_act_prof_delete_member", numbered(args))?;
                done(None)
            }
            "act_prof_create_group" | "act_prof_delete_group" => {
                let create = self.verb == "act_prof_create_group";
                if create {
                    self.exactly(1, "<action profile>")?;
                } else {
                    self.exactly(2, "<action profile> <group handle>")?;
                }
                let p = self.profile(a[0])?;
                if !p.selector {
                    return Err(format!(
                        "Cannot run this command on action profile {} without a selector",
                        p.name
                    ));
                }
                if create {
                    let args = numbered(vec![Value::str(p.name)]);
                    let h = self.handle("bm_mt_act_prof_create_group", args)?;
                    return handle_said("Group has been created with handle", h);
                }
                let args = vec![Value::str(p.name), Value::I32(int(a[1], "group handle")?)];
                self.call("bm_mt_act_prof_delete_group", numbered(args))?;
                done(None)
            }
            "act_prof_add_member_to_group" | "act_prof_remove_member_from_group" => {
                self.exactly(3, "<action profile> <member handle> <group handle>")?;
                let p = self.profile(a[0])?;
                if !p.selector {
                    return Err(format!(
                        "Cannot run this command on action profile {} without a selector",
                        p.name
                    ));
                }
                let args = vec![
                    Value::str(p.name),
                    Value::I32(int(a[1], "member handle")?),
                    Value::I32(int(a[2], "group handle")?),
                ];
                let method = if self.verb == "act_prof_add_member_to_group" {
                    "bm_mt_act_prof_add_member_to_group"
                } else {
                    "bm_mt_act_prof_remove_member_from_group"
                };
                self.call(method, numbered(args))?;
                done(None)
            }
            "counter_write" | "counter_reset" => {
                let write = self.verb == "counter_write";
                if write {
                    self.exactly(4, "<counter> <index> <packets> <bytes>")?;
                } else {
                    self.exactly(1, "<counter>")?;
                }
                let s = &v.schema;
                let all = s.counters.iter().chain(&s.direct_counters);
                let full = resolve("counter", all.clone().map(|c| c.name), a[0])?;
                let c = all
                    .clone()
                    .find(|c| c.name == full)
                    .ok_or_else(|| format!("Invalid counter name ({})", a[0]))?;
                let direct = c.direct_table.map(|t| s.tables[t].name);
                let target = Value::str(direct.unwrap_or(c.name));
                if !write {
                    let method = match direct {
                        Some(_) => "bm_mt_reset_counters",
                        None => "bm_counter_reset_all",
                    };
                    self.call(method, numbered(vec![target]))?;
                    return done(None);
                }
                let i = int(a[1], "index")?;
                let count = |w: &str, what: &str| {
                    w.parse::<i64>()
                        .ok()
                        .filter(|&n| n >= 0)
                        .ok_or_else(|| format!("Bad format for {what} ({w}), expected a count"))
                };
                let value = Struct::new()
                    .with(1, Value::I64(count(a[3], "bytes")?))
                    .with(2, Value::I64(count(a[2], "packets")?));
                let method = match direct {
                    Some(_) => "bm_mt_write_counter",
                    None => "bm_counter_write",
                };
                let args = vec![target, Value::I32(i), Value::Struct(value)];
                self.call(method, numbered(args))?;
                done(Some(format!("{}[{i}] has been updated", a[0])))
            }
            "meter_array_set_rates" | "meter_set_rates" => {
                let array = self.verb == "meter_array_set_rates";
                if array {
                    self.at_least(1, "<meter> <rate>:<burst> <rate>:<burst>")?;
                } else {
                    self.at_least(2, "<meter> <index> <rate>:<burst> <rate>:<burst>")?;
                }
                let s = &v.schema;
                let all = s.meters.iter().chain(&s.direct_meters);
                let full = resolve("meter", all.clone().map(|m| m.name), a[0])?;
                let m = all
                    .clone()
                    .find(|m| m.name == full)
                    .ok_or_else(|| format!("Invalid meter name ({})", a[0]))?;
                if array {
                    let args = vec![Value::str(m.name), rates(&a[1..])?];
                    self.call("bm_meter_array_set_rates", numbered(args))?;
                    return done(None);
                }
                let i = Value::I32(int(a[1], "index")?);
                let list = rates(&a[2..])?;
                match m.direct_table {
                    Some(t) => {
                        let args = vec![Value::str(s.tables[t].name), i, list];
                        self.call("bm_mt_set_meter_rates", numbered(args))?
                    }
                    None => {
                        let args = vec![Value::str(m.name), i, list];
                        self.call("bm_meter_set_rates", numbered(args))?
                    }
                };
                done(None)
            }
            "register_write" | "register_reset" => {
                let write = self.verb == "register_write";
                if write {
                    self.exactly(3, "<register> <index> <value>")?;
                } else {
                    self.exactly(1, "<register>")?;
                }
                let s = &v.schema;
                let name = resolve("register", s.registers.iter().map(|r| r.name), a[0])?;
                if !write {
                    self.call("bm_register_reset", numbered(vec![Value::str(name)]))?;
                    return done(None);
                }
                let value = number(a[2])
                    .ok()
                    .and_then(|x| u64::try_from(x).ok())
                    .ok_or_else(|| {
                        format!("Bad format for value ({}), must be an integer", a[2])
                    })?;
                let args = vec![
                    Value::str(name),
                    Value::I32(int(a[1], "index")?),
                    // The API's value is an i64: the bits are the value.
                    Value::I64(value as i64),
                ];
                self.call("bm_register_write", numbered(args))?;
                done(None)
            }
            "mc_mgrp_create" | "mc_mgrp_destroy" => {
                self.exactly(1, "<group id>")?;
                let g = Value::I32(int(a[0], "multicast group id")?);
                if self.verb == "mc_mgrp_create" {
                    self.handle("bm_mc_mgrp_create", numbered(vec![g]))?;
                } else {
                    self.call("bm_mc_mgrp_destroy", numbered(vec![g]))?;
                }
                done(None)
            }
            "mc_node_create" => {
                self.at_least(1, "<rid> <ports...> [| <lags...>]")?;
                let rid = Value::I32(int(a[0], "rid")?);
                let (ports, lags) = ports_and_lags(&a[1..])?;
                let h = self.handle("bm_mc_node_create", numbered(vec![rid, ports, lags]))?;
                handle_said("node was created with handle", h)
            }
            "mc_node_update" => {
                self.at_least(2, "<node handle> <ports...> [| <lags...>]")?;
                let h = Value::I32(int(a[0], "node handle")?);
                let (ports, lags) = ports_and_lags(&a[1..])?;
                self.call("bm_mc_node_update", numbered(vec![h, ports, lags]))?;
                done(None)
            }
            "mc_node_associate" | "mc_node_dissociate" => {
                self.exactly(2, "<group id> <node handle>")?;
                let args = vec![
                    Value::I32(int(a[0], "multicast group id")?),
                    Value::I32(int(a[1], "node handle")?),
                ];
                let method = if self.verb == "mc_node_associate" {
                    "bm_mc_node_associate"
                } else {
                    "bm_mc_node_dissociate"
                };
                self.call(method, numbered(args))?;
                done(None)
            }
            "mc_node_destroy" => {
                self.exactly(1, "<node handle>")?;
                let h = Value::I32(int(a[0], "node handle")?);
                self.call("bm_mc_node_destroy", numbered(vec![h]))?;
                done(None)
            }
            "mc_set_lag_membership" => {
                self.at_least(2, "<lag index> <ports...>")?;
                let lag = int(a[0], "lag index")?;
                let lag = i16::try_from(lag).map_err(|_| format!("lag index {lag}"))?;
                let ports = Value::str(port_map(&a[1..], "port")?);
                self.call(
                    "bm_mc_set_lag_membership",
                    numbered(vec![Value::I16(lag), ports]),
                )?;
                done(None)
            }
            "mirroring_add" | "mirroring_add_mc" => {
                let to_group = self.verb == "mirroring_add_mc";
                self.exactly(
                    2,
                    if to_group {
                        "<session id> <group id>"
                    } else {
                        "<session id> <port>"
                    },
                )?;
                let id = Value::I32(int(a[0], "mirror_id")?);
                let config = if to_group {
                    Struct::new().with(2, Value::I32(int(a[1], "mgrp")?))
                } else {
                    Struct::new().with(1, Value::I32(int(a[1], "egress_port")?))
                };
                self.call(
                    "mirroring_session_add",
                    fields(vec![id, Value::Struct(config)]),
                )?;
                done(None)
            }
            "mirroring_delete" => {
                self.exactly(1, "<session id>")?;
                let id = Value::I32(int(a[0], "mirror_id")?);
                self.call("mirroring_session_delete", fields(vec![id]))?;
                done(None)
            }
            "set_queue_depth" | "set_queue_rate" => {
                let what = if self.verb == "set_queue_depth" {
                    "nb_pkts"
                } else {
                    "rate_pps"
                };
                self.at_least(1, &format!("<{what}> [<egress port>]"))?;
                if a.len() > 2 {
                    self.exactly(2, &format!("<{what}> [<egress port>]"))?;
                }
                let value = a[0].parse::<i64>().map_err(|_| {
                    format!("Bad format for {what} ({}), expected an integer", a[0])
                })?;
                let port = match a.get(1) {
                    Some(p) => Some(i64::from(int(p, "egress_port")?)),
                    None => None,
                };
                pre::queue_setting(self.rt, self.verb, value, port)?;
                done(None)
            }
            "reset_state" => {
                self.exactly(0, "takes no arguments")?;
                self.call("bm_reset_state", Struct::new())?;
                done(None)
            }
            // Refused by the runtime API, with the error BMv2 gives.
            "port_add"
            | "port_remove"
            | "load_new_config_file"
            | "swap_configs"
            | "set_crc16_parameters"
            | "set_crc32_parameters" => {
                let method = match self.verb {
                    "port_add" => "bm_dev_mgr_add_port",
                    "port_remove" => "bm_dev_mgr_remove_port",
                    "load_new_config_file" => "bm_load_new_config",
                    "swap_configs" => "bm_swap_configs",
                    "set_crc16_parameters" => "bm_set_crc16_custom_parameters",
                    _ => "bm_set_crc32_custom_parameters",
                };
                self.call(method, Struct::new())?;
                done(None)
            }
            "pvs_add" | "pvs_remove" | "pvs_clear" => {
                let clear = self.verb == "pvs_clear";
                if clear {
                    self.exactly(1, "<pvs_name>")?;
                } else {
                    self.exactly(2, "<pvs_name> <value>")?;
                }
                let s = &v.schema;
                let name = resolve(
                    "parser value set",
                    s.value_sets.iter().map(|d| d.name),
                    a[0],
                )?;
                let mut args = vec![Value::str(name)];
                if !clear {
                    let width = s
                        .value_sets
                        .iter()
                        .find(|d| d.name == name)
                        .map_or(128, |d| d.bitwidth());
                    args.push(packed(a[1], width as u8, "value")?);
                }
                let method = match self.verb {
                    "pvs_add" => "bm_parse_vset_add",
                    "pvs_remove" => "bm_parse_vset_remove",
                    _ => "bm_parse_vset_clear",
                };
                self.call(method, numbered(args))?;
                done(None)
            }
            "shell" => Err("shell commands are not run from a command file".into()),
            verb if let Some((_, instead)) = OWN.iter().find(|(v, _)| *v == verb) => Err(format!(
                "the switch's own command (its language with a hard-wired --program), not \
                 simple_switch_CLI's; with a BMv2 program write {instead}"
            )),
            // The switch's settings the CLI has no verb for (set_port_rate, set_pfc, ...).
            _ => match &self.rt.opts.admin {
                Some(run) => {
                    let words: Vec<&str> = std::iter::once(self.verb)
                        .chain(a.iter().copied())
                        .collect();
                    let out = run(&words.join(" "))?;
                    let out = out.trim_end();
                    done((!out.is_empty()).then(|| out.to_string()))
                }
                None => Err(format!("unknown command {}", self.verb)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_by_unique_dot_suffix() {
        let all = ["ingress.ipv4_lpm", "ingress.acl", "egress.acl", "acl2"];
        let r = |n: &str| resolve("table", all.iter().copied(), n);
        assert_eq!(r("ipv4_lpm"), Ok("ingress.ipv4_lpm"));
        assert_eq!(r("ingress.acl"), Ok("ingress.acl"));
        assert!(r("acl").unwrap_err().contains("ambiguous"));
        assert_eq!(r("lpm"), Err("Invalid table name (lpm)".into()));
        assert_eq!(r("acl2"), Ok("acl2"));
    }

    #[test]
    fn port_maps_and_values_pack_as_the_cli_packs_them() {
        assert_eq!(port_map(&["3", "1"], "port").unwrap(), "1010");
        assert_eq!(port_map(&[], "port").unwrap(), "");
        assert!(
            port_map(&["1", "1"], "port")
                .unwrap_err()
                .contains("duplicate")
        );
        assert!(port_map(&["x"], "port").is_err());
        assert_eq!(
            packed("10.0.1.0", 32, "f").unwrap(),
            Value::Bytes(vec![10, 0, 1, 0])
        );
        assert_eq!(packed("0b11", 9, "f").unwrap(), Value::Bytes(vec![0, 3]));
        assert_eq!(
            packed("0x1ff", 9, "f").unwrap(),
            Value::Bytes(vec![1, 0xff])
        );
        assert_eq!(
            packed("512", 9, "port").unwrap_err(),
            "port: 512 does not fit 9 bits"
        );
        assert_eq!(code_name("bm_mt_delete_entry", 2), "INVALID_HANDLE");
        assert_eq!(code_name("bm_mt_add_entry", 100), "ERROR");
        assert_eq!(code_name("bm_mc_node_associate", 4), "INVALID_L1_HANDLE");
        assert_eq!(code_name("mirroring_session_add", 1), "SESSION_NOT_FOUND");
    }
}
