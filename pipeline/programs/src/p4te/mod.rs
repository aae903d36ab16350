//! `p4te`: P4TE, in-band monitoring, load-aware flowlet routing and fake-ACK rate control
//! (Robin and Khan, "P4TE: PISA Switch Based Traffic Engineering in Fat-Tree Data Center
//! Networks"; docs/p4te.md). Roles leaf and spine, IPv4 and IPv6, one program. The ids A-P4TE-n
//! cited in this module and its submodules are the paper's open questions, listed with our
//! choices in docs/p4te.md, "Open questions".
//!
//! **Ingress**
//! 1. From the CPU port: a `packet_out` header names the egress port. From the recirculation
//!    port: a utilisation copy writes `portUtilizations[port] := colour` and is consumed
//!    [P §4.1.2]; a FACK copy is rebuilt into a FACK ([`fack::build`]) and routed on.
//! 2. Parse; ARP and NDP go to the CPU. Frames from a host port (`ingress.edge_port`) lose any
//!    P4TE bits in their ToS (hosts cannot forge flags).
//! 3. **T1** [P §4.1.3]: the class meter of (class, ingress port) (`ingress.class_rate`, cell
//!    `class × 512 + port`) gives `incomingPacketColor`: GREEN, or YELLOW above the safe rate.
//! 4. **Anti-repeat** at the source leaf [P §4.3.1]: a data segment from a host port whose
//!    `seq − rcSeq[flow] < B` gets flag (a).
//! 5. **Alg. 2** [P §4.2.1]: `MAT_Down` (`ingress.down_v4/v6`, LPM) hit → that port. Otherwise a
//!    new flowlet (gap over `ingress.flowlet_gap_ns`) of a short flow takes `lowQueueDepthPort`
//!    (`ingress.queue_depth_up`, the highest-priority group present, hash member) if that port
//!    is GREEN in `portUtilizations`, else `lowUtilPort` (`ingress.link_util_up`); a large flow
//!    the other way round; untagged traffic ECMP (`ingress.ecmp_up`) [A-P4TE-8]; a packet of a
//!    running flowlet keeps `lastUsedPorts[flowlet]`.
//! 6. Toward a host port (this is the destination leaf, or the source leaf of the reverse
//!    direction): a FACK is patched from the last real ACK of its flow ([`fack::patch`]) and
//!    `rcSeq` updated; a real ACK is remembered (`ingress.last_ack`, `last_win`, `last_tsval`,
//!    `last_tsecr`).
//!
//! **Egress** on a data port
//! 1. MACs from `egress.port_mac`.
//! 2. **Alg. 1** [P Alg. 1]: a queue-depth event when `enq_qdepth` moved by Δ
//!    (`egress.qdepth_delta`) from `oldQueueDepths[port]` (signed comparisons); the 2R3C direct
//!    meter of `egress.link_util_rate[port]` gives the colour, and a change against
//!    `oldPacketColors[port]` is a utilisation event. An event clones the packet to the CPU
//!    port, where egress turns the copy into a feedback frame (below); a utilisation event also
//!    recirculates a copy.
//! 3. **T4** [P §4.3, §6.1.5] with `egress.rate_control[0]` = 1: a tagged data segment without
//!    flags, with `incomingPacketColor` YELLOW, on a RED link → DEC, on a GREEN link → INC; the
//!    packet gets flag (b) and a clone is recirculated to become the FACK.
//! 4. Toward a host port: the packet loses flags (a) and (b).
//! 5. Not the paper's, off by default: CE on ECT packets that joined a queue longer than
//!    `egress.ecn_threshold[port]` (as `ecmp` marks), for experiments that separate P4TE's routing
//!    from its queueing.
//!
//! One egress clone session carries every copy a packet needs: session [`SESSION_BASE`] + mask
//! (1: feedback to the CPU, replica id 1; 2: utilisation copy to the recirculation port, id 2;
//! 4: FACK copy to the recirculation port, id 3); the fabric plan creates the seven sessions.
//!
//! **Feedback frame** (to the agent, after the 2-byte `packet_in` header): Ethernet with
//! EtherType [`FEEDBACK_ETHERTYPE`], then 6 bytes [X]: `qd_event:2 | util_event:2 |
//! new_color:2 | egress_port:9 | pad:1 | event_data:32` (events: 0 none, 1 increase,
//! 2 decrease; colours 0 GREEN, 1 YELLOW, 2 RED; event_data = the queue depth, always
//! [A-P4TE-5]).

pub mod agent;
pub mod fack;
pub mod layout;
pub mod parse;
pub mod plan;

use std::sync::Arc;

use pipeline::externs::{Color, CounterKind, HashAlgorithm, HashFn, MeterAlgorithm, MeterUnit};
use pipeline::frame::Frame;
use pipeline::metadata::{DropReason, InstanceType, PORT_BITS, PortId, StdMeta};
use pipeline::program::{Ctx, Program};
use pipeline::schema::{
    ActionScope, CounterIx, MeterIx, RegisterIx, Schema, SchemaBuilder, TableIx, TableSpec,
};
use pipeline::table::MatchKind;

use fack::{Action, LastAck};
use parse::{Class, FLAG_A, FLAG_B, P4TE_BITS, Parsed, TCP_ACK};

/// EtherType of feedback frames to the agent (IEEE 802 local experimental 2) [X].
pub const FEEDBACK_ETHERTYPE: u16 = 0x88b6;
/// Bytes of the feedback shim after the Ethernet header.
pub const SHIM_LEN: usize = 6;
/// The egress clone sessions are `SESSION_BASE + mask`, mask in 1..=7 [X].
pub const SESSION_BASE: u32 = 100;
/// Replica id of the feedback copy to the CPU port.
pub const RID_FEEDBACK: u16 = 1;
/// Replica id of the utilisation copy to the recirculation port.
pub const RID_UTIL: u16 = 2;
/// Replica id of the FACK copy to the recirculation port.
pub const RID_FACK: u16 = 3;
/// Cells of the flowlet registers [P §6.2.3: hash-indexed].
pub const FLOWLET_CELLS: usize = 8192;
/// Cells of the per-flow rate-control registers (the paper sizes them for 1M flows; a
/// software switch of a few dozen hosts needs far fewer) [X].
pub const FLOW_CELLS: usize = 65536;
/// Ports per per-port array (9-bit port numbers).
const PORTS: usize = 1 << PORT_BITS;

/// Queue-depth and utilisation events [P Alg. 1].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Event {
    /// No change.
    None = 0,
    /// Depth up by Δ, or colour up.
    Increase = 1,
    /// Depth down by Δ, or colour down.
    Decrease = 2,
}

impl Event {
    fn from_bits(b: u64) -> Event {
        match b & 3 {
            1 => Event::Increase,
            2 => Event::Decrease,
            _ => Event::None,
        }
    }
}

/// How a new flowlet of a tagged flow goes up (`ingress.routing`, the plan's `routing=`): the
/// paper's Alg. 2, or one of the ablations that isolate what its two metrics each contribute
/// (docs/p4te.md, "Ablation") [X].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Routing {
    /// Alg. 2: a short flow's lowest-queue port if it is GREEN, else the lowest-utilisation
    /// port; a large flow the other way round.
    Alg2 = 0,
    /// Every tagged flowlet takes the lowest-queue port (`ingress.queue_depth_up`).
    Queue = 1,
    /// Every tagged flowlet takes the lowest-utilisation port (`ingress.link_util_up`).
    Color = 2,
    /// Every tagged flowlet hashes over every up port (`ingress.ecmp_up`): ECMP per flowlet
    /// through P4TE's tables, with its monitoring and rate control still running.
    Static = 3,
}

impl Routing {
    /// The mode of register value `v`.
    pub fn from_bits(v: u64) -> Routing {
        match v & 3 {
            1 => Routing::Queue,
            2 => Routing::Color,
            3 => Routing::Static,
            _ => Routing::Alg2,
        }
    }
}

/// One feedback report, as the agent reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feedback {
    /// Queue-depth event.
    pub qd_event: Event,
    /// Utilisation event.
    pub util_event: Event,
    /// The port's colour now.
    pub color: Color,
    /// The egress port.
    pub port: PortId,
    /// Its queue depth (packets) when the packet joined the queue.
    pub depth: u32,
}

impl Feedback {
    /// The 6-byte shim.
    pub fn encode(&self) -> [u8; SHIM_LEN] {
        let head: u16 = (u16::from(self.qd_event as u8) << 14)
            | (u16::from(self.util_event as u8) << 12)
            | ((self.color as u16) << 10)
            | ((self.port & 0x1ff) << 1);
        let mut b = [0u8; SHIM_LEN];
        b[..2].copy_from_slice(&head.to_be_bytes());
        b[2..].copy_from_slice(&self.depth.to_be_bytes());
        b
    }

    /// Reads a feedback frame (Ethernet + shim, without the packet_in header).
    pub fn decode(frame: &[u8]) -> Option<Feedback> {
        if frame.len() < 14 + SHIM_LEN
            || u16::from_be_bytes([frame[12], frame[13]]) != FEEDBACK_ETHERTYPE
        {
            return None;
        }
        let s = &frame[14..14 + SHIM_LEN];
        let head = u16::from_be_bytes([s[0], s[1]]);
        Some(Feedback {
            qd_event: Event::from_bits(u64::from(head >> 14)),
            util_event: Event::from_bits(u64::from(head >> 12)),
            color: Color::from_value(u64::from((head >> 10) & 3)).unwrap_or(Color::Red),
            port: (head >> 1) & 0x1ff,
            depth: u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
        })
    }
}

/// The decision table of rate adaptation [P §4.3, §6.1.5; A-P4TE-13]: the class's incoming
/// colour against the egress link's colour.
pub fn rate_decision(incoming: Color, link: Color) -> Option<Action> {
    match (incoming, link) {
        (Color::Green, _) | (_, Color::Yellow) => None,
        (_, Color::Red) => Some(Action::Decrease),
        (_, Color::Green) => Some(Action::Increase),
    }
}

/// Bridged metadata word 1 (egress → its clones): the events of Alg. 1 and the FACK action.
fn pack_events(depth: u32, q: Event, u: Event, color: Color, port: PortId, act: u64) -> u64 {
    u64::from(depth)
        | (u64::from(q as u8) << 32)
        | (u64::from(u as u8) << 34)
        | ((color as u64) << 36)
        | (u64::from(port) << 40)
        | (act << 52)
}

/// Bridged word 2 on a recirculated copy: what it is.
const KIND_UTIL: u64 = 1;
const KIND_FACK: u64 = 2;

#[derive(Clone, Copy, Debug)]
struct Ids {
    set_port: usize,
    set_macs: usize,
    down_v4: TableIx,
    down_v6: TableIx,
    queue_depth_up: TableIx,
    link_util_up: TableIx,
    ecmp_up: TableIx,
    port_mac: TableIx,
    link_util_rate: TableIx,
    class_rate: MeterIx,
    offered_rate: MeterIx,
    port_rx: CounterIx,
    port_tx: CounterIx,
    feedback: CounterIx,
    qdepth_events: CounterIx,
    color_events: CounterIx,
    facks: CounterIx,
    port_utilizations: RegisterIx,
    flowlet_time: RegisterIx,
    flowlet_port: RegisterIx,
    flowlet_gap: RegisterIx,
    routing: RegisterIx,
    edge_port: RegisterIx,
    rc_seq: RegisterIx,
    rc_bytes: RegisterIx,
    last_ack: RegisterIx,
    last_win: RegisterIx,
    last_tsval: RegisterIx,
    last_tsecr: RegisterIx,
    old_depths: RegisterIx,
    old_colors: RegisterIx,
    yellow_seen: RegisterIx,
    red_seen: RegisterIx,
    color_hold: RegisterIx,
    meter_offered: RegisterIx,
    delta: RegisterIx,
    rate_control: RegisterIx,
    ecn_threshold: RegisterIx,
    util_consumed: DropReason,
    fack_unpatched: DropReason,
    not_ip: DropReason,
}

/// The `p4te` program.
#[derive(Debug)]
pub struct P4te {
    schema: Arc<Schema>,
    ids: Ids,
    hash: HashFn,
}

/// The program.
pub fn build() -> Arc<dyn Program> {
    Arc::new(P4te::new())
}

impl Default for P4te {
    fn default() -> Self {
        Self::new()
    }
}

impl P4te {
    /// The program with its schema.
    pub fn new() -> Self {
        let (schema, ids) = schema();
        P4te {
            schema: Arc::new(schema),
            ids,
            hash: HashFn::new(HashAlgorithm::Crc32, 0),
        }
    }
}

fn schema() -> (Schema, Ids) {
    use ActionScope::*;
    use MatchKind::*;
    let mut b = SchemaBuilder::new("p4te", "0.1.0");
    let no_action = b.action("NoAction", &[]);
    let set_port = b.action("ingress.set_port", &[("port", PORT_BITS)]);
    let set_macs = b.action("egress.set_macs", &[("dmac", 48), ("smac", 48)]);
    let lpm = |b: &mut SchemaBuilder, name, field, width| {
        b.table(TableSpec {
            name,
            fields: vec![(field, width, Lpm)],
            actions: vec![(set_port, TableOnly), (no_action, TableAndDefault)],
            default_action: (no_action, vec![]),
            const_default: false,
            size: 4096,
            idle_timeout: false,
        })
    };
    let down_v4 = lpm(&mut b, "ingress.down_v4", "hdr.ipv4.dst_addr", 32);
    let down_v6 = lpm(&mut b, "ingress.down_v6", "hdr.ipv6.dst_addr", 128);
    let up = |b: &mut SchemaBuilder, name| {
        b.table(TableSpec {
            name,
            // IPv4 destinations as IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) [X].
            fields: vec![("meta.dst_addr", 128, Ternary)],
            actions: vec![(set_port, TableOnly), (no_action, TableAndDefault)],
            default_action: (no_action, vec![]),
            const_default: false,
            size: 256,
            idle_timeout: false,
        })
    };
    let queue_depth_up = up(&mut b, "ingress.queue_depth_up");
    let link_util_up = up(&mut b, "ingress.link_util_up");
    let ecmp_up = up(&mut b, "ingress.ecmp_up");
    b.action_profile(
        "ingress.up_selector",
        &[queue_depth_up, link_util_up, ecmp_up],
        true,
        1024,
        PORTS,
    );
    let port_mac = b.table(TableSpec {
        name: "egress.port_mac",
        fields: vec![("standard_metadata.egress_port", PORT_BITS, Exact)],
        actions: vec![(set_macs, TableOnly), (no_action, TableAndDefault)],
        default_action: (no_action, vec![]),
        const_default: false,
        size: PORTS,
        idle_timeout: false,
    });
    let link_util_rate = b.table(TableSpec {
        name: "egress.link_util_rate",
        fields: vec![("standard_metadata.egress_port", PORT_BITS, Exact)],
        actions: vec![(no_action, TableAndDefault)],
        default_action: (no_action, vec![]),
        const_default: false,
        size: PORTS,
        idle_timeout: false,
    });
    b.direct_meter(
        "egress.link_util_meter",
        MeterUnit::Bytes,
        MeterAlgorithm::TrTcm,
        link_util_rate,
    );
    let class_rate = b.meter(
        "ingress.class_rate",
        MeterUnit::Bytes,
        MeterAlgorithm::TrTcm,
        2 * PORTS,
    );
    // The link meter on offered load (`link_meter=offered`): every packet routed to a port,
    // before the traffic manager can drop or delay it.
    let offered_rate = b.meter(
        "ingress.offered_rate",
        MeterUnit::Bytes,
        MeterAlgorithm::TrTcm,
        PORTS,
    );
    let port_rx = b.counter("ingress.port_rx", CounterKind::Both, PORTS);
    let port_tx = b.counter("egress.port_tx", CounterKind::Both, PORTS);
    let feedback = b.counter("egress.feedback", CounterKind::Packets, PORTS);
    // The two kinds of Alg. 1 event apart (a report may carry both).
    let qdepth_events = b.counter("egress.qdepth_events", CounterKind::Packets, PORTS);
    let color_events = b.counter("egress.color_events", CounterKind::Packets, PORTS);
    let facks = b.counter("egress.facks", CounterKind::Packets, 2);
    let ids = Ids {
        set_port,
        set_macs,
        down_v4,
        down_v6,
        queue_depth_up,
        link_util_up,
        ecmp_up,
        port_mac,
        link_util_rate,
        class_rate,
        offered_rate,
        port_rx,
        port_tx,
        feedback,
        qdepth_events,
        color_events,
        facks,
        port_utilizations: b.register("ingress.port_utilizations", 2, PORTS),
        flowlet_time: b.register("ingress.flowlet_last_seen", 48, FLOWLET_CELLS),
        flowlet_port: b.register("ingress.flowlet_port", 10, FLOWLET_CELLS),
        flowlet_gap: b.register("ingress.flowlet_gap_ns", 48, 1),
        routing: b.register("ingress.routing", 2, 1),
        edge_port: b.register("ingress.edge_port", 1, PORTS),
        rc_seq: b.register("ingress.rc_seq", 32, FLOW_CELLS),
        rc_bytes: b.register("ingress.rc_bytes", 32, 1),
        last_ack: b.register("ingress.last_ack", 32, FLOW_CELLS),
        last_win: b.register("ingress.last_win", 17, FLOW_CELLS),
        last_tsval: b.register("ingress.last_tsval", 32, FLOW_CELLS),
        last_tsecr: b.register("ingress.last_tsecr", 32, FLOW_CELLS),
        old_depths: b.register("egress.old_queue_depths", 32, PORTS),
        old_colors: b.register("egress.old_packet_colors", 2, PORTS),
        yellow_seen: b.register("egress.yellow_seen_ns", 48, PORTS),
        red_seen: b.register("egress.red_seen_ns", 48, PORTS),
        color_hold: b.register("egress.color_hold_ns", 48, 1),
        meter_offered: b.register("ingress.meter_offered", 1, 1),
        delta: b.register("egress.qdepth_delta", 32, 1),
        rate_control: b.register("egress.rate_control", 1, 1),
        ecn_threshold: b.register("egress.ecn_threshold", 32, PORTS),
        util_consumed: b.consume_reason("p4te_util_feedback"),
        fack_unpatched: b.drop_reason("p4te_fack_without_ack"),
        not_ip: b.drop_reason("p4te_not_ip"),
    };
    b.controller_header("packet_in", &[("ingress_port", PORT_BITS), ("_pad", 7)]);
    b.controller_header("packet_out", &[("egress_port", PORT_BITS), ("_pad", 7)]);
    let schema = b.build().expect("the schema of p4te is consistent");
    (schema, ids)
}

/// A destination as the up tables key it: IPv6, or IPv4-mapped IPv6.
fn dst_key(p: &Parsed) -> u128 {
    if p.ipv4 {
        (0xffffu128 << 32) | p.dst
    } else {
        p.dst
    }
}

impl P4te {
    fn hash(&self, cx: &mut Ctx<'_>, bytes: &[u8]) -> u64 {
        self.hash.hash(bytes, cx.rng)
    }

    fn flow_cell(&self, cx: &mut Ctx<'_>, p: &Parsed, swap: bool) -> usize {
        let mut k = [0u8; 40];
        let n = p.flow_key(&mut k, swap);
        (self.hash(cx, &k[..n]) as usize) % FLOW_CELLS
    }

    /// A copy back from the recirculation port: consumed (utilisation), or made a FACK.
    /// Returns false when the packet is done.
    fn recirculated(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) -> bool {
        let ids = &self.ids;
        let kind = md.bridged[2];
        md.bridged[2] = 0;
        let ev = md.bridged[1];
        if kind == KIND_UTIL {
            let port = ((ev >> 40) & 0x1ff) as usize;
            let color = (ev >> 36) & 3;
            cx.register(ids.port_utilizations).write(port, color);
            cx.trace(|| format!("p4te portUtilizations[{port}] := {color}"));
            md.mark_to_drop(ids.util_consumed);
            return false;
        }
        if kind == KIND_FACK {
            let action = if (ev >> 52) & 3 == 2 {
                Action::Increase
            } else {
                Action::Decrease
            };
            let Ok(p) = parse::parse(pkt.data()) else {
                md.mark_to_drop(DropReason::Program);
                return false;
            };
            let Some(t) = p.tcp_data() else {
                md.mark_to_drop(DropReason::Program);
                return false;
            };
            let len = fack::build(pkt.data_mut(), &p, &t, action);
            pkt.truncate(len);
            cx.trace(|| format!("p4te fack built action={action:?} len={len}"));
        }
        true
    }

    /// How tagged flowlets are routed (`ingress.routing`).
    fn routing(&self, cx: &Ctx<'_>) -> Routing {
        Routing::from_bits(cx.register(self.ids.routing).read(0).unwrap_or(0))
    }

    /// Alg. 2's upward choice for a new flowlet.
    fn choose_up(&self, cx: &mut Ctx<'_>, p: &Parsed, hash: u64) -> Option<PortId> {
        let ids = &self.ids;
        let key = [dst_key(p)];
        let port_of = |cx: &mut Ctx<'_>, t: TableIx| {
            let r = cx.apply(t, &key, hash);
            (usize::from(r.action.action) == ids.set_port).then(|| r.action.arg(0) as PortId)
        };
        let green = |cx: &Ctx<'_>, port: PortId| {
            cx.register(ids.port_utilizations)
                .read(usize::from(port))
                .unwrap_or(0)
                == Color::Green as u64
        };
        // The ablations of Alg. 2 (`routing=` in the plan, [`Routing`]): one metric's groups
        // for every tagged flowlet, or none. Read for tagged packets only.
        let routing = p.class().map(|c| (c, self.routing(cx)));
        match routing {
            Some((_, Routing::Queue)) => port_of(cx, ids.queue_depth_up),
            Some((_, Routing::Color)) => port_of(cx, ids.link_util_up),
            Some((_, Routing::Static)) => port_of(cx, ids.ecmp_up),
            Some((class, Routing::Alg2)) => {
                let q = port_of(cx, ids.queue_depth_up);
                let u = port_of(cx, ids.link_util_up);
                let (first, second) = match class {
                    Class::Short => (q, u),
                    Class::Large => (u, q),
                };
                let pick = match first {
                    Some(f) if green(cx, f) => Some(f),
                    _ => second.or(first),
                };
                cx.trace(|| {
                    format!("p4te alg2 class={class:?} lowQueueDepthPort={q:?} lowUtilPort={u:?} -> {pick:?}")
                });
                pick
            }
            None => port_of(cx, ids.ecmp_up),
        }
    }

    /// Routes an IP packet (Alg. 2): the egress port, or None if nothing routes it.
    fn route(&self, cx: &mut Ctx<'_>, p: &Parsed, now: u64) -> Option<PortId> {
        let ids = &self.ids;
        let down = if p.ipv4 {
            cx.apply(ids.down_v4, &[p.dst], 0)
        } else {
            cx.apply(ids.down_v6, &[p.dst], 0)
        };
        if usize::from(down.action.action) == ids.set_port {
            return Some(down.action.arg(0) as PortId);
        }
        let mut k = [0u8; 40];
        let n = p.flowlet_key(&mut k);
        let hash = self.hash(cx, &k[..n]);
        let cell = (hash as usize) % FLOWLET_CELLS;
        let gap = cx.register(ids.flowlet_gap).read(0).unwrap_or(0);
        let last = cx.register(ids.flowlet_time).read(cell).unwrap_or(0);
        cx.register(ids.flowlet_time).write(cell, now);
        let used = cx.register(ids.flowlet_port).read(cell).unwrap_or(0);
        if used != 0 && now.saturating_sub(last) < gap {
            return Some((used - 1) as PortId);
        }
        let port = self.choose_up(cx, p, hash)?;
        cx.register(ids.flowlet_port)
            .write(cell, u64::from(port) + 1);
        Some(port)
    }

    /// At the switch next to the flow's sender, on a packet going down to it: patch a FACK, or
    /// remember a real ACK. Returns false if the packet is to be dropped.
    fn toward_sender(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, p: &Parsed) -> bool {
        let ids = &self.ids;
        let Some(t) = p.tcp else { return true };
        let cell = self.flow_cell(cx, p, true);
        if p.is_fack() {
            let win = cx.register(ids.last_win).read(cell).unwrap_or(0);
            if win & (1 << 16) == 0 {
                // No real ACK of this flow passed here yet: nothing to patch the FACK from.
                return false;
            }
            // The FACK carries the data's seq in its ack_no until now.
            cx.register(ids.rc_seq).write(cell, u64::from(t.ack));
            let tsval = cx.register(ids.last_tsval).read(cell).unwrap_or(0);
            let tsecr = cx.register(ids.last_tsecr).read(cell).unwrap_or(0);
            let last = LastAck {
                ack: cx.register(ids.last_ack).read(cell).unwrap_or(0) as u32,
                window: win as u16,
                ts: t.ts.map(|_| (tsval as u32, tsecr as u32)),
            };
            fack::patch(pkt.data_mut(), p, &last);
            cx.trace(|| format!("p4te fack patched cell={cell} {last:?}"));
        } else if t.flags & TCP_ACK != 0 {
            cx.register(ids.last_ack).write(cell, u64::from(t.ack));
            cx.register(ids.last_win)
                .write(cell, u64::from(t.window) | 1 << 16);
            if let Some((tsval, tsecr)) = t.ts {
                cx.register(ids.last_tsval).write(cell, u64::from(tsval));
                cx.register(ids.last_tsecr).write(cell, u64::from(tsecr));
            }
        }
        true
    }

    /// Alg. 1 on a packet leaving data port `port`: the events, and the port's colour now.
    fn monitor(&self, cx: &mut Ctx<'_>, md: &StdMeta, port: PortId) -> (Event, Event, Color) {
        let ids = &self.ids;
        let i = usize::from(port);
        let delta = cx.register(ids.delta).read(0).unwrap_or(0) as i64;
        let depth = i64::from(md.enq_qdepth);
        let mut q = Event::None;
        if delta > 0 {
            let last = cx.register(ids.old_depths).read(i).unwrap_or(0) as i64;
            if depth >= last + delta {
                q = Event::Increase;
            } else if depth <= last - delta {
                q = Event::Decrease;
            }
            if q != Event::None {
                cx.register(ids.old_depths).write(i, depth as u64);
            }
        }
        let r = cx.apply(ids.link_util_rate, &[u128::from(port)], 0);
        let Some(entry) = r.entry else {
            return (q, Event::None, Color::Green);
        };
        // The colour of offered load if ingress metered it, else of what the port sends.
        let metered = match (md.bridged[0] >> 2) & 3 {
            0 => cx.direct_meter(ids.link_util_rate, entry),
            c => Color::from_value(c - 1).unwrap_or(Color::Red),
        };
        let color = self.held(cx, i, metered, md.egress_global_timestamp);
        let last = cx.register(ids.old_colors).read(i).unwrap_or(0);
        cx.register(ids.old_colors).write(i, color as u64);
        let u = match (color as u64).cmp(&last) {
            std::cmp::Ordering::Greater => Event::Increase,
            std::cmp::Ordering::Less => Event::Decrease,
            std::cmp::Ordering::Equal => Event::None,
        };
        (q, u, color)
    }

    /// The link colour of port `i` at `now` from the meter's colour of this packet: with a hold
    /// time H (`egress.color_hold_ns`, A-P4TE-23), the worst colour the meter gave any packet of
    /// the port in the last H; with H = 0, this packet's colour (Alg. 1 as written). A trTCM
    /// colours only the excess over CIR, so a port a little above CIR would otherwise flicker
    /// between GREEN and YELLOW packet by packet (docs/p4te.md, Findings). One timestamp
    /// register per colour, each read and written once per packet.
    fn held(&self, cx: &mut Ctx<'_>, i: usize, metered: Color, now: u64) -> Color {
        let ids = &self.ids;
        let hold = cx.register(ids.color_hold).read(0).unwrap_or(0);
        if hold == 0 {
            return metered;
        }
        // 0 = never seen; a timestamp of 0 itself is taken as never (the clock starts later).
        let seen = |reg: RegisterIx, at: Color| {
            let r = cx.register(reg);
            if metered >= at {
                r.write(i, now);
                true
            } else {
                let t = r.read(i).unwrap_or(0);
                t != 0 && now.saturating_sub(t) < hold
            }
        };
        // Both registers see every packet: a RED packet is over CIR too.
        let (red, yellow) = (
            seen(ids.red_seen, Color::Red),
            seen(ids.yellow_seen, Color::Yellow),
        );
        if red {
            Color::Red
        } else if yellow {
            Color::Yellow
        } else {
            Color::Green
        }
    }

    /// The CPU port's copy: a feedback frame, or a punted packet; either gets `packet_in`.
    fn to_cpu(&self, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        if md.instance_type == InstanceType::EgressClone && md.egress_rid == RID_FEEDBACK {
            let ev = md.bridged[1];
            let fb = Feedback {
                qd_event: Event::from_bits(ev >> 32),
                util_event: Event::from_bits(ev >> 34),
                color: Color::from_value((ev >> 36) & 3).unwrap_or(Color::Red),
                port: ((ev >> 40) & 0x1ff) as PortId,
                depth: ev as u32,
            };
            if pkt.len() < 14 + SHIM_LEN {
                md.mark_to_drop(DropReason::Program);
                return;
            }
            pkt.truncate(14 + SHIM_LEN);
            let d = pkt.data_mut();
            d[12..14].copy_from_slice(&FEEDBACK_ETHERTYPE.to_be_bytes());
            d[14..14 + SHIM_LEN].copy_from_slice(&fb.encode());
        }
        pipeline::program::push_packet_in(pkt, md);
    }
}

impl Program for P4te {
    fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    fn layout(&self) -> Option<pipeline::resources::Layout> {
        Some(layout::layout())
    }

    fn ingress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        let ids = &self.ids;
        let now = md.ingress_global_timestamp;
        cx.count(ids.port_rx, usize::from(md.ingress_port));
        if md.ingress_port == cx.cpu_port {
            pipeline::program::packet_out(cx, pkt, md);
            return;
        }
        let recirculated = md.instance_type == InstanceType::Recirculated;
        if recirculated && !self.recirculated(cx, pkt, md) {
            return;
        }
        let mut p = match parse::parse(pkt.data()) {
            Ok(p) => p,
            Err((header, e)) => {
                md.mark_to_drop(DropReason::Malformed(header, e));
                return;
            }
        };
        if p.arp || p.ndp {
            md.egress_spec = Some(cx.cpu_port);
            return;
        }
        if !(p.ipv4 || p.ipv6) {
            md.mark_to_drop(ids.not_ip);
            return;
        }
        let from_host = !recirculated
            && cx
                .register(ids.edge_port)
                .read(usize::from(md.ingress_port))
                .unwrap_or(0)
                != 0;
        if from_host && p.tos & P4TE_BITS != 0 {
            p.tos &= !P4TE_BITS;
            parse::set_tos(pkt.data_mut(), &p, p.tos);
        }
        let class = p.class();
        // T1: the class's arrival rate on this port against its safe rate.
        let incoming = match class {
            Some(c) => {
                let cell = c.index() * PORTS + usize::from(md.ingress_port);
                match cx.meter(ids.class_rate, cell) {
                    Color::Green => Color::Green,
                    _ => Color::Yellow,
                }
            }
            None => Color::Green,
        };
        md.bridged[0] = incoming as u64;
        // Anti-repeat: the next B bytes after a rate change are left alone.
        if from_host
            && class.is_some()
            && cx.register(ids.rate_control).read(0).unwrap_or(0) != 0
            && let Some(t) = p.tcp_data()
        {
            let cell = self.flow_cell(cx, &p, false);
            let b = cx.register(ids.rc_bytes).read(0).unwrap_or(0);
            let since = cx.register(ids.rc_seq).read(cell).unwrap_or(0) as u32;
            if u64::from(t.seq.wrapping_sub(since)) < b {
                p.tos |= FLAG_A;
                parse::set_tos(pkt.data_mut(), &p, p.tos);
            }
        }
        if p.ttl <= 1 {
            md.mark_to_drop(DropReason::TtlExpired);
            return;
        }
        let Some(port) = self.route(cx, &p, now) else {
            md.mark_to_drop(DropReason::TableMiss(ids.ecmp_up.index() as u16));
            return;
        };
        let to_host = cx
            .register(ids.edge_port)
            .read(usize::from(port))
            .unwrap_or(0)
            != 0;
        if to_host {
            if !self.toward_sender(cx, pkt, &p) {
                md.mark_to_drop(ids.fack_unpatched);
                return;
            }
            if p.is_fack() {
                // Patched: the marks are gone.
                p.tos = 0;
            }
        }
        parse::decrement_ttl(pkt.data_mut(), &p);
        md.egress_spec = Some(port);
        // The link colour of offered load, bridged to egress as colour + 1 in bits 2-3.
        if cx.register(ids.meter_offered).read(0).unwrap_or(0) != 0 {
            let c = cx.meter(ids.offered_rate, usize::from(port));
            md.bridged[0] |= (c as u64 + 1) << 2;
        }
    }

    fn egress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        let ids = &self.ids;
        let port = md.egress_port;
        if port == cx.cpu_port {
            self.to_cpu(pkt, md);
            return;
        }
        if md.instance_type == InstanceType::EgressClone {
            // A copy on its way to the recirculation port: say what it is.
            md.bridged[2] = match md.egress_rid {
                RID_UTIL => KIND_UTIL,
                RID_FACK => KIND_FACK,
                _ => 0,
            };
            return;
        }
        let r = cx.apply(ids.port_mac, &[u128::from(port)], 0);
        if usize::from(r.action.action) == ids.set_macs {
            let d = pkt.data_mut();
            d[0..6].copy_from_slice(&r.action.arg(0).to_be_bytes()[10..]);
            d[6..12].copy_from_slice(&r.action.arg(1).to_be_bytes()[10..]);
        }
        cx.packet_len = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
        cx.count(ids.port_tx, usize::from(port));
        let (q, u, color) = self.monitor(cx, md, port);
        // Not P4TE's: optional DCTCP-style marking (as `ecmp`'s), off unless the plan sets K.
        let k = cx
            .register(ids.ecn_threshold)
            .read(usize::from(port))
            .unwrap_or(0);
        if k != 0 && u64::from(md.enq_qdepth) > k {
            pipeline::ecn::mark_ce(pkt.data_mut());
        }
        let mut mask = 0u32;
        if q != Event::None || u != Event::None {
            mask |= 1;
            cx.count(ids.feedback, usize::from(port));
        }
        if q != Event::None {
            cx.count(ids.qdepth_events, usize::from(port));
        }
        if u != Event::None {
            mask |= 2;
            cx.count(ids.color_events, usize::from(port));
        }
        let mut act = 0u64;
        let to_host = cx
            .register(ids.edge_port)
            .read(usize::from(port))
            .unwrap_or(0)
            != 0;
        if let Ok(mut p) = parse::parse(pkt.data())
            && p.class().is_some()
        {
            if cx.register(ids.rate_control).read(0).unwrap_or(0) != 0
                && p.tos & (FLAG_A | FLAG_B) == 0
                && p.tcp_data().is_some()
            {
                let incoming = Color::from_value(md.bridged[0] & 3).unwrap_or(Color::Green);
                if let Some(a) = rate_decision(incoming, color) {
                    p.tos |= FLAG_B;
                    parse::set_tos(pkt.data_mut(), &p, p.tos);
                    mask |= 4;
                    act = if a == Action::Increase { 2 } else { 1 };
                    cx.count(ids.facks, (act - 1) as usize);
                    cx.trace(|| {
                        format!("p4te rate control {a:?} incoming={incoming:?} link={color:?}")
                    });
                }
            }
            // The last hop: the host gets its packet without P4TE's flags. (Clearing them any
            // earlier, in ingress, would let this very egress take a flagged packet for a
            // candidate.)
            if to_host && p.tos & (FLAG_A | FLAG_B) != 0 {
                p.tos &= !(FLAG_A | FLAG_B);
                parse::set_tos(pkt.data_mut(), &p, p.tos);
            }
        }
        if mask != 0 {
            md.bridged[1] = pack_events(md.enq_qdepth, q, u, color, port, act);
            md.clone_session = Some(SESSION_BASE + mask);
            cx.trace(|| {
                format!("p4te alg1 port={port} qd={q:?} util={u:?} color={color:?} mask={mask}")
            });
        }
    }
}

/// The checked-in P4Info of `p4te`, for controllers.
pub const P4INFO: &str = include_str!("../../p4info/p4te.txt");
