//! The [`Program`] trait: what the engine runs.
//!
//! A program is a Rust type with a [`Schema`] (tables, actions, externs: the P4Info source) and two
//! stages, ingress and egress, that run on a frame in place. Each stage parses what it needs with
//! the zero-copy views of [`crate::wire`] (as Tofino's ingress and egress each have a parser), looks
//! tables up by index through [`Ctx`], and sets [`StdMeta`]. Names are resolved when the program is
//! built: the per-packet code uses indices only. The programs themselves, and the registry that
//! names them, live in the `programs` crate: the engine knows none of them.

use std::sync::Arc;

use crate::control::Externs;
use crate::externs::{Color, Rng};
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
