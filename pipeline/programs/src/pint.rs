//! `pint`: PINT path tracing (PINT §4.2; docs/pint.md) on `basic`'s routing.
//!
//! **Encoding (egress).** `egress.pint` (exact on the egress port) says what a port does; a miss
//! does nothing. Both actions carry the fabric-wide configuration (switch ID, hash seed, budget,
//! the fabric's longest path D, the hosts' initial TTL):
//! - `pint_transit`: the switch runs the Encoding Module ([`analysis::pint::encode_hop`]) on the
//!   packet's digest with its switch ID and hop number and writes the digest back;
//! - `pint_sink` (ports that face a host): the same, then the switch exports the record
//!   ([`RECORD`]: packet ID, hop count, digest, 5-tuple) as a digest to the controller and
//!   restores the header.
//!
//! **Queries.** The digest carries path tracing or, on a fabric-wide share of the packets chosen
//! by a hash of the packet ID, the latency query ([`super::pint_latency`]); the record's
//! `query_digest` field says which.
//!
//! **Where the digest rides [X].** In the high byte of the IPv4 Identification field: the packet
//! keeps its length, and the ID of an *atomic* datagram (DF set, not a fragment) has no meaning
//! and may hold any value (RFC 6864 §4.1): it is never reassembled. Only atomic IPv4
//! datagrams are traced; everything else passes untouched. Hop 1 starts the digest at 0, whatever
//! the host put there; the sink writes the byte back to 0 (exactly what `pisa-sim`'s hosts and
//! Linux's unconnected UDP sockets send). The IPv4 checksum is updated incrementally (RFC 1624).
//!
//! **Packet ID [X].** [`analysis::pint::packet_id`] of the 5-tuple and a per-packet word no switch
//! changes: the ID's low byte, and the TCP sequence and acknowledgement numbers, or the UDP
//! checksum and length ([`per_packet`]).
//!
//! **Hop number [X].** From the TTL, which `basic`'s ingress has already decremented when egress
//! runs: hop `initial_ttl − ttl` ([`analysis::pint::hops_from_ttl`]). At the sink that is also the
//! path's length k.
//!
//! **Fabric plan**: `basic`'s routes and one `egress.pint` entry per port, `pint_sink` on ports
//! that face a host. `pint_seed=`, `pint_bits=8|2x4`, `pint_max_hops=` (D; default the longest
//! host-to-host path in switches) and `pint_ttl=` (default 64) must agree across the fabric; one
//! switch's line sets them for all ([`fabric_config`]).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::hook::{Base, ComposeError, Mechanism};
pub use analysis::pint::fabric::{
    ConfigError, DEFAULT_SEED, DEFAULT_TTL, FabricConfig, LatencyFabric, agreed, config_of,
    fabric_config, latency_config_of, latency_fabric_config, parse_bits,
};
use analysis::pint::{Budget, Hashes, LayerConfig, MAX_HOPS, encode_hop};
use pipeline::metadata::{InstanceType, PORT_BITS, StdMeta};
use pipeline::program::Ctx;
use pipeline::schema::{ActionScope, DigestIx, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::MatchKind;
use pipeline::wire::{IpProtocol, Ipv4Packet, TcpPacket, UdpPacket, checksum};
use topo::plan::{SwitchPlan, routed};
use topo::{End, Switch, Topology};

/// The name of the sink's record digest.
pub const RECORD: &str = "egress.pint_record";
/// The record's fields, in order, with their widths.
pub const RECORD_FIELDS: [(&str, u8); 8] = [
    ("packet_id", 64),
    ("hops", 16),
    // The digest in the low byte, the query it answers (`analysis::pint::Query`: 0 path, 1 latency)
    // in the high byte: one field, as a digest message holds at most 8.
    ("query_digest", 16),
    ("src_addr", 32),
    ("dst_addr", 32),
    ("protocol", 8),
    ("src_port", 16),
    ("dst_port", 16),
];
/// PINT on `basic`: the encoder and the sink in egress.
#[derive(Clone, Copy, Debug)]
pub struct Pint(PintIds);

impl Mechanism for Pint {
    fn declare(b: &mut SchemaBuilder, base: &Base) -> Result<Self, ComposeError> {
        Ok(Pint(declare(b, base.no_action)))
    }

    #[inline]
    fn egress(&self, cx: &mut Ctx<'_>, pkt: &mut pipeline::frame::Frame<'_>, md: &mut StdMeta) {
        egress(cx, &self.0, pkt, md);
    }
}

/// The schema objects PINT adds to `basic`.
#[derive(Clone, Copy, Debug)]
struct PintIds {
    transit: usize,
    sink: usize,
    table: TableIx,
    record: DigestIx,
    latency: super::pint_latency::LatencyIds,
    hpcc: super::pint_hpcc::HpccIds,
}

/// Declares the encoder's table and the sink's record digest.
fn declare(b: &mut SchemaBuilder, no_action: usize) -> PintIds {
    let params: &[(&'static str, u8)] = &[
        ("switch_id", 32),
        ("seed", 64),
        ("bits", 8),
        ("instances", 8),
        ("max_hops", 16),
        ("initial_ttl", 8),
    ];
    let transit = b.action("egress.pint_transit", params);
    let sink = b.action("egress.pint_sink", params);
    let table = b.table(TableSpec {
        name: "egress.pint",
        fields: vec![("standard_metadata.egress_port", PORT_BITS, MatchKind::Exact)],
        actions: vec![
            (transit, ActionScope::TableOnly),
            (sink, ActionScope::TableOnly),
            (no_action, ActionScope::TableAndDefault),
        ],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 1 << PORT_BITS,
        idle_timeout: false,
    });
    PintIds {
        transit,
        sink,
        table,
        record: b.digest(RECORD, &RECORD_FIELDS),
        latency: super::pint_latency::declare(b, no_action),
        hpcc: super::pint_hpcc::declare(b, no_action),
    }
}

/// `LayerConfig::pint(D)` for every D up to [`MAX_HOPS`], built once (no allocation per packet).
fn layers(max_hops: u32) -> &'static LayerConfig {
    static LAYERS: OnceLock<Vec<LayerConfig>> = OnceLock::new();
    let all = LAYERS.get_or_init(|| (0..=MAX_HOPS).map(LayerConfig::pint).collect());
    &all[max_hops.min(MAX_HOPS) as usize]
}

/// What egress reads of a traced packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Traced {
    /// Offset of the IPv4 header.
    l3: usize,
    ident: u16,
    ttl: u8,
    src: u32,
    dst: u32,
    proto: u8,
    sport: u16,
    dport: u16,
    /// The per-packet word of the packet ID.
    word: u32,
}

/// The packet ID's per-packet word [X]: the IPv4 ID's low byte (the byte the digest leaves
/// alone) in the top bits, XOR the transport's invariant per-packet fields: for TCP the sequence
/// number and the acknowledgement number (rotated; pure ACKs differ only there), for UDP the
/// checksum and the length, otherwise nothing.
pub fn per_packet(ident: u16, proto: u8, l4: &[u8]) -> u32 {
    let transport = match IpProtocol(proto) {
        IpProtocol::TCP => TcpPacket::new_checked(l4)
            .map(|t| t.seq_number() ^ t.ack_number().rotate_left(16))
            .unwrap_or(0),
        IpProtocol::UDP => UdpPacket::new_checked(l4)
            .map(|u| u32::from(u.checksum()) | (u32::from(u.len()) << 16))
            .unwrap_or(0),
        _ => 0,
    };
    transport ^ (u32::from(ident & 0xff) << 24)
}

/// The IPv4 fields of an atomic datagram (DF set, MF clear, offset 0); `None` for anything else.
fn traced(d: &[u8]) -> Option<Traced> {
    let l3 = super::p4qcn::ipv4_at(d)?;
    let ip = Ipv4Packet::new_checked(d.get(l3..)?).ok()?;
    if !ip.dont_frag() || ip.more_frags() || ip.frag_offset() != 0 {
        return None;
    }
    let proto = ip.protocol().0;
    let l4 = ip.payload();
    let ports = match IpProtocol(proto) {
        IpProtocol::TCP | IpProtocol::UDP if l4.len() >= 4 => (
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        ),
        _ => (0, 0),
    };
    Some(Traced {
        l3,
        ident: ip.ident(),
        ttl: ip.ttl(),
        src: ip.src_addr().to_bits(),
        dst: ip.dst_addr().to_bits(),
        proto,
        sport: ports.0,
        dport: ports.1,
        word: per_packet(ip.ident(), proto, l4),
    })
}

/// The Encoding Module on a packet leaving by `md.egress_port`, and the sink's export.
#[inline(never)]
fn egress(cx: &mut Ctx<'_>, p: &PintIds, pkt: &mut pipeline::frame::Frame<'_>, md: &mut StdMeta) {
    if md.instance_type != InstanceType::Normal {
        return;
    }
    super::pint_hpcc::egress(cx, &p.hpcc, pkt, md);
    let r = cx.apply(p.table, &[u128::from(md.egress_port)], 0);
    let a = usize::from(r.action.action);
    let sink = a == p.sink;
    if !sink && a != p.transit {
        return;
    }
    let switch_id = r.action.arg(0) as u32;
    let hashes = Hashes::new(r.action.arg(1) as u64);
    let budget = Budget::new(r.action.arg(2) as u8, r.action.arg(3) as u8);
    let Some(budget) = budget.filter(|b| b.total_bits() <= 8) else {
        return;
    };
    let max_hops = r.action.arg(4) as u32;
    let initial_ttl = r.action.arg(5) as u8;
    let Some(t) = traced(pkt.data()) else { return };
    let hop = analysis::pint::hops_from_ttl(initial_ttl, t.ttl).unwrap_or(0);
    if hop == 0 {
        return;
    }
    let packet_id = analysis::pint::packet_id(t.src, t.dst, t.proto, t.sport, t.dport, t.word);
    let carried = if hop == 1 { 0 } else { u32::from(t.ident >> 8) };
    let (query, digest) =
        match super::pint_latency::encode(cx, &p.latency, md, hashes, packet_id, hop, carried) {
            Some(d) => (analysis::pint::Query::Latency, d & 0xff),
            None => {
                let layers = layers(max_hops);
                let d = encode_hop(hashes, layers, budget, packet_id, hop, switch_id, carried);
                (analysis::pint::Query::Path, d & 0xff)
            }
        };
    let ident = if sink {
        cx.digest(
            p.record,
            &[
                u128::from(packet_id),
                u128::from(hop),
                (query as u128) << 8 | u128::from(digest),
                u128::from(t.src),
                u128::from(t.dst),
                u128::from(t.proto),
                u128::from(t.sport),
                u128::from(t.dport),
            ],
        );
        t.ident & 0x00ff
    } else {
        ((digest as u16) << 8) | (t.ident & 0x00ff)
    };
    cx.trace(|| format!("pint hop={hop} query={query:?} digest={digest:#04x} sink={sink}"));
    if let Some(h) = pkt.data_mut().get_mut(t.l3..) {
        let mut ip = Ipv4Packet::new_unchecked(h);
        let c = checksum::update16(ip.checksum(), t.ident, ident);
        ip.set_ident(ident);
        ip.set_checksum(c);
    }
}

/// The fabric plan of `pint`: `basic`'s routes and, per port, a `pint_transit` entry, or
/// `pint_sink` where the port faces a host.
pub fn plan(
    t: &Topology,
    only: &[&Switch],
) -> Result<BTreeMap<String, SwitchPlan>, crate::PlanError> {
    let mut plans = routed(t, only);
    let c = config_of(t, only)?;
    let latency = latency_config_of(only)?;
    let ports = t.ports();
    for s in only {
        let Some(plan) = plans.get_mut(&s.name) else {
            continue;
        };
        for (port, (far, _)) in ports.get(s.name.as_str()).into_iter().flatten() {
            let action = match far {
                End::Host(_) => "pint_sink",
                End::Switch(..) => "pint_transit",
            };
            plan.routes.push(format!(
                "table_add pint {action} {port} => {} {} {} {} {} {}",
                s.switch_id,
                c.seed,
                c.budget.bits(),
                c.budget.instances(),
                c.max_hops,
                c.initial_ttl
            ));
            plan.routes
                .extend(super::pint_latency::plan_line(&latency, port));
        }
    }
    super::pint_hpcc::plan(t, only, c.seed, &mut plans)?;
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes: the egress parser returns or declines, never panics.
        #[test]
        fn traced_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = traced(&bytes);
        }
    }

    #[test]
    fn layers_match_the_decoders() {
        for d in [1, 5, 16, 64, 256, 1000] {
            assert_eq!(layers(d), &LayerConfig::pint(d.min(MAX_HOPS)));
        }
    }
}
