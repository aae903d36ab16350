//! `pisa-fabric e10`: P4QCN's experiment E10 (P4QCN §4) in `pisa-sim` and in namespaces,
//! and the threshold sweep of its Fig. 17 (`--sweep`). See `pisa_fabric::experiment::e10`.

use std::fmt::Write as _;

use pisa_fabric::experiment::e10::{self, CONFIGS, Config, Row, Setup};

use super::*;

#[derive(clap::Args, Debug)]
pub(super) struct E10Args {
    /// Every link's rate; every rate of the paper's (7 Mb/s links) is scaled to it.
    #[arg(long, default_value = "7M")]
    link: String,
    /// Seconds each point's senders send.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    seconds: f64,
    /// Background levels at the paper's rates (scaled to --link).
    #[arg(long, default_value = "2M,3M,4M,5M", value_delimiter = ',')]
    bg: Vec<String>,
    /// Configurations: udp, tcp, p4qcn, p4qcn+pfc, pfc, three-point.
    #[arg(
        long,
        default_value = "udp,tcp,p4qcn,p4qcn+pfc,pfc,three-point",
        value_delimiter = ','
    )]
    configs: Vec<String>,
    /// Where: sim, netns or both.
    #[arg(long, default_value = "sim")]
    r#where: String,
    /// Q_P4QCN = Q_min = Q_max, packets.
    #[arg(long, default_value_t = 11)]
    q_p4qcn: u32,
    /// Q_PFC, packets.
    #[arg(long, default_value_t = 14)]
    q_pfc: u32,
    /// Fig. 17 instead: utilisation of host41's link against these thresholds (Q_P4QCN for
    /// p4qcn, Q_PFC for pfc) at the lowest background level.
    #[arg(long, value_delimiter = ',')]
    sweep: Vec<u32>,
    /// Mean background flow size, frame bytes (default: one second at the link rate).
    #[arg(long)]
    mean_size: Option<u64>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Capture every switch port in namespaces (pcaps under OUT/<point>/run/<switch>-pcap).
    #[arg(long)]
    capture: bool,
    /// Port I/O of the switches in namespaces.
    #[arg(long, default_value = "af-xdp")]
    io: String,
    /// Where the tables, traces and reports go.
    #[arg(long, default_value = "e10")]
    out: PathBuf,
    /// Fabric name (1-6 letters and digits).
    #[arg(long, default_value = "e10")]
    pub(super) name: String,
}

fn point(
    a: &E10Args,
    s: &Setup,
    c: &Config,
    bg: u64,
    wh: &str,
    cancel: &Arc<AtomicBool>,
) -> Result<Row, String> {
    let mut tag = format!(
        "{}-{wh}-{}-{:.0}M",
        c.name,
        s.link_bps / 1_000_000,
        bg as f64 / 1e6
    );
    if !a.sweep.is_empty() {
        tag += &format!("-q{}-{}", s.q_p4qcn, s.q_pfc);
    }
    let dir = a.out.join(&tag);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (row, report) = if wh == "sim" {
        e10::sim(s, c, bg)?
    } else {
        let opts = Options {
            name: a.name.clone(),
            io: a.io.clone(),
            dir: dir.join("run"),
            cancel: cancel.clone(),
            capture: a.capture,
            links: fabric::Links::Veth,
        };
        let _g = BRINGUP
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        e10::netns(s, c, bg, &opts, &dir, |m| eprintln!("  {m}"))?
    };
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let trace = &report["flows"][0]["qcn_rp"]["trace_t_us_rc_rt_state"];
    if let Some(rows) = trace.as_array().filter(|r| !r.is_empty()) {
        // pisa-sim's RP trace: rows [t_us, rc, rt, state].
        let mut csv = String::from("t_us,rc_bps,rt_bps,state\n");
        for r in rows {
            let v: Vec<String> = r
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| x.as_str().map_or(x.to_string(), str::to_string))
                .collect();
            csv += &(v.join(",") + "\n");
        }
        std::fs::write(dir.join("trace.csv"), csv).map_err(|e| e.to_string())?;
    }
    eprintln!(
        "{tag}: loss {:.4}, p99 {:?} us, use {:.3}",
        row.loss, row.latency_us.1, row.utilisation
    );
    Ok(row)
}

pub(super) fn e10(a: &E10Args, cancel: Arc<AtomicBool>) -> Result<(), String> {
    let link = topo::parse_rate(&a.link)?;
    let mut s = Setup::paper(link, a.seconds);
    s.q_p4qcn = a.q_p4qcn;
    s.q_pfc = a.q_pfc;
    s.seed = a.seed;
    if let Some(m) = a.mean_size {
        s.mean_bytes = m;
    }
    let mut bgs = Vec::new();
    for b in &a.bg {
        bgs.push(s.scale(topo::parse_rate(b)?));
    }
    let configs: Vec<Config> = a
        .configs
        .iter()
        .map(|n| e10::config_named(n).ok_or_else(|| format!("no configuration {n}")))
        .collect::<Result<_, _>>()?;
    let wheres: Vec<&str> = match a.r#where.as_str() {
        "both" => vec!["sim", "netns"],
        w @ ("sim" | "netns") => vec![w],
        w => return Err(format!("--where {w}: sim, netns or both")),
    };
    std::fs::create_dir_all(&a.out).map_err(|e| e.to_string())?;
    let cmd: Vec<String> = std::env::args().collect();
    for wh in wheres {
        let mut md = format!(
            "`{}`\n\nLinks {} Mb/s, flow host11 -> host41 at {:.1} Mb/s, {} s per point, \
             Q_P4QCN {} Q_PFC {}, seed {}.\n\n",
            cmd.join(" "),
            link as f64 / 1e6,
            s.scale(e10::PAPER_FLOW_BPS) as f64 / 1e6,
            a.seconds,
            s.q_p4qcn,
            s.q_pfc,
            s.seed
        );
        if a.sweep.is_empty() {
            let mut rows = Vec::new();
            for c in &configs {
                if c.tcp && wh == "sim" {
                    continue;
                }
                for &bg in &bgs {
                    rows.push(point(a, &s, c, bg, wh, &cancel)?);
                }
            }
            md += &e10::table(&rows);
        } else {
            // Fig. 17: the lowest background level ("slight congestion").
            let bg = bgs.iter().copied().min().unwrap_or(0);
            md += "| threshold (packets) | p4qcn: host41 link use | p4qcn loss | pfc: host41 \
                   link use | pfc loss |\n|---:|---:|---:|---:|---:|\n";
            let (p4qcn, pfc) = (CONFIGS[2], CONFIGS[4]);
            for &q in &a.sweep {
                let qs = Setup {
                    q_p4qcn: q,
                    q_pfc: q,
                    ..s.clone()
                };
                let r1 = point(a, &qs, &p4qcn, bg, wh, &cancel)?;
                let r2 = point(a, &qs, &pfc, bg, wh, &cancel)?;
                let _ = writeln!(
                    md,
                    "| {q} | {:.3} | {:.4} | {:.3} | {:.4} |",
                    r1.utilisation, r1.loss, r2.utilisation, r2.loss
                );
            }
        }
        let file = a.out.join(format!(
            "e10-{wh}{}.md",
            if a.sweep.is_empty() { "" } else { "-sweep" }
        ));
        std::fs::write(&file, &md).map_err(|e| e.to_string())?;
        println!("{md}\n(written to {})", file.display());
    }
    Ok(())
}
