//! `pisa-fabric e10`: P4QCN's experiment E10 (P4QCN §4) in `pisa-sim` and in namespaces,
//! and the threshold sweep of its Fig. 17 (`--sweep`). See `pisa_fabric::experiment::e10`.

use pisa_fabric::experiment::e10::sweep::{Settings, Sweep, Where};
use pisa_fabric::experiment::e10::{self, Setup};

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
    /// Seed (of the first repetition; repetition r uses seed + r - 1).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Repetitions of every point, each with its own seed; the tables give the median over
    /// them and its 95% bootstrap interval.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Capture every switch port in namespaces (pcaps under OUT/points/<point>/run/<switch>-pcap).
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

pub(super) fn e10(a: &E10Args, cancel: Arc<AtomicBool>) -> anyhow::Result<()> {
    let link = topo::parse_rate(&a.link).map_err(anyhow::Error::msg)?;
    let mut setup = Setup::paper(link, a.seconds);
    setup.q_p4qcn = a.q_p4qcn;
    setup.q_pfc = a.q_pfc;
    setup.seed = a.seed;
    if let Some(m) = a.mean_size {
        setup.mean_bytes = m;
    }
    let bgs =
        a.bg.iter()
            .map(|b| Ok(setup.scale(topo::parse_rate(b).map_err(anyhow::Error::msg)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
    let configs = a
        .configs
        .iter()
        .map(|n| e10::config_named(n).ok_or_else(|| anyhow::anyhow!("no configuration {n}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let wheres = Where::parse_list(&a.r#where)?;
    let mut s = Sweep::new(Settings {
        setup,
        bgs,
        configs,
        wheres: wheres.clone(),
        thresholds: a.sweep.clone(),
        reps: a.reps,
        out: a.out.clone(),
    })?;
    let mut ctx = sweep::Ctx::new(&a.name, cancel);
    ctx.io = a.io.clone();
    ctx.capture = a.capture;
    sweep::run(&mut s, &ctx)?;
    for at in wheres {
        print_table(&s.table_path(at))?;
    }
    Ok(())
}
