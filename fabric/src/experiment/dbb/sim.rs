//! DBB's E9 in `pisa-sim` (issue 13; docs/dbb.md, "Reproduction"): the paper's Fig. 5
//! ([`super::topology_with`], its link capacities as rates of [`UNIT_BPS`] per paper Gb/s, so a
//! max-flow of 250 Mb/s from s1 to s6), two constant-rate UDP flows from s1's hosts to s6's at
//! a fraction of the max-flow, every scheme on the same flows and seed. A point measures, per
//! scheme and load: goodput (received / sent), loss, reordered packets, and each forward link's
//! share of the packets its stage sent, against the compiler's `N_ij / N` (Table IV: N = 10).
//!
//! The run is deterministic: one seed gives the same row.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use topo::{End, Topology};

use super::{Links, Which, expected_shares, pairs, topology_with};

/// The schemes, in the table's order (registry names).
pub const SCHEMES: [&str; 6] = [
    "dbb-shared",
    "dbb-independent",
    "spray-random",
    "spray-counter",
    "spray-rr",
    "ecmp",
];

/// Fig. 5's links, hosts and queues in `pisa-sim`: 10 Mb/s per paper Gb/s (links of 25 to
/// 200 Mb/s), 1 Gb/s hosts (never the bottleneck), 64-packet queues, 10 µs per link.
pub const LINKS: Links = Links {
    rate_bps: UNIT_BPS,
    host_bps: 1_000_000_000,
    buffer: 64,
    delay_us: 10,
};
/// The rate of one paper Gb/s.
pub const UNIT_BPS: u64 = 10_000_000;
/// The flows: the first two of [`pairs`]`(E9)`, one host of s1 to one host of s6 each.
pub const FLOWS: usize = 2;
/// Every packet's IPv4 length, bytes.
pub const SIZE: u16 = 1000;

/// One forward link of Fig. 5 at a point.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkShare {
    /// Its name in the table, e.g. `S1-S2`.
    pub name: String,
    /// Its sending end, `switch:port`.
    pub id: String,
    /// Its stage (the compiler's).
    pub stage: usize,
    /// The compiler's `N_ij / N`.
    pub expected: f64,
    /// Packets the sending end transmitted on it.
    pub packets: u64,
    /// Its share of the packets its stage transmitted.
    pub share: f64,
    /// The 99th percentile of the queueing delay at its sending end, µs: the paths' difference
    /// is what reorders a sprayed flow where they merge.
    pub qdelay_p99_us: f64,
}

/// One (scheme, load) point of E9 in `pisa-sim`.
#[derive(Clone, Debug, PartialEq)]
pub struct E9SimRow {
    /// The scheme (every switch's program).
    pub scheme: String,
    /// Offered load, a fraction of the max-flow.
    pub load: f64,
    /// Packets the flows sent.
    pub sent: u64,
    /// Packets they delivered.
    pub received: u64,
    /// Packets that arrived after a later one of their flow.
    pub reordered: u64,
    /// How far: the reordering extent (RFC 4737) at the 99th percentile of the reordered
    /// packets, the larger of the flows', and the largest.
    pub extent: (u64, u64),
    /// Reordered packets whose extent reached TCP's duplicate-ACK threshold (3).
    pub beyond_dupthresh: u64,
    /// Fig. 5's forward links, in the compiler's order.
    pub links: Vec<LinkShare>,
}

impl E9SimRow {
    /// Delivered over sent.
    pub fn goodput(&self) -> f64 {
        self.received as f64 / self.sent.max(1) as f64
    }

    /// Packets sent and never delivered.
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }
}

/// Fig. 5 in `pisa-sim` with every switch running `scheme`.
pub fn sim_topology(scheme: &str) -> Topology {
    let mut t = topology_with(Which::E9, &LINKS);
    for s in &mut t.switches {
        s.program = scheme.into();
    }
    t
}

/// The max-flow from s1 to s6 (bits/s) and Fig. 5's forward links with their names, stages and
/// `N_ij / N` (packets and shares zero).
pub fn fig5_links(t: &Topology) -> Result<(u64, Vec<LinkShare>), String> {
    let (capacity, expected) = expected_shares(t, Which::E9)?;
    let mut out = Vec::new();
    for (id, stage, share) in expected {
        let (sw, port) = id.split_once(':').ok_or(format!("link {id}: no port"))?;
        let port: u16 = port.parse().map_err(|_| format!("link {id}: bad port"))?;
        let far = t
            .links
            .iter()
            .find_map(|l| match (&l.a, &l.b) {
                (End::Switch(a, pa), End::Switch(b, _)) if a == sw && *pa == port => Some(b),
                (End::Switch(b, _), End::Switch(a, pa)) if a == sw && *pa == port => Some(b),
                _ => None,
            })
            .ok_or(format!("link {id}: not a link between switches"))?;
        out.push(LinkShare {
            name: format!("{}-{}", sw.to_uppercase(), far.to_uppercase()),
            id,
            stage,
            expected: share,
            packets: 0,
            share: 0.0,
            qdelay_p99_us: 0.0,
        });
    }
    Ok((capacity, out))
}

/// The unsigned number at `path` in a `pisa-sim` report (0 where there is none).
pub(super) fn u(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_u64()
        .unwrap_or_default()
}

/// The row of a `pisa-sim` report of `t` (whose switches run `scheme`) at `load`: what
/// [`sim_point`] returns, from a report kept on disk.
pub fn summarise(scheme: &str, load: f64, t: &Topology, r: &Value) -> Result<E9SimRow, String> {
    let flows = r["flows"].as_array().ok_or("the report has no flows")?;
    let sum = |k: &str| flows.iter().map(|f| u(f, &[k])).sum::<u64>();
    let (_, mut links) = fig5_links(t)?;
    for l in &mut links {
        let (sw, port) = l.id.split_once(':').unwrap_or_default();
        l.packets = u(r, &["switches", sw, "ports", port, "tx_packets"]);
        l.qdelay_p99_us = r["switches"][sw]["ports"][port]["qdelay_us"]["p99"]
            .as_f64()
            .unwrap_or(0.0);
    }
    let mut totals: BTreeMap<usize, u64> = BTreeMap::new();
    for l in &links {
        *totals.entry(l.stage).or_default() += l.packets;
    }
    for l in &mut links {
        l.share = l.packets as f64 / totals[&l.stage].max(1) as f64;
    }
    Ok(E9SimRow {
        scheme: scheme.into(),
        load,
        sent: sum("sent"),
        received: sum("received"),
        reordered: sum("reordered"),
        extent: (
            flows
                .iter()
                .map(|f| u(f, &["reorder_extent", "p99"]))
                .max()
                .unwrap_or(0),
            flows
                .iter()
                .map(|f| u(f, &["reorder_extent", "max"]))
                .max()
                .unwrap_or(0),
        ),
        beyond_dupthresh: flows
            .iter()
            .map(|f| u(f, &["reorder_extent", "beyond_dupthresh"]))
            .sum(),
        links,
    })
}

/// One point: Fig. 5 with every switch running `scheme`, two UDP flows of [`SIZE`]-byte packets
/// from s1's hosts to s6's, each at `load / 2` of the max-flow, for `ms` ms of virtual time with
/// `seed` (then the fabric drains). Returns the row and `pisa-sim`'s report.
pub fn sim_point(scheme: &str, load: f64, ms: u64, seed: u64) -> Result<(E9SimRow, Value), String> {
    if programs::lookup(scheme).is_none() {
        return Err(format!("scheme {scheme}: no such program"));
    }
    if !(load > 0.0 && load.is_finite()) {
        return Err(format!("load {load}: a positive fraction of the max-flow"));
    }
    let t = sim_topology(scheme);
    let (capacity, _) = fig5_links(&t)?;
    let rate = (capacity as f64 * load / FLOWS as f64) as u64;
    let mut opts = Options::new(ms * 1_000_000, seed);
    for (i, (src, dst)) in pairs(Which::E9).iter().take(FLOWS).enumerate() {
        let spec = format!("{src}>{dst} rate={rate} size={SIZE}");
        opts.flows.push(FlowSpec::parse(&spec, i)?);
    }
    let r = Sim::new(&t, opts)?.run();
    let r: Value =
        serde_json::from_str(&r.pretty()).map_err(|e| format!("the simulator's report: {e}"))?;
    Ok((summarise(scheme, load, &t, &r)?, r))
}

/// The rows as Markdown: a table of goodput, loss, reordering (how many; how far, RFC 4737's
/// extent at p99 and max; how many as far as TCP's DupThresh) and every link's share, under
/// the compiler's `N_ij / N`; then each link's p99 queueing delay.
pub fn sim_table(rows: &[E9SimRow]) -> Result<String, String> {
    let (_, links) = fig5_links(&sim_topology(SCHEMES[0]))?;
    let mut head = vec![
        "scheme",
        "load",
        "goodput",
        "lost",
        "reordered",
        "extent p99",
        "extent max",
        "extent >= 3",
    ];
    head.extend(links.iter().map(|l| l.name.as_str()));
    let mut s = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    s += "| DBB's N_ij / N (Table IV) | | | | | | |";
    for l in &links {
        let _ = write!(s, " | {:.2}", l.expected);
    }
    s += " |\n";
    for r in rows {
        let _ = write!(
            s,
            "| {} | {:.2} | {:.3} | {} | {} | {} | {} | {}",
            r.scheme,
            r.load,
            r.goodput(),
            r.lost(),
            r.reordered,
            r.extent.0,
            r.extent.1,
            r.beyond_dupthresh
        );
        for l in &r.links {
            let _ = write!(s, " | {:.2}", l.share);
        }
        s += " |\n";
    }
    let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
    let _ = write!(
        s,
        "\np99 queueing delay at each link's sending end, µs:\n\n| scheme | load | {} |\n|{}\n",
        names.join(" | "),
        "---|".repeat(names.len() + 2)
    );
    for r in rows {
        let _ = write!(s, "| {} | {:.2}", r.scheme, r.load);
        for l in &r.links {
            let _ = write!(s, " | {:.1}", l.qdelay_p99_us);
        }
        s += " |\n";
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fig5_in_the_sim_has_the_papers_links_and_shares() {
        let t = sim_topology("dbb-shared");
        assert!(t.switches.iter().all(|s| s.program == "dbb-shared"));
        assert!(t.links.iter().all(|l| l.props.delay_us == 10));
        let (cap, links) = fig5_links(&t).unwrap();
        assert_eq!(cap, 250_000_000);
        let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "S1-S2", "S1-S3", "S2-S4", "S2-S5", "S3-S4", "S3-S5", "S4-S6", "S5-S6"
            ]
        );
        // Table IV: N_ij of a cycle of N = 10.
        let tenths: Vec<f64> = links.iter().map(|l| l.expected * 10.0).collect();
        assert_eq!(tenths, [2.0, 8.0, 1.0, 1.0, 3.0, 5.0, 4.0, 6.0]);
        let table = sim_table(&[]).unwrap();
        assert!(table.contains(
            "| DBB's N_ij / N (Table IV) | | | | | | | | 0.20 | 0.80 | 0.10 | 0.10 | 0.30 | 0.50 | 0.40 | 0.60 |"
        ));
    }

    #[test]
    fn shares_are_of_the_links_stage_and_an_idle_stage_has_none() {
        let t = sim_topology("ecmp");
        let tx = |n: u64| serde_json::json!({"tx_packets": n, "qdelay_us": {"p99": 1.5}});
        let extent = |p99: u64, max: u64, n: u64| serde_json::json!({"p99": p99, "max": max, "beyond_dupthresh": n});
        let r = serde_json::json!({
            "flows": [{"sent": 10, "received": 7, "reordered": 2, "reorder_extent": extent(4, 5, 2)},
                      {"sent": 10, "received": 10, "reordered": 0, "reorder_extent": extent(0, 0, 0)}],
            "switches": {
                "s1": {"ports": {"1": tx(3), "2": tx(9)}},
                "s2": {"ports": {"2": tx(1), "3": tx(0)}},
                "s3": {"ports": {"2": tx(0), "3": tx(3)}},
            }
        });
        let row = summarise("ecmp", 0.5, &t, &r).unwrap();
        assert_eq!(
            (row.sent, row.received, row.reordered, row.lost()),
            (20, 17, 2, 3)
        );
        assert_eq!(row.goodput(), 0.85);
        let share = |n: &str| row.links.iter().find(|l| l.name == n).unwrap().share;
        assert_eq!((share("S1-S2"), share("S1-S3")), (0.25, 0.75));
        assert_eq!((share("S2-S4"), share("S3-S5")), (0.25, 0.75));
        assert_eq!((share("S4-S6"), share("S5-S6")), (0.0, 0.0));
        let table = sim_table(&[row]).unwrap();
        assert!(
            table.contains("| ecmp | 0.50 | 0.850 | 3 | 2 | 4 | 5 | 2 | 0.25 | 0.75 | 0.25 | 0.00 | 0.00 | 0.75 | 0.00 | 0.00 |"),
            "{table}"
        );
        assert!(
            table.contains("| ecmp | 0.50 | 1.5 | 1.5 | 1.5 | 1.5 | 1.5 | 1.5 | 0.0 | 0.0 |"),
            "{table}"
        );
    }

    #[test]
    fn dbb_shared_splits_as_the_compiler_says_and_delivers_everything() {
        let (row, r) = sim_point("dbb-shared", 0.5, 20, 1).unwrap();
        assert_eq!(r["flows"].as_array().map(Vec::len), Some(FLOWS));
        // 20 ms of two flows of 62.5 Mb/s in 1014-byte frames: about 300 packets.
        assert!(row.sent > 250, "{row:?}");
        assert_eq!((row.lost(), row.reordered), (0, 0), "{row:?}");
        for l in &row.links {
            assert!((l.share - l.expected).abs() < 0.02, "{l:?}");
        }
        // One seed, one row.
        assert_eq!(sim_point("dbb-shared", 0.5, 20, 1).unwrap().0, row);
    }

    #[test]
    fn at_low_load_every_scheme_delivers_and_at_high_load_only_dbb_does() {
        for s in SCHEMES {
            // Two flows of 12.5 Mb/s for 40 ms: about 120 packets.
            let (row, _) = sim_point(s, 0.1, 40, 1).unwrap();
            assert!(row.sent > 100 && row.goodput() > 0.99, "{row:?}");
        }
        // At 96% of the max-flow, splitting evenly over s1's 50 and 200 Mb/s links overloads
        // the first (DBB §IV's point); ECMP puts each flow on one path of at most 100 Mb/s.
        let dbb = sim_point("dbb-shared", 0.96, 20, 1).unwrap().0;
        assert!(dbb.goodput() > 0.99, "{dbb:?}");
        for s in ["spray-random", "spray-rr", "ecmp"] {
            let (row, _) = sim_point(s, 0.96, 20, 1).unwrap();
            assert!(row.goodput() < 0.9, "{row:?}");
        }
        assert!(sim_point("no-such-scheme", 0.5, 1, 1).is_err());
        assert!(sim_point("dbb-shared", 0.0, 1, 1).is_err());
    }
}
