//! The [`Program`] trait and the hard-wired programs.
//!
//! A program is a Rust type with a [`Schema`] (tables, actions, externs: the P4Info source) and two
//! stages, ingress and egress, that run on a frame in place. Each stage parses what it needs with
//! the zero-copy views of [`crate::wire`] (as Tofino's ingress and egress each have a parser), looks
//! tables up by index through [`Ctx`], and sets [`StdMeta`]. Names are resolved when the program is
//! built: the per-packet code uses indices only.

pub mod basic;
pub mod dbb;
pub mod ecmp;
pub mod hula;
pub mod p4qcn;
pub mod p4te;
pub mod pint;
pub mod pint_hpcc;
pub mod pint_latency;
pub mod spray;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::agent::Agent;
use crate::control::Externs;
use crate::externs::{Color, Rng};
use crate::fabric::plan::SwitchPlan;
use crate::fabric::topo::{Switch, Topology};
use crate::frame::Frame;
use crate::metadata::{PortId, StdMeta};
use crate::schema::{CounterIx, DigestIx, MeterIx, RegisterIx, Schema, TableIx};
use crate::state::{ActionCall, Hot, State};
use crate::table::EntryId;

/// A hard-wired P4 program.
pub trait Program: Send + Sync + std::fmt::Debug + 'static {
    /// The program's schema.
    fn schema(&self) -> &Arc<Schema>;

    /// The ingress control, parser and deparser included. Sets `md.egress_spec`, `md.mcast_grp`,
    /// `md.clone_session`, `md.resubmit` or `md.drop`.
    fn ingress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta);

    /// The egress control, on one copy bound for `md.egress_port`. May set `md.drop`,
    /// `md.clone_session` (E2E) or `md.recirculate`.
    fn egress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta);

    /// Its table dependency graph and PHV fields, for an RMT resource estimate
    /// ([`crate::resources`]), if it declares them.
    fn layout(&self) -> Option<crate::resources::Layout> {
        None
    }
}

/// A fabric plan: given the whole topology and the switches that run the program, what each of
/// them is told, keyed by switch name.
pub type PlanFn = fn(&Topology, &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, String>;

/// What the registry knows of a program: everything a switch, a fabric and the simulator need
/// to run it, under one name.
#[derive(Debug)]
pub struct Entry {
    /// The name `--program` and topology lines use.
    pub name: &'static str,
    /// One line on what it does.
    pub about: &'static str,
    /// Builds the program (its schema, hence its P4Info, comes with it).
    pub build: fn() -> Arc<dyn Program>,
    /// Its fabric plan: what each switch of `topology` running this program is told (the
    /// traffic manager's settings and the table writes), keyed by switch name. Given the whole
    /// topology; returns plans for the switches in `switches` (those that run this program).
    pub plan: PlanFn,
    /// Its switch-local agent, if it has one (run by `pisa-switch` unless `--no-agent`, and by
    /// `pisa-sim` in virtual time).
    pub agent: Option<AgentFn>,
}

/// Builds a program's agent for a switch running it.
pub type AgentFn = fn(&Arc<Schema>) -> Box<dyn Agent>;

/// Every program this build has. Adding a program is one module and one line here.
pub static REGISTRY: &[Entry] = &[
    Entry {
        name: "basic",
        about: "L2, IPv4/IPv6 LPM routing with an ECMP selector, ternary ACL, punt to CPU",
        build: || Arc::new(basic::Basic::new()),
        plan: crate::fabric::plan::routed,
        agent: None,
    },
    Entry {
        name: "ecmp",
        about: "basic's routing with ECMP per flowlet and DCTCP-style ECN marking (the papers' baseline)",
        build: ecmp::build,
        plan: ecmp::plan,
        agent: None,
    },
    Entry {
        name: "hula",
        about: "HULA: probes from the ToRs' packet generators, per-ToR best hops, flowlets (the papers' baseline)",
        build: hula::build,
        plan: hula::plan,
        agent: None,
    },
    Entry {
        name: "p4te",
        about: "P4TE: in-band monitoring, load-aware flowlet routing and fake-ACK rate control",
        build: p4te::build,
        plan: p4te::plan::plan,
        agent: Some(p4te::agent::build),
    },
    Entry {
        name: "p4te-nra",
        about: "P4TE without rate adaptation (the same program; its plan turns FACKs off)",
        build: p4te::build,
        plan: p4te::plan::plan_nra,
        agent: Some(p4te::agent::build),
    },
    Entry {
        name: "p4qcn",
        about: "P4QCN: congestion points send feedback packets to the source (two-point); PFC with pfc=on",
        build: p4qcn::build,
        plan: p4qcn::plan,
        agent: None,
    },
    Entry {
        name: "p4qcn-pfc",
        about: "P4QCN's two-point congestion points and PFC at Q_PFC",
        build: p4qcn::build,
        plan: p4qcn::plan_pfc,
        agent: None,
    },
    Entry {
        name: "p4qcn-3pt",
        about: "QCN's three-point baseline on p4qcn: congestion points mark CE, the receiver (NP) answers",
        build: p4qcn::build,
        plan: p4qcn::plan_three_point,
        agent: None,
    },
    Entry {
        name: "pfc",
        about: "PFC alone at Q_PFC (the p4qcn program with its congestion points off)",
        build: p4qcn::build,
        plan: p4qcn::plan_pfc_only,
        agent: None,
    },
    Entry {
        name: "p4qcn-off",
        about: "the p4qcn program with congestion points and PFC off (plain UDP and TCP)",
        build: p4qcn::build,
        plan: p4qcn::plan_off,
        agent: None,
    },
    Entry {
        name: "spray",
        about: "packet spraying over equal-cost next hops (PLTS), the mode from mode= (random, counter, rr, rr-prefix; default random)",
        build: spray::build,
        plan: spray::plan,
        agent: None,
    },
    Entry {
        name: "spray-random",
        about: "PLTS-Random: a uniformly random next hop per packet (RPS, DBB's baseline)",
        build: spray::build,
        plan: spray::plan_random,
        agent: None,
    },
    Entry {
        name: "spray-counter",
        about: "PLTS-Counter: the next hop whose port has sent the fewest bytes",
        build: spray::build,
        plan: spray::plan_counter,
        agent: None,
    },
    Entry {
        name: "spray-rr",
        about: "PLTS-RR: round robin over the next hops per flow",
        build: spray::build,
        plan: spray::plan_rr,
        agent: None,
    },
    Entry {
        name: "spray-rr-prefix",
        about: "round robin over the next hops per destination prefix",
        build: spray::build,
        plan: spray::plan_rr_prefix,
        agent: None,
    },
    Entry {
        name: "dbb",
        about: "DBB: per ToR pair, deterministic bandwidth-proportional dispatch cycles, the counter from counter= (shared, independent; default shared)",
        build: dbb::build,
        plan: dbb::plan,
        agent: None,
    },
    Entry {
        name: "dbb-shared",
        about: "DBB with one circular counter per ToR pair",
        build: dbb::build,
        plan: dbb::plan_shared,
        agent: None,
    },
    Entry {
        name: "dbb-independent",
        about: "DBB with one circular counter per flow",
        build: dbb::build,
        plan: dbb::plan_independent,
        agent: None,
    },
    Entry {
        name: "pint",
        about: "PINT path tracing: every hop encodes its switch ID into an 8-bit digest in the IPv4 ID, the last hop exports it",
        build: pint::build,
        plan: pint::plan,
        agent: None,
    },
];

/// The registry entry of `name`.
pub fn lookup(name: &str) -> Option<&'static Entry> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// The program called `name`, built.
pub fn by_name(name: &str) -> Option<Arc<dyn Program>> {
    lookup(name).map(|e| (e.build)())
}

/// Names of the programs this build has.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|e| e.name)
}

/// The name a topology line (or `pisa-fabric experiment --schemes`) gives a switch that is a
/// Linux router in place of a `pisa-switch` process: `pisa-fabric` sets it up with the kernel's
/// multipath routes (an L4 hash) and tbf shaping. It runs no program, so it has no registry
/// entry and no fabric plan, and `pisa-sim` cannot simulate it.
pub const KERNEL: &str = "kernel";

/// Whether `program` names a Linux router ([`KERNEL`]) rather than a program.
pub fn is_kernel(program: &str) -> bool {
    program == KERNEL
}

/// The plan of every switch of `t`, each by the fabric plan of the program its line names.
/// Linux routers ([`KERNEL`]) get none: `pisa-fabric` sets their routes up itself.
pub fn fabric_plan(t: &Topology) -> Result<BTreeMap<String, SwitchPlan>, String> {
    let mut by_program: BTreeMap<&str, Vec<&Switch>> = BTreeMap::new();
    for s in t.switches.iter().filter(|s| !is_kernel(&s.program)) {
        by_program.entry(s.program.as_str()).or_default().push(s);
    }
    let mut out = BTreeMap::new();
    for (program, switches) in by_program {
        let entry = lookup(program).ok_or_else(|| {
            format!(
                "switch {}: no program {program} (this build has: {})",
                switches[0].name,
                names().collect::<Vec<_>>().join(", ")
            )
        })?;
        out.extend((entry.plan)(t, &switches)?);
    }
    Ok(out)
}

/// The controller's `packet_out` header (egress_port: 9 bits, 7 pad bits) of a frame from the
/// CPU port: stripped, and its port set as the egress port; a short frame, or one naming the
/// CPU port, is dropped as a bad packet-out. Programs that take `basic`'s controller headers use
/// it.
pub fn packet_out(cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
    let d = pkt.data();
    if d.len() < 2 {
        md.mark_to_drop(crate::metadata::DropReason::BadPacketOut);
        return;
    }
    let port = (u16::from(d[0]) << 1) | u16::from(d[1] >> 7);
    pkt.pop_front(2);
    if port == cx.cpu_port {
        md.mark_to_drop(crate::metadata::DropReason::BadPacketOut);
        return;
    }
    cx.trace(|| format!("packet_out egress_port={port}"));
    md.egress_spec = Some(port);
}

/// Pushes the `packet_in` header (ingress_port: 9 bits, 7 pad bits) in front of a frame bound
/// for the CPU port; drops it if the headroom is gone.
pub fn push_packet_in(pkt: &mut Frame<'_>, md: &mut StdMeta) {
    let ingress = md.ingress_port;
    match pkt.push_front(2) {
        Some(h) => {
            h[0] = (ingress >> 1) as u8;
            h[1] = ((ingress & 1) as u8) << 7;
        }
        None => md.mark_to_drop(crate::metadata::DropReason::NoHeadroom),
    }
}

/// The result of applying a table.
#[derive(Clone, Copy, Debug)]
pub struct Applied<'a> {
    /// The entry that matched (None: the default action ran).
    pub entry: Option<EntryId>,
    /// The action to run.
    pub action: &'a ActionCall,
}

/// What a stage can see and use besides the packet: the table snapshot, the externs, the time,
/// randomness, and the switch's configuration.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// Table state for this batch.
    pub state: &'a State,
    /// Registers, counters, meters, digests.
    pub externs: &'a Externs,
    /// This worker's counter shard.
    pub shard: usize,
    /// Now, ns.
    pub now_ns: u64,
    /// This worker's random numbers.
    pub rng: &'a mut Rng,
    /// The CPU port number.
    pub cpu_port: PortId,
    /// Length of the current packet, for direct counters.
    pub packet_len: u32,
    /// When tracing: lines describing what happened to the packet.
    pub trace: Option<&'a mut Vec<String>>,
}

impl<'a> Ctx<'a> {
    /// Records a trace line (the closure runs only when tracing).
    #[inline]
    pub fn trace(&mut self, line: impl FnOnce() -> String) {
        if let Some(t) = self.trace.as_deref_mut() {
            t.push(line());
        }
    }

    /// Looks `key` up in table `table` (one value per key field, masked to the field width):
    /// counts the direct counter, stamps the idle time and returns the action to run. For tables
    /// with an action selector, `selector_hash` picks the group member.
    #[inline]
    pub fn apply(&mut self, table: TableIx, key: &[u128], selector_hash: u64) -> Applied<'a> {
        let table = table.index();
        let state: &'a State = self.state;
        let t = &state.tables[table];
        let hit = t
            .matcher
            .lookup(key)
            .and_then(|id| Some((id, t.hot.get(id as usize)?)));
        let applied = match hit {
            None => Applied {
                entry: None,
                action: &t.default,
            },
            Some((id, hot)) => {
                let x = self.externs;
                if let Some(c) = x.direct_counter_of(table) {
                    c.count(self.shard, id as usize, self.packet_len);
                }
                if let Some(h) = &x.hit_times[table] {
                    h.touch(id, self.now_ns);
                }
                let action = match hot {
                    Hot::Action(call) => Some(call),
                    Hot::Member(m) => state.profile_of(table).and_then(|p| p.member_by_index(*m)),
                    Hot::Group(g) => state
                        .profile_of(table)
                        .and_then(|p| p.select_by_index(*g, selector_hash)),
                    Hot::Empty => None,
                };
                match action {
                    Some(action) => Applied {
                        entry: Some(id),
                        action,
                    },
                    // An empty group: the default action runs.
                    None => Applied {
                        entry: None,
                        action: &t.default,
                    },
                }
            }
        };
        if self.trace.is_some() {
            let name = self.externs.table_names[table];
            let action = self.externs.action_names[usize::from(applied.action.action)];
            let params = applied.action.params.clone();
            let entry = applied.entry;
            self.trace(|| match entry {
                Some(id) => {
                    format!("table={name} hit=true entry={id} action={action} params={params:x?}")
                }
                None => format!("table={name} hit=false action={action} params={params:x?}"),
            });
        }
        applied
    }

    /// Counts the current packet in cell `index` of indexed counter `counter`.
    #[inline]
    pub fn count(&self, counter: CounterIx, index: usize) {
        self.externs.counters[counter.index()].count(self.shard, index, self.packet_len);
    }

    /// Runs cell `index` of indexed meter `meter` on the current packet (colour-blind).
    #[inline]
    pub fn meter(&self, meter: MeterIx, index: usize) -> Color {
        self.externs.meters[meter.index()].execute(index, self.now_ns, self.packet_len, None)
    }

    /// Runs the direct meter of table `table` for entry `entry` on the current packet.
    #[inline]
    pub fn direct_meter(&self, table: TableIx, entry: EntryId) -> Color {
        match self.externs.direct_meter_of(table.index()) {
            Some(m) => m.execute(entry as usize, self.now_ns, self.packet_len, None),
            None => Color::Green,
        }
    }

    /// Sends digest `digest` with `values` to the controller (dropped and counted if the queue is
    /// full).
    #[inline]
    pub fn digest(&self, digest: DigestIx, values: &[u128]) {
        let x = self.externs;
        let d = digest.index() as u16;
        x.digests.push(d, values, self.now_ns);
        if x.agent_attached.load(std::sync::atomic::Ordering::Relaxed) {
            x.agent_digests.push(d, values, self.now_ns);
        }
    }

    /// Register array `register` (atomic read-modify-write per cell).
    #[inline]
    pub fn register(&self, register: RegisterIx) -> &'a crate::externs::Register {
        &self.externs.registers[register.index()]
    }
}
