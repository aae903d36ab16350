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
    /// Measured in pisa-sim's virtual time: no fidelity to judge (the columns say `-`).
    pub virtual_time: bool,
    /// The switch-local agents, summed over the switches.
    pub agents: Agents,
}

/// What the switch-local agents of a point did, summed over the switches that run one: from
/// each switch's `show_agent` in namespaces, from the simulated switches' agents in pisa-sim
/// (where an agent takes each report as it leaves the switch, so it has no queue: no drops,
/// no backlog and no reaction time).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Agents {
    /// Switches with an agent.
    pub switches: u64,
    /// Packet-ins handed to the agents (P4TE: feedback reports).
    pub reports: u64,
    /// Packet-ins an agent's full queue refused.
    pub dropped: u64,
    /// Table updates the agents wrote.
    pub writes: u64,
    /// The agents' `moves` (P4TE: ports moved between routing groups, idle returns included).
    pub moves: u64,
    /// Over how long, s (the flows' phase: from the first start to the end of the drain).
    pub seconds: f64,
    /// The worst switch's p99 queue backlog when its agent took a report, frames: its lag.
    pub backlog_p99: Option<u64>,
    /// The worst switch's p99 time from taking a report to its write being visible, µs.
    pub reaction_p99_us: Option<f64>,
}

impl Agents {
    /// Adds one switch's `show_agent` output (`NAME VALUE` lines; empty: no agent).
    pub fn add_shown(&mut self, text: &str) {
        let v: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once(' ')).collect();
        if v.is_empty() {
            return;
        }
        let n = |k: &str| v.get(k).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        self.switches += 1;
        self.reports += n("packet_ins");
        self.dropped += n("dropped");
        self.writes += n("writes");
        self.moves += n("agent.moves");
        if v.contains_key("backlog_p99") {
            self.backlog_p99 = Some(self.backlog_p99.unwrap_or(0).max(n("backlog_p99")));
        }
        if let Some(r) = v.get("reaction_p99_us").and_then(|x| x.parse::<f64>().ok()) {
            self.reaction_p99_us = Some(self.reaction_p99_us.unwrap_or(0.0).max(r));
        }
    }

    /// The summary's agent columns, with their leading comma (empty cells without an agent).
    fn cells(&self) -> String {
        if self.switches == 0 {
            return ",".repeat(AGENT_COLUMNS.split(',').count());
        }
        let per_s = if self.seconds > 0.0 {
            format!("{:.1}", self.moves as f64 / self.seconds)
        } else {
            String::new()
        };
        format!(
            ",{},{},{},{},{per_s},{},{}",
            self.reports,
            self.dropped,
            self.writes,
            self.moves,
            self.backlog_p99.map(|b| b.to_string()).unwrap_or_default(),
            self.reaction_p99_us
                .map(|r| format!("{r:.1}"))
                .unwrap_or_default(),
        )
    }
}

/// The summary's last columns: [`Agents`].
macro_rules! agent_columns {
    () => {
        "agent_reports,agent_dropped,agent_writes,agent_moves,agent_moves_per_s,\
         agent_backlog_p99,agent_reaction_p99_us"
    };
}
const AGENT_COLUMNS: &str = agent_columns!();

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
pub const SUMMARY_HEADER: &str = concat!(
    "scheme,load,rep,workload,pattern,load_of,cc,ecn,seconds,flows,\
    finished,short_n,short_avg_fct_us,short_p99_fct_us,large_n,large_avg_fct_us,large_p99_fct_us,\
    retransmits,delivered_ce,uplink_pkts_std_mean,uplink_pkts_std_max,tm_drops,program_drops,tm_ecn_marked,\
    queue_max_pkts,queue_mean_pkts,start_lag_p99_us,wall_s,queue_p90_pkts,fidelity,cpu_busy,cpu_steal,\
    runq_mean,runq_max,host_drops,switch_input_drops,link_late_p99_frames,link_late_port,",
    agent_columns!()
);

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
    ) + &if sw.virtual_time {
        // The verdict `-` and no machine, host or link figures.
        format!(",{},,,,,,,,", fidelity::no_verdict())
    } else {
        fidelity_cells(&sw.fidelity)
    } + &sw.agents.cells()
}

/// Writes a point's `summary.csv` (its one row) and `uplinks.csv` into `dir`.
pub(super) fn write_point_tables(
    dir: &Path,
    e: &Fct,
    t: &Transport,
    p: &Point,
    rows: &[FlowRow],
    sw: &SwitchStats,
    wall_s: f64,
) -> anyhow::Result<()> {
    let summary = summary_row(e, t, p, rows, sw, wall_s);
    let path = dir.join("summary.csv");
    std::fs::write(&path, format!("{SUMMARY_HEADER}\n{summary}\n"))
        .with_context(|| format!("writing {}", path.display()))?;
    let mut up_csv = format!("{UPLINKS_HEADER}\n");
    for (l, port, s, n) in &sw.uplinks {
        let _ = writeln!(
            up_csv,
            "{},{},{},{l},{port},{s},{n}",
            p.scheme, p.load, p.rep
        );
    }
    let path = dir.join("uplinks.csv");
    std::fs::write(&path, up_csv).with_context(|| format!("writing {}", path.display()))
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

/// The `fidelity` cell of a point's `summary.csv`, if it has one.
pub fn point_verdict(summary: &Path) -> Option<String> {
    let text = std::fs::read_to_string(summary).ok()?;
    let mut lines = text.lines();
    let i = lines.next()?.split(',').position(|h| h == "fidelity")?;
    lines.next()?.split(',').nth(i).map(str::to_string)
}

/// The header of `retries.csv`.
pub const RETRIES_HEADER: &str = "scheme,load,rep,attempt,fidelity,used";

/// `OUT/retries.csv`: every attempt of each point measured more than once (`--retry-degraded`),
/// the kept ones (`used` no) and the one in the tables (`used` yes), with their verdicts.
pub(super) fn write_retries(out: &Path, dirs: &[&Path]) -> anyhow::Result<()> {
    let mut text = format!("{RETRIES_HEADER}\n");
    for dir in dirs {
        let kept = crate::sweep::attempts_of(dir);
        if kept.is_empty() {
            continue;
        }
        let used = dir.to_path_buf();
        let all = kept.iter().map(|d| (d, "no")).chain([(&used, "yes")]);
        for (k, (d, used)) in all.enumerate() {
            let summary = d.join("summary.csv");
            let text_of = std::fs::read_to_string(&summary).unwrap_or_default();
            let row: Vec<&str> = text_of
                .lines()
                .nth(1)
                .unwrap_or_default()
                .split(',')
                .collect();
            let verdict = point_verdict(&summary).unwrap_or_else(fidelity::no_verdict);
            let _ = writeln!(
                text,
                "{},{},{},{},{verdict},{used}",
                row.first().unwrap_or(&"-"),
                row.get(1).unwrap_or(&"-"),
                row.get(2).unwrap_or(&"-"),
                k + 1
            );
        }
    }
    let path = out.join("retries.csv");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_list_every_attempt_of_a_point_measured_again() {
        let out = std::env::temp_dir().join(format!("pisa-retries-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let summary = |d: &Path, verdict: &str| {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(
                d.join("summary.csv"),
                format!("scheme,load,rep,fidelity,cpu_busy\nhula,0.8,4,{verdict},0.5\n"),
            )
            .unwrap();
        };
        let p = out.join("points/hula_load0.8_rep4");
        summary(&p, "ok");
        summary(&crate::sweep::attempt_dir(&p, 1), "degraded: CPU 6% stolen");
        let q = out.join("points/hula_load0.8_rep5");
        summary(&q, "ok");
        assert_eq!(point_verdict(&p.join("summary.csv")).as_deref(), Some("ok"));
        assert_eq!(point_verdict(&out.join("none.csv")), None);
        write_retries(&out, &[&p, &q]).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("retries.csv")).unwrap(),
            format!(
                "{RETRIES_HEADER}\nhula,0.8,4,1,degraded: CPU 6% stolen,no\nhula,0.8,4,2,ok,yes\n"
            )
        );
        std::fs::remove_dir_all(&out).unwrap();
    }
}
