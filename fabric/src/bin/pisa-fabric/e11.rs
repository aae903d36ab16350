//! `pisa-fabric e11`: PINT's E11 (issue 15) in namespaces at a small scale: HPCC(INT) against
//! HPCC(PINT, 8 bits) at p = 1, 1/16, 1/256 with `pisa-host hpcc-send` on a leaf-spine of `pint`
//! switches. See `pisa_fabric::experiment::e11`.

use pisa_fabric::experiment::e11::sim;
use pisa_fabric::experiment::e11::sweep::{Settings, SimSweep, Sweep};
use pisa_fabric::experiment::e11::{SCHEMES, Scheme, Setup};

use super::*;

#[derive(clap::Args, Debug)]
pub(super) struct E11Args {
    /// Offered loads, fractions of each host's link.
    #[arg(long, default_value = "0.5", value_delimiter = ',')]
    loads: Vec<f64>,
    /// Schemes: INT, PINT1, PINT16, PINT256 (and, in sim, PINT1PAD: PINT p = 1 with an
    /// INT-sized shim).
    #[arg(
        long,
        default_value = "INT,PINT1,PINT16,PINT256",
        value_delimiter = ','
    )]
    schemes: Vec<String>,
    /// Hosts per leaf (2 leaves, 2 spines).
    #[arg(long, default_value_t = 2)]
    hosts_per_leaf: usize,
    /// Host link rate (uplinks carry hosts-per-leaf x this / 2).
    #[arg(long, default_value = "100M")]
    host_rate: String,
    /// Seconds of flow arrivals.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    seconds: f64,
    /// Seconds the senders go on after the last arrival.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    drain: f64,
    /// Flow sizes are web search's times this.
    #[arg(long, default_value_t = 0.1)]
    scale: f64,
    /// T, the switches' and senders' base RTT, µs.
    #[arg(long, default_value_t = 4000)]
    rtt_us: u64,
    /// Egress buffer per port, packets (200 at 100 Mb/s: 16 ms, as pisa-sim's 1000 at 1 Gb/s
    /// are 8 ms).
    #[arg(long, default_value_t = 200)]
    buffer: u32,
    /// PFC XOFF, packets (half the buffer, as pisa-sim's E11).
    #[arg(long, default_value_t = 100)]
    pfc_xoff: u32,
    /// Seed of the flows.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Port I/O of the switches.
    #[arg(long, default_value = "af-xdp")]
    io: String,
    /// Where: netns (pisa-host on a 2x2 leaf-spine) or sim (pisa-sim's k = 4 fat-tree at 1 and
    /// 4 Gb/s; --seconds is the arrival window of virtual time).
    #[arg(long, default_value = "netns")]
    r#where: String,
    /// netns: the uplinks' oversubscription r (each uplink at hosts per leaf × host rate /
    /// 2r), so that between leaves the leaf-spine hops are the bottleneck.
    #[arg(long, default_value_t = 1.0)]
    oversubscription: f64,
    /// sim: the aggregation-core links' rate (default: the fabric's 4 Gb/s, so the last hop is
    /// always the bottleneck); below 1G the core is oversubscribed (500M: 2:1).
    #[arg(long)]
    core_rate: Option<String>,
    /// Repetitions of every point, each with its own seed (seed, seed + 1, ...); the table
    /// gives the median over them and its 95% bootstrap interval (in namespaces, also how many
    /// kept fidelity).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// sim: workloads.
    #[arg(long, default_value = "websearch", value_delimiter = ',')]
    workloads: Vec<String>,
    /// sim: also write the rows as the JSON `scripts/analysis pint-plot e11` reads.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Where the tables and reports go.
    #[arg(long, default_value = "e11")]
    out: PathBuf,
    /// Fabric name (1-6 letters and digits).
    #[arg(long, default_value = "e11")]
    pub(super) name: String,
}

fn scheme(name: &str) -> Result<Scheme, String> {
    let want = match name {
        "INT" => "INT",
        "PINT1" => "PINT p=1",
        "PINT16" => "PINT p=1/16",
        "PINT256" => "PINT p=1/256",
        _ => return Err(format!("no scheme {name}: INT, PINT1, PINT16, PINT256")),
    };
    Ok(*SCHEMES
        .iter()
        .find(|s| s.name == want)
        .unwrap_or(&SCHEMES[0]))
}

pub(super) fn e11(a: &E11Args, cancel: Arc<AtomicBool>) -> anyhow::Result<()> {
    match a.r#where.as_str() {
        "netns" => {}
        "sim" => {
            let schemes = a
                .schemes
                .iter()
                .map(|n| {
                    if n == "PINT1PAD" {
                        return sim::sim_scheme("PINT p=1, INT-sized shim")
                            .ok_or_else(|| anyhow::anyhow!("no padded scheme"));
                    }
                    scheme(n).map_err(anyhow::Error::msg)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut s = SimSweep {
                workloads: a.workloads.clone(),
                loads: a.loads.clone(),
                schemes,
                window_ms: a.seconds * 1000.0,
                core_bps: a
                    .core_rate
                    .as_deref()
                    .map(topo::parse_rate)
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
                seed: a.seed,
                reps: a.reps,
                out: a.out.clone(),
                json: a.json.clone(),
            };
            sweep::run(&mut s, &sweep::Ctx::new(&a.name, cancel))?;
            return print_table(&s.table_path());
        }
        other => anyhow::bail!("--where {other}: netns or sim"),
    }
    let schemes: Vec<Scheme> = a
        .schemes
        .iter()
        .map(|n| scheme(n))
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    let host_bps = topo::parse_rate(&a.host_rate).map_err(anyhow::Error::msg)?;
    let mut s = Sweep::new(Settings {
        setup: Setup {
            hosts_per_leaf: a.hosts_per_leaf,
            host_bps,
            rtt_us: a.rtt_us,
            scale: a.scale,
            load: 0.0,
            seconds: a.seconds,
            drain: a.drain,
            seed: a.seed,
            buffer: a.buffer,
            pfc_xoff: a.pfc_xoff,
            ip_len: 1000,
            oversubscription: a.oversubscription,
        },
        loads: a.loads.clone(),
        schemes,
        reps: a.reps,
        out: a.out.clone(),
    })?;
    let mut ctx = sweep::Ctx::new(&a.name, cancel);
    ctx.io = a.io.clone();
    sweep::run(&mut s, &ctx)?;
    print_table(&s.table_path())
}
