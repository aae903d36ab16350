//! The ingress and egress controls: a graph of tables and conditions, walked per packet. Tables
//! are the engine's own (looked up through [`Ctx::apply`], so the control plane, counters, idle
//! times and action selectors behave as for every program); the actions they return run here.

use std::collections::HashMap;

use pipeline::schema::TableIx;

use crate::action::{Calc, Run};
use crate::expr::{Env, Expr};
use crate::layout::FieldRef;
use crate::program::Bmv2Program;

/// Where to go after a node (`None`: the end of the control).
pub(crate) type Next = Option<u32>;

#[derive(Debug)]
pub(crate) enum Node {
    Table(TableNode),
    Cond {
        /// Its name in the JSON, for the trace.
        name: String,
        expr: Expr,
        t: Next,
        f: Next,
    },
}

#[derive(Debug)]
pub(crate) enum NextTables {
    /// By the action that ran (schema action index), else `base_default_next`.
    Actions(HashMap<u16, Next>, Next),
    /// `__HIT__` / `__MISS__`.
    HitMiss { hit: Next, miss: Next },
}

#[derive(Debug)]
pub(crate) struct TableNode {
    pub ix: TableIx,
    /// Key parts and their static masks.
    pub key: Vec<(FieldRef, u128)>,
    /// An action selector's hash inputs.
    pub selector: Option<Calc>,
    pub next: NextTables,
    /// A direct meter's colour goes here on a hit.
    pub meter_target: Option<u32>,
}

/// A compiled control.
#[derive(Debug)]
pub(crate) struct Control {
    pub nodes: Vec<Node>,
    pub init: Next,
}

impl Control {
    pub(crate) fn run(&self, p: &Bmv2Program, run: &mut Run<'_, '_>, keys: &mut Vec<u128>) {
        let mut node = self.init;
        while let Some(n) = node {
            if run.req.exit {
                return;
            }
            node = match &self.nodes[n as usize] {
                Node::Cond { name, expr, t, f } => {
                    let env = Env {
                        l: run.l,
                        phv: run.phv,
                        params: &[],
                        look: &[],
                        short: std::cell::Cell::new(false),
                        x: run.cx.externs,
                    };
                    let holds = expr.eval(&env) != 0;
                    run.cx.trace(|| format!("condition={name} value={holds}"));
                    if holds { *t } else { *f }
                }
                Node::Table(t) => {
                    keys.clear();
                    for (r, mask) in &t.key {
                        let v = match *r {
                            FieldRef::Field(f) => run.phv.vals[f as usize],
                            FieldRef::Valid(h) => u128::from(run.phv.valid[h as usize]),
                        };
                        keys.push(v & mask);
                    }
                    let hash = match &t.selector {
                        Some(c) => {
                            c.input(run.l, run.phv, run.scratch, &mut |_| {});
                            c.hash.hash(&run.scratch.bytes, run.cx.rng)
                        }
                        None => 0,
                    };
                    let applied = run.cx.apply(t.ix, keys, hash);
                    if let (Some(entry), Some(dst)) = (applied.entry, t.meter_target) {
                        let colour = run.cx.direct_meter(t.ix, entry);
                        run.phv.set(run.l, dst, colour as i128);
                    }
                    let action = applied.action;
                    run.action(&p.actions[usize::from(action.action)], &action.params);
                    match &t.next {
                        NextTables::HitMiss { hit, miss } => {
                            if applied.entry.is_some() {
                                *hit
                            } else {
                                *miss
                            }
                        }
                        NextTables::Actions(by, default) => {
                            by.get(&action.action).copied().unwrap_or(*default)
                        }
                    }
                }
            };
        }
    }
}
