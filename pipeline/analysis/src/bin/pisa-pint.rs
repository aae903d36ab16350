//! `pisa-pint`: PINT's collector (Recording and Inference Modules) and its experiments.
//!
//! ```text
//! pisa-pint decode TOPOLOGY RECORDS      # records from `pisa-sim --pint-records` ("-": stdin)
//! pisa-pint e13 [--trials N] [--seed S] [--json FILE]   # path tracing: packets and time to decode
//! pisa-pint e12 [--trials N] [--seed S] [--json FILE]   # latency quantiles: error vs packets
//! ```
//!
//! `decode` reads the fabric's PINT configuration (seed, budget, D, latency codec) and its switch
//! IDs from the topology, as the switches' plan does, and prints per flow the decoded path with
//! the packets used and the per-hop latency quantiles (all samples, and the KLL sketch).
//! docs/pint.md describes the record file and the experiments.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;

use analysis::pint::Status;
use analysis::pint::collector::{Collector, CollectorConfig, SKETCH_K, SinkRecord};
use analysis::pint::eval::{self, E12_PACKETS, E13_CASES, PathKind};
use anyhow::{Context, anyhow};
use clap::{Parser, Subcommand};
use topo::Topology;

#[derive(Parser, Debug)]
#[command(version, about = "PINT's collector and experiments (docs/pint.md)")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Decodes the records of a fabric of `pint` switches: per flow, the path and the latency
    /// quantiles.
    Decode {
        /// The topology the records come from (its `pint_*` keys and switch IDs).
        topology: PathBuf,
        /// The records, one per line as `pisa-sim --pint-records` writes them; `-` for stdin.
        records: PathBuf,
        /// The KLL sketch's k.
        #[arg(long, default_value_t = SKETCH_K)]
        sketch_k: usize,
    },
    /// E13: packets and time to decode paths of 1 to 32 hops, 8 and 2 x 4 bits.
    E13 {
        /// Trials per case (each its own seed, IDs, path, packets).
        #[arg(long, default_value_t = 201)]
        trials: usize,
        /// Seed of every trial.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Also write the rows as JSON here (for scripts/analysis pint-plot).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// E12: error of per-hop p50/p99 latency against packets received, b = 4 and 8, with and
    /// without the KLL sketch.
    E12 {
        /// Trials (each its own latency model and seed).
        #[arg(long, default_value_t = 101)]
        trials: usize,
        /// Seed of every trial.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Path length.
        #[arg(long, default_value_t = 5)]
        hops: u32,
        /// Also write the rows as JSON here (for scripts/analysis pint-plot).
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

fn main() {
    let r = match Args::parse().cmd {
        Cmd::Decode {
            topology,
            records,
            sketch_k,
        } => decode(&topology, &records, sketch_k),
        Cmd::E13 { trials, seed, json } => e13(trials, seed, json),
        Cmd::E12 {
            trials,
            seed,
            hops,
            json,
        } => e12(hops, trials, seed, json),
    };
    if let Err(e) = r {
        eprintln!("pisa-pint: {e:#}");
        std::process::exit(1);
    }
}

fn decode(topology: &PathBuf, records: &PathBuf, sketch_k: usize) -> anyhow::Result<()> {
    let at = || topology.display().to_string();
    let text = std::fs::read_to_string(topology)
        .with_context(|| format!("reading {}", topology.display()))?;
    let t = Topology::parse(&text)
        .map_err(anyhow::Error::msg)
        .with_context(at)?;
    let Some(c) = analysis::pint::fabric::fabric_config(&t).with_context(at)? else {
        return Err(anyhow!("{}: no switch runs pint", topology.display()));
    };
    let l = analysis::pint::fabric::latency_fabric_config(&t).with_context(at)?;
    let mut input = String::new();
    if records.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut input)
            .context("reading the records from stdin")?;
    } else {
        input = std::fs::read_to_string(records)
            .with_context(|| format!("reading {}", records.display()))?;
    }
    let mut col = Collector::new(CollectorConfig {
        path: c.path_tracing(),
        latency: l.config,
        candidates: t.switches.iter().map(|s| s.switch_id).collect(),
        sketch_k,
    });
    let mut bad = 0;
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        match SinkRecord::parse_line(line) {
            Some(r) => col.push(r),
            None => bad += 1,
        }
    }
    let hosts: BTreeMap<u32, &str> = t
        .hosts
        .iter()
        .map(|h| (h.ipv4.to_bits(), h.name.as_str()))
        .collect();
    let name = |a: u32| {
        hosts.get(&a).map_or_else(
            || std::net::Ipv4Addr::from_bits(a).to_string(),
            |n| n.to_string(),
        )
    };
    println!(
        "seed {:#x}, budget {}x{}, D {}, {} candidates; latency share {:.4}, codec {:?} {} bits \
         (error bound {:.4}), sketch k {sketch_k}",
        c.seed,
        c.budget.instances(),
        c.budget.bits(),
        c.max_hops,
        t.switches.len(),
        f64::from(l.share) / f64::from(analysis::pint::latency::SHARE_ONE),
        l.config.kind,
        l.config.bits,
        l.config.codec().error_bound(),
    );
    if bad > 0 || col.unknown_query() > 0 {
        println!(
            "{bad} malformed lines, {} records of an unknown query",
            col.unknown_query()
        );
    }
    for f in col.flows() {
        let (src, dst, proto, sport, dport) = f.flow;
        let p = &f.path;
        let status = match p.status {
            Status::Decoded => "decoded",
            Status::Incomplete => "incomplete",
            Status::Inconsistent => "inconsistent",
        };
        let path = p.path.clone().unwrap_or_default();
        let ids: Vec<String> = path.iter().map(u32::to_string).collect();
        println!(
            "{} -> {} proto {proto} {sport}->{dport}: {} hops, {} records ({} latency); path \
             {status} [{}] using {} packets",
            name(src),
            name(dst),
            f.hops,
            f.records,
            f.latency_records,
            ids.join(" "),
            p.packets_used
        );
        for q in &f.latency {
            let sw = path
                .get(q.hop as usize - 1)
                .map_or_else(|| "?".to_string(), u32::to_string);
            println!(
                "  hop {:>2} switch {sw:>10}: {:>6} samples  p50 {:>10.0} ns  p99 {:>10.0} ns  \
                 | sketch ({} items) p50 {:>10.0} ns  p99 {:>10.0} ns",
                q.hop, q.samples, q.p50, q.p99, q.sketch_items, q.p50_sketch, q.p99_sketch
            );
        }
    }
    Ok(())
}

fn write_json(path: Option<PathBuf>, rows: Vec<String>) -> anyhow::Result<()> {
    if let Some(p) = path {
        let text = format!("[\n{}\n]\n", rows.join(",\n"));
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

fn e13(trials: usize, seed: u64, json: Option<PathBuf>) -> anyhow::Result<()> {
    let rows = eval::e13(&E13_CASES, trials, seed);
    println!(
        "| path | k | N | budget | median packets | p90 | k·log log* k | × E[R]/inst | median / \
         (× E[R]/inst) | decode µs (median) | ns/record | failed |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut out = Vec::new();
    for r in &rows {
        let kind = match r.kind {
            PathKind::FatTree8 => "fat-tree k=8",
            PathKind::Chain => "chain",
        };
        let budget = format!("{}x{}", r.budget.instances(), r.budget.bits());
        let ratio = if r.paper_hashed > 0.0 {
            format!("{:.2}", r.median / r.paper_hashed)
        } else {
            "-".into()
        };
        println!(
            "| {kind} | {} | {} | {budget} | {} | {} | {:.1} | {:.1} | {ratio} | {:.1} | {:.0} | \
             {}/{} |",
            r.k,
            r.candidates,
            r.median,
            r.p90,
            r.paper,
            r.paper_hashed,
            r.decode_us,
            r.ns_per_record,
            r.failures,
            r.trials
        );
        out.push(format!(
            "{{\"kind\": \"{kind}\", \"k\": {}, \"n\": {}, \"budget\": \"{budget}\", \"median\": \
             {}, \"p90\": {}, \"paper\": {}, \"paper_hashed\": {}, \"decode_us\": {}, \
             \"ns_per_record\": {}, \"failures\": {}, \"trials\": {}}}",
            r.k,
            r.candidates,
            r.median,
            r.p90,
            r.paper,
            r.paper_hashed,
            r.decode_us,
            r.ns_per_record,
            r.failures,
            r.trials
        ));
    }
    write_json(json, out)
}

fn e12(hops: u32, trials: usize, seed: u64, json: Option<PathBuf>) -> anyhow::Result<()> {
    let rows = eval::e12(hops, &E12_PACKETS, trials, seed);
    for bits in [4u8, 8] {
        println!(
            "b = {bits}: ε = {:.4}",
            eval::e12_config(bits).codec().error_bound()
        );
    }
    println!("| b | sketch | packets | p50 rel. error | p99 rel. error | sketch items (max) |");
    println!("|---|---|---|---|---|---|");
    let mut out = Vec::new();
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.4} | {:.4} | {} |",
            r.bits,
            if r.sketch { "KLL" } else { "all samples" },
            r.packets,
            r.p50_err,
            r.p99_err,
            if r.sketch {
                r.sketch_items.to_string()
            } else {
                "-".into()
            }
        );
        out.push(format!(
            "{{\"bits\": {}, \"sketch\": {}, \"packets\": {}, \"p50_err\": {}, \"p99_err\": {}, \
             \"sketch_items\": {}}}",
            r.bits, r.sketch, r.packets, r.p50_err, r.p99_err, r.sketch_items
        ));
    }
    write_json(json, out)
}
