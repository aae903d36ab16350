//! The parser: states of extracts, sets, verifies and advances, with value/mask transitions on
//! fields and lookahead bits. A parser error does not drop the packet: as in the v1model,
//! ingress runs with `standard_metadata.parser_error` set and the headers extracted so far.

use std::cell::Cell;
use std::collections::HashMap;

use pipeline::control::Externs;
use serde_json::Value;

use crate::action::{Names, Prim, compile_prim};
use crate::bits;
use crate::error::{Result, invalid, unsupported};
use crate::expr::{Env, Expr, Scope};
use crate::json;
use crate::layout::Layout;
use crate::phv::Phv;

/// The error codes a parser sets, as the program's `errors` number them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Errors {
    pub no_error: i128,
    pub packet_too_short: i128,
    pub no_match: i128,
    pub stack_out_of_bounds: i128,
    pub header_too_short: i128,
    pub parser_timeout: i128,
    pub parser_invalid_argument: i128,
}

impl Errors {
    pub(crate) fn of(doc: &json::Doc) -> Errors {
        let code = |name: &str, default: i128| {
            doc.errors
                .iter()
                .find(|(n, _)| n == name)
                .map_or(default, |(_, v)| i128::from(*v))
        };
        // Without an `errors` list, p4c's numbering of the core errors.
        Errors {
            no_error: code("NoError", 0),
            packet_too_short: code("PacketTooShort", 2),
            no_match: code("NoMatch", 3),
            stack_out_of_bounds: code("StackOutOfBounds", 4),
            header_too_short: code("HeaderTooShort", 5),
            parser_timeout: code("ParserTimeout", 6),
            parser_invalid_argument: code("ParserInvalidArgument", 7),
        }
    }
}

#[derive(Debug)]
enum Op {
    /// A primitive call in a state (an extern method: `log_msg`, `assign_header`, ...).
    Prim(Prim),
    Extract(u32),
    /// Extract into a stack's next element.
    ExtractNext(u32),
    /// `extract_VL`: a header (or, with `true`, a stack's next element) whose varbit field is
    /// as many bits as the expression says.
    ExtractVl(u32, bool, Expr),
    /// Extract into member `1` of union stack `0`'s next union.
    ExtractUnion(u32, u32),
    Set(u32, Expr),
    Verify(Expr, Expr),
    Advance(Expr),
}

#[derive(Debug)]
struct Transition {
    case: Case,
    /// `None`: accept.
    next: Option<u32>,
}

/// What a transition matches.
#[derive(Debug)]
enum Case {
    /// The byte-padded key under `mask` equals `value`.
    Value { value: u128, mask: u128 },
    /// A member of value set `set` equals the compressed key (the key's parts concatenated
    /// without padding, as BMv2 stores a value set's members), under `mask` if given.
    Set { set: usize, mask: Option<u128> },
}

#[derive(Debug)]
struct State {
    name: String,
    ops: Vec<Op>,
    /// Key parts with their widths; each is byte-padded in the key, as BMv2 lays it out.
    key: Vec<(Expr, u32)>,
    /// Whether a transition matches a value set (which needs the compressed key).
    sets: bool,
    transitions: Vec<Transition>,
    /// The default transition: `Some(None)` accepts, `None` is a NoMatch error.
    default: Option<Option<u32>>,
}

/// A compiled parser.
#[derive(Debug)]
pub(crate) struct Parser {
    states: Vec<State>,
    start: Option<u32>,
    pub errors: Errors,
}

/// Where parsing stopped.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    /// Bytes of the packet the parser consumed.
    pub offset: usize,
    /// The error code, if parsing stopped on an error.
    pub error: Option<i128>,
    /// The states visited, when tracing.
    pub trace: Vec<String>,
}

/// States visited before a parser gives up (BMv2 has no bound; a state loop without extraction
/// would never end there).
const MAX_STATES: usize = 1024;

impl Parser {
    pub(crate) fn compile(
        doc: &json::Doc,
        ix: usize,
        scope: &Scope<'_>,
        externs: &Names<'_>,
        value_sets: &HashMap<String, (usize, u32)>,
        errors: Errors,
    ) -> Result<Parser> {
        let p = &doc.parsers[ix];
        let names: HashMap<&str, u32> = p
            .parse_states
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i as u32))
            .collect();
        let next = |path: &str, n: &Option<String>| -> Result<Option<u32>> {
            match n {
                None => Ok(None),
                Some(n) => names
                    .get(n.as_str())
                    .map(|&i| Some(i))
                    .ok_or_else(|| invalid(path, format!("no parse state {n}"))),
            }
        };
        let mut states = Vec::new();
        for (si, s) in p.parse_states.iter().enumerate() {
            let path = format!("parsers[{ix}].parse_states[{si}]");
            let mut ops = Vec::new();
            for (oi, op) in s.parser_ops.iter().enumerate() {
                let opath = format!("{path}.parser_ops[{oi}]");
                ops.push(compile_op(scope, externs, &opath, op)?);
            }
            let mut key = Vec::new();
            for (ki, k) in s.transition_key.iter().enumerate() {
                let kpath = format!("{path}.transition_key[{ki}]");
                let e = scope.expr(&kpath, k)?;
                let width = match &e {
                    Expr::Field(f) => scope.l.fields[*f as usize].width,
                    Expr::Valid(_) => 1,
                    Expr::Lookahead { width, .. } => *width,
                    Expr::StackField(s, o) => {
                        let h = scope.l.stacks[*s as usize][0];
                        scope.l.fields[(scope.l.headers[h as usize].first + o) as usize].width
                    }
                    Expr::UnionStackField(k, m, o) => {
                        let u = scope.l.union_stacks[*k as usize].0[0];
                        let h = scope.l.unions[u as usize][*m as usize];
                        scope.l.fields[(scope.l.headers[h as usize].first + o) as usize].width
                    }
                    _ => {
                        return Err(unsupported(
                            &kpath,
                            "a key that is not a field or lookahead",
                        ));
                    }
                };
                key.push((e, width));
            }
            let key_bits: u32 = key.iter().map(|(_, w)| w.div_ceil(8) * 8).sum();
            if key_bits > 128 {
                return Err(unsupported(
                    &format!("{path}.transition_key"),
                    format!("a transition key of {key_bits} bits (128 are run)"),
                ));
            }
            let compressed_bits: u32 = key.iter().map(|(_, w)| w).sum();
            let mut transitions = Vec::new();
            let mut default = None;
            for (ti, t) in s.transitions.iter().enumerate() {
                let tpath = format!("{path}.transitions[{ti}]");
                let to = next(&tpath, &t.next_state)?;
                let kind = t.kind.as_deref().unwrap_or(match &t.value {
                    Value::String(v) if v == "default" => "default",
                    _ => "hexstr",
                });
                match kind {
                    "default" => {
                        if default.is_none() {
                            default = Some(to);
                        }
                    }
                    "hexstr" => {
                        let value = hex(&tpath, &t.value)?;
                        let mask = match &t.mask {
                            Value::Null => bits::mask(key_bits),
                            m => hex(&tpath, m)?,
                        };
                        transitions.push(Transition {
                            case: Case::Value {
                                value: value & mask,
                                mask,
                            },
                            next: to,
                        });
                    }
                    "parse_vset" => {
                        let name = t.value.as_str().unwrap_or_default();
                        let (set, width) = *value_sets
                            .get(name)
                            .ok_or_else(|| invalid(&tpath, format!("no value set {name:?}")))?;
                        if width != compressed_bits {
                            return Err(unsupported(
                                &tpath,
                                format!(
                                    "a value set of {width} bits on a key of {compressed_bits}"
                                ),
                            ));
                        }
                        let mask = match &t.mask {
                            Value::Null => None,
                            m => match hex(&tpath, m)? {
                                m if m & !bits::mask(width) != 0 => {
                                    return Err(invalid(
                                        &tpath,
                                        format!("a mask wider than the value set's {width} bits"),
                                    ));
                                }
                                m => Some(m),
                            },
                        };
                        transitions.push(Transition {
                            case: Case::Set { set, mask },
                            next: to,
                        });
                    }
                    other => {
                        return Err(unsupported(&tpath, format!("{other} transitions")));
                    }
                }
            }
            states.push(State {
                name: s.name.clone(),
                ops,
                key,
                sets: transitions
                    .iter()
                    .any(|t| matches!(t.case, Case::Set { .. })),
                transitions,
                default,
            });
        }
        let start = names.get(p.init_state.as_str()).copied().ok_or_else(|| {
            invalid(
                &format!("parsers[{ix}].init_state"),
                format!("no parse state {}", p.init_state),
            )
        })?;
        Ok(Parser {
            states,
            start: Some(start),
            errors,
        })
    }

    /// Parses `pkt` into `phv` (whose headers are all invalid).
    ///
    /// `prim` runs the primitives a state calls (extern methods such as `log_msg`); with
    /// `trace`, the states visited are returned as trace lines.
    pub(crate) fn run(
        &self,
        l: &Layout,
        phv: &mut Phv,
        pkt: &[u8],
        x: &Externs,
        trace: bool,
        prim: &mut dyn FnMut(&Prim, &mut Phv),
    ) -> Parsed {
        let mut off = 0usize;
        let mut state = self.start;
        let mut visited = 0;
        let mut lines = Vec::new();
        let stop = |off, error, lines: &mut Vec<String>| Parsed {
            offset: off,
            error: Some(error),
            trace: std::mem::take(lines),
        };
        while let Some(si) = state {
            visited += 1;
            if visited > MAX_STATES {
                return stop(off, self.errors.parser_timeout, &mut lines);
            }
            let s = &self.states[si as usize];
            if trace {
                lines.push(format!("parser state={} offset={off}", s.name));
            }
            for op in &s.ops {
                match op {
                    Op::Prim(p) => prim(p, phv),
                    Op::ExtractVl(target, stack, bits) => {
                        let h = if *stack {
                            let next = usize::from(phv.next[*target as usize]);
                            match l.stacks[*target as usize].get(next) {
                                Some(&h) => h,
                                None => {
                                    return stop(off, self.errors.stack_out_of_bounds, &mut lines);
                                }
                            }
                        } else {
                            *target
                        };
                        // As BMv2: a length of whole bytes, within the packet, then within the
                        // header type's max_length.
                        let (b, _) = eval(l, phv, &pkt[off..], x, bits);
                        if b < 0 || b % 8 != 0 {
                            return stop(off, self.errors.parser_invalid_argument, &mut lines);
                        }
                        let vl = usize::try_from(b / 8).unwrap_or(usize::MAX);
                        let hd = &l.headers[h as usize];
                        let n = hd.bytes.saturating_add(vl);
                        if pkt.len() - off < n {
                            return stop(off, self.errors.packet_too_short, &mut lines);
                        }
                        let most = hd.varbit.map_or(0, |k| l.wide[k as usize].bytes);
                        if vl > most {
                            return stop(off, self.errors.header_too_short, &mut lines);
                        }
                        phv.set_varbit_len(l, h, vl);
                        phv.extract(l, h, &pkt[off..off + n]);
                        if *stack {
                            phv.next[*target as usize] += 1;
                        }
                        off += n;
                    }
                    Op::Extract(h) => {
                        let n = phv.header_bytes(l, *h);
                        let Some(b) = pkt.get(off..off + n) else {
                            return stop(off, self.errors.packet_too_short, &mut lines);
                        };
                        phv.extract(l, *h, b);
                        off += n;
                    }
                    Op::ExtractNext(st) => {
                        let elems = &l.stacks[*st as usize];
                        let next = usize::from(phv.next[*st as usize]);
                        let Some(&h) = elems.get(next) else {
                            return stop(off, self.errors.stack_out_of_bounds, &mut lines);
                        };
                        let n = phv.header_bytes(l, h);
                        let Some(b) = pkt.get(off..off + n) else {
                            return stop(off, self.errors.packet_too_short, &mut lines);
                        };
                        phv.extract(l, h, b);
                        phv.next[*st as usize] += 1;
                        off += n;
                    }
                    Op::ExtractUnion(k, m) => {
                        let slot = l.union_next(*k);
                        let next = usize::from(phv.next[slot]);
                        let Some(&u) = l.union_stacks[*k as usize].0.get(next) else {
                            return stop(off, self.errors.stack_out_of_bounds, &mut lines);
                        };
                        let h = l.unions[u as usize][*m as usize];
                        let n = phv.header_bytes(l, h);
                        let Some(b) = pkt.get(off..off + n) else {
                            return stop(off, self.errors.packet_too_short, &mut lines);
                        };
                        phv.extract(l, h, b);
                        phv.next[slot] += 1;
                        off += n;
                    }
                    Op::Set(f, e) => {
                        let (v, short) = eval(l, phv, &pkt[off..], x, e);
                        if short {
                            return stop(off, self.errors.packet_too_short, &mut lines);
                        }
                        phv.set(l, *f, v);
                    }
                    Op::Verify(cond, err) => {
                        let (c, short) = eval(l, phv, &pkt[off..], x, cond);
                        if short {
                            return stop(off, self.errors.packet_too_short, &mut lines);
                        }
                        if c == 0 {
                            let (e, _) = eval(l, phv, &pkt[off..], x, err);
                            return stop(off, e, &mut lines);
                        }
                    }
                    Op::Advance(bits) => {
                        let (b, _) = eval(l, phv, &pkt[off..], x, bits);
                        let n = usize::try_from(b / 8).unwrap_or(usize::MAX);
                        if pkt.len() - off < n {
                            return stop(off, self.errors.packet_too_short, &mut lines);
                        }
                        off += n;
                    }
                }
            }
            let mut key: u128 = 0;
            let mut compressed: u128 = 0;
            for (e, w) in &s.key {
                let (v, short) = eval(l, phv, &pkt[off..], x, e);
                if short {
                    return stop(off, self.errors.packet_too_short, &mut lines);
                }
                let v = (v as u128) & bits::mask(*w);
                let padded = w.div_ceil(8) * 8;
                key = key.checked_shl(padded).unwrap_or(0) | v;
                if s.sets {
                    compressed = compressed.checked_shl(*w).unwrap_or(0) | v;
                }
            }
            let hit = |t: &&Transition| match t.case {
                Case::Value { value, mask } => key & mask == value,
                Case::Set { set, mask: None } => x.value_sets[set].contains(compressed),
                Case::Set {
                    set,
                    mask: Some(mask),
                } => x.value_sets[set].contains_masked(compressed, mask),
            };
            state = match s.transitions.iter().find(hit) {
                Some(t) => t.next,
                None => match s.default {
                    Some(next) => next,
                    None => return stop(off, self.errors.no_match, &mut lines),
                },
            };
        }
        Parsed {
            offset: off,
            error: None,
            trace: lines,
        }
    }
}

fn eval(l: &Layout, phv: &Phv, look: &[u8], x: &Externs, e: &Expr) -> (i128, bool) {
    let env = Env {
        l,
        phv,
        params: &[],
        look,
        short: Cell::new(false),
        x,
    };
    let v = e.eval(&env);
    (v, env.short.get())
}

fn hex(path: &str, v: &Value) -> Result<u128> {
    match v {
        Value::String(s) => bits::hexstr(s)
            .map(|v| v as u128)
            .map_err(|e| invalid(path, e)),
        _ => Err(invalid(path, "expected a hex string")),
    }
}

fn compile_op(scope: &Scope<'_>, names: &Names<'_>, path: &str, op: &json::ParserOp) -> Result<Op> {
    let param = |i: usize| -> Result<&Value> {
        op.parameters
            .get(i)
            .ok_or_else(|| invalid(path, format!("{} needs parameter {i}", op.op)))
    };
    match op.op.as_str() {
        "extract" => {
            let p = param(0)?;
            match (p.get("type").and_then(Value::as_str), p.get("value")) {
                (Some("regular"), Some(Value::String(h))) => {
                    let h = scope.l.header(path, h)?;
                    if scope.l.headers[h as usize].metadata {
                        return Err(invalid(path, "extract into metadata"));
                    }
                    Ok(Op::Extract(h))
                }
                (Some("stack"), Some(Value::String(s))) => {
                    Ok(Op::ExtractNext(scope.l.stack(path, s)?))
                }
                (Some("union_stack"), Some(v)) => match v.as_array().map(Vec::as_slice) {
                    Some([Value::String(s), Value::String(m)]) => {
                        let (k, m) = scope.l.union_member(path, s, m)?;
                        Ok(Op::ExtractUnion(k, m))
                    }
                    _ => Err(invalid(path, "a union stack extract is [stack, member]")),
                },
                (Some(t), _) => Err(unsupported(
                    &format!("{path}.parameters[0]"),
                    format!("extracting to a {t}"),
                )),
                _ => Err(invalid(path, "extract takes a {type, value} header")),
            }
        }
        "extract_VL" => {
            let p = param(0)?;
            // (the header or stack, whether a stack, a header of its type)
            let (t, stack, h) = match (p.get("type").and_then(Value::as_str), p.get("value")) {
                (Some("regular"), Some(Value::String(h))) => {
                    let h = scope.l.header(path, h)?;
                    (h, false, h)
                }
                (Some("stack"), Some(Value::String(s))) => {
                    let s = scope.l.stack(path, s)?;
                    (s, true, scope.l.stacks[s as usize][0])
                }
                _ => {
                    return Err(unsupported(
                        &format!("{path}.parameters[0]"),
                        "extract_VL into other than a header or a stack",
                    ));
                }
            };
            if scope.l.headers[h as usize].varbit.is_none() {
                return Err(invalid(
                    path,
                    "extract_VL of a header without a varbit field",
                ));
            }
            let len = param(1)?;
            if len.get("type").and_then(Value::as_str) != Some("expression") {
                return Err(invalid(
                    &format!("{path}.parameters[1]"),
                    "extract_VL's length is an expression",
                ));
            }
            let bits = scope.expr(&format!("{path}.parameters[1]"), len)?;
            Ok(Op::ExtractVl(t, stack, bits))
        }
        "set" => {
            let f = scope.lvalue(&format!("{path}.parameters[0]"), param(0)?)?;
            let v = scope.expr(&format!("{path}.parameters[1]"), param(1)?)?;
            Ok(Op::Set(f, v))
        }
        "verify" => Ok(Op::Verify(
            scope.expr(&format!("{path}.parameters[0]"), param(0)?)?,
            scope.expr(&format!("{path}.parameters[1]"), param(1)?)?,
        )),
        "advance" => Ok(Op::Advance(
            scope.expr(&format!("{path}.parameters[0]"), param(0)?)?,
        )),
        "shift" => {
            let bytes = scope.expr(&format!("{path}.parameters[0]"), param(0)?)?;
            Ok(Op::Advance(Expr::Bin(
                crate::expr::Bin::Mul,
                Box::new(bytes),
                Box::new(Expr::Const(8)),
            )))
        }
        "primitive" => {
            let p: json::Primitive = serde_json::from_value(param(0)?.clone())
                .map_err(|e| invalid(path, format!("a primitive call: {e}")))?;
            let ppath = format!("{path}.parameters[0]");
            match compile_prim(scope, names, &ppath, &p, 1)? {
                Prim::Jump(_) | Prim::JumpIfZero(..) => {
                    Err(unsupported(&ppath, "jumps in a parser state"))
                }
                p => Ok(Op::Prim(p)),
            }
        }
        other => Err(unsupported(path, format!("parser operation {other}"))),
    }
}
