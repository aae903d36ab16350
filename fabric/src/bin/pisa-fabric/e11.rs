//! `pisa-fabric e11`: PINT's E11 (issue 15) in namespaces at a small scale: HPCC(INT) against
//! HPCC(PINT, 8 bits) at p = 1, 1/16, 1/256 with `pisa-host hpcc-send` on a leaf-spine of `pint`
//! switches. See `pisa_fabric::experiment::e11`.

use pisa_fabric::experiment::e11::{self, Row, SCHEMES, Scheme, Setup};

use super::*;

#[derive(clap::Args, Debug)]
pub(super) struct E11Args {
    /// Offered loads, fractions of each host's link.
    #[arg(long, default_value = "0.5", value_delimiter = ',')]
    loads: Vec<f64>,
    /// Schemes: INT, PINT1, PINT16, PINT256.
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

pub(super) fn e11(a: &E11Args, cancel: Arc<AtomicBool>) -> Result<(), String> {
    let schemes: Vec<Scheme> = a
        .schemes
        .iter()
        .map(|n| scheme(n))
        .collect::<Result<_, _>>()?;
    let host_bps = topo::parse_rate(&a.host_rate)?;
    std::fs::create_dir_all(&a.out).map_err(|e| e.to_string())?;
    let cmd: Vec<String> = std::env::args().collect();
    let mut md = format!(
        "`{}`\n\n2 leaves, 2 spines, {} hosts per leaf at {} Mb/s, T = {} us, web search x {}, \
         {} s of arrivals + {} s, buffers {} packets, PFC at {}, seed {}.\n",
        cmd.join(" "),
        a.hosts_per_leaf,
        host_bps as f64 / 1e6,
        a.rtt_us,
        a.scale,
        a.seconds,
        a.drain,
        a.buffer,
        a.pfc_xoff,
        a.seed
    );
    for &load in &a.loads {
        let s = Setup {
            hosts_per_leaf: a.hosts_per_leaf,
            host_bps,
            rtt_us: a.rtt_us,
            scale: a.scale,
            load,
            seconds: a.seconds,
            drain: a.drain,
            seed: a.seed,
            buffer: a.buffer,
            pfc_xoff: a.pfc_xoff,
            ip_len: 1000,
        };
        let n = e11::flows(&s, &e11::topology(&s, &schemes[0]))?.len();
        let mut rows: Vec<Row> = Vec::new();
        for sc in &schemes {
            if cancel.load(Ordering::Relaxed) {
                return Err("cancelled".into());
            }
            let tag = format!(
                "load{:.0}-{}",
                load * 100.0,
                sc.name.replace([' ', '=', '/'], "")
            );
            let dir = a.out.join(&tag);
            let opts = Options {
                name: a.name.clone(),
                io: a.io.clone(),
                dir: dir.join("run"),
                cancel: cancel.clone(),
                capture: false,
                links: fabric::Links::Veth,
            };
            eprintln!("{tag}: {n} flows");
            let (row, report) = {
                let _g = BRINGUP
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                e11::netns(&s, sc, &opts, &dir, |m| eprintln!("  {m}"))?
            };
            std::fs::write(
                dir.join("report.json"),
                serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?,
            )
            .map_err(|e| e.to_string())?;
            eprintln!("{}", e11::table(std::slice::from_ref(&row)));
            rows.push(row);
        }
        md += &format!(
            "\n### websearch x {}, load {:.0}%: {n} flows in {} s\n\n",
            a.scale,
            load * 100.0,
            a.seconds
        );
        md += &e11::table(&rows);
        std::fs::write(a.out.join("e11-netns.md"), &md).map_err(|e| e.to_string())?;
    }
    println!(
        "{md}\n(written to {})",
        a.out.join("e11-netns.md").display()
    );
    Ok(())
}
