//! `pisa-fabric dbb`: DBB's E8 and E9 in namespaces with kernel TCP (issue 13). See
//! `pisa_fabric::experiment::dbb`.

use pisa_fabric::experiment::dbb::sweep::{Settings, SimSweep, Sweep};
use pisa_fabric::experiment::dbb::{Scenario, Which};
use pisa_fabric::traffic::Transport;

use super::*;

#[derive(clap::Args, Debug)]
pub(super) struct DbbArgs {
    /// e8 (four equal paths per stage) or e9 (Fig. 5, unequal bandwidths).
    #[arg(long, default_value = "e8")]
    experiment: Which,
    /// Schemes (registry names).
    #[arg(
        long,
        default_value = "dbb-shared,dbb-independent,spray-random",
        value_delimiter = ','
    )]
    schemes: Vec<String>,
    /// Scenarios of DBB §IV (docs/dbb.md): A<load %>, B/C/D<connections>.
    #[arg(long, default_value = "A50,A100,B40,C40,D40", value_delimiter = ',')]
    scenarios: Vec<Scenario>,
    /// E8: every fabric link's rate. E9: the rate of one paper Gb/s (Fig. 5's links are 2.5 to
    /// 20 of them). K/M/G suffixes.
    #[arg(long)]
    rate: Option<String>,
    /// Host link rate (default: the stage capacity, so a host is never the bottleneck).
    #[arg(long)]
    host_rate: Option<String>,
    /// Egress queue of every link, packets.
    #[arg(long, default_value_t = 64)]
    buffer: u32,
    /// Seconds for the paper's 10 s (scenario A starts a flow every step; flows last 6 steps).
    #[arg(long, default_value_t = 2.0, value_parser = parse_seconds)]
    step: f64,
    /// Repetitions of every (scheme, scenario).
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// Congestion control of every connection.
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// net.ipv4.tcp_ecn in the hosts.
    #[arg(long, default_value_t = 0)]
    ecn: u8,
    /// A sysctl set in every sender and receiver namespace (repeatable), e.g.
    /// net.ipv4.tcp_min_tso_segs=1; recorded with the run's other settings.
    #[arg(long)]
    sysctl: Vec<String>,
    /// How switches are linked to each other.
    #[arg(long, default_value = "shm")]
    links: pisa_fabric::fabric::Links,
    /// Where: netns (kernel TCP, the scenarios), sim-tcp (the same scenarios in pisa-sim with
    /// its TCP hosts, virtual time, rep r seeded --seed + r), or sim (E9 only: pisa-sim, two
    /// UDP flows at --loads of Fig. 5's max-flow, deterministic).
    #[arg(long, default_value = "netns")]
    r#where: String,
    /// sim: loads, fractions of the max-flow.
    #[arg(long, default_value = "0.5,0.8,0.96", value_delimiter = ',')]
    loads: Vec<f64>,
    /// sim: seconds of virtual time the flows send.
    #[arg(long, default_value_t = 0.2, value_parser = parse_seconds)]
    seconds: f64,
    /// sim: seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Start each connection up to this long after the scenario's start, uniformly from the
    /// rep's seed (0: all at the paper's instant): 5ms, 500us.
    #[arg(long, default_value = "0", value_parser = topo::parse_delay)]
    start_spread: u64,
    /// sim-tcp: what each switch traversal takes, µs (0: nothing; the namespace fabric's
    /// switches add 23-52 µs each, docs/performance.md).
    #[arg(long, default_value_t = 0)]
    sim_hop_us: u64,
    /// sim-tcp: frames cross links store-and-forward (their serialisation time added, as on a
    /// wire); without it, as between namespaces.
    #[arg(long)]
    sim_store_and_forward: bool,
    /// Where points, CSVs and tables go; a rerun skips finished points.
    #[arg(long, default_value = "dbb-exp")]
    out: PathBuf,
    /// Fabric name (1-6 letters and digits).
    #[arg(long, default_value = "dbb")]
    pub(super) name: String,
}

pub(super) fn dbb_experiment(a: &DbbArgs, cancel: Arc<AtomicBool>) -> anyhow::Result<()> {
    let w = a.experiment;
    match (a.r#where.as_str(), w) {
        ("netns" | "sim-tcp", _) => {}
        ("sim", Which::E9) => {
            let mut s = SimSweep {
                schemes: a.schemes.clone(),
                loads: a.loads.clone(),
                ms: (a.seconds * 1000.0).round() as u64,
                seed: a.seed,
                out: a.out.clone(),
            };
            sweep::run(&mut s, &sweep::Ctx::new(&a.name, cancel))?;
            return print_table(&s.table_path());
        }
        ("sim", Which::E8) => anyhow::bail!("--where sim: E9 only"),
        (other, _) => anyhow::bail!("--where {other}: netns, sim-tcp or sim"),
    }
    let rate_bps = topo::parse_rate(a.rate.as_deref().unwrap_or(match w {
        Which::E8 => "25M",
        Which::E9 => "4M",
    }))
    .map_err(anyhow::Error::msg)?;
    let host_bps = match &a.host_rate {
        Some(h) => Some(topo::parse_rate(h).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let mut s = Sweep::new(Settings {
        which: w,
        schemes: a.schemes.clone(),
        scenarios: a.scenarios.clone(),
        rate_bps,
        host_bps,
        buffer: a.buffer,
        step: a.step,
        reps: a.reps,
        transport: Transport {
            cc: a.cc.clone(),
            ecn: a.ecn,
            reordering: None,
        },
        sysctl: a.sysctl.clone(),
        links: a.links,
        out: a.out.clone(),
        sim_seed: (a.r#where == "sim-tcp").then_some(a.seed),
        start_spread_ns: a.start_spread * 1000,
        sim_hop_us: a.sim_hop_us,
        sim_store_and_forward: a.sim_store_and_forward,
    })?;
    let mut ctx = sweep::Ctx::new(&a.name, cancel);
    ctx.links = a.links;
    sweep::run(&mut s, &ctx)?;
    print_table(&a.out.join(format!("{}.md", w.name())))
}
