//! Actions: the primitives of BMv2's core and of simple_switch (the v1model), compiled with
//! resolved references, and run on one packet.

use std::cell::Cell;
use std::collections::HashMap;

use pipeline::externs::{HashAlgorithm, HashFn};
use pipeline::program::Ctx;
use pipeline::schema::{CounterIx, MeterIx, RegisterIx};
use serde_json::Value;

use crate::bits::{self, BitWriter};
use crate::error::{Result, invalid, unsupported};
use crate::expr::{Bin, Env, Expr, HeaderRef, LValue, Scope};
use crate::json;
use crate::layout::{DROP_PORT, Layout, StdFields};
use crate::phv::Phv;

/// A named calculation: a hash over fields, constants, headers and the payload.
#[derive(Debug, Clone)]
pub(crate) struct Calc {
    pub hash: HashFn,
    pub inputs: Vec<CalcInput>,
    /// For `payload`: the header after which headers and payload are included.
    pub payload_after: Option<u32>,
}

#[derive(Debug, Clone)]
pub(crate) enum CalcInput {
    Field(u32),
    /// A field held as bytes: its slot, and its header (the input counts while it is valid).
    Wide(u32, u32),
    Const(u128, u32),
    Header(u32),
    Payload,
}

/// The algorithms of BMv2's calculations that the engine has.
pub(crate) fn algorithm(path: &str, algo: &str) -> Result<HashAlgorithm> {
    Ok(match algo {
        "crc16" => HashAlgorithm::Crc16,
        "crc32" => HashAlgorithm::Crc32,
        "csum16" => HashAlgorithm::Csum16,
        "identity" => HashAlgorithm::Identity,
        "xor16" => HashAlgorithm::Xor16,
        "random" => HashAlgorithm::Random,
        other => return Err(unsupported(path, format!("hash algorithm {other}"))),
    })
}

impl Calc {
    pub(crate) fn compile(
        scope: &Scope<'_>,
        path: &str,
        algo: &str,
        input: &[Value],
    ) -> Result<Calc> {
        let hash = HashFn::new(algorithm(&format!("{path}.algo"), algo)?, 0);
        let mut inputs = Vec::new();
        let mut last_header = None;
        for (i, v) in input.iter().enumerate() {
            let ipath = format!("{path}.input[{i}]");
            let ty = v.get("type").and_then(Value::as_str).unwrap_or_default();
            let value = v.get("value").unwrap_or(&Value::Null);
            match ty {
                "field"
                    if let Some((h, k)) = value
                        .as_array()
                        .and_then(|a| Some((a.first()?.as_str()?, a.get(1)?.as_str()?)))
                        .and_then(|(h, f)| scope.l.any_field(&ipath, h, f).ok())
                        .and_then(|f| {
                            let fd = &scope.l.fields[f as usize];
                            Some((fd.header, fd.wide?))
                        }) =>
                {
                    last_header = Some(h);
                    inputs.push(CalcInput::Wide(k, h));
                }
                "field" => match scope.field(&ipath, value)? {
                    crate::layout::FieldRef::Field(f) => {
                        last_header = Some(scope.l.fields[f as usize].header);
                        inputs.push(CalcInput::Field(f));
                    }
                    crate::layout::FieldRef::Valid(_) => {
                        return Err(unsupported(&ipath, "a $valid$ bit in a calculation"));
                    }
                },
                "hexstr" => {
                    let width = v
                        .get("bitwidth")
                        .and_then(Value::as_u64)
                        .and_then(|w| u32::try_from(w).ok())
                        .filter(|w| (1..=128).contains(w))
                        .ok_or_else(|| {
                            invalid(&ipath, "a constant input needs a bitwidth (1-128)")
                        })?;
                    let c = value
                        .as_str()
                        .ok_or_else(|| invalid(&ipath, "expected a hex string"))
                        .and_then(|s| bits::hexstr(s).map_err(|e| invalid(&ipath, e)))?;
                    inputs.push(CalcInput::Const(c as u128, width));
                }
                "header" => {
                    let h = scope.l.header(&ipath, value.as_str().unwrap_or_default())?;
                    last_header = Some(h);
                    inputs.push(CalcInput::Header(h));
                }
                "payload" => inputs.push(CalcInput::Payload),
                other => {
                    return Err(unsupported(
                        &ipath,
                        format!("a calculation input of type {other}"),
                    ));
                }
            }
        }
        let payload_after = if inputs.iter().any(|i| matches!(i, CalcInput::Payload)) {
            last_header
        } else {
            None
        };
        Ok(Calc {
            hash,
            inputs,
            payload_after,
        })
    }

    /// The calculation's input bytes. `rest` writes what `payload` stands for (the headers after
    /// the last one named, then the payload), when there is a packet to take it from.
    pub(crate) fn input(
        &self,
        l: &Layout,
        phv: &Phv,
        w: &mut BitWriter,
        rest: &mut dyn FnMut(&mut BitWriter),
    ) {
        w.clear();
        for i in &self.inputs {
            match i {
                CalcInput::Field(f) => {
                    let fd = &l.fields[*f as usize];
                    if phv.valid[fd.header as usize] {
                        w.push(fd.width, phv.vals[*f as usize]);
                    }
                }
                CalcInput::Wide(k, h) => {
                    if phv.valid[*h as usize] {
                        w.push_bytes(&phv.wide[*k as usize]);
                    }
                }
                CalcInput::Const(v, width) => w.push(*width, *v),
                CalcInput::Header(h) => {
                    if phv.valid[*h as usize] {
                        phv.push_header(l, *h, w);
                    }
                }
                CalcInput::Payload => rest(w),
            }
        }
        w.finish();
    }
}

/// A primitive call.
#[derive(Debug)]
pub(crate) enum Prim {
    Assign(LValue, Expr),
    /// A field held as bytes copied whole: destination, source ([`crate::layout::Wide`]).
    AssignWide(u32, u32),
    AssignHeader(HeaderRef, HeaderRef),
    SetValid(HeaderRef),
    SetInvalid(HeaderRef),
    /// A stack's push_front / pop_front by a count.
    Push(u32, Expr),
    Pop(u32, Expr),
    /// Copies a whole stack (elements, validity, next index).
    AssignStack(u32, u32),
    /// `assign_union`: destination union, source union.
    AssignUnion(u32, u32),
    /// `assign_union_stack`: destination, source.
    AssignUnionStack(u32, u32),
    /// `push` and `pop` of a header union stack.
    PushUnions(u32, Expr),
    PopUnions(u32, Expr),
    MarkToDrop,
    Exit,
    Jump(usize),
    JumpIfZero(Expr, usize),
    Count(CounterIx, Expr),
    Meter(MeterIx, Expr, u32),
    RegRead(u32, RegisterIx, Expr),
    RegWrite(RegisterIx, Expr, Expr),
    Hash {
        dst: u32,
        base: Expr,
        calc: usize,
        max: Expr,
    },
    Random(u32, Expr, Expr),
    Clone {
        egress: bool,
        session: Expr,
        list: usize,
    },
    Resubmit(usize),
    Recirculate(usize),
    Truncate(Expr),
    Digest(usize),
    Log(String, Vec<Expr>),
    Assert(Expr),
    NoOp,
}

/// A compiled action.
#[derive(Debug)]
pub(crate) struct Action {
    pub prims: Vec<Prim>,
}

/// What the primitives may name besides fields: the program's externs by name.
pub(crate) struct Names<'a> {
    pub counters: &'a HashMap<String, CounterIx>,
    pub meters: &'a HashMap<String, MeterIx>,
    pub calcs: &'a HashMap<String, usize>,
    /// Field lists and learn lists by their JSON id.
    pub field_lists: &'a HashMap<i64, usize>,
    pub learn_lists: &'a HashMap<i64, usize>,
}

impl Action {
    pub(crate) fn compile(
        scope: &Scope<'_>,
        names: &Names<'_>,
        path: &str,
        a: &json::Action,
    ) -> Result<Action> {
        let mut prims = Vec::new();
        for (pi, p) in a.primitives.iter().enumerate() {
            let ppath = format!("{path}.primitives[{pi}]");
            prims.push(compile_prim(scope, names, &ppath, p, a.primitives.len())?);
        }
        Ok(Action { prims })
    }
}

pub(crate) fn compile_prim(
    scope: &Scope<'_>,
    names: &Names<'_>,
    path: &str,
    p: &json::Primitive,
    count: usize,
) -> Result<Prim> {
    let arg = |i: usize| -> Result<(String, &Value)> {
        let v = p
            .parameters
            .get(i)
            .ok_or_else(|| invalid(path, format!("{} needs parameter {i}", p.op)))?;
        Ok((format!("{path}.parameters[{i}]"), v))
    };
    let expr = |i: usize| -> Result<Expr> {
        let (ap, v) = arg(i)?;
        scope.expr(&ap, v)
    };
    let lvalue = |i: usize| -> Result<u32> {
        let (ap, v) = arg(i)?;
        scope.lvalue(&ap, v)
    };
    let header = |i: usize| -> Result<HeaderRef> {
        let (ap, v) = arg(i)?;
        scope.header_ref(&ap, v)
    };
    let stack = |i: usize| -> Result<u32> {
        let (ap, v) = arg(i)?;
        match (v.get("type").and_then(Value::as_str), v.get("value")) {
            (Some("header_stack"), Some(Value::String(s))) => scope.l.stack(&ap, s),
            _ => Err(invalid(&ap, "expected a header stack")),
        }
    };
    // A header union or header union stack argument: (its index, whether it is a stack).
    let unions = |i: usize| -> Result<(u32, bool)> {
        let (ap, v) = arg(i)?;
        match (v.get("type").and_then(Value::as_str), v.get("value")) {
            (Some("header_union"), Some(Value::String(u))) => Ok((scope.l.union(&ap, u)?, false)),
            (Some("header_union_stack"), Some(Value::String(s))) => {
                Ok((scope.l.union_stack(&ap, s)?, true))
            }
            _ => Err(invalid(&ap, "expected a header union or union stack")),
        }
    };
    let is_union_stack = |i: usize| {
        p.parameters
            .get(i)
            .and_then(|v| v.get("type"))
            .and_then(Value::as_str)
            == Some("header_union_stack")
    };
    let place = |i: usize| -> Result<LValue> {
        let (ap, v) = arg(i)?;
        scope.place(&ap, v)
    };
    // A field held as bytes named by argument `i`: its slot, whether varbit, its width.
    let wide = |i: usize| -> Option<(u32, bool, u32)> {
        let v = p.parameters.get(i)?;
        if v.get("type").and_then(Value::as_str) != Some("field") {
            return None;
        }
        let [Value::String(h), Value::String(f)] = v.get("value")?.as_array()?.as_slice() else {
            return None;
        };
        let fd = &scope.l.fields[scope.l.any_field("", h, f).ok()? as usize];
        let k = fd.wide?;
        Some((k, scope.l.wide[k as usize].varbit, fd.width))
    };
    let named = |i: usize, kind: &str| -> Result<(String, String)> {
        let (ap, v) = arg(i)?;
        match (v.get("type").and_then(Value::as_str), v.get("value")) {
            (Some(t), Some(Value::String(n))) if t == kind => Ok((ap, n.clone())),
            _ => Err(invalid(&ap, format!("expected a {kind}"))),
        }
    };
    let constant = |i: usize| -> Result<i64> {
        let (ap, v) = arg(i)?;
        match scope.expr(&ap, v)? {
            Expr::Const(c) => i64::try_from(c).map_err(|_| invalid(&ap, "out of range")),
            _ => Err(unsupported(&ap, "a list id that is not a constant")),
        }
    };
    let list = |i: usize, lists: &HashMap<i64, usize>| -> Result<usize> {
        if p.parameters.len() <= i {
            return Ok(0);
        }
        let id = constant(i)?;
        if id == 0 {
            return Ok(0);
        }
        let (ap, _) = arg(i)?;
        lists
            .get(&id)
            .map(|&x| x + 1)
            .ok_or_else(|| invalid(&ap, format!("no list with id {id}")))
    };
    let jump = |i: usize| -> Result<usize> {
        let (ap, _) = arg(i)?;
        usize::try_from(constant(i)?)
            .ok()
            .filter(|&o| o <= count)
            .ok_or_else(|| invalid(&ap, "a jump outside the action"))
    };
    Ok(match p.op.as_str() {
        "assign" | "modify_field" | "assign_VL" if wide(0).is_some() || p.op == "assign_VL" => {
            // Fields held as bytes are copied whole, from a field of the same kind and width.
            let (ap, _) = arg(1)?;
            match (wide(0), wide(1)) {
                (Some((d, dv, dw)), Some((s, sv, sw)))
                    if p.parameters.len() == 2 && dv == sv && dw == sw =>
                {
                    Prim::AssignWide(d, s)
                }
                _ => {
                    return Err(unsupported(
                        &ap,
                        format!(
                            "{} other than of a whole field of over 128 bits, or a varbit \
                             field, from one of the same kind and width",
                            p.op
                        ),
                    ));
                }
            }
        }
        "assign" | "modify_field" => {
            if p.parameters.len() > 2 {
                // modify_field(dst, value, mask): only the masked bits change.
                let dst = place(0)?;
                let m = expr(2)?;
                let keep = Expr::Bin(
                    Bin::BitAnd,
                    Box::new(dst.read()),
                    Box::new(Expr::Un(crate::expr::Un::BitNeg, Box::new(m.clone()))),
                );
                let set = Expr::Bin(Bin::BitAnd, Box::new(expr(1)?), Box::new(m));
                Prim::Assign(dst, Expr::Bin(Bin::BitOr, Box::new(keep), Box::new(set)))
            } else {
                Prim::Assign(place(0)?, expr(1)?)
            }
        }
        "add_to_field" | "subtract_from_field" => {
            let dst = place(0)?;
            let op = if p.op == "add_to_field" {
                Bin::Add
            } else {
                Bin::Sub
            };
            let read = dst.read();
            Prim::Assign(dst, Expr::Bin(op, Box::new(read), Box::new(expr(1)?)))
        }
        "add" | "subtract" | "bit_and" | "bit_or" | "bit_xor" | "shift_left" | "shift_right" => {
            let op = match p.op.as_str() {
                "add" => Bin::Add,
                "subtract" => Bin::Sub,
                "bit_and" => Bin::BitAnd,
                "bit_or" => Bin::BitOr,
                "bit_xor" => Bin::BitXor,
                "shift_left" => Bin::Shl,
                _ => Bin::Shr,
            };
            Prim::Assign(
                place(0)?,
                Expr::Bin(op, Box::new(expr(1)?), Box::new(expr(2)?)),
            )
        }
        "assign_header" | "copy_header" => Prim::AssignHeader(header(0)?, header(1)?),
        "add_header" => Prim::SetValid(header(0)?),
        "remove_header" => Prim::SetInvalid(header(0)?),
        "push" | "pop" if is_union_stack(0) => {
            let (k, _) = unions(0)?;
            if p.op == "push" {
                Prim::PushUnions(k, expr(1)?)
            } else {
                Prim::PopUnions(k, expr(1)?)
            }
        }
        "push" => Prim::Push(stack(0)?, expr(1)?),
        "pop" => Prim::Pop(stack(0)?, expr(1)?),
        "assign_union" | "assign_union_stack" => {
            let ((d, ds), (s, ss)) = (unions(0)?, unions(1)?);
            let stacks = p.op == "assign_union_stack";
            let (dn, sn) = if stacks {
                let n = |k: u32| scope.l.union_stacks[k as usize].0.len();
                (n(d), n(s))
            } else {
                let n = |u: u32| scope.l.unions[u as usize].len();
                (n(d), n(s))
            };
            if ds != stacks || ss != stacks || dn != sn {
                return Err(invalid(
                    path,
                    format!("{} between objects of two kinds or sizes", p.op),
                ));
            }
            if stacks {
                Prim::AssignUnionStack(d, s)
            } else {
                Prim::AssignUnion(d, s)
            }
        }
        "assign_header_stack" => {
            let (d, s) = (stack(0)?, stack(1)?);
            if scope.l.stacks[d as usize].len() != scope.l.stacks[s as usize].len() {
                return Err(invalid(
                    path,
                    "assign_header_stack between stacks of two sizes",
                ));
            }
            Prim::AssignStack(d, s)
        }
        "mark_to_drop" | "drop" => Prim::MarkToDrop,
        "no_op" => Prim::NoOp,
        "exit" => Prim::Exit,
        "_jump" => Prim::Jump(jump(0)?),
        "_jump_if_zero" => Prim::JumpIfZero(expr(0)?, jump(1)?),
        "count" => {
            let (ap, n) = named(0, "counter_array")?;
            let c = *names
                .counters
                .get(&n)
                .ok_or_else(|| invalid(&ap, format!("no indexed counter {n}")))?;
            Prim::Count(c, expr(1)?)
        }
        "execute_meter" => {
            let (ap, n) = named(0, "meter_array")?;
            let m = *names
                .meters
                .get(&n)
                .ok_or_else(|| invalid(&ap, format!("no indexed meter {n}")))?;
            Prim::Meter(m, expr(1)?, lvalue(2)?)
        }
        "register_read" => {
            let (ap, n) = named(1, "register_array")?;
            Prim::RegRead(lvalue(0)?, scope.register(&ap, &n)?, expr(2)?)
        }
        "register_write" => {
            let (ap, n) = named(0, "register_array")?;
            Prim::RegWrite(scope.register(&ap, &n)?, expr(1)?, expr(2)?)
        }
        "modify_field_with_hash_based_offset" => {
            let (ap, n) = named(2, "calculation")?;
            let calc = *names
                .calcs
                .get(&n)
                .ok_or_else(|| invalid(&ap, format!("no calculation {n}")))?;
            Prim::Hash {
                dst: lvalue(0)?,
                base: expr(1)?,
                calc,
                max: expr(3)?,
            }
        }
        "modify_field_rng_uniform" => Prim::Random(lvalue(0)?, expr(1)?, expr(2)?),
        "clone_ingress_pkt_to_egress" | "clone_egress_pkt_to_egress" => {
            let egress = p.op == "clone_egress_pkt_to_egress";
            let list = list(1, names.field_lists)?;
            Prim::Clone {
                egress,
                session: expr(0)?,
                list,
            }
        }
        "resubmit" => Prim::Resubmit(list(0, names.field_lists)?),
        "recirculate" => Prim::Recirculate(list(0, names.field_lists)?),
        "truncate" => Prim::Truncate(expr(0)?),
        "generate_digest" => {
            let l = list(1, names.learn_lists)?;
            if l == 0 {
                return Err(invalid(&arg(1)?.0, "generate_digest needs a learn list"));
            }
            Prim::Digest(l - 1)
        }
        "log_msg" => {
            let (ap, v) = arg(0)?;
            let fmt = v
                .get("value")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(&ap, "log_msg takes a format string"))?
                .to_owned();
            let mut args = Vec::new();
            if let Ok((vp, vec)) = arg(1) {
                let items = vec
                    .get("value")
                    .and_then(Value::as_array)
                    .ok_or_else(|| invalid(&vp, "log_msg takes a parameters_vector"))?;
                for (k, it) in items.iter().enumerate() {
                    args.push(scope.expr(&format!("{vp}.value[{k}]"), it)?);
                }
            }
            Prim::Log(fmt, args)
        }
        "assert" | "assume" => Prim::Assert(expr(0)?),
        other => return Err(unsupported(path, format!("primitive {other}"))),
    })
}

/// What a packet's actions asked of the switch beyond its fields.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Requests {
    pub exit: bool,
    pub assert_failed: bool,
    /// (session, field list + 1 or 0, egress-to-egress)
    pub clone: Option<(u32, usize, bool)>,
    pub resubmit: Option<usize>,
    pub recirculate: Option<usize>,
    pub digest: Option<usize>,
    pub truncate: Option<u32>,
}

/// Where an action goes after a primitive.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Flow {
    Next,
    Jump(usize),
    Stop,
}

/// Runs one action on a packet.
pub(crate) struct Run<'r, 'c> {
    pub l: &'r Layout,
    pub phv: &'r mut Phv,
    pub cx: &'r mut Ctx<'c>,
    pub calcs: &'r [Calc],
    pub req: &'r mut Requests,
    pub scratch: &'r mut BitWriter,
}

impl Run<'_, '_> {
    fn env<'e>(&'e self, params: &'e [u128]) -> Env<'e> {
        Env {
            l: self.l,
            phv: self.phv,
            params,
            look: &[],
            short: Cell::new(false),
            x: self.cx.externs,
        }
    }

    fn eval(&self, e: &Expr, params: &[u128]) -> i128 {
        e.eval(&self.env(params))
    }

    fn header(&self, h: &HeaderRef, params: &[u128]) -> Option<u32> {
        h.resolve(&self.env(params))
    }

    fn count(&self, n: &Expr, params: &[u128]) -> usize {
        usize::try_from(self.eval(n, params)).unwrap_or(0)
    }

    pub(crate) fn action(&mut self, a: &Action, params: &[u128]) {
        let mut pc = 0;
        while let Some(p) = a.prims.get(pc) {
            pc += 1;
            match self.prim(p, params) {
                Flow::Next => {}
                Flow::Jump(to) => pc = to,
                Flow::Stop => return,
            }
        }
    }

    /// Runs one primitive; says where the action goes on.
    pub(crate) fn prim(&mut self, p: &Prim, params: &[u128]) -> Flow {
        {
            match p {
                Prim::Assign(dst, e) => {
                    let v = self.eval(e, params);
                    if let Some(f) = dst.resolve(&self.env(params)) {
                        self.phv.set(self.l, f, v);
                    }
                }
                Prim::AssignWide(d, s) => self.phv.copy_wide(self.l, *d, *s),
                Prim::AssignHeader(dst, src) => {
                    if let (Some(d), Some(s)) = (self.header(dst, params), self.header(src, params))
                    {
                        // Metadata stays valid; only its values move.
                        let keep = self.phv.valid[d as usize];
                        self.phv.copy_header(self.l, d, s);
                        if self.l.headers[d as usize].metadata {
                            self.phv.valid[d as usize] = keep;
                        }
                    }
                }
                Prim::SetValid(h) => {
                    if let Some(h) = self.header(h, params)
                        && !self.phv.valid[h as usize]
                    {
                        self.phv.zero_header(self.l, h);
                        self.phv.make_valid(self.l, h);
                    }
                }
                Prim::SetInvalid(h) => {
                    if let Some(h) = self.header(h, params)
                        && !self.l.headers[h as usize].metadata
                    {
                        self.phv.valid[h as usize] = false;
                    }
                }
                Prim::Push(s, n) => {
                    let n = self.count(n, params);
                    self.phv.push_front(self.l, *s, n);
                }
                Prim::Pop(s, n) => {
                    let n = self.count(n, params);
                    self.phv.pop_front(self.l, *s, n);
                }
                Prim::AssignUnion(d, s) => self.phv.copy_union(self.l, *d, *s),
                Prim::AssignUnionStack(d, s) => {
                    let (du, su) = (
                        &self.l.union_stacks[*d as usize].0,
                        &self.l.union_stacks[*s as usize].0,
                    );
                    for (&a, &b) in du.iter().zip(su) {
                        self.phv.copy_union(self.l, a, b);
                    }
                    let (dn, sn) = (self.l.union_next(*d), self.l.union_next(*s));
                    self.phv.next[dn] = self.phv.next[sn];
                }
                Prim::PushUnions(k, n) => {
                    let n = self.count(n, params);
                    self.phv.push_unions(self.l, *k, n);
                }
                Prim::PopUnions(k, n) => {
                    let n = self.count(n, params);
                    self.phv.pop_unions(self.l, *k, n);
                }
                Prim::AssignStack(d, s) => {
                    let (de, se) = (&self.l.stacks[*d as usize], &self.l.stacks[*s as usize]);
                    for (&dh, &sh) in de.iter().zip(se) {
                        self.phv.copy_header(self.l, dh, sh);
                    }
                    self.phv.next[*d as usize] = self.phv.next[*s as usize];
                }
                Prim::MarkToDrop => {
                    self.phv
                        .set_std(self.l, |s: &StdFields| s.egress_spec, DROP_PORT);
                    self.phv.set_std(self.l, |s: &StdFields| s.mcast_grp, 0);
                }
                Prim::Exit => {
                    self.req.exit = true;
                    return Flow::Stop;
                }
                Prim::Jump(to) => return Flow::Jump(*to),
                Prim::JumpIfZero(c, to) => {
                    if self.eval(c, params) == 0 {
                        return Flow::Jump(*to);
                    }
                }
                Prim::Count(c, i) => {
                    if let Ok(i) = usize::try_from(self.eval(i, params))
                        && i < self.cx.externs.counters[c.index()].size()
                    {
                        self.cx.count(*c, i);
                    }
                }
                Prim::Meter(m, i, dst) => {
                    if let Ok(i) = usize::try_from(self.eval(i, params)) {
                        let colour = self.cx.meter(*m, i);
                        self.phv.set(self.l, *dst, colour as i128);
                    }
                }
                Prim::RegRead(dst, r, i) => {
                    let v = usize::try_from(self.eval(i, params))
                        .ok()
                        .and_then(|i| self.cx.register(*r).read_wide(i))
                        .unwrap_or(0);
                    self.phv.set(self.l, *dst, v as i128);
                }
                Prim::RegWrite(r, i, v) => {
                    let value = self.eval(v, params);
                    if let Ok(i) = usize::try_from(self.eval(i, params)) {
                        self.cx.register(*r).write_wide(i, value as u128);
                    }
                }
                Prim::Hash {
                    dst,
                    base,
                    calc,
                    max,
                } => {
                    let c = &self.calcs[*calc];
                    c.input(self.l, self.phv, self.scratch, &mut |_| {});
                    let h = c.hash.hash(&self.scratch.bytes, self.cx.rng);
                    let base = self.eval(base, params) as u64;
                    let max = self.eval(max, params) as u64;
                    let v = pipeline::externs::hash_range(h, base, max);
                    self.phv.set(self.l, *dst, i128::from(v));
                }
                Prim::Random(dst, lo, hi) => {
                    let lo = self.eval(lo, params) as u64;
                    let hi = self.eval(hi, params) as u64;
                    let v = self.cx.rng.range(lo, hi);
                    self.phv.set(self.l, *dst, i128::from(v));
                }
                Prim::Clone {
                    egress,
                    session,
                    list,
                } => {
                    let s = self.eval(session, params) as u32;
                    self.req.clone = Some((s, *list, *egress));
                }
                Prim::Resubmit(list) => self.req.resubmit = Some(*list),
                Prim::Recirculate(list) => self.req.recirculate = Some(*list),
                Prim::Truncate(len) => {
                    self.req.truncate = u32::try_from(self.eval(len, params)).ok();
                }
                Prim::Digest(list) => self.req.digest = Some(*list),
                Prim::Log(fmt, args) => {
                    if self.cx.trace.is_some() {
                        let vals: Vec<i128> = args.iter().map(|a| self.eval(a, params)).collect();
                        let line = format_log(fmt, &vals);
                        self.cx.trace(|| format!("log_msg {line}"));
                    }
                }
                Prim::NoOp => {}
                Prim::Assert(c) => {
                    if self.eval(c, params) == 0 {
                        self.req.assert_failed = true;
                        self.req.exit = true;
                        return Flow::Stop;
                    }
                }
            }
        }
        Flow::Next
    }
}

/// `log_msg`'s format: each `{}` takes the next value.
fn format_log(fmt: &str, vals: &[i128]) -> String {
    let mut out = String::new();
    let mut vals = vals.iter();
    let mut rest = fmt;
    while let Some(i) = rest.find("{}") {
        out.push_str(&rest[..i]);
        match vals.next() {
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str("{}"),
        }
        rest = &rest[i + 2..];
    }
    out.push_str(rest);
    out
}
