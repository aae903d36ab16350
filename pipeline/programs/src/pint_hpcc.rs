//! `pint`'s HPCC query (PINT §4.3, Example #3; docs/pint.md, "HPCC") and the
//! INT baseline it is compared with.
//!
//! **Per egress port, on every packet** (`egress.pint_hpcc` names the port's rate B, the base RTT
//! T and the switch's id): the utilisation EWMA U ([`analysis::pint::UtilEwma`], in the registers
//! `egress.hpcc_util`, fixed point 32.32, and `egress.hpcc_last_ts`) and the port's transmitted
//! bytes (`egress.hpcc_tx_bytes`, wrapping at 2^32) are updated at dequeue, whatever the packet.
//!
//! **Where the telemetry rides [X]** (the paper does not say; docs/pint.md): a shim at the start of
//! the payload of UDP datagrams to a designated port (`pint_hpcc_port=`, default 4791), laid out as
//! [`Shim`] describes. The receiver echoes the shim in its ACK; switches leave ACKs alone (they are
//! not to that port).
//! - `KIND_PINT`: a sampled packet ([`sampled`]: a p = 2^-m fraction, decided by a global hash
//!   of the packet so that every hop agrees) gets the flag [`FLAG_SAMPLED`] and each hop writes
//!   max(digest, [log_(1+ε)² U]_R) into the digest byte ([`analysis::pint::HpccUtil`]).
//! - `KIND_INT`: every packet; each hop fills the next of the slots the sender reserved with its
//!   record (switch id, timestamp, tx bytes, queue length, port rate: [`INT_HOP_LEN`] bytes);
//!   when the slots are full it sets [`FLAG_OVERFLOW`].
//!
//! A nonzero UDP checksum is cleared (RFC 768 allows 0 over IPv4): the hops rewrite the payload.

use std::collections::BTreeMap;

use crate::PlanError;
use crate::pint::ConfigError;
use crate::plan_error::bad_value;
use analysis::pint::{Hashes, HpccUtil, UtilEwma};
use hosts::hpcc::IntHop;
use pipeline::metadata::{CELL_BYTES, InstanceType, PORT_BITS, StdMeta};
use pipeline::program::Ctx;
use pipeline::schema::{ActionScope, RegisterIx, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::MatchKind;
use topo::plan::SwitchPlan;
use topo::{Switch, Topology};

/// The shim's first byte.
pub const MAGIC: u8 = b'H';
/// A shim carrying PINT's 8-bit HPCC digest.
pub const KIND_PINT: u8 = 1;
/// A shim carrying an INT stack.
pub const KIND_INT: u8 = 2;
/// The packet carries the HPCC query (PINT) / a record was written (INT).
pub const FLAG_SAMPLED: u8 = 1;
/// An INT hop found no free slot.
pub const FLAG_OVERFLOW: u8 = 2;
/// Bytes of the shim before the INT slots.
pub const SHIM_LEN: usize = 12;
/// Bytes of one INT record.
pub const INT_HOP_LEN: usize = 16;
/// The designated UDP port when no switch gives `pint_hpcc_port=` (RoCEv2's, HPCC's transport).
pub const DEFAULT_PORT: u16 = 4791;
/// Global-hash instance of the sampling decision (apart from path tracing's instances).
const SAMPLE_INSTANCE: u8 = 0x48;

/// The shim [X]:
///
/// | bytes | field |
/// |---|---|
/// | 0 | [`MAGIC`] |
/// | 1 | kind: [`KIND_PINT`] or [`KIND_INT`] |
/// | 2 | flags: [`FLAG_SAMPLED`], [`FLAG_OVERFLOW`] |
/// | 3 | PINT: the digest; INT: records written |
/// | 4 | slots reserved (the sender's choice; PINT: padding, normally 0) |
/// | 5–7 | 0 |
/// | 8–11 | the sender's packet number (part of the packet ID) |
/// | 12… | INT: the slots, [`INT_HOP_LEN`] bytes each: switch id mod 2^16 (16), queue at dequeue in 80-byte cells (16, saturating), egress timestamp ns mod 2^32 (32), port tx bytes mod 2^32 (32), port rate Mb/s (32) |
///
/// The rate has 32 bits so that 100-400 Gb/s ports fit (before 2026-11-27 it had 16 and
/// saturated at 65.5 Gb/s); the switch id gave up the 16 bits, as the sender only compares the
/// ids of two stacks to notice a path change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shim {
    /// [`KIND_PINT`] or [`KIND_INT`].
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// The digest (PINT) or the records written (INT).
    pub value: u8,
    /// INT slots.
    pub capacity: u8,
    /// The sender's packet number.
    pub nonce: u32,
}

impl Shim {
    /// Bytes of a shim of `kind` with `capacity` slots (INT's records; a PINT shim with slots
    /// only pads, to compare PINT and INT at equal overhead).
    pub fn len_of(_kind: u8, capacity: u8) -> usize {
        SHIM_LEN + usize::from(capacity) * INT_HOP_LEN
    }

    /// A sender's shim, slots zeroed.
    pub fn bytes(kind: u8, capacity: u8, nonce: u32) -> Vec<u8> {
        let mut v = vec![0u8; Shim::len_of(kind, capacity)];
        v[0] = MAGIC;
        v[1] = kind;
        v[4] = capacity;
        v[8..12].copy_from_slice(&nonce.to_be_bytes());
        v
    }

    /// The shim at the start of `b`, if there is a whole one.
    pub fn parse(b: &[u8]) -> Option<Shim> {
        let h = b.get(..SHIM_LEN)?;
        if h[0] != MAGIC || !(h[1] == KIND_PINT || h[1] == KIND_INT) {
            return None;
        }
        let s = Shim {
            kind: h[1],
            flags: h[2],
            value: h[3],
            capacity: h[4],
            nonce: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        };
        (b.len() >= s.len() && (s.kind != KIND_INT || s.value <= s.capacity)).then_some(s)
    }

    /// Its length.
    pub fn len(&self) -> usize {
        Shim::len_of(self.kind, self.capacity)
    }

    /// Never empty (the header is always there).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The INT records of the shim at the start of `b` (empty for PINT).
    pub fn hops(&self, b: &[u8]) -> Vec<IntHop> {
        if self.kind != KIND_INT {
            return Vec::new();
        }
        (0..usize::from(self.value))
            .filter_map(|i| b.get(SHIM_LEN + i * INT_HOP_LEN..SHIM_LEN + (i + 1) * INT_HOP_LEN))
            .map(|r| {
                let w = |at: usize| u32::from_be_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]);
                IntHop {
                    switch_id: u32::from(u16::from_be_bytes([r[0], r[1]])),
                    qlen_bytes: u32::from(u16::from_be_bytes([r[2], r[3]])) * CELL_BYTES,
                    ts_ns: w(4),
                    tx_bytes: w(8),
                    rate_mbps: w(12),
                }
            })
            .collect()
    }
}

/// Whether packet `packet_id` carries the HPCC query when a 2^-`sample_log2` fraction does: the
/// same global hash at every hop.
pub fn sampled(hashes: Hashes, packet_id: u64, sample_log2: u8) -> bool {
    sample_log2 == 0 || hashes.layer(packet_id, SAMPLE_INSTANCE) >> (64 - sample_log2.min(63)) == 0
}

/// The schema objects of the HPCC query.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HpccIds {
    port: usize,
    table: TableIx,
    util: RegisterIx,
    last_ts: RegisterIx,
    tx_bytes: RegisterIx,
}

/// Declares the per-port table and registers.
pub(crate) fn declare(b: &mut SchemaBuilder, no_action: usize) -> HpccIds {
    let port = b.action(
        "egress.pint_hpcc_port",
        &[
            ("switch_id", 32),
            ("rate_mbps", 32),
            ("base_rtt_ns", 32),
            ("udp_port", 16),
            ("sample_log2", 8),
            ("seed", 64),
        ],
    );
    let table = b.table(TableSpec {
        name: "egress.pint_hpcc",
        fields: vec![("standard_metadata.egress_port", PORT_BITS, MatchKind::Exact)],
        actions: vec![
            (port, ActionScope::TableOnly),
            (no_action, ActionScope::TableAndDefault),
        ],
        default_action: (no_action, vec![]),
        const_default: false,
        size: 1 << PORT_BITS,
        idle_timeout: false,
    });
    HpccIds {
        port,
        table,
        util: b.register("egress.hpcc_util", 64, 1 << PORT_BITS),
        last_ts: b.register("egress.hpcc_last_ts", 48, 1 << PORT_BITS),
        tx_bytes: b.register("egress.hpcc_tx_bytes", 32, 1 << PORT_BITS),
    }
}

/// U in the register's 32.32 fixed point.
const FIXED: f64 = 4_294_967_296.0;

/// The UDP payload of an IPv4 datagram to `udp_port`: (offset of the UDP header, of the payload).
fn udp_to(d: &[u8], udp_port: u16) -> Option<(usize, usize)> {
    let l3 = super::p4qcn::ipv4_at(d)?;
    let ip = d.get(l3..l3 + 20)?;
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    if ip[0] >> 4 != 4 || ihl < 20 || ip[9] != 17 || frag != 0 {
        return None;
    }
    let l4 = l3 + ihl;
    let udp = d.get(l4..l4 + 8)?;
    (u16::from_be_bytes([udp[2], udp[3]]) == udp_port).then_some((l4, l4 + 8))
}

/// The paper's utilisation codec, built once (its logarithms are not per-packet work).
static PAPER_UTIL: std::sync::LazyLock<HpccUtil> = std::sync::LazyLock::new(HpccUtil::paper);

/// The per-port update and, on a shim packet, the query.
#[inline(never)]
pub(crate) fn egress(
    cx: &mut Ctx<'_>,
    h: &HpccIds,
    pkt: &mut pipeline::frame::Frame<'_>,
    md: &mut StdMeta,
) {
    if md.instance_type != InstanceType::Normal {
        return;
    }
    let port = usize::from(md.egress_port);
    let r = cx.apply(h.table, &[port as u128], 0);
    if usize::from(r.action.action) != h.port {
        return;
    }
    let switch_id = r.action.arg(0) as u32;
    let rate_mbps = r.action.arg(1) as u64;
    let base_rtt_ns = r.action.arg(2) as u64;
    let udp_port = r.action.arg(3) as u16;
    let sample_log2 = r.action.arg(4) as u8;
    let hashes = Hashes::new(r.action.arg(5) as u64);
    let now = md.egress_global_timestamp;
    let bytes = pkt.len() as u64;
    let (util, last_ts, tx) = (
        cx.register(h.util),
        cx.register(h.last_ts),
        cx.register(h.tx_bytes),
    );
    let last = last_ts.read(port).unwrap_or(0);
    let mut ewma = UtilEwma::from_parts(
        util.read(port).unwrap_or(0) as f64 / FIXED,
        last.checked_sub(1),
    );
    let u = ewma.update(
        now,
        bytes,
        u64::from(md.deq_qdepth_bytes),
        rate_mbps.max(1) as f64 / 8_000.0,
        base_rtt_ns,
    );
    util.write(port, (u * FIXED).min(u64::MAX as f64) as u64);
    last_ts.write(port, now.wrapping_add(1) & ((1 << 48) - 1));
    let sent = tx.read(port).unwrap_or(0).wrapping_add(bytes) & 0xffff_ffff;
    tx.write(port, sent);
    let Some((l4, at)) = udp_to(pkt.data(), udp_port) else {
        return;
    };
    let d = pkt.data_mut();
    let Some(shim) = Shim::parse(&d[at..]) else {
        return;
    };
    let s = &mut d[at..];
    match shim.kind {
        KIND_PINT => {
            let ip = super::p4qcn::ipv4_at(d).unwrap_or(0);
            let w = |o: usize| u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
            let ports = w(l4);
            let packet_id = analysis::pint::packet_id(
                w(ip + 12),
                w(ip + 16),
                17,
                (ports >> 16) as u16,
                ports as u16,
                shim.nonce,
            );
            if !sampled(hashes, packet_id, sample_log2) {
                return;
            }
            let coin = hashes.coin(packet_id, switch_id);
            let s = &mut d[at..];
            s[2] |= FLAG_SAMPLED;
            s[3] = PAPER_UTIL.encode_max(s[3], u, coin);
            cx.trace(|| format!("pint_hpcc u={u:.4} digest={}", d[at + 3]));
        }
        _ => {
            if shim.value >= shim.capacity {
                s[2] |= FLAG_OVERFLOW;
            } else {
                let o = SHIM_LEN + usize::from(shim.value) * INT_HOP_LEN;
                let r = &mut s[o..o + INT_HOP_LEN];
                let cells = u64::from(md.deq_qdepth_bytes).div_ceil(u64::from(CELL_BYTES));
                r[0..2].copy_from_slice(&(switch_id as u16).to_be_bytes());
                r[2..4].copy_from_slice(&(cells.min(0xffff) as u16).to_be_bytes());
                r[4..8].copy_from_slice(&(now as u32).to_be_bytes());
                r[8..12].copy_from_slice(&(sent as u32).to_be_bytes());
                r[12..16]
                    .copy_from_slice(&(rate_mbps.min(u64::from(u32::MAX)) as u32).to_be_bytes());
                s[2] |= FLAG_SAMPLED;
                s[3] += 1;
            }
        }
    }
    // The payload changed: no UDP checksum (RFC 768, IPv4).
    d[l4 + 6] = 0;
    d[l4 + 7] = 0;
}

/// The HPCC query's fabric-wide parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HpccFabric {
    /// The designated UDP port.
    pub udp_port: u16,
    /// m: a 2^-m fraction of PINT packets carries the query.
    pub sample_log2: u8,
    /// T, ns: the switches' EWMA horizon and the senders' base RTT.
    pub base_rtt_ns: u64,
}

/// The fabric's base RTT [X]: the longest host-to-host path (in switches, +1 links), both ways,
/// each link's propagation delay plus one 1500-byte frame at its rate (the longest delay and the
/// slowest rate of the fabric, so T is an upper bound, as HPCC's T is).
pub fn base_rtt_ns(t: &Topology) -> u64 {
    let links = topo::plan::host_path_switches(t) as u64 + 1;
    let (mut delay, mut rate) = (0u64, u64::MAX);
    for l in &t.links {
        delay = delay.max(l.props.delay_us * 1000);
        rate = rate.min(l.props.rate_bps.max(1));
    }
    if rate == u64::MAX {
        return 1;
    }
    2 * links * (delay + 1514 * 8 * 1_000_000_000 / rate)
}

/// `pint_hpcc_port=`, `pint_hpcc_sample=N` (p = 1/N, N a power of two up to 2^16, default 1) and
/// `pint_hpcc_rtt_us=` (default [`base_rtt_ns`]), agreed across the `pint` switches.
pub fn fabric(t: &Topology, only: &[&Switch]) -> Result<HpccFabric, ConfigError> {
    let udp_port = super::pint::agreed(only, "pint_hpcc_port", "a UDP port, 1..=65535", |v| {
        v.parse().ok().filter(|&p: &u16| p > 0)
    })?;
    let sample = super::pint::agreed(
        only,
        "pint_hpcc_sample",
        "a power of two up to 65536",
        |v| {
            v.parse()
                .ok()
                .filter(|&n: &u32| n.is_power_of_two() && n <= 1 << 16)
        },
    )?;
    let rtt = super::pint::agreed(
        only,
        "pint_hpcc_rtt_us",
        "a number of µs, at least 1",
        |v| v.parse().ok().filter(|&x: &u64| x > 0),
    )?;
    Ok(HpccFabric {
        udp_port: udp_port.unwrap_or(DEFAULT_PORT),
        sample_log2: sample.unwrap_or(1).trailing_zeros() as u8,
        base_rtt_ns: rtt.map_or_else(|| base_rtt_ns(t), |us| us * 1000),
    })
}

/// The fabric's HPCC parameters if any switch runs `pint`.
pub fn fabric_of(t: &Topology) -> Result<Option<HpccFabric>, ConfigError> {
    let only: Vec<&Switch> = t.switches.iter().filter(|s| s.program == "pint").collect();
    if only.is_empty() {
        return Ok(None);
    }
    fabric(t, &only).map(Some)
}

/// Adds one `pint_hpcc` entry per port of each planned switch, and PFC on every port of a switch
/// whose line says `pint_pfc_xoff=N` (pause the upstream at N packets queued from a port).
pub(crate) fn plan(
    t: &Topology,
    only: &[&Switch],
    seed: u64,
    plans: &mut BTreeMap<String, SwitchPlan>,
) -> Result<(), PlanError> {
    let f = fabric(t, only)?;
    let ports = t.ports();
    for s in only {
        let Some(plan) = plans.get_mut(&s.name) else {
            continue;
        };
        let xoff = match s.params.get("pint_pfc_xoff") {
            Some(v) => Some(v.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                bad_value(s, "pint_pfc_xoff", v, "a number of packets, at least 1")
            })?),
            None => None,
        };
        for (port, (_, props)) in ports.get(s.name.as_str()).into_iter().flatten() {
            plan.routes.push(format!(
                "table_add pint_hpcc pint_hpcc_port {port} => {} {} {} {} {} {seed}",
                s.switch_id,
                (props.rate_bps / 1_000_000).max(1),
                f.base_rtt_ns,
                f.udp_port,
                f.sample_log2,
            ));
            if let Some(n) = xoff {
                plan.tm.push(format!("set_pfc on {port}"));
                plan.tm.push(format!("set_pfc_xoff {n} {port}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_round_trips_and_rejects_short_or_foreign_payloads() {
        let b = Shim::bytes(KIND_INT, 3, 77);
        assert_eq!(b.len(), SHIM_LEN + 3 * INT_HOP_LEN);
        let s = Shim::parse(&b).unwrap();
        assert_eq!((s.kind, s.value, s.capacity, s.nonce), (KIND_INT, 0, 3, 77));
        assert!(Shim::parse(&b[..b.len() - 1]).is_none());
        assert!(Shim::parse(b"PSIM0000000000000000").is_none());
        let p = Shim::bytes(KIND_PINT, 0, 1);
        assert_eq!(Shim::parse(&p).unwrap().len(), SHIM_LEN);
        // PINT with slots: padding only, no records.
        let p = Shim::bytes(KIND_PINT, 2, 1);
        let s = Shim::parse(&p).unwrap();
        assert_eq!((s.len(), s.hops(&p).len()), (SHIM_LEN + 2 * INT_HOP_LEN, 0));
    }

    #[test]
    fn sampling_keeps_about_a_p_fraction() {
        let h = Hashes::new(5);
        for m in [0u8, 4, 8] {
            let n = (0..65_536u64).filter(|&p| sampled(h, p, m)).count() as f64;
            let want = 65_536.0 / f64::from(1u32 << m);
            assert!((n - want).abs() < 4.0 * want.sqrt() + 1.0, "m={m}: {n}");
        }
    }
}
