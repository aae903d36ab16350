//! PINT's collector in `pisa-sim`: the Recording and Inference Modules (PINT §4.2) fed by
//! the records the sinks of `pint` switches export (docs/pint.md).
//!
//! After each turn of a switch running `pint` the simulator drains its digest queue (what a
//! controller would receive), keeps the `egress.pint_record` messages and feeds each to the
//! sans-IO [`analysis::pint::collector::Collector`]: per flow (5-tuple) the path decoder, made at
//! the flow's first record for its hop count with every switch ID of the topology as
//! candidates, and the per-hop latency samples and sketches. The report's `pint` object lists
//! every flow seen, in 5-tuple order. On request the records are also kept, in arrival order,
//! for `pisa-sim --pint-records` (the input of `pisa-pint decode`).

use std::collections::BTreeMap;

use ::hosts::json::Json;
use analysis::pint::Status;
use analysis::pint::collector::{self, CollectorConfig, FlowReport, SinkRecord};
use pipeline::control::Control;
use programs::pint::{FabricConfig, LatencyFabric, RECORD, fabric_config};
use topo::Topology;

/// The collector of one simulated fabric.
#[derive(Debug)]
pub(super) struct Collector {
    config: FabricConfig,
    latency: LatencyFabric,
    inner: collector::Collector,
    /// Per switch: the index of its record digest, if it runs `pint`.
    record: Vec<Option<u16>>,
    /// Host names by IPv4 address.
    hosts: BTreeMap<u32, String>,
    /// Every record, when asked for.
    log: Option<Vec<SinkRecord>>,
}

impl Collector {
    /// The collector of `t`, if any switch of it runs `pint`.
    pub(super) fn new(t: &Topology) -> Result<Option<Collector>, String> {
        let Some(config) = fabric_config(t)? else {
            return Ok(None);
        };
        let latency = programs::pint::latency_fabric_config(t)?;
        let inner = collector::Collector::new(CollectorConfig {
            path: config.path_tracing(),
            latency: latency.config,
            candidates: t.switches.iter().map(|s| s.switch_id).collect(),
            sketch_k: collector::SKETCH_K,
        });
        Ok(Some(Collector {
            config,
            latency,
            inner,
            record: Vec::new(),
            hosts: t
                .hosts
                .iter()
                .map(|h| (h.ipv4.to_bits(), h.name.clone()))
                .collect(),
            log: None,
        }))
    }

    /// Keeps every record from now on.
    pub(super) fn keep_records(&mut self) {
        self.log.get_or_insert_with(Vec::new);
    }

    /// The records kept (empty unless [`Collector::keep_records`] was called).
    pub(super) fn records(&self) -> &[SinkRecord] {
        self.log.as_deref().unwrap_or_default()
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

    /// Drains switch `sw`'s digests and feeds its records to the collector.
    pub(super) fn drain(&mut self, sw: usize, control: &Control) {
        let Some(Some(record)) = self.record.get(sw).copied() else {
            return;
        };
        while let Some(m) = control.externs().digests.pop() {
            if m.digest != record {
                continue;
            }
            let Some(rec) = SinkRecord::from_values(m.values()) else {
                continue;
            };
            if let Some(log) = &mut self.log {
                log.push(rec);
            }
            self.inner.push(rec);
        }
    }

    fn host(&self, addr: u32) -> String {
        self.hosts
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| std::net::Ipv4Addr::from_bits(addr).to_string())
    }

    fn flow(&self, f: &FlowReport) -> Json {
        let (src, dst, proto, sport, dport) = f.flow;
        let r = &f.path;
        let path_ids = r.path.clone().unwrap_or_default();
        let path: Vec<Json> = path_ids.iter().copied().map(Json::from).collect();
        let status = match r.status {
            Status::Decoded => "decoded",
            Status::Incomplete => "incomplete",
            Status::Inconsistent => "inconsistent",
        };
        let latency: Vec<Json> = f
            .latency
            .iter()
            .map(|h| {
                let mut o = Json::object().with("hop", u64::from(h.hop));
                if let Some(&id) = path_ids.get(h.hop as usize - 1) {
                    o = o.with("switch_id", u64::from(id));
                }
                o.with("samples", h.samples as u64)
                    .with("p50_ns", h.p50)
                    .with("p99_ns", h.p99)
                    .with("p50_ns_sketch", h.p50_sketch)
                    .with("p99_ns_sketch", h.p99_sketch)
                    .with("sketch_items", h.sketch_items as u64)
            })
            .collect();
        Json::object()
            .with("src", self.host(src))
            .with("dst", self.host(dst))
            .with("proto", u64::from(proto))
            .with("sport", u64::from(sport))
            .with("dport", u64::from(dport))
            .with("hops", u64::from(f.hops))
            .with("records", f.records)
            .with("status", status)
            .with("decoded_path", path)
            .with("packets_used", r.packets_used as u64)
            .with("ignored", r.ignored as u64)
            .with("latency_records", f.latency_records)
            .with("latency", latency)
    }

    /// The report's `pint` object.
    pub(super) fn report(&self) -> Json {
        let c = &self.config;
        let flows: Vec<Json> = self.inner.flows().iter().map(|f| self.flow(f)).collect();
        let budget = format!("{}x{}", c.budget.instances(), c.budget.bits());
        let l = &self.latency;
        let codec = l.config.codec();
        let kind = match l.config.kind {
            analysis::pint::latency::CodecKind::Multiplicative => "mul",
            analysis::pint::latency::CodecKind::Additive => "add",
        };
        let latency = Json::object()
            .with(
                "share",
                f64::from(l.share) / f64::from(analysis::pint::latency::SHARE_ONE),
            )
            .with("codec", kind)
            .with("bits", u64::from(l.config.bits))
            .with("min_ns", u64::from(l.config.min_ns))
            .with("max_ns", u64::from(l.config.max_ns))
            .with("error_bound", codec.error_bound())
            .with("sketch_k", self.inner.config().sketch_k as u64);
        Json::object()
            .with("seed", format!("{:#x}", c.seed))
            .with("budget", budget)
            .with("max_hops", u64::from(c.max_hops))
            .with("initial_ttl", u64::from(c.initial_ttl))
            .with("candidates", self.inner.config().candidates.len() as u64)
            .with("latency_query", latency)
            .with("flows", flows)
    }
}
