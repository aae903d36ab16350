//! PINT's collector in `pisa-sim`: the Recording and Inference Modules (seed-spec §4.1) fed by
//! the records the sinks of `pint` switches export (docs/pint.md).
//!
//! After each turn of a switch running `pint` the collector drains its digest queue (what a
//! controller would receive), keeps the `egress.pint_record` messages and feeds each to the
//! [`PathDecoder`] of its flow, keyed by the 5-tuple. A flow's decoder is made at its first
//! record, for the record's hop count, with every switch ID of the topology as candidates; the
//! decoder ignores records of another hop count and stops counting once the path is decoded.
//! The report's `pint` object lists every flow seen, in 5-tuple order.

use std::collections::BTreeMap;

use crate::control::Control;
use crate::fabric::topo::Topology;
use crate::pint::{PathDecoder, PathTracing, Record, Status};
use crate::program::pint::{FabricConfig, RECORD, fabric_config};
use crate::sim::json::Json;

/// A flow's 5-tuple: source and destination address, protocol, ports.
type FlowKey = (u32, u32, u8, u16, u16);

#[derive(Debug)]
struct FlowDecoder {
    decoder: PathDecoder<'static>,
    records: u64,
}

/// The collector of one simulated fabric.
#[derive(Debug)]
pub(super) struct Collector {
    config: FabricConfig,
    cfg: PathTracing,
    candidates: Vec<u32>,
    /// Per switch: the index of its record digest, if it runs `pint`.
    record: Vec<Option<u16>>,
    /// Host names by IPv4 address.
    hosts: BTreeMap<u32, String>,
    flows: BTreeMap<FlowKey, FlowDecoder>,
}

impl Collector {
    /// The collector of `t`, if any switch of it runs `pint`.
    pub(super) fn new(t: &Topology) -> Result<Option<Collector>, String> {
        let Some(config) = fabric_config(t)? else {
            return Ok(None);
        };
        Ok(Some(Collector {
            config,
            cfg: config.path_tracing(),
            candidates: t.switches.iter().map(|s| s.switch_id).collect(),
            record: Vec::new(),
            hosts: t
                .hosts
                .iter()
                .map(|h| (h.ipv4.to_bits(), h.name.clone()))
                .collect(),
            flows: BTreeMap::new(),
        }))
    }

    /// Registers switch number `sw` (in topology order) and its control plane.
    pub(super) fn add_switch(&mut self, sw: usize, program: &str, control: &Control) {
        if self.record.len() <= sw {
            self.record.resize(sw + 1, None);
        }
        let s = control.schema();
        self.record[sw] = (program == "pint")
            .then(|| s.digests.iter().position(|d| d.name == RECORD))
            .flatten()
            .and_then(|i| u16::try_from(i).ok());
    }

    /// Drains switch `sw`'s digests and feeds its records to their flows' decoders.
    pub(super) fn drain(&mut self, sw: usize, control: &Control) {
        let Some(Some(record)) = self.record.get(sw).copied() else {
            return;
        };
        while let Some(m) = control.externs().digests.pop() {
            let v = m.values();
            if m.digest != record || v.len() < 8 {
                continue;
            }
            let key = (
                v[3] as u32,
                v[4] as u32,
                v[5] as u8,
                v[6] as u16,
                v[7] as u16,
            );
            let rec = Record {
                packet_id: v[0] as u64,
                hops: v[1] as u32,
                digest: v[2] as u32,
            };
            let flow = self.flows.entry(key).or_insert_with(|| FlowDecoder {
                decoder: PathDecoder::owned(self.cfg.clone(), rec.hops, &self.candidates),
                records: 0,
            });
            flow.records += 1;
            flow.decoder.push(rec);
        }
    }

    fn host(&self, addr: u32) -> String {
        self.hosts
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| std::net::Ipv4Addr::from_bits(addr).to_string())
    }

    /// The report's `pint` object.
    pub(super) fn report(&self) -> Json {
        let c = &self.config;
        let flows: Vec<Json> = self
            .flows
            .iter()
            .map(|(&(src, dst, proto, sport, dport), f)| {
                let r = f.decoder.report();
                let path: Vec<Json> = r
                    .path
                    .unwrap_or_default()
                    .into_iter()
                    .map(Json::from)
                    .collect();
                let status = match r.status {
                    Status::Decoded => "decoded",
                    Status::Incomplete => "incomplete",
                    Status::Inconsistent => "inconsistent",
                };
                Json::object()
                    .with("src", self.host(src))
                    .with("dst", self.host(dst))
                    .with("proto", u64::from(proto))
                    .with("sport", u64::from(sport))
                    .with("dport", u64::from(dport))
                    .with("hops", u64::from(f.decoder.k()))
                    .with("records", f.records)
                    .with("status", status)
                    .with("decoded_path", path)
                    .with("packets_used", r.packets_used as u64)
                    .with("ignored", r.ignored as u64)
            })
            .collect();
        let budget = format!("{}x{}", c.budget.instances(), c.budget.bits());
        Json::object()
            .with("seed", format!("{:#x}", c.seed))
            .with("budget", budget)
            .with("max_hops", u64::from(c.max_hops))
            .with("initial_ttl", u64::from(c.initial_ttl))
            .with("candidates", self.candidates.len() as u64)
            .with("flows", flows)
    }
}
