//! `pisa-fabric dbb`: DBB's E8 and E9 in namespaces with kernel TCP (issue 13). See
//! `pisa_fabric::experiment::dbb`.

use std::fmt::Write as _;

use pisa_fabric::experiment::dbb::report::{self, Row};
use pisa_fabric::experiment::dbb::{self, Scenario, Which};
use pisa_fabric::experiment::effective_transport;
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
    /// Where points, CSVs and tables go; a rerun skips finished points.
    #[arg(long, default_value = "dbb-exp")]
    out: PathBuf,
    /// Fabric name (1-6 letters and digits).
    #[arg(long, default_value = "dbb")]
    pub(super) name: String,
}

fn read_row(dir: &std::path::Path, scheme: &str, scen: &str, rep: u32) -> Option<Row> {
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).ok()?).ok()?;
    Some(Row {
        scheme: scheme.into(),
        scenario: scen.into(),
        rep,
        values: report::summarise(&r),
        shares: report::link_shares(&r),
    })
}

pub(super) fn dbb_experiment(a: &DbbArgs, cancel: Arc<AtomicBool>) -> Result<(), String> {
    let w = a.experiment;
    let rate = topo::parse_rate(a.rate.as_deref().unwrap_or(match w {
        Which::E8 => "25M",
        Which::E9 => "4M",
    }))?;
    if rate == 0 || (w == Which::E9 && rate % 2 != 0) {
        return Err("--rate: positive (even for e9: Fig. 5 has halves)".into());
    }
    let base = dbb::topology(w, rate, rate, a.buffer);
    let (capacity, _) = dbb::expected_shares(&base, w)?;
    let host_bps = match &a.host_rate {
        Some(h) => topo::parse_rate(h)?,
        None => capacity,
    };
    if host_bps == 0 || a.reps == 0 || a.buffer == 0 {
        return Err("--host-rate, --reps and --buffer must be positive".into());
    }
    for s in &a.schemes {
        if programs::lookup(s).is_none() {
            return Err(format!("scheme {s}: no such program"));
        }
    }
    let base = dbb::topology(w, rate, host_bps, a.buffer);
    // tcp_reordering, like any other host sysctl, comes with --sysctl.
    let (transport, _dctcp) = effective_transport(&Transport {
        cc: a.cc.clone(),
        ecn: a.ecn,
        reordering: None,
    });
    let mut sysctls = Vec::new();
    for kv in &a.sysctl {
        match kv.split_once('=') {
            Some((k, v))
                if !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._".contains(&b)) =>
            {
                sysctls.push((k.to_string(), v.to_string()));
            }
            _ => {
                return Err(format!(
                    "--sysctl {kv}: KEY=VALUE, e.g. net.ipv4.tcp_reordering=127"
                ));
            }
        }
    }
    std::fs::create_dir_all(a.out.join("points")).map_err(|e| e.to_string())?;
    let setup = format!(
        "{} rate={rate} host={host_bps} buffer={} step={} links={:?} cc={} ecn={} sysctl={:?}\n",
        w.name(),
        a.buffer,
        a.step,
        a.links,
        transport.cc,
        transport.ecn,
        a.sysctl
    );
    let rec = a.out.join("setup");
    match std::fs::read_to_string(&rec) {
        Ok(old) if old != setup => {
            return Err(format!(
                "{} holds points of another setup ({}); this one is {}",
                a.out.display(),
                old.trim(),
                setup.trim()
            ));
        }
        Ok(_) => {}
        Err(_) => std::fs::write(&rec, &setup).map_err(|e| e.to_string())?,
    }
    // Rep-major, so that slow drift of the machine's load spreads over the schemes.
    let mut points = Vec::new();
    for rep in 1..=a.reps {
        for sc in &a.scenarios {
            for s in &a.schemes {
                points.push((s.clone(), sc.clone(), rep));
            }
        }
    }
    let dir_of = |s: &str, sc: &Scenario, rep: u32| {
        a.out
            .join("points")
            .join(format!("{s}_{}_rep{rep}", sc.name))
    };
    let todo = points
        .iter()
        .filter(|(s, sc, r)| !dir_of(s, sc, *r).join("done").exists())
        .count();
    eprintln!(
        "dbb {}: {} points, {} to run; stage capacity {:.1} Mb/s, hosts {:.1} Mb/s, cc {} ecn {}",
        w.name(),
        points.len(),
        todo,
        capacity as f64 / 1e6,
        host_bps as f64 / 1e6,
        transport.cc,
        transport.ecn
    );
    let started = Instant::now();
    let mut ran = 0u32;
    let mut rows = Vec::new();
    for (s, sc, rep) in &points {
        let dir = dir_of(s, sc, *rep);
        if !dir.join("done").exists() {
            if cancel.load(Ordering::Relaxed) {
                return Err("cancelled".into());
            }
            let _ = std::fs::remove_dir_all(&dir);
            let mut t = base.clone();
            for sw in &mut t.switches {
                sw.program = s.clone();
            }
            let flows = dbb::flows(sc, capacity, a.step);
            let opts = Options {
                name: a.name.clone(),
                io: "af-xdp".into(),
                dir: dir.join("run"),
                cancel: cancel.clone(),
                capture: false,
                links: a.links,
            };
            let t0 = Instant::now();
            let up = |t: &Topology, o: &Options| bring_up(t, o, |_| {});
            let hosts = dbb::HostSetup {
                transport: transport.clone(),
                sysctls: sysctls.clone(),
            };
            let r = dbb::run_point(w, &t, &flows, &hosts, &opts, &dir, &up);
            fabric::teardown(&a.name);
            let r = r?;
            std::fs::write(
                dir.join("report.json"),
                serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?,
            )
            .map_err(|e| e.to_string())?;
            std::fs::write(dir.join("done"), "").map_err(|e| e.to_string())?;
            ran += 1;
            let v = report::summarise(&r);
            eprintln!(
                "[{ran}/{todo}] {s} {} rep {rep}: goodput {:.1} of {:.1} Mb/s offered, OOO {:.2}%, \
                 max share dev {:.3}; {:.0} s, ETA {:.0} s",
                sc.name,
                v[2],
                v[1],
                v[8],
                v[16],
                t0.elapsed().as_secs_f64(),
                started.elapsed().as_secs_f64() / f64::from(ran) * f64::from(todo as u32 - ran)
            );
        }
        if let Some(row) = read_row(&dir, s, &sc.name, *rep) {
            rows.push(row);
        }
    }
    let cmd: Vec<String> = std::env::args().collect();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut md = format!(
        "`{}`\n\n{}: stage capacity {:.1} Mb/s ({}), hosts {:.1} Mb/s, buffers {} packets, \
         step {} s (the paper's 10 s), cc {} ecn {}, {} reps; load average at the end: {}\n\n",
        cmd.join(" "),
        w.name(),
        capacity as f64 / 1e6,
        match w {
            Which::E8 => format!("4 x {:.1} Mb/s links per stage", rate as f64 / 1e6),
            Which::E9 => format!("Fig. 5 at {:.1} Mb/s per paper Gb/s", rate as f64 / 1e6),
        },
        host_bps as f64 / 1e6,
        a.buffer,
        a.step,
        transport.cc,
        transport.ecn,
        a.reps,
        load.trim()
    );
    if let Some(r) = rows.first() {
        let dir = dir_of(&r.scheme, &r.scenario.parse()?, r.rep);
        if let Ok(text) = std::fs::read_to_string(dir.join("report.json"))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
        {
            let _ = writeln!(md, "Kernel settings (sender namespace): {}\n", v["sysctl"]);
        }
    }
    md += &report::tables(&rows);
    let name = w.name();
    std::fs::write(a.out.join(format!("{name}.csv")), report::csv(&rows))
        .map_err(|e| e.to_string())?;
    std::fs::write(a.out.join(format!("{name}.md")), &md).map_err(|e| e.to_string())?;
    println!(
        "{md}\n(written to {})",
        a.out.join(format!("{name}.md")).display()
    );
    Ok(())
}
