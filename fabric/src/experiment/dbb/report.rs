//! E8/E9 results: each point's report reduced to one row of numbers, and the tables of medians
//! over repetitions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::traffic::PACED_CSV_HEADER;

/// The rows of a `--paced-out` CSV as JSON objects (numbers where a column parses as one).
pub fn parse_paced(text: &str) -> Result<Vec<Value>, String> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    if head != PACED_CSV_HEADER.split(',').collect::<Vec<_>>() {
        return Err(format!("not a paced-flow CSV: header {head:?}"));
    }
    let mut rows = Vec::new();
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let v: Vec<&str> = l.split(',').collect();
        if v.len() != head.len() {
            return Err(format!("paced-flow CSV: {} columns in {l:?}", v.len()));
        }
        let obj: serde_json::Map<String, Value> = head
            .iter()
            .zip(v)
            .map(|(k, x)| {
                let val = match (x.parse::<f64>(), x) {
                    (_, "true") => json!(true),
                    (_, "false") => json!(false),
                    (Ok(n), _) if !x.starts_with("0x") => json!(n),
                    _ => json!(x),
                };
                (k.to_string(), val)
            })
            .collect();
        rows.push(Value::Object(obj));
    }
    Ok(rows)
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// [`sim::traffic::median`]; NaN (a "-" in the tables) when no value is finite.
fn median(v: Vec<f64>) -> f64 {
    sim::traffic::median(&v).unwrap_or(f64::NAN)
}

/// The columns of [`summarise`], in order.
pub const COLUMNS: [&str; 21] = [
    "capacity_mbps",
    "offered_mbps",
    "goodput_mbps",
    "goodput_of_offered",
    "min_pair_mbps",
    "flow_rate_frac_min",
    "flow_rate_frac_median",
    "unfinished",
    "ooo_pct",
    "dupacks",
    "retrans_pct",
    "dsack_recv",
    "sack_reorder",
    "spurious_rtos",
    "reord_seen",
    "rcv_ofo_queue",
    "max_share_dev",
    "tm_drops",
    "reordering_median",
    "reordering_max",
    "qdelay_p99_max_us",
];

/// Each forward link's share of the packets its stage sent over the run, with its stage and
/// `N_ij / N`, in the report's order.
pub fn link_shares(r: &Value) -> Vec<(String, usize, f64, f64)> {
    let links = r["links"].as_array().cloned().unwrap_or_default();
    let mut stage_sum: BTreeMap<u64, f64> = BTreeMap::new();
    for l in &links {
        *stage_sum
            .entry(l["stage"].as_u64().unwrap_or(0))
            .or_default() += num(l, "packets");
    }
    links
        .iter()
        .map(|l| {
            let st = l["stage"].as_u64().unwrap_or(0);
            let total = stage_sum.get(&st).copied().unwrap_or(0.0);
            let share = if total > 0.0 {
                num(l, "packets") / total
            } else {
                f64::NAN
            };
            (
                l["link"].as_str().unwrap_or_default().to_string(),
                st as usize,
                num(l, "expected_share"),
                share,
            )
        })
        .collect()
}

/// One point's report as the numbers of [`COLUMNS`]:
/// - goodput: the window's bytes over its seconds, summed over the pairs (Mb/s), and against the
///   offered load; the slowest pair's;
/// - per flow over its own life: goodput / pacing rate, the least and the median;
/// - reordering: the receivers' out-of-order packets in % of their data segments (`TCP_INFO`), and
///   their count (each is answered by a DUPACK); the senders' retransmitted segments in % of the
///   segments they sent, DSACKs received, SACK-detected reordering and spurious RTOs (namespace
///   counters `Tcp.RetransSegs / Tcp.OutSegs`, `TcpExt.TCPDSACKRecv`, `TcpExt.TCPSACKReorder`,
///   `TcpExt.TCPSpuriousRTOs`), `tcpi_reord_seen` summed, and the receivers' `TCPOFOQueue`;
/// - the largest |share - N_ij / N| of a forward link, and the switches' TM drops;
/// - how far packets were reordered, as each sender's kernel measured it: `tcpi_reordering`,
///   the distance in segments between a SACKed segment and the hole below it that Linux took as
///   reordering (3 if it saw none; up to `tcp_max_reordering`), median and largest over flows;
/// - the queueing delay behind the reordering: the largest p99 over the forward links of what
///   left them (`show_ports`, the whole run; NaN in reports recorded before it was).
pub fn summarise(r: &Value) -> Vec<f64> {
    let flows = r["flows"].as_array().cloned().unwrap_or_default();
    let win = r["window"].as_array().cloned().unwrap_or_default();
    let goodput: f64 = win.iter().map(|w| num(w, "goodput_bps")).sum();
    let min_pair = win
        .iter()
        .map(|w| num(w, "goodput_bps"))
        .fold(f64::INFINITY, f64::min);
    let frac: Vec<f64> = flows
        .iter()
        .filter(|f| f["finished"] == json!(true) && num(f, "rate_bps") > 0.0)
        .map(|f| num(f, "goodput_bps") / num(f, "rate_bps"))
        .collect();
    let unfinished = flows
        .iter()
        .filter(|f| f["finished"] != json!(true))
        .count();
    let sum = |k: &str| flows.iter().map(|f| num(f, k)).sum::<f64>();
    let snd = &r["sender_counters"];
    let rcv = &r["receiver_counters"];
    let offered = num(r, "offered_bps");
    let dev = link_shares(r)
        .iter()
        .map(|(_, _, e, s)| (s - e).abs())
        .fold(0.0, f64::max);
    // What pisa-sim's hosts do not count: NaN, a "-" in the tables, rather than a zero.
    let kernel = |x: f64| {
        if r["where"] == json!("sim") {
            f64::NAN
        } else {
            x
        }
    };
    vec![
        num(r, "capacity_bps") / 1e6,
        offered / 1e6,
        goodput / 1e6,
        if offered > 0.0 {
            goodput / offered
        } else {
            0.0
        },
        if min_pair.is_finite() {
            min_pair / 1e6
        } else {
            0.0
        },
        frac.iter().copied().fold(f64::INFINITY, f64::min),
        median(frac),
        unfinished as f64,
        100.0 * sum("rcv_ooopack") / sum("rcv_segs").max(1.0),
        sum("rcv_ooopack"),
        100.0 * num(snd, "Tcp.RetransSegs") / num(snd, "Tcp.OutSegs").max(1.0),
        num(snd, "TcpExt.TCPDSACKRecv"),
        kernel(num(snd, "TcpExt.TCPSACKReorder")),
        kernel(num(snd, "TcpExt.TCPSpuriousRTOs")),
        sum("reord_seen"),
        kernel(num(rcv, "TcpExt.TCPOFOQueue")),
        dev,
        num(r, "tm_drops"),
        median(flows.iter().map(|f| num(f, "reordering")).collect()),
        flows
            .iter()
            .map(|f| num(f, "reordering"))
            .fold(0.0, f64::max),
        r["links"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["qdelay_us"]["p99"].as_f64())
            .fold(f64::NAN, f64::max),
    ]
}

fn fmt(x: f64) -> String {
    if !x.is_finite() {
        "—".into()
    } else if x.abs() >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// One point's identity and numbers.
#[derive(Clone, Debug)]
pub struct Row {
    /// Scheme.
    pub scheme: String,
    /// Scenario name.
    pub scenario: String,
    /// Repetition, from 1.
    pub rep: u32,
    /// [`COLUMNS`].
    pub values: Vec<f64>,
    /// Each forward link's share and expected share.
    pub shares: Vec<(String, usize, f64, f64)>,
    /// The point's fidelity verdict (`ok`, `degraded: ...`; `-` for reports recorded before
    /// the verdict existed).
    pub fidelity: String,
}

/// The CSV of every point.
pub fn csv(rows: &[Row]) -> String {
    let mut s = format!("scheme,scenario,rep,{},fidelity\n", COLUMNS.join(","));
    for r in rows {
        let v: Vec<String> = r.values.iter().map(|x| format!("{x:.4}")).collect();
        let _ = writeln!(
            s,
            "{},{},{},{},{}",
            r.scheme,
            r.scenario,
            r.rep,
            v.join(","),
            r.fidelity
        );
    }
    s
}

/// Medians over the reps of each (scenario, scheme), in the order the rows first name them.
fn groups(rows: &[Row]) -> Vec<((String, String), Vec<&Row>)> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut by: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        let k = (r.scenario.clone(), r.scheme.clone());
        if !by.contains_key(&k) {
            order.push(k.clone());
        }
        by.entry(k).or_default().push(r);
    }
    let mut order_sorted = order.clone();
    // Scenario-major, schemes in their first order within it.
    order_sorted.sort_by_key(|k| {
        (
            order.iter().position(|o| o.0 == k.0).unwrap_or(0),
            order.iter().position(|o| o == k).unwrap_or(0),
        )
    });
    order_sorted
        .into_iter()
        .map(|k| {
            let v = by.remove(&k).unwrap_or_default();
            (k, v)
        })
        .collect()
}

/// The Markdown tables: goodput and reordering per (scenario, scheme), medians over the reps
/// (goodput and its fraction of the offer with the 95% bootstrap interval of the median); then
/// each forward link's share of its stage against `N_ij / N`.
pub fn tables(rows: &[Row]) -> String {
    let shown = [
        ("offered Mb/s", 1),
        ("goodput Mb/s", 2),
        ("of offered", 3),
        ("slowest pair Mb/s", 4),
        ("flow goodput/rate min", 5),
        ("median", 6),
        ("OOO %", 8),
        ("DUPACKs", 9),
        ("retrans %", 10),
        ("DSACKs", 11),
        ("SACK reorder", 12),
        ("reordering median", 18),
        ("reordering max", 19),
        ("worst link p99 queueing µs", 20),
        ("spurious RTOs", 13),
        ("max share dev", 16),
        ("TM drops", 17),
    ];
    let mut s = String::from("| scenario | scheme | reps | fidelity ok |");
    for (h, _) in shown {
        let _ = write!(s, " {h} |");
    }
    s += "\n|---|---|---:|---:|";
    s += &"---:|".repeat(shown.len());
    s += "\n";
    let gs = groups(rows);
    for ((scen, scheme), rs) in &gs {
        let ok = rs.iter().filter(|r| r.fidelity == "ok").count();
        let judged = rs.iter().filter(|r| r.fidelity != "-").count();
        if judged == 0 {
            let _ = write!(s, "| {scen} | {scheme} | {} | - |", rs.len());
        } else {
            let _ = write!(s, "| {scen} | {scheme} | {} | {ok}/{judged} |", rs.len());
        }
        for (_, i) in shown {
            let v: Vec<f64> = rs.iter().map(|r| r.values[i]).collect();
            // Goodput, the measure every claim is about, with the 95% bootstrap interval of
            // its median over the reps; the other columns with their median alone.
            let cell = match i {
                2 => crate::experiment::e10::median_cell(&v, 1),
                3 => crate::experiment::e10::median_cell(&v, 3),
                _ => fmt(median(v)),
            };
            let _ = write!(s, " {cell} |");
        }
        s += "\n";
    }
    // Shares: one column per forward link.
    let Some(first) = rows.first() else {
        return s;
    };
    s += "\n| scenario | scheme |";
    for (l, st, _, _) in &first.shares {
        let _ = write!(s, " {l} (stage {st}) |");
    }
    s += "\n|---|---|";
    s += &"---:|".repeat(first.shares.len());
    s += "\n| | N_ij / N |";
    for (_, _, e, _) in &first.shares {
        let _ = write!(s, " {e:.3} |");
    }
    s += "\n";
    for ((scen, scheme), rs) in &gs {
        let _ = write!(s, "| {scen} | {scheme} |");
        for i in 0..first.shares.len() {
            let m = median(
                rs.iter()
                    .filter_map(|r| r.shares.get(i).map(|x| x.3))
                    .collect(),
            );
            let _ = write!(s, " {m:.3} |");
        }
        s += "\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Value {
        json!({
            "capacity_bps": 100e6, "offered_bps": 100e6,
            "window": [{"goodput_bps": 30e6}, {"goodput_bps": 20e6}],
            "flows": [
                {"finished": true, "rate_bps": 50e6, "goodput_bps": 25e6, "rcv_ooopack": 10.0,
                 "rcv_segs": 1000.0, "reord_seen": 1.0, "reordering": 12.0},
                {"finished": false, "rate_bps": 50e6, "goodput_bps": 0.0, "rcv_ooopack": 0.0,
                 "rcv_segs": 0.0, "reord_seen": 0.0, "reordering": 3.0}
            ],
            "links": [
                {"link": "s1:1", "stage": 1, "expected_share": 0.2, "packets": 30,
                 "qdelay_us": {"p50": 2.0, "p99": 250.5, "max": 900.0}},
                {"link": "s1:2", "stage": 1, "expected_share": 0.8, "packets": 70,
                 "qdelay_us": {"p50": 1.0, "p99": 12.0, "max": 80.0}},
                {"link": "s2:2", "stage": 2, "expected_share": 1.0, "packets": 5}
            ],
            "sender_counters": {"Tcp.RetransSegs": 5, "Tcp.OutSegs": 500,
                "TcpExt.TCPDSACKRecv": 2},
            "receiver_counters": {},
            "tm_drops": 3
        })
    }

    #[test]
    fn a_report_reduces_to_its_numbers() {
        let v = summarise(&report());
        let get = |k: &str| v[COLUMNS.iter().position(|c| *c == k).unwrap()];
        assert_eq!(get("goodput_mbps"), 50.0);
        assert_eq!(get("goodput_of_offered"), 0.5);
        assert_eq!(get("min_pair_mbps"), 20.0);
        assert_eq!(get("flow_rate_frac_min"), 0.5);
        assert_eq!(get("unfinished"), 1.0);
        assert_eq!(get("ooo_pct"), 1.0);
        assert_eq!(get("retrans_pct"), 1.0);
        assert_eq!(get("dsack_recv"), 2.0);
        assert!((get("max_share_dev") - 0.1).abs() < 1e-9);
        assert_eq!(get("tm_drops"), 3.0);
        assert_eq!(
            (get("reordering_median"), get("reordering_max")),
            (7.5, 12.0)
        );
        // The worst link's p99 queueing delay; a link with none recorded is passed over.
        assert_eq!(get("qdelay_p99_max_us"), 250.5);
        // A simulated report: the kernel's counters the simulator lacks are NaN, not 0.
        let mut sim = report();
        sim["where"] = json!("sim");
        let v = summarise(&sim);
        let get = |k: &str| v[COLUMNS.iter().position(|c| *c == k).unwrap()];
        assert!(get("sack_reorder").is_nan() && get("spurious_rtos").is_nan());
        assert_eq!(get("retrans_pct"), 1.0);
        // An empty report gives numbers, not a panic; a report without queueing delays, NaN.
        let empty = summarise(&json!({}));
        assert_eq!(empty.len(), COLUMNS.len());
        assert!(empty[COLUMNS.len() - 1].is_nan());
    }

    #[test]
    fn tables_give_medians_over_reps() {
        let row = |rep, g| Row {
            scheme: "dbb-shared".into(),
            scenario: "A100".into(),
            rep,
            values: {
                let mut v = vec![0.0; COLUMNS.len()];
                v[2] = g;
                v
            },
            shares: vec![("s1:9".into(), 1, 0.25, g / 400.0)],
            fidelity: if rep == 2 {
                "degraded: CPU 99% busy".into()
            } else {
                "ok".into()
            },
        };
        let t = tables(&[row(1, 90.0), row(2, 10.0), row(3, 80.0)]);
        assert!(
            t.contains("| A100 | dbb-shared | 3 | 2/3 | 0 | 80.0 [10.0, 90.0] |"),
            "{t}"
        );
        assert_eq!(
            crate::experiment::fidelity::verdict_of(&json!({"fidelity": {"verdict": "ok"}})),
            "ok"
        );
        assert_eq!(crate::experiment::fidelity::verdict_of(&json!({})), "-");
        assert!(t.contains("| A100 | dbb-shared | 0.200 |"), "{t}");
        assert_eq!(csv(&[row(1, 1.0)]).lines().count(), 2);
    }

    #[test]
    fn paced_csvs_parse_and_others_are_rejected() {
        let row = "0,h1,h9,0,1000.000,25000000,0,1448,0x00,cubic,1,0,true,3000000,24000000,2,1,3,\
                   0,5,2000,";
        let v = parse_paced(&format!("{PACED_CSV_HEADER}\n{row}\n")).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0]["finished"], json!(true));
        assert_eq!(num(&v[0], "goodput_bps"), 24e6);
        assert_eq!(v[0]["tos"], json!("0x00"));
        assert!(parse_paced("a,b\n1,2\n").is_err());
        assert!(parse_paced(&format!("{PACED_CSV_HEADER}\n1,2\n")).is_err());
        assert!(parse_paced("").is_err());
    }
}
