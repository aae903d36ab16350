//! `pisa-fabric dbb` on the sweep driver ([`crate::sweep`]): every (rep, scenario, scheme) of E8
//! or E9 in namespaces, one fresh fabric each, or in `pisa-sim` with its TCP hosts
//! ([`super::sim_tcp`], `--where sim-tcp`). Points run rep-major, so that slow drift of the
//! machine's load spreads over the schemes. Tables: `OUT/e8.md` (or `e9.md`) and `OUT/e8.csv`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use topo::Topology;

use super::report::{self, Row};
use super::{HostSetup, Scenario, Which};
use crate::dctcp::Dctcp;
use crate::experiment::effective_transport;
use crate::sweep::{Ctx, Experiment, command_line, read_json, write_file};
use crate::traffic::Transport;

/// What `pisa-fabric dbb` asks for.
#[derive(Clone, Debug)]
pub struct Settings {
    /// E8 or E9.
    pub which: Which,
    /// Schemes (registry names).
    pub schemes: Vec<String>,
    /// Scenarios of DBB §IV.
    pub scenarios: Vec<Scenario>,
    /// E8: every fabric link's rate; E9: one paper Gb/s.
    pub rate_bps: u64,
    /// Host link rate (`None`: the stage capacity).
    pub host_bps: Option<u64>,
    /// Egress queue of every link, packets.
    pub buffer: u32,
    /// Seconds for the paper's 10 s.
    pub step: f64,
    /// Repetitions of every (scheme, scenario).
    pub reps: u32,
    /// The hosts' congestion control and ECN.
    pub transport: Transport,
    /// `--sysctl KEY=VALUE` as given.
    pub sysctl: Vec<String>,
    /// How switches are linked to each other.
    pub links: crate::fabric::Links,
    /// Output directory.
    pub out: PathBuf,
    /// In `pisa-sim` with its TCP hosts, rep `r` seeded `seed + r` ([`super::sim_tcp`]);
    /// `None`: in namespaces.
    pub sim_seed: Option<u64>,
    /// Each connection starts up to this much after the scenario's start
    /// ([`super::spread_starts`]; rep `r` draws from seed `r`, or `seed + r` in the simulator).
    pub start_spread_ns: u64,
    /// In `pisa-sim`: what each switch traversal takes, µs (`sim::fabric::Options::hop_latency_ns`).
    pub sim_hop_us: u64,
    /// In `pisa-sim`: frames cross links store-and-forward.
    pub sim_store_and_forward: bool,
}

/// One point.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Scheme.
    pub scheme: String,
    /// Scenario.
    pub scenario: Scenario,
    /// Repetition, from 1.
    pub rep: u32,
}

/// The sweep.
pub struct Sweep {
    s: Settings,
    /// The fabric with the hosts' rates, before the scheme is set.
    base: Topology,
    /// The stage capacity, bits/s.
    capacity: u64,
    host_bps: u64,
    hosts: HostSetup,
    _dctcp: Option<Dctcp>,
}

impl std::fmt::Debug for Sweep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweep")
            .field("settings", &self.s)
            .field("capacity", &self.capacity)
            .field("host_bps", &self.host_bps)
            .finish_non_exhaustive()
    }
}

impl Sweep {
    /// Checks `s` and derives the fabric.
    pub fn new(s: Settings) -> Result<Sweep> {
        let w = s.which;
        if s.rate_bps == 0 || (w == Which::E9 && !s.rate_bps.is_multiple_of(2)) {
            bail!("--rate: positive (even for e9: Fig. 5 has halves)");
        }
        let probe = super::topology(w, s.rate_bps, s.rate_bps, s.buffer);
        let (capacity, _) = super::expected_shares(&probe, w).map_err(anyhow::Error::msg)?;
        let host_bps = s.host_bps.unwrap_or(capacity);
        if host_bps == 0 || s.reps == 0 || s.buffer == 0 {
            bail!("--host-rate, --reps and --buffer must be positive");
        }
        for sc in &s.schemes {
            if programs::lookup(sc).is_none() {
                bail!("scheme {sc}: no such program");
            }
        }
        let mut sysctls = Vec::new();
        for kv in &s.sysctl {
            match kv.split_once('=') {
                Some((k, v))
                    if !k.is_empty()
                        && k.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"._".contains(&b)) =>
                {
                    sysctls.push((k.to_string(), v.to_string()));
                }
                _ => bail!("--sysctl {kv}: KEY=VALUE, e.g. net.ipv4.tcp_reordering=127"),
            }
        }
        // tcp_reordering, like any other host sysctl, comes with --sysctl. The simulator's
        // hosts need no kernel module.
        let (transport, dctcp) = if s.sim_seed.is_some() {
            (s.transport.clone(), None)
        } else {
            effective_transport(&s.transport)
        };
        Ok(Sweep {
            base: super::topology(w, s.rate_bps, host_bps, s.buffer),
            capacity,
            host_bps,
            hosts: HostSetup { transport, sysctls },
            _dctcp: dctcp,
            s,
        })
    }

    fn row(&self, p: &Point, dir: &Path) -> Result<Row> {
        let r: serde_json::Value = read_json(&dir.join("report.json"))?;
        Ok(Row {
            scheme: p.scheme.clone(),
            scenario: p.scenario.name.clone(),
            rep: p.rep,
            values: report::summarise(&r),
            shares: report::link_shares(&r),
            fidelity: crate::experiment::fidelity::verdict_of(&r),
        })
    }
}

impl Experiment for Sweep {
    type Point = Point;

    fn title(&self) -> String {
        format!("dbb {}", self.s.which.name())
    }
    fn out(&self) -> &Path {
        &self.s.out
    }
    fn points(&self) -> Vec<Point> {
        let mut v = Vec::new();
        for rep in 1..=self.s.reps {
            for sc in &self.s.scenarios {
                for s in &self.s.schemes {
                    v.push(Point {
                        scheme: s.clone(),
                        scenario: sc.clone(),
                        rep,
                    });
                }
            }
        }
        v
    }
    fn dir_name(&self, p: &Point) -> String {
        format!("{}_{}_rep{}", p.scheme, p.scenario.name, p.rep)
    }
    fn label(&self, p: &Point) -> String {
        format!("{} {} rep {}", p.scheme, p.scenario.name, p.rep)
    }
    /// The record of the sweeps before the driver, unchanged, so that they resume.
    fn record(&self) -> String {
        let t = &self.hosts.transport;
        let mut r = format!(
            "{} rate={} host={} buffer={} step={} links={:?} cc={} ecn={} sysctl={:?}\n",
            self.s.which.name(),
            self.s.rate_bps,
            self.host_bps,
            self.s.buffer,
            self.s.step,
            self.s.links,
            t.cc,
            t.ecn,
            self.s.sysctl
        );
        if let Some(seed) = self.s.sim_seed {
            r += &format!("where=sim-tcp seed={seed}\n");
        }
        if self.s.start_spread_ns > 0 {
            r += &format!("start_spread_ns={}\n", self.s.start_spread_ns);
        }
        if self.s.sim_hop_us > 0 || self.s.sim_store_and_forward {
            r += &format!(
                "sim_hop_us={} sim_store_and_forward={}\n",
                self.s.sim_hop_us, self.s.sim_store_and_forward
            );
        }
        r
    }
    fn describe(&self) -> Option<String> {
        Some(format!(
            "stage capacity {:.1} Mb/s, hosts {:.1} Mb/s, cc {} ecn {}",
            self.capacity as f64 / 1e6,
            self.host_bps as f64 / 1e6,
            self.hosts.transport.cc,
            self.hosts.transport.ecn
        ))
    }
    /// Simulated points touch no fabric: one per core.
    fn parallel(&self) -> usize {
        match self.s.sim_seed {
            Some(_) => std::thread::available_parallelism().map_or(1, usize::from),
            None => 1,
        }
    }
    fn measure(&self, p: &Point, dir: &Path, ctx: &Ctx) -> Result<String> {
        let mut t = self.base.clone();
        for sw in &mut t.switches {
            sw.program = p.scheme.clone();
        }
        let mut flows = super::flows(&p.scenario, self.capacity, self.s.step);
        let rep_seed = self.s.sim_seed.unwrap_or(0) + u64::from(p.rep);
        super::spread_starts(&mut flows, self.s.start_spread_ns, rep_seed);
        let r = match self.s.sim_seed {
            Some(_) => {
                let tr = &self.hosts.transport;
                let seed = rep_seed;
                let links = super::sim_tcp::SimLinks {
                    hop_us: self.s.sim_hop_us,
                    store_and_forward: self.s.sim_store_and_forward,
                };
                let (r, raw) =
                    super::sim_tcp::run(self.s.which, &t, &flows, (&tr.cc, tr.ecn), links, seed)?;
                write_file(&dir.join("sim-report.json"), serde_json::to_string(&raw)?)?;
                r
            }
            None => {
                let opts = ctx.options(&dir.join("run"));
                let up = |t: &Topology, o: &crate::fabric::Options| ctx.up(t, o);
                super::run_point(self.s.which, &t, &flows, &self.hosts, &opts, dir, &up)?
            }
        };
        write_file(&dir.join("report.json"), serde_json::to_string_pretty(&r)?)?;
        let v = report::summarise(&r);
        let mut line = format!(
            "goodput {:.1} of {:.1} Mb/s offered, OOO {:.2}%, max share dev {:.3}",
            v[2], v[1], v[8], v[16]
        );
        if let (Some(wall), Some(simulated)) = (
            r["sim"]["wall_s"].as_f64(),
            r["sim"]["simulated_s"].as_f64(),
        ) {
            let _ = write!(
                line,
                " (pisa-sim: {:.2} s of wall time per simulated second)",
                wall / simulated.max(1e-9)
            );
        }
        Ok(line)
    }
    fn tables(&self, done: &[(&Point, PathBuf)]) -> Result<()> {
        let rows = done
            .iter()
            .map(|(p, d)| self.row(p, d))
            .collect::<Result<Vec<_>>>()?;
        let w = self.s.which;
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let mut md = format!(
            "`{}`\n\n{}{}: stage capacity {:.1} Mb/s ({}), hosts {:.1} Mb/s, buffers {} packets, \
             step {} s (the paper's 10 s), cc {} ecn {}, {} reps; load average at the end: {}\n\n",
            command_line(),
            w.name(),
            if self.s.sim_seed.is_some() {
                " in pisa-sim with its TCP hosts (virtual time; - where it measures nothing)"
            } else {
                ""
            },
            self.capacity as f64 / 1e6,
            match w {
                Which::E8 => format!(
                    "4 x {:.1} Mb/s links per stage",
                    self.s.rate_bps as f64 / 1e6
                ),
                Which::E9 => format!(
                    "Fig. 5 at {:.1} Mb/s per paper Gb/s",
                    self.s.rate_bps as f64 / 1e6
                ),
            },
            self.host_bps as f64 / 1e6,
            self.s.buffer,
            self.s.step,
            self.hosts.transport.cc,
            self.hosts.transport.ecn,
            self.s.reps,
            load.trim()
        );
        if let (Some((_, dir)), None) = (done.first(), self.s.sim_seed) {
            let v: serde_json::Value = read_json(&dir.join("report.json"))?;
            let _ = writeln!(md, "Kernel settings (sender namespace): {}\n", v["sysctl"]);
        }
        md += &report::tables(&rows);
        let name = w.name();
        for (file, text) in [
            (format!("{name}.csv"), report::csv(&rows)),
            (format!("{name}.md"), md),
        ] {
            let path = self.s.out.join(file);
            write_file(&path, text)?;
        }
        Ok(())
    }
}

/// E9 in `pisa-sim` on the sweep driver ([`super::sim`]): every (scheme, load), UDP on Fig. 5,
/// deterministic. Each point leaves `report.json`; the table is `OUT/e9-sim.md`.
#[derive(Clone, Debug)]
pub struct SimSweep {
    /// Schemes (registry names).
    pub schemes: Vec<String>,
    /// Loads, fractions of the max-flow.
    pub loads: Vec<f64>,
    /// Virtual time the flows send, ms.
    pub ms: u64,
    /// Seed.
    pub seed: u64,
    /// Output directory.
    pub out: PathBuf,
}

/// A point of [`SimSweep`]: (scheme, load).
pub type SimPoint = (String, f64);

impl SimSweep {
    /// The table's file.
    pub fn table_path(&self) -> PathBuf {
        self.out.join("e9-sim.md")
    }
}

impl Experiment for SimSweep {
    type Point = SimPoint;

    fn title(&self) -> String {
        "dbb e9 sim".into()
    }
    fn out(&self) -> &Path {
        &self.out
    }
    fn points(&self) -> Vec<SimPoint> {
        let mut v = Vec::new();
        for s in &self.schemes {
            for &l in &self.loads {
                v.push((s.clone(), l));
            }
        }
        v
    }
    fn dir_name(&self, p: &SimPoint) -> String {
        format!("{}_load{}", p.0, p.1)
    }
    fn label(&self, p: &SimPoint) -> String {
        format!("{} load {}", p.0, p.1)
    }
    fn record(&self) -> String {
        let l = &super::sim::LINKS;
        format!(
            "experiment=e9-sim\nms={}\nseed={}\nunit_bps={}\nhost_bps={}\nbuffer={}\ndelay_us={}\n",
            self.ms, self.seed, l.rate_bps, l.host_bps, l.buffer, l.delay_us
        )
    }
    fn measure(&self, p: &SimPoint, dir: &Path, _ctx: &Ctx) -> Result<String> {
        let (row, report) =
            super::sim::sim_point(&p.0, p.1, self.ms, self.seed).map_err(anyhow::Error::msg)?;
        let path = dir.join("report.json");
        write_file(&path, serde_json::to_string_pretty(&report)?)?;
        Ok(format!(
            "goodput {:.3}, {} lost, {} reordered",
            row.goodput(),
            row.lost(),
            row.reordered
        ))
    }
    fn tables(&self, done: &[(&SimPoint, PathBuf)]) -> Result<()> {
        let rows = done
            .iter()
            .map(|(p, d)| {
                let r: serde_json::Value = read_json(&d.join("report.json"))?;
                super::sim::summarise(&p.0, p.1, &super::sim::sim_topology(&p.0), &r)
                    .map_err(anyhow::Error::msg)
            })
            .collect::<Result<Vec<_>>>()?;
        let md = format!(
            "`{}`\n\nE9 in pisa-sim: Fig. 5 at {} Mb/s per paper Gb/s, two UDP flows, {} ms, \
             seed {}.\n\n{}",
            command_line(),
            super::sim::UNIT_BPS / 1_000_000,
            self.ms,
            self.seed,
            super::sim::sim_table(&rows).map_err(anyhow::Error::msg)?
        );
        let path = self.table_path();
        write_file(&path, md)
    }
}
