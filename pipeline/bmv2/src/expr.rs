//! Expressions: BMv2's type-value objects compiled to a tree of resolved references, evaluated
//! per packet without allocating.
//!
//! BMv2 computes with unbounded integers and truncates on assignment; here values are 128-bit
//! two's complement (`i128`, wrapping), which agrees wherever an intermediate fits in 128 bits.
//! p4c masks every arithmetic result to its P4 width, so the programs p4c writes stay inside.
//! The one place this can differ is an ordering comparison (`<`, `>`, ...) of 128-bit unsigned
//! values with the top bit set, which read as negative; equality and bitwise operations are
//! exact.

use std::cell::Cell;
use std::collections::HashMap;

use pipeline::control::Externs;
use pipeline::schema::RegisterIx;
use serde_json::Value;

use crate::bits;
use crate::error::{Result, invalid, unsupported};
use crate::layout::{FieldRef, Layout};
use crate::phv::Phv;

/// A compiled expression.
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    Const(i128),
    Field(u32),
    Valid(u32),
    /// Action data (`runtime_data`, or `local` inside an action).
    Param(u16),
    /// Packet bits at `offset` from the parser's position (parser only).
    Lookahead {
        offset: u32,
        width: u32,
    },
    Register(RegisterIx, Box<Expr>),
    /// A field of the last extracted element of a stack (`stack_field`).
    StackField(u32, u32),
    /// Whether any member of a union is valid (`valid_union`).
    UnionValid(u32),
    /// A field of a member of the last extracted union of a union stack
    /// (`union_stack_field`): stack, member, the field's offset.
    UnionStackField(u32, u32, u32),
    /// A field (by offset in its header) of a header named at run time.
    DynField(HeaderRef, u32),
    ValidRef(HeaderRef),
    /// A stack's last valid index (next - 1) and its size in valid elements (next).
    LastIndex(u32),
    StackSize(u32),
    Un(Un, Box<Expr>),
    Bin(Bin, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Un {
    Not,
    BitNeg,
    Neg,
    D2b,
    B2d,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Shl,
    Shr,
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    And,
    Or,
    BitAnd,
    BitOr,
    BitXor,
    TwoCompMod,
    SatCast,
    UsatCast,
}

/// A header, named in the JSON or chosen at run time (an element of a stack by index).
#[derive(Debug, Clone)]
pub(crate) enum HeaderRef {
    Static(u32),
    Elem(u32, Box<Expr>),
}

impl HeaderRef {
    /// The header index; `None` for an index outside the stack.
    pub(crate) fn resolve(&self, e: &Env<'_>) -> Option<u32> {
        match self {
            HeaderRef::Static(h) => Some(*h),
            HeaderRef::Elem(s, i) => usize::try_from(i.eval(e))
                .ok()
                .and_then(|i| e.l.stacks[*s as usize].get(i).copied()),
        }
    }
}

/// A field a primitive writes: named, or of a header chosen at run time.
#[derive(Debug, Clone)]
pub(crate) enum LValue {
    Field(u32),
    Dyn(HeaderRef, u32),
}

impl LValue {
    /// The same place, read.
    pub(crate) fn read(&self) -> Expr {
        match self {
            LValue::Field(f) => Expr::Field(*f),
            LValue::Dyn(h, o) => Expr::DynField(h.clone(), *o),
        }
    }

    /// The field it is for this packet (`None` for a stack index out of range).
    pub(crate) fn resolve(&self, e: &Env<'_>) -> Option<u32> {
        match self {
            LValue::Field(f) => Some(*f),
            LValue::Dyn(h, o) => h.resolve(e).map(|h| e.l.headers[h as usize].first + o),
        }
    }
}

/// What an expression is evaluated against.
pub(crate) struct Env<'a> {
    pub l: &'a Layout,
    pub phv: &'a Phv,
    pub params: &'a [u128],
    /// The packet from the parser's position (empty outside the parser).
    pub look: &'a [u8],
    /// Set when a lookahead reached past the end of the packet.
    pub short: Cell<bool>,
    pub x: &'a Externs,
}

impl Expr {
    pub(crate) fn eval(&self, e: &Env<'_>) -> i128 {
        match self {
            Expr::Const(v) => *v,
            Expr::Field(f) => e.phv.get(e.l, *f),
            Expr::Valid(h) => i128::from(e.phv.valid[*h as usize]),
            Expr::Param(i) => e.params.get(usize::from(*i)).copied().unwrap_or(0) as i128,
            Expr::Lookahead { offset, width } => {
                let end = (*offset + *width) as usize;
                if end > e.look.len() * 8 {
                    e.short.set(true);
                    0
                } else {
                    bits::read(e.look, *offset as usize, *width) as i128
                }
            }
            Expr::Register(r, index) => {
                let i = index.eval(e);
                usize::try_from(i)
                    .ok()
                    .and_then(|i| e.x.registers[r.index()].read_wide(i))
                    .map_or(0, |v| v as i128)
            }
            Expr::StackField(s, o) => {
                let elems = &e.l.stacks[*s as usize];
                let last = usize::from(e.phv.next[*s as usize]).saturating_sub(1);
                let h = elems[last.min(elems.len() - 1)];
                e.phv.get(e.l, e.l.headers[h as usize].first + o)
            }
            Expr::UnionValid(u) => i128::from(
                e.l.unions[*u as usize]
                    .iter()
                    .any(|&h| e.phv.valid[h as usize]),
            ),
            Expr::UnionStackField(k, m, o) => {
                let unions = &e.l.union_stacks[*k as usize].0;
                let last = usize::from(e.phv.next[e.l.union_next(*k)]).saturating_sub(1);
                let u = unions[last.min(unions.len() - 1)];
                let h = e.l.unions[u as usize][*m as usize];
                e.phv.get(e.l, e.l.headers[h as usize].first + o)
            }
            Expr::DynField(h, o) => h
                .resolve(e)
                .map_or(0, |h| e.phv.get(e.l, e.l.headers[h as usize].first + o)),
            Expr::ValidRef(h) => h
                .resolve(e)
                .map_or(0, |h| i128::from(e.phv.valid[h as usize])),
            Expr::LastIndex(s) => i128::from(e.phv.next[*s as usize]) - 1,
            Expr::StackSize(s) => i128::from(e.phv.next[*s as usize]),
            Expr::Un(op, a) => {
                let a = a.eval(e);
                match op {
                    Un::Not => i128::from(a == 0),
                    Un::BitNeg => !a,
                    Un::Neg => a.wrapping_neg(),
                    Un::D2b => i128::from(a != 0),
                    Un::B2d => a,
                }
            }
            Expr::Bin(Bin::And, a, b) => i128::from(a.eval(e) != 0 && b.eval(e) != 0),
            Expr::Bin(Bin::Or, a, b) => i128::from(a.eval(e) != 0 || b.eval(e) != 0),
            Expr::Bin(op, a, b) => binary(*op, a.eval(e), b.eval(e)),
            Expr::Cond(c, a, b) => {
                if c.eval(e) != 0 {
                    a.eval(e)
                } else {
                    b.eval(e)
                }
            }
        }
    }
}

fn binary(op: Bin, a: i128, b: i128) -> i128 {
    let shift = |b: i128| u32::try_from(b).ok().filter(|&s| s < 128);
    match op {
        Bin::Add => a.wrapping_add(b),
        Bin::Sub => a.wrapping_sub(b),
        Bin::Mul => a.wrapping_mul(b),
        // BMv2 leaves division by zero undefined; here it is zero rather than a crash.
        Bin::Div => a.checked_div(b).unwrap_or(0),
        Bin::Mod => a.checked_rem(b).unwrap_or(0),
        Bin::Shl => shift(b).map_or(0, |s| a.wrapping_shl(s)),
        Bin::Shr => shift(b).map_or(if a < 0 { -1 } else { 0 }, |s| a >> s),
        Bin::Eq => i128::from(a == b),
        Bin::Ne => i128::from(a != b),
        Bin::Gt => i128::from(a > b),
        Bin::Ge => i128::from(a >= b),
        Bin::Lt => i128::from(a < b),
        Bin::Le => i128::from(a <= b),
        Bin::And => i128::from(a != 0 && b != 0),
        Bin::Or => i128::from(a != 0 || b != 0),
        Bin::BitAnd => a & b,
        Bin::BitOr => a | b,
        Bin::BitXor => a ^ b,
        Bin::TwoCompMod => match u32::try_from(b) {
            Ok(w) if (1..128).contains(&w) => {
                let v = (a as u128) & bits::mask(w);
                if (v >> (w - 1)) & 1 == 1 {
                    (v | !bits::mask(w)) as i128
                } else {
                    v as i128
                }
            }
            _ => a,
        },
        Bin::SatCast => match u32::try_from(b) {
            Ok(w) if (1..128).contains(&w) => {
                let max = (1i128 << (w - 1)) - 1;
                a.clamp(-max - 1, max)
            }
            _ => a,
        },
        Bin::UsatCast => match u32::try_from(b) {
            Ok(w) if (1..127).contains(&w) => a.clamp(0, (1i128 << w) - 1),
            _ => a.max(0),
        },
    }
}

/// What an expression may refer to where it is compiled.
pub(crate) struct Scope<'a> {
    pub l: &'a Layout,
    pub registers: &'a HashMap<String, RegisterIx>,
    /// Number of action parameters (0 outside an action).
    pub params: usize,
    /// In a parser state: lookahead is allowed.
    pub parser: bool,
}

impl Scope<'_> {
    /// Compiles a type-value object (or a bare `{op, left, right}`) used as a value.
    pub(crate) fn expr(&self, path: &str, v: &Value) -> Result<Expr> {
        if v.get("op").is_some() {
            return self.op(path, v);
        }
        let ty = v
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(path, "expected a {type, value} object"))?;
        let value = v.get("value").unwrap_or(&Value::Null);
        match ty {
            "field" => Ok(match self.field(path, value)? {
                FieldRef::Field(f) => Expr::Field(f),
                FieldRef::Valid(h) => Expr::Valid(h),
            }),
            "hexstr" => Ok(Expr::Const(self.hex(path, value)?)),
            "bool" => value
                .as_bool()
                .map(|b| Expr::Const(i128::from(b)))
                .ok_or_else(|| invalid(path, "a bool value is true or false")),
            "runtime_data" | "local" => {
                let i = value
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .filter(|&i| i < self.params)
                    .ok_or_else(|| {
                        invalid(
                            path,
                            format!("{ty} {value} is not an action parameter here"),
                        )
                    })?;
                Ok(Expr::Param(
                    u16::try_from(i).expect("under 2^16 parameters"),
                ))
            }
            "expression" => self.expr(&format!("{path}.value"), value),
            "lookahead" if self.parser => {
                let (o, w) = value
                    .as_array()
                    .and_then(|a| Some((a.first()?.as_u64()?, a.get(1)?.as_u64()?)))
                    .ok_or_else(|| invalid(path, "lookahead is [offset, width]"))?;
                let (offset, width) = (u32::try_from(o), u32::try_from(w));
                match (offset, width) {
                    (Ok(offset), Ok(width)) if (1..=128).contains(&width) => {
                        Ok(Expr::Lookahead { offset, width })
                    }
                    _ => Err(unsupported(path, "a lookahead wider than 128 bits")),
                }
            }
            "stack_field" => match value.as_array().map(Vec::as_slice) {
                Some([Value::String(st), Value::String(f)]) => {
                    let s = self.l.stack(path, st)?;
                    let first = self.l.stacks[s as usize][0];
                    Ok(Expr::StackField(s, self.l.field_offset(path, first, f)?))
                }
                _ => Err(invalid(path, "a stack field is [stack, field]")),
            },
            "union_stack_field" => match value.as_array().map(Vec::as_slice) {
                Some([Value::String(st), Value::String(m), Value::String(f)]) => {
                    let (k, m) = self.l.union_member(path, st, m)?;
                    let u = self.l.union_stacks[k as usize].0[0];
                    let h = self.l.unions[u as usize][m as usize];
                    Ok(Expr::UnionStackField(
                        k,
                        m,
                        self.l.field_offset(path, h, f)?,
                    ))
                }
                _ => Err(invalid(
                    path,
                    "a union stack field is [stack, member, field]",
                )),
            },
            "register" => {
                let name = value.get(0).and_then(Value::as_str).unwrap_or_default();
                let r = self.register(path, name)?;
                let index = value
                    .get(1)
                    .ok_or_else(|| invalid(path, "register is [name, index]"))?;
                Ok(Expr::Register(
                    r,
                    Box::new(self.expr(&format!("{path}.value[1]"), index)?),
                ))
            }
            other => Err(unsupported(path, format!("a value of type {other}"))),
        }
    }

    fn op(&self, path: &str, v: &Value) -> Result<Expr> {
        let op = v.get("op").and_then(Value::as_str).unwrap_or_default();
        let side = |s: &str| -> Result<Expr> {
            let x = v
                .get(s)
                .filter(|x| !x.is_null())
                .ok_or_else(|| invalid(path, format!("operator {op} needs {s}")))?;
            self.expr(&format!("{path}.{s}"), x)
        };
        let un = |u: Un| -> Result<Expr> { Ok(Expr::Un(u, Box::new(side("right")?))) };
        let bin = |b: Bin| -> Result<Expr> {
            Ok(Expr::Bin(
                b,
                Box::new(side("left")?),
                Box::new(side("right")?),
            ))
        };
        let unary = v.get("left").is_none_or(Value::is_null);
        match op {
            "+" => bin(Bin::Add),
            "-" if unary => un(Un::Neg),
            "-" => bin(Bin::Sub),
            "*" => bin(Bin::Mul),
            "/" => bin(Bin::Div),
            "%" => bin(Bin::Mod),
            "<<" => bin(Bin::Shl),
            ">>" => bin(Bin::Shr),
            "==" => bin(Bin::Eq),
            "!=" => bin(Bin::Ne),
            ">" => bin(Bin::Gt),
            ">=" => bin(Bin::Ge),
            "<" => bin(Bin::Lt),
            "<=" => bin(Bin::Le),
            "and" => bin(Bin::And),
            "or" => bin(Bin::Or),
            "&" => bin(Bin::BitAnd),
            "|" => bin(Bin::BitOr),
            "^" => bin(Bin::BitXor),
            "two_comp_mod" => bin(Bin::TwoCompMod),
            "sat_cast" => bin(Bin::SatCast),
            "usat_cast" => bin(Bin::UsatCast),
            "not" => un(Un::Not),
            "~" => un(Un::BitNeg),
            "d2b" => un(Un::D2b),
            "b2d" => un(Un::B2d),
            "?" => {
                let c = v
                    .get("cond")
                    .ok_or_else(|| invalid(path, "operator ? needs cond"))?;
                Ok(Expr::Cond(
                    Box::new(self.expr(&format!("{path}.cond"), c)?),
                    Box::new(side("left")?),
                    Box::new(side("right")?),
                ))
            }
            "valid" => {
                let r = v
                    .get("right")
                    .ok_or_else(|| invalid(path, "valid needs a header"))?;
                Ok(match self.header_ref(&format!("{path}.right"), r)? {
                    HeaderRef::Static(h) => Expr::Valid(h),
                    dynamic => Expr::ValidRef(dynamic),
                })
            }
            "valid_union" => {
                let r = v.get("right").unwrap_or(&Value::Null);
                match (r.get("type").and_then(Value::as_str), r.get("value")) {
                    (Some("header_union"), Some(Value::String(u))) => {
                        Ok(Expr::UnionValid(self.l.union(&format!("{path}.right"), u)?))
                    }
                    _ => Err(invalid(path, "valid_union takes a header union")),
                }
            }
            "access_field" => {
                let h = self.header_ref(
                    &format!("{path}.left"),
                    v.get("left").unwrap_or(&Value::Null),
                )?;
                let o = self.offset(path, &h, v.get("right"))?;
                Ok(match h {
                    HeaderRef::Static(h) => Expr::Field(self.l.headers[h as usize].first + o),
                    dynamic => Expr::DynField(dynamic, o),
                })
            }
            "last_stack_index" | "size_stack" => {
                let r = v.get("right").unwrap_or(&Value::Null);
                let s = match (r.get("type").and_then(Value::as_str), r.get("value")) {
                    (Some("header_stack"), Some(Value::String(s))) => {
                        self.l.stack(&format!("{path}.right"), s)?
                    }
                    _ => return Err(invalid(path, format!("{op} takes a header stack"))),
                };
                Ok(if op == "size_stack" {
                    Expr::StackSize(s)
                } else {
                    Expr::LastIndex(s)
                })
            }
            other => Err(unsupported(path, format!("operator {other:?}"))),
        }
    }

    /// A field reference `[header, field]`.
    pub(crate) fn field(&self, path: &str, v: &Value) -> Result<FieldRef> {
        match v.as_array().map(Vec::as_slice) {
            Some([Value::String(h), Value::String(f)]) => self.l.field(path, h, f),
            _ => Err(invalid(path, "a field is [header, field]")),
        }
    }

    /// A header: `{type: header}`, or a stack element (`dereference_header_stack`), resolved
    /// now when its index is a constant.
    pub(crate) fn header_ref(&self, path: &str, v: &Value) -> Result<HeaderRef> {
        if v.get("op").and_then(Value::as_str) == Some("dereference_header_stack") {
            let st = v.get("left").unwrap_or(&Value::Null);
            let s = match (st.get("type").and_then(Value::as_str), st.get("value")) {
                (Some("header_stack"), Some(Value::String(s))) => {
                    self.l.stack(&format!("{path}.left"), s)?
                }
                _ => {
                    return Err(invalid(
                        path,
                        "dereference_header_stack takes a header stack",
                    ));
                }
            };
            let i = self.expr(
                &format!("{path}.right"),
                v.get("right").unwrap_or(&Value::Null),
            )?;
            let elems = &self.l.stacks[s as usize];
            return Ok(match i {
                Expr::Const(c) => HeaderRef::Static(
                    usize::try_from(c)
                        .ok()
                        .and_then(|c| elems.get(c).copied())
                        .ok_or_else(|| invalid(path, format!("index {c} outside the stack")))?,
                ),
                i => HeaderRef::Elem(s, Box::new(i)),
            });
        }
        match (v.get("type").and_then(Value::as_str), v.get("value")) {
            (Some("header"), Some(Value::String(h))) => {
                Ok(HeaderRef::Static(self.l.header(path, h)?))
            }
            (Some("expression"), Some(inner)) => self.header_ref(&format!("{path}.value"), inner),
            (Some(t), _) => Err(unsupported(
                path,
                format!("a {t} where a header is expected"),
            )),
            _ => Err(invalid(path, "expected a header")),
        }
    }

    /// A field offset (`access_field`'s right side) within `h`'s type.
    fn offset(&self, path: &str, h: &HeaderRef, v: Option<&Value>) -> Result<u32> {
        let o = v
            .and_then(Value::as_u64)
            .and_then(|o| u32::try_from(o).ok())
            .ok_or_else(|| invalid(path, "access_field takes a field offset"))?;
        let any = match h {
            HeaderRef::Static(h) => *h,
            HeaderRef::Elem(s, _) => self.l.stacks[*s as usize][0],
        };
        if o >= self.l.headers[any as usize].count {
            return Err(invalid(
                path,
                format!("field offset {o} outside the header"),
            ));
        }
        Ok(o)
    }

    /// Any field a primitive assigns: a named field or `access_field` of a stack element.
    pub(crate) fn place(&self, path: &str, v: &Value) -> Result<LValue> {
        match v.get("type").and_then(Value::as_str) {
            Some("expression") => match self.expr(path, v)? {
                Expr::Field(f) => Ok(LValue::Field(f)),
                Expr::DynField(h, o) => Ok(LValue::Dyn(h, o)),
                _ => Err(invalid(
                    path,
                    "an expression that is not a field cannot be assigned",
                )),
            },
            _ => self.lvalue(path, v).map(LValue::Field),
        }
    }

    /// A field written by a primitive (not a `$valid$` bit).
    pub(crate) fn lvalue(&self, path: &str, v: &Value) -> Result<u32> {
        let ty = v.get("type").and_then(Value::as_str);
        match ty {
            Some("field") => match self.field(path, v.get("value").unwrap_or(&Value::Null))? {
                FieldRef::Field(f) => Ok(f),
                FieldRef::Valid(_) => Err(invalid(path, "$valid$ cannot be written")),
            },
            Some(other) => Err(unsupported(path, format!("writing to a {other}"))),
            None => Err(invalid(path, "expected a {type, value} object")),
        }
    }

    fn hex(&self, path: &str, v: &Value) -> Result<i128> {
        match v {
            Value::String(s) => bits::hexstr(s).map_err(|e| invalid(path, e)),
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .ok_or_else(|| invalid(path, "an integer out of range")),
            _ => Err(invalid(path, "expected a hex string")),
        }
    }

    pub(crate) fn register(&self, path: &str, name: &str) -> Result<RegisterIx> {
        self.registers
            .get(name)
            .copied()
            .ok_or_else(|| invalid(path, format!("no register array {name}")))
    }
}
