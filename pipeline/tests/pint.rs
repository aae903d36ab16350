//! PINT path tracing (seed 003; seed-spec §4; docs/pint.md) in `pisa-sim`: `pint` switches encode
//! their switch IDs hop by hop (§4.2), the sinks export records, and the simulator's collector
//! decodes every flow's path. Tests are named after the paper's sections; every run is
//! deterministic for its seed.

use pipeline::fabric::topo::Topology;
use pipeline::sim::json::Json;

mod common;
use common::{num, sim_run as run};

/// splitmix64, for random switch IDs.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `n` distinct random nonzero 32-bit switch IDs from `seed`.
fn random_ids(seed: u64, n: usize) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut s = seed;
    while ids.len() < n {
        s = mix(s);
        let id = s as u32;
        if id != 0 && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// A chain s1 – s2 – … – sN with host h1 on s1 and h2 on sN, the switches carrying `ids`.
fn chain(ids: &[u32], params: &str) -> Topology {
    let mut t = String::from("defaults rate=100M delay=5us buffer=64\n");
    for (i, id) in ids.iter().enumerate() {
        t += &format!("switch s{} program=pint switch_id={id} {params}\n", i + 1);
    }
    t += "host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\nhost h2 ipv4=10.0.2.1 ipv6=fd00::2:1\n";
    t += "link s1:1 h1\n";
    for i in 1..ids.len() {
        t += &format!("link s{i}:2 s{}:1\n", i + 1);
    }
    t += &format!("link s{}:2 h2\n", ids.len());
    Topology::parse(&t).unwrap()
}

/// The report's `pint.flows`.
fn pint_flows(r: &Json) -> &[Json] {
    match r.get("pint").and_then(|p| p.get("flows")) {
        Some(Json::A(f)) => f,
        _ => panic!("no pint.flows in the report"),
    }
}

/// A flow's decoded path.
fn decoded(f: &Json) -> Vec<u32> {
    match f.get("decoded_path") {
        Some(Json::A(p)) => p.iter().map(|x| x.as_u64().unwrap() as u32).collect(),
        _ => panic!("no decoded_path"),
    }
}

#[test]
fn explore() {
    for k in [5usize, 16] {
        for bits in ["8", "2x4"] {
            for seed in 0..5u64 {
                let ids = random_ids(seed ^ (k as u64) << 8, k);
                let t = chain(&ids, &format!("pint_bits={bits} pint_seed={}", mix(seed)));
                let r = run(&t, 300, seed, &["h1>h2 rate=10000pps size=500"]);
                let f = &pint_flows(&r)[0];
                assert_eq!(decoded(f), ids);
                println!(
                    "k={k} bits={bits} seed={seed} used={} records={}",
                    num(f, &["packets_used"]),
                    num(f, &["records"])
                );
            }
        }
    }
}
