//! PINT's latency query (§4.4(d), §5, §6.2; docs/pint.md) and the Query Engine in `pisa-sim`:
//! `pint` switches write compressed hop latencies on a share of the packets, the sinks export
//! them, and the collector reports per-hop quantiles next to the decoded path. Deterministic for
//! each seed.

use analysis::pint::latency::{CodecKind, LatencyConfig};
use hosts::json::Json;
use topo::Topology;

mod common;
use common::{num, sim_run as run};

/// A 5-switch chain h1 – s1 … s5 – h2 at 100 Mb/s, but s3 → s4 at 50 Mb/s: the one hop that
/// queues is hop 3 (s3's egress). Buffers hold 64 packets.
fn chain(params: &str) -> Topology {
    let mut t = String::from("defaults rate=100M delay=5us buffer=64\n");
    for i in 1..=5 {
        t += &format!("switch s{i} program=pint switch_id={} {params}\n", 100 + i);
    }
    t += "host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\nhost h2 ipv4=10.0.2.1 ipv6=fd00::2:1\n";
    t += "link s1:1 h1\nlink s1:2 s2:1\nlink s2:2 s3:1\nlink s3:2 s4:1 rate=50M\n";
    t += "link s4:2 s5:1\nlink s5:2 h2\n";
    Topology::parse(&t).unwrap()
}

fn field(j: &Json, key: &str) -> f64 {
    match j.get(key) {
        Some(Json::F(x)) => *x,
        Some(Json::U(x)) => *x as f64,
        other => panic!("{key}: {other:?}"),
    }
}

fn array<'a>(j: &'a Json, key: &str) -> &'a [Json] {
    match j.get(key) {
        Some(Json::A(a)) => a,
        other => panic!("{key}: {other:?}"),
    }
}

/// Poisson packets at 11,000/s of 500 B through the chain for 300 ms (the 50 Mb/s hop at
/// ρ ≈ 0.9): the one flow's report.
fn one_flow(params: &str, seed: u64) -> (Json, Json) {
    let r = run(
        &chain(params),
        300,
        seed,
        &["h1>h2 rate=11000pps size=500 pattern=poisson"],
    );
    let p = r.get("pint").expect("pint").clone();
    let flows = array(&p, "flows");
    assert_eq!(flows.len(), 1);
    (p.clone(), flows[0].clone())
}

/// §4.4(d) and the Query Engine: half the packets carry latency, spread evenly over the hops;
/// the other half still decode the path; only the hop before the slow link reports queueing,
/// and its quantiles are physically possible (a 64-packet buffer drains in 64 service times).
#[test]
fn s4_4_latency_query_finds_the_queueing_hop() {
    let (p, f) = one_flow("pint_latency=1/2", 5);
    let records = num(&f, &["records"]) as f64;
    let lat = num(&f, &["latency_records"]) as f64;
    assert!(records > 3000.0, "{records}");
    assert!((lat / records - 0.5).abs() < 0.04, "{lat} of {records}");
    let path: Vec<u64> = array(&f, "decoded_path")
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(path, [101, 102, 103, 104, 105]);
    let eps = field(p.get("latency_query").unwrap(), "error_bound");
    let hops = array(&f, "latency");
    assert_eq!(hops.len(), 5);
    // A 500-byte frame's service time on 50 Mb/s; the buffer bounds the wait.
    let service_ns = 500.0 * 8.0 / 50e6 * 1e9;
    for h in hops {
        let hop = num(h, &["hop"]);
        assert_eq!(num(h, &["switch_id"]), 100 + hop);
        let n = num(h, &["samples"]) as f64;
        assert!((n / lat - 0.2).abs() < 0.04, "hop {hop}: {n} of {lat}");
        let (p50, p99) = (field(h, "p50_ns"), field(h, "p99_ns"));
        let (s50, s99) = (field(h, "p50_ns_sketch"), field(h, "p99_ns_sketch"));
        assert!(num(h, &["sketch_items"]) <= 100);
        if hop == 3 {
            assert!(p50 > 20_000.0 && p50 < p99, "{p50} {p99}");
            assert!(p99 <= 65.0 * service_ns * (1.0 + eps), "{p99}");
            // The sketch's quantiles are samples' values close in rank to the exact ones.
            assert!(s50 / p50 < 1.5 && p50 / s50 < 1.5, "{s50} {p50}");
            assert!(s99 / p99 < 1.5 && p99 / s99 < 1.5, "{s99} {p99}");
        } else {
            assert_eq!((p50, p99, s50, s99), (0.0, 0.0, 0.0, 0.0), "hop {hop}");
        }
    }
}

/// §4.3 in the switches: with 4-bit additive compression every reported quantile is a
/// multiple of the step 2Δ, and the latency share 1 leaves no packet for path tracing.
#[test]
fn s4_3_additive_four_bit_latency_is_on_the_grid() {
    let (p, f) = one_flow(
        "pint_latency=1 pint_lat_codec=add pint_lat_bits=4 pint_lat_max_ns=3000000",
        9,
    );
    let q = p.get("latency_query").unwrap();
    assert_eq!(num(q, &["bits"]), 4);
    let cfg = LatencyConfig {
        kind: CodecKind::Additive,
        bits: 4,
        min_ns: 100,
        max_ns: 3_000_000,
    };
    let delta = cfg.codec().error_bound();
    assert!((field(q, "error_bound") - delta).abs() < 1e-6);
    assert_eq!(num(&f, &["latency_records"]), num(&f, &["records"]));
    assert_eq!(array(&f, "decoded_path").len(), 0, "no path packets");
    let h3 = &array(&f, "latency")[2];
    for key in ["p50_ns", "p99_ns", "p50_ns_sketch", "p99_ns_sketch"] {
        let steps = field(h3, key) / (2.0 * delta);
        assert!((steps - steps.round()).abs() < 1e-6, "{key}: {steps}");
        assert!(steps.round() <= 15.0);
    }
    assert!(field(h3, "p99_ns") >= 2.0 * delta);
}

/// The latency keys must agree across the fabric like the others (§4.1: switches and the
/// collector share one configuration), and malformed values fail the plan.
#[test]
fn s4_1_latency_parameters_must_agree() {
    let mut t = chain("");
    t.switches[0]
        .params
        .insert("pint_lat_bits".into(), "4".into());
    t.switches[3]
        .params
        .insert("pint_lat_bits".into(), "8".into());
    let e = programs::fabric_plan(&t).unwrap_err();
    assert!(
        matches!(&e, programs::PlanError::Pint(programs::pint::ConfigError::Disagree { key, .. })
            if key == "pint_lat_bits"),
        "{e:?}"
    );
    for (k, v) in [
        ("pint_latency", "2"),
        ("pint_lat_codec", "log"),
        ("pint_lat_bits", "5"),
        ("pint_lat_max_ns", "0"),
    ] {
        let mut t = chain("");
        t.switches[1].params.insert(k.into(), v.into());
        assert!(programs::fabric_plan(&t).is_err(), "{k}={v}");
    }
    let mut t = chain("");
    t.switches[2]
        .params
        .insert("pint_latency".into(), "1/16".into());
    let plans = programs::fabric_plan(&t).unwrap();
    for s in ["s1", "s5"] {
        let lines: Vec<&String> = plans[s]
            .routes
            .iter()
            .filter(|l| l.contains("pint_query"))
            .collect();
        assert_eq!(lines.len(), 2, "one entry per port on {s}");
        assert!(
            lines[0].ends_with("=> 4096 0 8 100 10000000"),
            "{}",
            lines[0]
        );
    }
}

/// The records `pisa-sim --pint-records` dumps, written out as lines, read back and fed to a
/// collector configured from the topology alone (what `pisa-pint decode` does), give the same
/// paths, packets used and quantiles as the simulator's own collector.
#[test]
fn s4_1_records_replayed_offline_give_the_same_report() {
    use analysis::pint::collector::{Collector, CollectorConfig, SKETCH_K, SinkRecord};
    let t = chain("pint_latency=1/4 pint_bits=2x4");
    let mut opts = sim::fabric::Options::new(200_000_000, 11);
    for (i, f) in [
        "h1>h2 rate=11000pps size=500 pattern=poisson",
        "h2>h1 rate=2000pps size=200",
    ]
    .iter()
    .enumerate()
    {
        opts.flows.push(sim::flow::FlowSpec::parse(f, i).unwrap());
    }
    let mut sim = sim::fabric::Sim::new(&t, opts).unwrap();
    sim.keep_pint_records();
    let r = sim.run();
    let text: String = sim
        .pint_records()
        .iter()
        .map(|r| r.to_line() + "\n")
        .collect();
    let c = programs::pint::fabric_config(&t).unwrap().unwrap();
    let l = programs::pint::latency_fabric_config(&t).unwrap();
    let mut col = Collector::new(CollectorConfig {
        path: c.path_tracing(),
        latency: l.config,
        candidates: t.switches.iter().map(|s| s.switch_id).collect(),
        sketch_k: SKETCH_K,
    });
    for line in text.lines() {
        col.push(SinkRecord::parse_line(line).unwrap());
    }
    let offline = col.flows();
    let online = array(r.get("pint").unwrap(), "flows");
    assert_eq!(offline.len(), 2);
    assert_eq!(online.len(), 2);
    for (a, b) in offline.iter().zip(online) {
        assert_eq!(a.records, num(b, &["records"]));
        assert_eq!(a.path.packets_used as u64, num(b, &["packets_used"]));
        let path: Vec<u64> = array(b, "decoded_path")
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        let want: Vec<u64> = a
            .path
            .path
            .clone()
            .unwrap()
            .into_iter()
            .map(u64::from)
            .collect();
        assert_eq!(path, want);
        assert_eq!(want.len(), 5);
        let lat = array(b, "latency");
        assert_eq!(a.latency.len(), lat.len());
        for (q, j) in a.latency.iter().zip(lat) {
            assert_eq!(q.samples as u64, num(j, &["samples"]));
            assert_eq!((q.p50, q.p99), (field(j, "p50_ns"), field(j, "p99_ns")));
            assert_eq!(q.p99_sketch, field(j, "p99_ns_sketch"));
        }
    }
}
