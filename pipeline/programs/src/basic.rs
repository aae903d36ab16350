//! `basic`: L2 switching, IPv4/IPv6 LPM routing with ECMP, a ternary ACL, and punting to the CPU.
//!
//! Ingress, in order:
//! 1. count the frame in `ingress.port_rx[ingress_port]`;
//! 2. a frame from the CPU port carries a `packet_out` header (egress_port: 9 bits, 7 pad bits):
//!    strip it and send the frame to that port, skipping every table;
//! 3. parse Ethernet (one optional 802.1Q tag), ARP, IPv4, IPv6, TCP, UDP, ICMPv6; a malformed
//!    header drops the frame with that header and reason;
//! 4. police the ingress port with `ingress.port_meter` (red drops; unconfigured = green);
//! 5. ARP and NDP (ICMPv6 types 133-137) go to the CPU;
//! 6. `ingress.l2_exact` on the destination MAC: forward, multicast, or drop; a frame switched at L2
//!    looks its source MAC up in `ingress.smac` and, on a miss, sends a `mac_learn` digest;
//! 7. otherwise IPv4 or IPv6 is routed: TTL/hop limit <= 1 drops (TTL expired);
//!    `ingress.ipv4_lpm` / `ingress.ipv6_lpm` pick a member of `ingress.ecmp_selector` (a group is
//!    resolved by the CRC-32 of the 5-tuple); `set_nhop` rewrites both MACs, decrements the
//!    TTL/hop limit (IPv4 checksum updated incrementally, RFC 1624) and picks the port; the last
//!    routed time of the flow is stored in `ingress.flow_last_seen[hash % 4096]`;
//! 8. `ingress.acl` (ternary, with priorities, direct counter and direct meter) may permit, drop,
//!    punt to the CPU or clone to a session.
//!
//! Egress counts the frame in `egress.port_tx[egress_port]` and, for the CPU port, pushes the
//! `packet_in` header (ingress_port: 9 bits, 7 pad bits).
//!
//! The ACL's IPv4 address fields read 0 for non-IPv4 packets; its L4 ports read 0 for packets that
//! are neither TCP nor UDP, and for IPv4 fragments after the first.
//!
//! **Options** ([`Options`]): flowlet switching (a flow's ECMP choice is re-hashed when it pauses
//! longer than `ingress.flowlet_gap_ns[0]`) and DCTCP-style ECN marking in egress (CE on ECT
//! packets when `enq_qdepth` exceeds `egress.ecn_threshold[egress_port]`).
//!
//! **Mechanisms**: `Basic<M>` runs the hooks of one [`Mechanism`] `M` at fixed points of the
//! stages above (before and after the parser, before and after the route, in egress); see
//! [`super::hook`]. `Basic<()>` is `basic`.

use std::sync::Arc;

use crate::hook::{Base, ComposeError, FlowletRegisters, Mechanism, Next, Steer};
use pipeline::externs::{Color, CounterKind, HashAlgorithm, HashFn, MeterAlgorithm, MeterUnit};
use pipeline::frame::Frame;
use pipeline::metadata::{DropReason, HeaderKind, PORT_BITS, PortId, StdMeta};
use pipeline::program::{Ctx, Program};
use pipeline::schema::{
    ActionScope, CounterIx, DigestIx, MeterIx, RegisterIx, Schema, SchemaBuilder, TableIx,
    TableSpec,
};
use pipeline::table::MatchKind;
use pipeline::wire::{
    self, EtherType, EthernetFrame, Icmpv6Packet, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket,
    UdpPacket, VlanTag,
};

/// Indices of the schema objects the per-packet code uses.
#[derive(Clone, Copy, Debug)]
struct Ids {
    no_action: usize,
    drop: usize,
    l2_forward: usize,
    l2_multicast: usize,
    set_nhop: usize,
    punt: usize,
    clone_to_session: usize,
    l2_exact: TableIx,
    smac: TableIx,
    ipv4_lpm: TableIx,
    ipv6_lpm: TableIx,
    acl: TableIx,
    port_rx: CounterIx,
    port_tx: CounterIx,
    port_meter: MeterIx,
    flow_last_seen: RegisterIx,
    mac_learn: DigestIx,
    /// Flowlet switching, when on.
    flowlets: Option<FlowletRegisters>,
    /// ECN marking in egress, when on: K per egress port.
    ecn_threshold: Option<RegisterIx>,
}

/// `basic`'s options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Flowlet switching: a flow's ECMP choice is re-hashed when it pauses longer than the gap.
    pub flowlets: bool,
    /// ECN marking in egress: CE on ECT packets when `enq_qdepth` exceeds the port's K.
    pub ecn: bool,
}

/// Cells of the flow register.
const FLOW_CELLS: usize = 4096;

/// Cells of the flowlet registers (the flow hash picks one).
pub const FLOWLET_CELLS: usize = 8192;

/// The `basic` program, with the mechanism `M` at its hooks.
#[derive(Debug)]
pub struct Basic<M: Mechanism = ()> {
    schema: Arc<Schema>,
    ids: Ids,
    ecmp_hash: HashFn,
    mechanism: M,
}

impl Default for Basic {
    fn default() -> Self {
        Self::new()
    }
}

impl Basic {
    /// The program with its schema.
    pub fn new() -> Self {
        Self::compose("basic", "0.1.0", Options::default())
            .expect("basic alone composes: it declares each of its objects once")
    }
}

impl<M: Mechanism> Basic<M> {
    /// The program named `name` (its P4Info name and version): `basic` with `options` and the
    /// mechanism `M`; fails if `M` needs an option that is off, or its schema clashes.
    pub fn compose(
        name: &'static str,
        version: &'static str,
        options: Options,
    ) -> Result<Self, ComposeError> {
        let (schema, ids, mechanism) = schema::<M>(name, version, options)?;
        Ok(Basic {
            schema: Arc::new(schema),
            ids,
            ecmp_hash: HashFn::new(HashAlgorithm::Crc32, 0),
            mechanism,
        })
    }

    /// The mechanism at the hooks.
    pub fn mechanism(&self) -> &M {
        &self.mechanism
    }
}

fn schema<M: Mechanism>(
    name: &'static str,
    version: &'static str,
    options: Options,
) -> Result<(Schema, Ids, M), ComposeError> {
    use ActionScope::*;
    use MatchKind::*;
    let mut b = SchemaBuilder::new(name, version);
    let no_action = b.action("NoAction", &[]);
    let drop = b.action("ingress.drop", &[]);
    let l2_forward = b.action("ingress.l2_forward", &[("port", PORT_BITS)]);
    let l2_multicast = b.action("ingress.l2_multicast", &[("group", 16)]);
    let set_nhop = b.action(
        "ingress.set_nhop",
        &[("dmac", 48), ("smac", 48), ("port", PORT_BITS)],
    );
    let punt = b.action("ingress.punt_to_cpu", &[]);
    let clone_to_session = b.action("ingress.clone_to_session", &[("session_id", 10)]);
    let learn = b.action("ingress.learn", &[]);
    let l2_exact = b.table(TableSpec {
        name: "ingress.l2_exact",
        fields: vec![("hdr.ethernet.dst_addr", 48, Exact)],
        actions: vec![
            (l2_forward, TableAndDefault),
            (l2_multicast, TableAndDefault),
            (drop, TableAndDefault),
            (no_action, TableAndDefault),
        ],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 4096,
        idle_timeout: false,
    });
    let smac = b.table(TableSpec {
        name: "ingress.smac",
        fields: vec![("hdr.ethernet.src_addr", 48, Exact)],
        actions: vec![(no_action, TableOnly), (learn, DefaultOnly)],
        default_action: (learn, vec![]),
        const_default: true,
        size: 4096,
        idle_timeout: true,
    });
    let route_actions = vec![
        (set_nhop, TableOnly),
        (punt, TableAndDefault),
        (drop, TableAndDefault),
        (no_action, DefaultOnly),
    ];
    let ipv4_lpm = b.table(TableSpec {
        name: "ingress.ipv4_lpm",
        fields: vec![("hdr.ipv4.dst_addr", 32, Lpm)],
        actions: route_actions.clone(),
        default_action: (drop, vec![]),
        const_default: false,
        size: 131_072,
        idle_timeout: false,
    });
    let ipv6_lpm = b.table(TableSpec {
        name: "ingress.ipv6_lpm",
        fields: vec![("hdr.ipv6.dst_addr", 128, Lpm)],
        actions: route_actions,
        default_action: (drop, vec![]),
        const_default: false,
        size: 16_384,
        idle_timeout: false,
    });
    b.action_profile(
        "ingress.ecmp_selector",
        &[ipv4_lpm, ipv6_lpm],
        true,
        4096,
        128,
    );
    let acl = b.table(TableSpec {
        name: "ingress.acl",
        fields: vec![
            ("standard_metadata.ingress_port", PORT_BITS, Ternary),
            ("eth_dst", 48, Ternary), // @name("eth_dst"): unique last name component (finsy)
            ("hdr.ethernet.ether_type", 16, Ternary),
            ("hdr.ipv4.src_addr", 32, Ternary),
            ("hdr.ipv4.dst_addr", 32, Ternary),
            ("meta.ip_proto", 8, Ternary),
            ("meta.l4_src_port", 16, Ternary),
            ("meta.l4_dst_port", 16, Ternary),
        ],
        actions: vec![
            (no_action, TableAndDefault),
            (drop, TableAndDefault),
            (punt, TableAndDefault),
            (clone_to_session, TableAndDefault),
        ],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 4096,
        idle_timeout: false,
    });
    b.direct_counter("ingress.acl_counter", CounterKind::Both, acl);
    b.direct_meter(
        "ingress.acl_meter",
        MeterUnit::Bytes,
        MeterAlgorithm::TrTcm,
        acl,
    );
    let port_rx = b.counter("ingress.port_rx", CounterKind::Both, 512);
    let port_tx = b.counter("egress.port_tx", CounterKind::Both, 512);
    let port_meter = b.meter(
        "ingress.port_meter",
        MeterUnit::Bytes,
        MeterAlgorithm::TrTcm,
        512,
    );
    let flow_last_seen = b.register("ingress.flow_last_seen", 48, FLOW_CELLS);
    let mac_learn = b.digest(
        "ingress.mac_learn",
        &[("src_addr", 48), ("ingress_port", PORT_BITS)],
    );
    let flowlets = options.flowlets.then(|| FlowletRegisters {
        time: b.register("ingress.flowlet_time", 48, FLOWLET_CELLS),
        id: b.register("ingress.flowlet_id", 16, FLOWLET_CELLS),
        gap: b.register("ingress.flowlet_gap_ns", 48, 1),
    });
    let ecn_threshold = options
        .ecn
        .then(|| b.register("egress.ecn_threshold", 32, 1 << PORT_BITS));
    let base = Base {
        program: name,
        no_action,
        flowlets,
        ecn: options.ecn,
    };
    let mechanism = M::declare(&mut b, &base)?;
    b.controller_header("packet_in", &[("ingress_port", PORT_BITS), ("_pad", 7)]);
    b.controller_header("packet_out", &[("egress_port", PORT_BITS), ("_pad", 7)]);
    let schema = b.build()?;
    let ids = Ids {
        no_action,
        drop,
        l2_forward,
        l2_multicast,
        set_nhop,
        punt,
        clone_to_session,
        l2_exact,
        smac,
        ipv4_lpm,
        ipv6_lpm,
        acl,
        port_rx,
        port_tx,
        port_meter,
        flow_last_seen,
        mac_learn,
        flowlets,
        ecn_threshold,
    };
    Ok((schema, ids, mechanism))
}

/// The headers `basic`'s parser extracts, with the offsets of those rewritten in place: what
/// `basic`'s tables match on and what a [`Mechanism`]'s hooks read.
#[derive(Clone, Copy, Debug, Default)]
pub struct Headers {
    /// Destination MAC, as a 48-bit value.
    pub dst_mac: u64,
    /// Source MAC, as a 48-bit value.
    pub src_mac: u64,
    /// EtherType after any VLAN tag.
    pub ether_type: u16,
    /// Offset of the L3 header (or of whatever follows the EtherType).
    pub l3: usize,
    /// An IPv4 header was parsed.
    pub ipv4: bool,
    /// An IPv6 header was parsed.
    pub ipv6: bool,
    /// An ARP packet.
    pub arp: bool,
    /// An NDP message (ICMPv6 types 133-137).
    pub ndp: bool,
    /// IPv4 protocol or IPv6 next header.
    pub ip_proto: u8,
    /// IPv4 source (0 for other packets).
    pub v4_src: u32,
    /// IPv4 destination (0 for other packets).
    pub v4_dst: u32,
    /// IPv6 source (0 for other packets).
    pub v6_src: u128,
    /// IPv6 destination (0 for other packets).
    pub v6_dst: u128,
    /// TTL or hop limit.
    pub ttl: u8,
    /// TCP or UDP source port (0 for other packets and later IPv4 fragments).
    pub l4_sport: u16,
    /// TCP or UDP destination port (0 for other packets and later IPv4 fragments).
    pub l4_dport: u16,
    /// A TCP segment with ACK set, no SYN, FIN or RST, and no payload.
    pub pure_ack: bool,
}

fn mac_u64(b: &[u8]) -> u64 {
    b.iter()
        .take(6)
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

fn mac_bytes(v: u128) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[10], b[11], b[12], b[13], b[14], b[15]]
}

type ParseResult = Result<Headers, (HeaderKind, wire::Error)>;

/// The parser: Ethernet, one optional 802.1Q tag, then ARP / IPv4 / IPv6 and TCP / UDP / ICMPv6.
fn parse(data: &[u8]) -> ParseResult {
    let eth = EthernetFrame::new_checked(data).map_err(|e| (HeaderKind::Ethernet, e))?;
    let mut p = Headers {
        dst_mac: mac_u64(eth.dst_addr().as_bytes()),
        src_mac: mac_u64(eth.src_addr().as_bytes()),
        ..Headers::default()
    };
    let mut ether_type = eth.ethertype();
    let mut l3 = eth.header_len();
    if ether_type == EtherType::VLAN {
        let tag = VlanTag::new_checked(&data[l3..]).map_err(|e| (HeaderKind::Vlan, e))?;
        ether_type = tag.ethertype();
        l3 += tag.header_len();
    }
    p.ether_type = ether_type.0;
    p.l3 = l3;
    let rest = &data[l3..];
    let l4 = match ether_type {
        EtherType::ARP => {
            p.arp = true;
            return Ok(p);
        }
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(rest).map_err(|e| (HeaderKind::Ipv4, e))?;
            p.ipv4 = true;
            p.ip_proto = ip.protocol().0;
            p.v4_src = u32::from(ip.src_addr());
            p.v4_dst = u32::from(ip.dst_addr());
            p.ttl = ip.ttl();
            if ip.frag_offset() != 0 {
                return Ok(p);
            }
            &rest[ip.header_len()..usize::from(ip.total_len())]
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked(rest).map_err(|e| (HeaderKind::Ipv6, e))?;
            p.ipv6 = true;
            p.ip_proto = ip.next_header().0;
            p.v6_src = u128::from(ip.src_addr());
            p.v6_dst = u128::from(ip.dst_addr());
            p.ttl = ip.hop_limit();
            let end = ip.header_len() + usize::from(ip.payload_len());
            &rest[ip.header_len()..end]
        }
        _ => return Ok(p),
    };
    match IpProtocol(p.ip_proto) {
        IpProtocol::TCP => {
            let tcp = TcpPacket::new_checked(l4).map_err(|e| (HeaderKind::Tcp, e))?;
            p.l4_sport = tcp.src_port();
            p.l4_dport = tcp.dst_port();
            p.pure_ack =
                tcp.ack() && !(tcp.syn() || tcp.fin() || tcp.rst()) && l4.len() == tcp.header_len();
        }
        IpProtocol::UDP => {
            let udp = UdpPacket::new_checked(l4).map_err(|e| (HeaderKind::Udp, e))?;
            p.l4_sport = udp.src_port();
            p.l4_dport = udp.dst_port();
        }
        IpProtocol::ICMPV6 if p.ipv6 => {
            let icmp = Icmpv6Packet::new_checked(l4).map_err(|e| (HeaderKind::Icmpv6, e))?;
            p.ndp = (133..=137).contains(&icmp.msg_type());
        }
        _ => {}
    }
    Ok(p)
}

impl Headers {
    /// The IP destination, as the route's key (IPv4 in the low 32 bits).
    #[inline]
    pub fn dst(&self) -> u128 {
        if self.ipv4 {
            u128::from(self.v4_dst)
        } else {
            self.v6_dst
        }
    }

    /// The IP source (IPv4 in the low 32 bits).
    #[inline]
    pub fn src(&self) -> u128 {
        if self.ipv4 {
            u128::from(self.v4_src)
        } else {
            self.v6_src
        }
    }

    /// The 5-tuple as bytes for hashing: addresses, protocol, ports.
    fn flow_bytes(&self, buf: &mut [u8; 39]) -> usize {
        if self.ipv4 {
            buf[..4].copy_from_slice(&self.v4_src.to_be_bytes());
            buf[4..8].copy_from_slice(&self.v4_dst.to_be_bytes());
            buf[8] = self.ip_proto;
            buf[9..11].copy_from_slice(&self.l4_sport.to_be_bytes());
            buf[11..13].copy_from_slice(&self.l4_dport.to_be_bytes());
            13
        } else {
            buf[..16].copy_from_slice(&self.v6_src.to_be_bytes());
            buf[16..32].copy_from_slice(&self.v6_dst.to_be_bytes());
            buf[32] = self.ip_proto;
            buf[33..35].copy_from_slice(&self.l4_sport.to_be_bytes());
            buf[35..37].copy_from_slice(&self.l4_dport.to_be_bytes());
            37
        }
    }
}

impl<M: Mechanism> Basic<M> {
    /// Routes an IP packet.
    fn route(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta, p: &Headers) {
        let ids = &self.ids;
        if p.ttl <= 1 {
            md.mark_to_drop(DropReason::TtlExpired);
            return;
        }
        let mut flow = [0u8; 39];
        let n = p.flow_bytes(&mut flow);
        let flow_hash = self.ecmp_hash.hash(&flow[..n], cx.rng);
        let mut hash = flow_hash;
        // A mechanism with flowlets of its own (HULA) picks a new flowlet's hop itself.
        if let Some(f) = ids.flowlets
            && !M::OWN_FLOWLETS
        {
            hash = self.flowlet_hash(cx, f, hash, &mut flow, n, md.ingress_global_timestamp);
        }
        let table = if p.ipv4 { ids.ipv4_lpm } else { ids.ipv6_lpm };
        let key = p.dst();
        match self.mechanism.steer(cx, md, p, flow_hash) {
            Steer::Route => {}
            Steer::Hop { dmac, smac, port } => {
                self.next_hop(cx, pkt, md, p, (dmac, smac, port), hash);
                return;
            }
            Steer::Dropped => return,
        }
        let r = cx.apply(table, &[key], hash);
        let a = usize::from(r.action.action);
        if a == ids.set_nhop {
            let hop = (r.action.arg(0), r.action.arg(1), r.action.arg(2) as PortId);
            self.next_hop(cx, pkt, md, p, hop, hash);
            self.mechanism.routed(cx, pkt, md, p, flow_hash);
        } else if a == ids.punt {
            md.egress_spec = Some(cx.cpu_port);
        } else if r.entry.is_none() {
            md.mark_to_drop(DropReason::TableMiss(table.index() as u16));
        } else {
            md.mark_to_drop(DropReason::Program);
        }
    }

    /// `set_nhop`: rewrites both MACs, decrements the TTL or hop limit, picks the port and
    /// stamps the flow's last routed time.
    fn next_hop(
        &self,
        cx: &mut Ctx<'_>,
        pkt: &mut Frame<'_>,
        md: &mut StdMeta,
        p: &Headers,
        (dmac, smac, port): (u128, u128, PortId),
        hash: u64,
    ) {
        let d = pkt.data_mut();
        d[0..6].copy_from_slice(&mac_bytes(dmac));
        d[6..12].copy_from_slice(&mac_bytes(smac));
        let l3 = &mut d[p.l3..];
        if p.ipv4 {
            Ipv4Packet::new_unchecked(l3).decrement_ttl_update_checksum();
        } else {
            Ipv6Packet::new_unchecked(l3).decrement_hop_limit();
        }
        md.egress_spec = Some(port);
        let cell = (hash as usize) % FLOW_CELLS;
        cx.register(self.ids.flow_last_seen)
            .write(cell, md.ingress_global_timestamp);
    }

    /// Flowlet switching: the flow's cell remembers its last packet and its flowlet number; a
    /// packet after a gap longer than `flowlet_gap_ns` starts a new flowlet, whose ECMP choice is
    /// the hash of the 5-tuple and the flowlet number. Returns the selector hash.
    fn flowlet_hash(
        &self,
        cx: &mut Ctx<'_>,
        f: FlowletRegisters,
        flow_hash: u64,
        flow: &mut [u8; 39],
        n: usize,
        now: u64,
    ) -> u64 {
        let gap = cx.register(f.gap).read(0).unwrap_or(0);
        if gap == 0 {
            return flow_hash;
        }
        let cell = (flow_hash as usize) % FLOWLET_CELLS;
        let last = cx.register(f.time).read(cell).unwrap_or(0);
        let ids = cx.register(f.id);
        let id = if now.saturating_sub(last) > gap {
            ids.rmw(cell, |v| v.wrapping_add(1))
                .map_or(0, |(_, new)| new)
        } else {
            ids.read(cell).unwrap_or(0)
        };
        cx.register(f.time).write(cell, now);
        cx.trace(|| format!("flowlet cell={cell} id={id} gap_ns={gap}"));
        flow[n..n + 2].copy_from_slice(&(id as u16).to_be_bytes());
        self.ecmp_hash.hash(&flow[..n + 2], cx.rng)
    }

    fn acl(&self, cx: &mut Ctx<'_>, md: &mut StdMeta, p: &Headers) {
        let ids = &self.ids;
        let (sport, dport) = (u128::from(p.l4_sport), u128::from(p.l4_dport));
        let key = [
            u128::from(md.ingress_port),
            u128::from(p.dst_mac),
            u128::from(p.ether_type),
            u128::from(p.v4_src),
            u128::from(p.v4_dst),
            u128::from(p.ip_proto),
            sport,
            dport,
        ];
        let r = cx.apply(ids.acl, &key, 0);
        let Some(entry) = r.entry else { return };
        if cx.direct_meter(ids.acl, entry) == Color::Red {
            md.mark_to_drop(DropReason::MeterRed);
            return;
        }
        let a = usize::from(r.action.action);
        if a == ids.drop {
            md.mark_to_drop(DropReason::Program);
        } else if a == ids.punt {
            md.mcast_grp = 0;
            md.egress_spec = Some(cx.cpu_port);
        } else if a == ids.clone_to_session {
            md.clone_session = Some(r.action.arg(0) as u32);
        }
    }
}

impl<M: Mechanism> Program for Basic<M> {
    fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    fn ingress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        let ids = &self.ids;
        cx.count(ids.port_rx, usize::from(md.ingress_port));
        if md.ingress_port == cx.cpu_port {
            pipeline::program::packet_out(cx, pkt, md);
            return;
        }
        if self.mechanism.before_parse(cx, pkt, md) == Next::Done {
            return;
        }
        let p = match parse(pkt.data()) {
            Ok(p) => p,
            Err((header, e)) => {
                cx.trace(|| format!("parser header={header:?} error={e:?}"));
                md.mark_to_drop(DropReason::Malformed(header, e));
                return;
            }
        };
        cx.trace(|| {
            format!(
                "parser ether_type={:#06x} ipv4={} ipv6={} proto={} sport={} dport={}",
                p.ether_type, p.ipv4, p.ipv6, p.ip_proto, p.l4_sport, p.l4_dport
            )
        });
        if self.mechanism.parsed(cx, pkt, md, &p) == Next::Done {
            return;
        }
        if cx.meter(ids.port_meter, usize::from(md.ingress_port)) == Color::Red {
            md.mark_to_drop(DropReason::MeterRed);
            return;
        }
        if p.arp || p.ndp {
            md.egress_spec = Some(cx.cpu_port);
            return;
        }
        let l2 = cx.apply(ids.l2_exact, &[u128::from(p.dst_mac)], 0);
        let a = usize::from(l2.action.action);
        if a == ids.l2_forward || a == ids.l2_multicast {
            if a == ids.l2_forward {
                md.egress_spec = Some(l2.action.arg(0) as PortId);
            } else {
                md.mcast_grp = l2.action.arg(0) as u16;
            }
            let learned = cx.apply(ids.smac, &[u128::from(p.src_mac)], 0);
            if learned.entry.is_none() {
                cx.digest(
                    ids.mac_learn,
                    &[u128::from(p.src_mac), u128::from(md.ingress_port)],
                );
            }
        } else if a == ids.drop {
            md.mark_to_drop(DropReason::Program);
            return;
        } else if p.ipv4 || p.ipv6 {
            self.route(cx, pkt, md, &p);
        } else {
            md.mark_to_drop(DropReason::TableMiss(ids.l2_exact.index() as u16));
        }
        if md.drop.is_none() {
            self.acl(cx, md, &p);
        }
        debug_assert!(ids.no_action != ids.drop);
    }

    fn egress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        let port = md.egress_port;
        if port == cx.cpu_port {
            pipeline::program::push_packet_in(pkt, md);
            if md.drop.is_some() {
                return;
            }
        }
        if let Some(k) = self.ids.ecn_threshold {
            // DCTCP-style step marking: CE when the queue the packet joined was longer than K.
            let k = cx.register(k).read(usize::from(port)).unwrap_or(0);
            if k != 0 && u64::from(md.enq_qdepth) > k && pipeline::ecn::mark_ce(pkt.data_mut()) {
                cx.trace(|| format!("ecn mark enq_qdepth={} k={k}", md.enq_qdepth));
            }
        }
        self.mechanism.egress(cx, pkt, md);
        cx.packet_len = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
        cx.count(self.ids.port_tx, usize::from(port));
    }
}

/// The checked-in P4Info of `basic`, for controllers.
pub const P4INFO: &str = include_str!("../p4info/basic.txt");
