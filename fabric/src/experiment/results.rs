//! What a point leaves behind: the hosts' flow rows parsed, its summary row (FCT averages and
//! p99s per class, retransmissions, uplink balance, drops, queues), and the merged CSVs of every
//! finished point.

use anyhow::Context as _;

use super::*;

/// One parsed flow row of a host's CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRow {
    /// `short` or `large`.
    pub class: String,
    /// Whether it finished.
    pub finished: bool,
    /// FCT, µs.
    pub fct_us: Option<f64>,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Deliveries the receiver echoed as CE-marked.
    pub delivered_ce: u64,
    /// How late the flow started, µs.
    pub lag_us: f64,
}

/// Parses the rows of a `pisa-traffic client` CSV (with its header).
pub fn parse_flow_rows(text: &str) -> Result<Vec<FlowRow>, String> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().ok_or("empty CSV")?.split(',').collect();
    let col = |name: &str| {
        head.iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("no column {name}"))
    };
    let (c, f, t, r, ce, lag) = (
        col("class")?,
        col("finished")?,
        col("fct_us")?,
        col("retransmits")?,
        col("delivered_ce")?,
        col("lag_us")?,
    );
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            if v.len() != head.len() {
                return Err(format!(
                    "row with {} of {} columns: {l}",
                    v.len(),
                    head.len()
                ));
            }
            Ok(FlowRow {
                class: v[c].to_string(),
                finished: v[f] == "true",
                fct_us: v[t].parse().ok(),
                retransmits: v[r].parse().unwrap_or(0),
                delivered_ce: v[ce].parse().unwrap_or(0),
                lag_us: v[lag].parse().unwrap_or(0.0),
            })
        })
        .collect()
}

/// Switch statistics of a point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwitchStats {
    /// Packets sent on each uplink: (leaf, port, spine, packets).
    pub uplinks: Vec<(String, u16, String, u64)>,
    /// Packets the traffic managers dropped (tail drops).
    pub tm_drops: u64,
    /// Packets the programs dropped (every reason).
    pub program_drops: u64,
    /// Packets the traffic managers marked CE (their own threshold; a program's marking shows
    /// in the flows' `delivered_ce`).
    pub tm_ecn_marked: u64,
    /// Largest sampled egress queue, packets.
    pub queue_max: u64,
    /// Mean sampled egress queue over every switch port, packets.
    pub queue_mean: f64,
    /// 90th percentile of the sampled egress queues, packets (P4TE derives its Δ from this
    /// figure measured under `ecmp`).
    pub queue_p90: u64,
    /// Whether the emulator kept up ([`fidelity`]).
    pub fidelity: fidelity::Measured,
}

impl SwitchStats {
    /// Fills the queue figures from depth samples (packets), one per port per sampling round.
    pub fn set_queue_samples(&mut self, depths: &[u64]) {
        self.queue_max = depths.iter().copied().max().unwrap_or(0);
        self.queue_mean = if depths.is_empty() {
            0.0
        } else {
            depths.iter().sum::<u64>() as f64 / depths.len() as f64
        };
        let d: Vec<f64> = depths.iter().map(|&x| x as f64).collect();
        self.queue_p90 = traffic::quantile_nearest_rank(&d, 0.9) as u64;
    }
}

/// The header of `summary.csv`.
pub const SUMMARY_HEADER: &str = "scheme,load,rep,workload,pattern,load_of,cc,ecn,seconds,flows,\
    finished,short_n,short_avg_fct_us,short_p99_fct_us,large_n,large_avg_fct_us,large_p99_fct_us,\
    retransmits,delivered_ce,uplink_pkts_std_mean,uplink_pkts_std_max,tm_drops,program_drops,tm_ecn_marked,\
    queue_max_pkts,queue_mean_pkts,start_lag_p99_us,wall_s,queue_p90_pkts,fidelity,cpu_busy,cpu_steal,\
    runq_mean,runq_max,host_drops,switch_input_drops,link_late_p99_frames,link_late_port";

/// The std-dev of per-uplink packets of each leaf: (mean over leaves, max).
pub fn uplink_balance(up: &[(String, u16, String, u64)]) -> (f64, f64) {
    let mut by_leaf: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (l, _, _, p) in up {
        by_leaf.entry(l).or_default().push(*p as f64);
    }
    let sds: Vec<f64> = by_leaf.values().map(|v| Stats::of(v).std_dev).collect();
    let mean = if sds.is_empty() {
        0.0
    } else {
        sds.iter().sum::<f64>() / sds.len() as f64
    };
    (mean, sds.iter().copied().fold(0.0, f64::max))
}

/// A point's summary row.
pub fn summary_row(
    e: &Fct,
    t: &Transport,
    p: &Point,
    rows: &[FlowRow],
    sw: &SwitchStats,
    wall_s: f64,
) -> String {
    let fcts = |class: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r.class == class && r.finished)
            .filter_map(|r| r.fct_us)
            .collect()
    };
    let (s, l) = (Stats::of(&fcts("short")), Stats::of(&fcts("large")));
    let (sd_mean, sd_max) = uplink_balance(&sw.uplinks);
    let load_of = match e.load_of {
        LoadOf::Host => "host",
        LoadOf::Fabric => "fabric",
    };
    format!(
        "{},{},{},{},{},{load_of},{},{},{},{},{},{},{:.1},{:.1},{},{:.1},{:.1},{},{},{:.1},{:.1},{},{},{},{},{:.2},{:.0},{:.1},{}",
        p.scheme,
        p.load,
        p.rep,
        e.workload,
        e.pattern,
        t.cc,
        t.ecn,
        e.seconds,
        rows.len(),
        rows.iter().filter(|r| r.finished).count(),
        s.n,
        s.mean,
        s.p99,
        l.n,
        l.mean,
        l.p99,
        rows.iter().map(|r| r.retransmits).sum::<u64>(),
        rows.iter().map(|r| r.delivered_ce).sum::<u64>(),
        sd_mean,
        sd_max,
        sw.tm_drops,
        sw.program_drops,
        sw.tm_ecn_marked,
        sw.queue_max,
        sw.queue_mean,
        traffic::quantile_nearest_rank(&rows.iter().map(|r| r.lag_us).collect::<Vec<_>>(), 0.99),
        wall_s,
        sw.queue_p90
    ) + &fidelity_cells(&sw.fidelity)
}

/// The fidelity columns of a summary row, with their leading comma.
fn fidelity_cells(m: &fidelity::Measured) -> String {
    let opt = |v: Option<String>| v.unwrap_or_default();
    format!(
        ",{},{:.3},{:.3},{:.1},{},{},{},{},{}",
        fidelity::verdict(m, &fidelity::Thresholds::default()),
        m.machine.busy,
        m.machine.steal,
        m.machine.runq_mean,
        m.machine.runq_max,
        m.host_drops,
        opt(m.switch_input_drops.map(|d| d.to_string())),
        opt(m.link_late_p99.as_ref().map(|(l, _)| format!("{l:.2}"))),
        opt(m.link_late_p99.as_ref().map(|(_, p)| p.clone())),
    )
}

/// Concatenates `name` of every finished point (one header) into `OUT/name`.
pub(super) fn merge(out: &Path, dirs: &[&Path], name: &str, header: &str) -> anyhow::Result<()> {
    let mut text = format!("{header}\n");
    for dir in dirs {
        let part = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        for l in part.lines().skip(1) {
            text += l;
            text.push('\n');
        }
    }
    let path = out.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// The header of the merged `flows.csv`.
pub fn flows_header() -> String {
    format!("scheme,load,rep,{FLOW_CSV_HEADER}")
}

/// The header of `uplinks.csv`.
pub const UPLINKS_HEADER: &str = "scheme,load,rep,leaf,port,spine,packets";
