//! `p4qcn`: P4QCN's congestion point (P4QCN §3.1.1) on `basic`'s routing, with PFC from the
//! traffic manager. docs/p4qcn.md records the choices, and its "Open questions" the A-QCN ids
//! cited here.
//!
//! **Congestion point (egress).** `egress.qcn_cp` (exact on the egress port) picks what a port
//! does; a miss does nothing, so every mechanism is switched per port by a table entry:
//! - `qcn_fbp(q_min, q_max, pace_us)`, two-point P4QCN: an IPv4 UDP packet that joined a queue of
//!   `enq_qdepth` packets is chosen with Eq. 1's probability ([`hosts::qcn::feedback_probability`]);
//!   if its flow (addresses and UDP ports: a reaction point is a socket) has had no feedback
//!   packet (FBP) for `pace_us`
//!   (`egress.qcn_next_fbp[hash % 4096]` holds when the next may go; N µs, which the paper leaves
//!   open, A-QCN-4: by default the fabric's base round trip), the packet
//!   is cloned egress-to-egress to [`SESSION`], whose replica goes to the recirculation port and
//!   so back to ingress: v1model's egress-to-ingress clone. Packets already CE are not chosen
//!   (an FBP, or a packet a three-point CP marked, A-QCN-5).
//! - `qcn_mark(q_min, q_max)`, the three-point baseline's CP: the chosen packet is marked CE
//!   (if ECN-capable) and forwarded; the receiver (the NP, `pisa-host sink --np`) answers.
//!
//! **Feedback packet (ingress, on the recirculated clone).** The clone becomes the FBP in place:
//! MACs, IPv4 addresses and UDP ports swapped, ECN = 11, TTL 64, the UDP payload cut to
//! [`FBP_PAYLOAD`] bytes with the UDP length and both checksums fixed, so the source's kernel
//! delivers it to the sending socket. It is then routed like any packet, to the old source.
//! `egress.qcn_fbps[port]` counts the FBPs a port's congestion caused, `egress.qcn_marks[port]`
//! the three-point marks.
//!
//! **PFC** is the traffic manager's: each port's threshold in packets (`set_pfc_xoff`), counted
//! per ingress port across the shared queues, with XON under it; a port with a threshold obeys
//! PFC too.
//!
//! **Fabric plan**: `basic`'s routes, the clone session, and per switch port a `qcn_cp` entry and
//! a PFC threshold as `cp=` and `pfc=` say, which the schemes preset: `p4qcn` (two-point),
//! `p4qcn-pfc` (two-point and PFC), `p4qcn-3pt` (three-point), `pfc` (PFC alone), `p4qcn-off`
//! (neither: plain forwarding). The
//! thresholds follow §3.2.2 from each switch's buffer and links ([`thresholds`]), and the FBP
//! pacing's N is the fabric's base round trip ([`base_rtt_us`]), unless the switch's line gives
//! `q_min=`, `q_max=`, `q_pfc=` (packets) or `pace_us=`.

use std::collections::BTreeMap;

use super::hook::{Base, ComposeError, Mechanism, Next};
use crate::PlanError;
use crate::plan_error::{bad_value, number};
use pipeline::metadata::{DropReason, InstanceType, PORT_BITS, StdMeta};
use pipeline::program::Ctx;
use pipeline::schema::{ActionScope, CounterIx, RegisterIx, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::MatchKind;
use pipeline::wire::{EtherType, EthernetFrame, IpProtocol, Ipv4Packet, UdpPacket, VlanTag};
use topo::plan::{SwitchPlan, routed};
use topo::{LinkProps, Switch, Topology};

/// The clone session of feedback packets (its replica names the recirculation port).
pub const SESSION: u32 = 90;
/// Marks a clone, in `bridged[0]`, as a feedback packet to build.
const KIND_FBP: u64 = 0x5143_4e46; // "QCNF"
/// Cells of the FBP pacing register.
pub const PACE_CELLS: usize = 4096;
/// UDP payload bytes an FBP keeps (the data packet's first bytes: enough for a sender's header).
pub const FBP_PAYLOAD: usize = 32;
/// The replication id of the FBP replica.
const RID_FBP: u16 = 1;

/// P4QCN's congestion point on `basic`: feedback packets built from recirculated clones before
/// the parser, the congestion point in egress.
#[derive(Clone, Copy, Debug)]
pub struct P4qcn(QcnIds);

impl Mechanism for P4qcn {
    fn declare(b: &mut SchemaBuilder, base: &Base) -> Result<Self, ComposeError> {
        Ok(P4qcn(declare(b, base.no_action)))
    }

    #[inline]
    fn before_parse(
        &self,
        cx: &mut Ctx<'_>,
        pkt: &mut pipeline::frame::Frame<'_>,
        md: &mut StdMeta,
    ) -> Next {
        if is_fbp_clone(md) && !feedback(cx, &self.0, pkt, md) {
            return Next::Done;
        }
        Next::Continue
    }

    #[inline]
    fn egress(&self, cx: &mut Ctx<'_>, pkt: &mut pipeline::frame::Frame<'_>, md: &mut StdMeta) {
        egress(cx, &self.0, pkt, md);
    }
}

/// The schema objects P4QCN adds to `basic`.
#[derive(Clone, Copy, Debug)]
struct QcnIds {
    fbp: usize,
    mark: usize,
    cp: TableIx,
    next_fbp: RegisterIx,
    fbps: CounterIx,
    marks: CounterIx,
    bad_fbp: DropReason,
}

/// Declares the congestion point's table, registers, counters and drop reason.
fn declare(b: &mut SchemaBuilder, no_action: usize) -> QcnIds {
    let fbp = b.action(
        "egress.qcn_fbp",
        &[("q_min", 16), ("q_max", 16), ("pace_us", 32)],
    );
    let mark = b.action("egress.qcn_mark", &[("q_min", 16), ("q_max", 16)]);
    let cp = b.table(TableSpec {
        name: "egress.qcn_cp",
        fields: vec![("standard_metadata.egress_port", PORT_BITS, MatchKind::Exact)],
        actions: vec![
            (fbp, ActionScope::TableOnly),
            (mark, ActionScope::TableOnly),
            (no_action, ActionScope::TableAndDefault),
        ],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 1 << PORT_BITS,
        idle_timeout: false,
    });
    use pipeline::externs::CounterKind::Packets;
    QcnIds {
        fbp,
        mark,
        cp,
        next_fbp: b.register("egress.qcn_next_fbp", 48, PACE_CELLS),
        fbps: b.counter("egress.qcn_fbps", Packets, 1 << PORT_BITS),
        marks: b.counter("egress.qcn_marks", Packets, 1 << PORT_BITS),
        bad_fbp: b.drop_reason("qcn_bad_fbp"),
    }
}

/// The IPv4 header's offset, if `frame` is Ethernet (one optional VLAN tag) and IPv4.
pub(crate) fn ipv4_at(frame: &[u8]) -> Option<usize> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let mut l3 = eth.header_len();
    let mut ethertype = eth.ethertype();
    if ethertype == EtherType::VLAN {
        let tag = VlanTag::new_checked(frame.get(l3..)?).ok()?;
        ethertype = tag.ethertype();
        l3 += tag.header_len();
    }
    (ethertype == EtherType::IPV4).then_some(l3)
}

/// The congestion point, on a packet leaving by `md.egress_port`.
fn egress(cx: &mut Ctx<'_>, q: &QcnIds, pkt: &mut pipeline::frame::Frame<'_>, md: &mut StdMeta) {
    if md.instance_type != InstanceType::Normal {
        return;
    }
    let port = md.egress_port;
    let r = cx.apply(q.cp, &[u128::from(port)], 0);
    let a = usize::from(r.action.action);
    if a != q.fbp && a != q.mark {
        return;
    }
    let (q_min, q_max) = (r.action.arg(0) as u32, r.action.arg(1) as u32);
    let p = hosts::qcn::feedback_probability(md.enq_qdepth, q_min, q_max);
    if p == 0 || (p < 1 << 16 && cx.rng.range(0, 0xffff) >= u64::from(p)) {
        return;
    }
    let d = pkt.data();
    let Some(l3) = ipv4_at(d) else { return };
    let Ok(ip) = Ipv4Packet::new_checked(&d[l3..]) else {
        return;
    };
    if ip.ecn() == 3 {
        return;
    }
    if a == q.mark {
        if pipeline::ecn::mark_ce(pkt.data_mut()) {
            cx.count(q.marks, usize::from(port));
            cx.trace(|| format!("qcn mark enq_qdepth={}", md.enq_qdepth));
        }
        return;
    }
    if ip.protocol() != IpProtocol::UDP || ip.is_fragment() {
        return;
    }
    // The flow as its reaction point is one: a socket, so addresses and UDP ports (keyed by
    // the address pair alone, two flows between the same hosts shared one pacing slot).
    let Ok(udp) = UdpPacket::new_checked(ip.payload()) else {
        return;
    };
    let pair = (u64::from(ip.src_addr().to_bits()) << 32) | u64::from(ip.dst_addr().to_bits());
    let ports = (u64::from(udp.src_port()) << 16) | u64::from(udp.dst_port());
    let flow = pair ^ ports.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    let cell = (flow.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize % PACE_CELLS;
    // At most one FBP every N us per flow: the cell holds when the next may go.
    let now = md.egress_global_timestamp;
    if now < cx.register(q.next_fbp).read(cell).unwrap_or(0) {
        return;
    }
    let pace_ns = (r.action.arg(2) as u64).saturating_mul(1000);
    cx.register(q.next_fbp)
        .write(cell, now.saturating_add(pace_ns));
    md.clone_session = Some(SESSION);
    md.bridged[0] = KIND_FBP;
    cx.count(q.fbps, usize::from(port));
    cx.trace(|| format!("qcn fbp enq_qdepth={} cell={cell}", md.enq_qdepth));
}

/// Whether this recirculated packet is a clone to turn into a feedback packet.
fn is_fbp_clone(md: &StdMeta) -> bool {
    md.instance_type == InstanceType::Recirculated && md.bridged[0] == KIND_FBP
}

/// Turns the recirculated clone into the feedback packet, in place. Returns false (dropped) if it
/// is not an IPv4 UDP packet after all.
fn feedback(
    cx: &mut Ctx<'_>,
    q: &QcnIds,
    pkt: &mut pipeline::frame::Frame<'_>,
    md: &mut StdMeta,
) -> bool {
    md.bridged[0] = 0;
    match build_fbp(pkt.data_mut()) {
        Some(len) => {
            pkt.truncate(len);
            cx.trace(|| format!("qcn fbp built len={len}"));
            true
        }
        None => {
            md.mark_to_drop(q.bad_fbp);
            false
        }
    }
}

/// Rewrites an IPv4 UDP frame into its feedback packet; returns the new frame length.
fn build_fbp(d: &mut [u8]) -> Option<usize> {
    let l3 = ipv4_at(d)?;
    let (src_mac, dst_mac) = (
        <[u8; 6]>::try_from(&d[6..12]).ok()?,
        <[u8; 6]>::try_from(&d[0..6]).ok()?,
    );
    d[0..6].copy_from_slice(&src_mac);
    d[6..12].copy_from_slice(&dst_mac);
    let mut ip = Ipv4Packet::new_checked(&mut d[l3..]).ok()?;
    if ip.protocol() != IpProtocol::UDP || ip.is_fragment() {
        return None;
    }
    let hl = ip.header_len();
    let udp_len = usize::from(ip.total_len()) - hl;
    if udp_len < 8 {
        return None;
    }
    let keep = (udp_len - 8).min(FBP_PAYLOAD);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_ecn(3);
    ip.set_ttl(64);
    ip.set_total_len((hl + 8 + keep) as u16);
    ip.fill_checksum();
    let mut udp = UdpPacket::new_unchecked(&mut ip.payload_mut()[..8 + keep]);
    let (sport, dport) = (udp.src_port(), udp.dst_port());
    udp.set_src_port(dport);
    udp.set_dst_port(sport);
    udp.set_len((8 + keep) as u16);
    udp.fill_checksum(dst, src);
    Some(l3 + hl + 8 + keep)
}

/// What a scheme turns on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cp {
    Off,
    TwoPoint,
    ThreePoint,
}

/// P4QCN's thresholds for one switch, packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// Eq. 1's lower bound.
    pub q_min: u32,
    /// Eq. 1's upper bound.
    pub q_max: u32,
    /// PFC's per-ingress-port threshold.
    pub q_pfc: u32,
}

/// §3.2.2's thresholds for a switch whose `n` ports have `buffer` packets of queue in all and
/// whose largest bandwidth-delay product is `q_flight` packets: Q_PFC = (Q − 8n·Q_flight)/(8n),
/// Q_P4QCN = Q_PFC − Q_flight (used for Q_min and Q_max alike, as the paper's experiments do),
/// each at least 1 (the formula goes to 0 or below when the buffer is small for the BDP).
pub fn thresholds(buffer: u64, n: u64, q_flight: u64) -> Thresholds {
    let eight_n = 8 * n.max(1);
    let q_pfc = buffer.saturating_sub(eight_n * q_flight) / eight_n;
    let q_pfc = u32::try_from(q_pfc).unwrap_or(u32::MAX).max(1);
    let q = q_pfc
        .saturating_sub(u32::try_from(q_flight).unwrap_or(u32::MAX))
        .max(1);
    Thresholds {
        q_min: q,
        q_max: q,
        q_pfc,
    }
}

/// A link's bandwidth-delay product in 1500-byte packets (round trip, at least 1).
fn bdp_packets(l: &LinkProps) -> u64 {
    let rtt_us = 2 * l.delay_us;
    let bits = u128::from(l.rate_bps) * u128::from(rtt_us) / 1_000_000;
    u64::try_from(bits / (1500 * 8)).unwrap_or(u64::MAX).max(1)
}

/// The fabric's longest base round trip between hosts, us: a full frame out and a minimum-size
/// frame (a feedback packet, an ACK) back over every link of the longest path, each way with the
/// link's delay, at the slowest rate and the longest delay (store and forward at every hop).
pub fn base_rtt_us(t: &Topology) -> u64 {
    let links = topo::plan::host_path_switches(t) as u64 + 1;
    let slowest = t
        .links
        .iter()
        .map(|l| l.props.rate_bps.max(1))
        .min()
        .unwrap_or(1);
    let longest = t.links.iter().map(|l| l.props.delay_us).max().unwrap_or(0);
    let frames_us = (1514 + 64) * 8 * 1_000_000 / slowest;
    links * (2 * longest + frames_us)
}

/// The congestion point of switch `s`: `cp=` on its line (`two-point`, `three-point` or `off`;
/// the registry's presets set it), default two-point.
fn cp_of(s: &Switch) -> Result<Cp, PlanError> {
    match s.params.get("cp").map(String::as_str) {
        None | Some("two-point") => Ok(Cp::TwoPoint),
        Some("three-point") => Ok(Cp::ThreePoint),
        Some("off") => Ok(Cp::Off),
        Some(v) => Err(bad_value(s, "cp", v, "two-point, three-point or off")),
    }
}

/// The fabric plan of `p4qcn`: the congestion point from `cp=` (default two-point), PFC from
/// `pfc=` (default off). The registry's presets `p4qcn-pfc`, `p4qcn-3pt`, `pfc` and `p4qcn-off`
/// set both.
pub fn plan(t: &Topology, only: &[&Switch]) -> Result<BTreeMap<String, SwitchPlan>, PlanError> {
    let mut plans = routed(t, only);
    let ports = t.ports();
    let recirc = pipeline::runtime::Config::default().recirc_port;
    let rtt_us = base_rtt_us(t);
    for s in only {
        let Some(plan) = plans.get_mut(&s.name) else {
            continue;
        };
        let mine = ports.get(s.name.as_str()).cloned().unwrap_or_default();
        let buffer: u64 = mine.values().map(|(_, l)| u64::from(l.buffer)).sum();
        let q_flight = mine
            .values()
            .map(|(_, l)| bdp_packets(l))
            .max()
            .unwrap_or(1);
        let mut th = thresholds(buffer, mine.len() as u64, q_flight);
        if let Some(v) = number(s, "q_min")? {
            th.q_min = v;
            th.q_max = th.q_max.max(v);
        }
        if let Some(v) = number(s, "q_max")? {
            th.q_max = v;
        }
        if let Some(v) = number(s, "q_pfc")? {
            th.q_pfc = v;
        }
        if th.q_min > th.q_max {
            return Err(PlanError::Exceeds {
                switch: s.name.clone(),
                key: "q_min".into(),
                value: th.q_min.into(),
                limit_key: "q_max".into(),
                limit: th.q_max.into(),
            });
        }
        // PFC's resume threshold (packets; default 3/4 of q_pfc, see the traffic manager).
        let q_pfc_xon: Option<u32> = number(s, "q_pfc_xon")?;
        if let Some(v) = q_pfc_xon
            && (v == 0 || u64::from(v) > u64::from(th.q_pfc))
        {
            return Err(bad_value(
                s,
                "q_pfc_xon",
                &v.to_string(),
                "1 to q_pfc packets",
            ));
        }
        let pace_us: Option<u64> = number(s, "pace_us")?;
        let cp = cp_of(s)?;
        let pfc = match s.params.get("pfc").map(String::as_str) {
            None | Some("off") => false,
            Some("on") => true,
            Some(v) => return Err(bad_value(s, "pfc", v, "on or off")),
        };
        plan.routes.push(format!(
            "mirroring_add_replicas {SESSION} {recirc}:{RID_FBP}"
        ));
        let pace_us = pace_us.unwrap_or(rtt_us);
        for port in mine.keys() {
            match cp {
                Cp::TwoPoint => plan.routes.push(format!(
                    "table_add qcn_cp qcn_fbp {port} => {} {} {pace_us}",
                    th.q_min, th.q_max
                )),
                Cp::ThreePoint => plan.routes.push(format!(
                    "table_add qcn_cp qcn_mark {port} => {} {}",
                    th.q_min, th.q_max
                )),
                Cp::Off => {}
            }
            if pfc {
                plan.tm.push(format!("set_pfc_xoff {} {port}", th.q_pfc));
                if let Some(v) = q_pfc_xon {
                    plan.tm.push(format!("set_pfc_xon {v} {port}"));
                }
            }
        }
    }
    Ok(plans)
}
