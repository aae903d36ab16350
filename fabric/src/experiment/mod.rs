//! `pisa-fabric experiment` (issue 11 §2): for each (scheme, load, rep), bring a fabric up,
//! program it by the scheme's fabric plan, run a workload with `pisa-traffic` in every host
//! namespace, collect per-uplink packets (P4Runtime counters), drops, ECN marks and sampled queue
//! depths (the switches' admin sockets), and tear the fabric down. The scheme `kernel` is a
//! fabric of Linux routers ([`crate::fabric::kernel`]): its uplink packets come from the
//! interfaces' counters, its drops and queue depths from the qdiscs.
//!
//! It runs on the sweep driver ([`crate::sweep`]: resume, the setup record [`record`], teardown,
//! progress). Outputs, in `OUT/`:
//! - `points/<scheme>_load<L>_rep<R>/`: each point's own `flows.csv`, `summary.csv`,
//!   `uplinks.csv`, the hosts' schedules and logs, and a `done` marker. A point with a marker is
//!   skipped, so a run resumes where it stopped.
//! - `flows.csv`, `summary.csv`, `uplinks.csv`: every finished point's rows, in sweep order,
//!   rebuilt after each point.
//!
//! The schedule of a (load, rep) depends only on the seed, the workload, the pattern, the load and
//! the rep ([`Seeding::Value`]), so every scheme sees exactly the same flows, and a load gets the
//! same flows in every sweep that lists it: points of different sweeps pair. Sweeps recorded
//! before 2026-11-26 seeded a point by its load's position in `--loads` instead
//! ([`Seeding::Position`], `--seeding position`), which reproduces them. Loads are fractions of
//! the capacity `--load-of` names: `host` (HPCC's: each host's link; the default) or `fabric`
//! (CONGA's: each leaf's uplink capacity shared by its hosts).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use pipeline::externs::Rng;
use programs::is_kernel;
use sim::traffic::{self, Class, Flow, Layout, Pattern, Stats, Tagging};
use sim::workload::Cdf;
use topo::{End, Role, Topology};

use crate::dctcp::Dctcp;
use crate::fabric::{Fabric, kernel};
use crate::traffic::{FLOW_CSV_HEADER, Job, PORT, Transport};
use crate::{Process, workspace_bin};

mod calibrate;
mod counters;
pub mod dbb;
pub mod e10;
pub mod e11;
pub mod fidelity;
pub mod hpcc;
mod point;
pub mod qcn;
mod rate;
mod results;
mod schedule;
mod sim_point;

pub use calibrate::ping_times_us;
pub use counters::{PORT_TX, port_tx_bytes, port_tx_packets, switch_counters};
use point::{run_point, start_servers};
pub use rate::{RateProbe, at_host_rate, calibrate_rate, host_rate};
pub use results::*;
pub use schedule::*;

/// What `--load-of` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadOf {
    /// Each host's link (HPCC).
    Host,
    /// Each leaf's uplink capacity divided among its hosts (CONGA).
    Fabric,
}

impl std::str::FromStr for LoadOf {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "host" => Ok(LoadOf::Host),
            "fabric" => Ok(LoadOf::Fabric),
            _ => Err(format!("--load-of {s}: host or fabric")),
        }
    }
}

/// An experiment.
#[derive(Clone, Debug)]
pub struct Fct {
    /// The topology; each point replaces every switch's program by the scheme's.
    pub base: Topology,
    /// Schemes: program names of the registry (or `kernel`), each optionally with plan
    /// parameters of its own ([`scheme_parts`]).
    pub schemes: Vec<String>,
    /// `--set KEY=VALUE`: fabric-plan parameters for every switch.
    pub sets: Vec<(String, String)>,
    /// Workload name (`sim::workload`).
    pub workload: String,
    /// Loads, fractions.
    pub loads: Vec<f64>,
    /// `stride`, `random`, `permutation`, `all-to-all` or `incast`.
    pub pattern: String,
    /// The incast groups (`COUNTxSIZE[:CLASS],...`), for `incast`.
    pub incast: String,
    /// The capacity loads refer to.
    pub load_of: LoadOf,
    /// Arrival window, seconds.
    pub seconds: f64,
    /// Seconds after the window before unfinished flows are recorded as such.
    pub drain: f64,
    /// Repetitions per (scheme, load).
    pub reps: usize,
    /// Output directory.
    pub out: PathBuf,
    /// Congestion control and ECN (dctcp is our BPF DCTCP; cubic with ECN where it cannot be
    /// loaded).
    pub transport: Transport,
    /// Tags of short and large flows.
    pub short_tos: u8,
    /// See `short_tos`.
    pub large_tos: u8,
    /// Seed.
    pub seed: u64,
    /// How a point's flows are seeded from `seed`.
    pub seeding: Seeding,
    /// Fabric name.
    pub name: String,
    /// How switches are linked to each other.
    pub links: crate::fabric::Links,
    /// Program counters recorded per switch at the end of each point (`counters.csv`).
    pub counters: Vec<String>,
    /// Fail a point whose fidelity is degraded ([`fidelity`]) instead of warning.
    pub require_fidelity: bool,
    /// Measure a point whose fidelity was degraded again, with the same flows, up to this many
    /// times; the degraded attempts are kept beside it and listed in `OUT/retries.csv`. Not in
    /// the setup record: every attempt is measured alike.
    pub retry_degraded: usize,
    /// The switches' workers' SCHED_FIFO priority (0: normal scheduling).
    pub rt_priority: u8,
    /// Where the points run.
    pub place: Place,
    /// With `--where sim`: each switch traversal's latency, µs (0: none; a namespace run's
    /// `calibration` file says its `per_hop_us`).
    pub sim_hop_us: u64,
    /// With `--where sim`: frames cross links store-and-forward, their serialisation time
    /// added as on a wire ([`sim::fabric::Options::store_and_forward`]).
    pub sim_store_and_forward: bool,
    /// With `--where sim`: switches stall now and then, as a software switch's process
    /// waiting for a CPU ([`sim::fabric::Stalls`]).
    pub sim_stalls: Option<sim::fabric::Stalls>,
    /// With `--where sim`: how many points run at once (each on its own thread).
    pub jobs: usize,
    /// The flows run over IPv6 (the hosts' IPv6 addresses, the ToS in the traffic class).
    pub ipv6: bool,
}

/// Where an experiment's points run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Place {
    /// Namespaces with pisa-switch processes and Linux TCP.
    #[default]
    Namespaces,
    /// pisa-sim, in virtual time, with its Linux-like TCP hosts ([`sim_point`]).
    Sim,
}

impl std::str::FromStr for Place {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "namespaces" | "ns" => Ok(Place::Namespaces),
            "sim" => Ok(Place::Sim),
            _ => Err(format!("--where {s}: namespaces or sim")),
        }
    }
}

/// How a point's flows are seeded (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Seeding {
    /// From the point's value: the workload, the pattern, the load and the rep. A load gets the
    /// same flows in every sweep that lists it.
    #[default]
    Value,
    /// From the load's position in `--loads` and the rep: how the runner seeded points before
    /// 2026-11-26, kept to reproduce the sweeps recorded then.
    Position,
}

impl std::str::FromStr for Seeding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "value" => Ok(Seeding::Value),
            "position" => Ok(Seeding::Position),
            _ => Err(format!("seeding {s}: value or position")),
        }
    }
}

/// The setup record of a sweep (`OUT/setup`, see [`crate::sweep`]): everything a point's
/// measurement depends on except the point itself (its scheme, load and rep), so that a resumed
/// sweep does not mix points measured on different fabrics, workloads or transports. Schemes,
/// loads and reps may be added to a sweep.
pub fn record(e: &Fct) -> String {
    let links = match e.links {
        crate::fabric::Links::Veth => "veth",
        crate::fabric::Links::Shm => "shm",
    };
    let seeding = match e.seeding {
        Seeding::Value => "value",
        Seeding::Position => "position",
    };
    let sets: Vec<String> = e.sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut r = format!(
        "experiment=fct\nlinks={links}\nswitch_wait={}\n{}workload={}\npattern={}\nincast={}\n\
         load_of={:?}\nseconds={}\ndrain={}\ncc={}\necn={}\nreordering={:?}\nshort_tos={}\n\
         large_tos={}\nseed={}\nseeding={seeding}\nsets={}\ncounters={}\n",
        crate::fabric::SWITCH_WAIT.join(" "),
        // Only where set: sweeps recorded before they existed ran in namespaces with normal
        // scheduling.
        match (e.rt_priority, e.place) {
            (0, Place::Namespaces) => String::new(),
            (r, Place::Namespaces) => format!("rt_priority={r}\n"),
            // Store and forward only where set, as for the real-time priority.
            (_, Place::Sim) => format!(
                "where=sim\nsim_hop_us={}\n{}{}",
                e.sim_hop_us,
                if e.sim_store_and_forward {
                    "sim_store_and_forward=true\n"
                } else {
                    ""
                },
                e.sim_stalls
                    .map_or(String::new(), |st| format!("sim_stalls={st}\n"))
            ),
        },
        e.workload,
        e.pattern,
        e.incast,
        e.load_of,
        e.seconds,
        e.drain,
        e.transport.cc,
        e.transport.ecn,
        e.transport.reordering,
        e.short_tos,
        e.large_tos,
        e.seed,
        sets.join(" "),
        e.counters.join(" ")
    );
    // Only where set, so that the IPv4 sweeps recorded before it existed still resume.
    if e.ipv6 {
        r += "ip=6\n";
    }
    // The topology, with the programs every point replaces.
    let mut t = e.base.clone();
    for s in &mut t.switches {
        s.program = "-".into();
    }
    r += "topology:\n";
    r += &t.to_text("");
    r
}

/// One point of the sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Scheme.
    pub scheme: String,
    /// Index into the loads.
    pub load_index: usize,
    /// Load.
    pub load: f64,
    /// Repetition, from 1.
    pub rep: usize,
}

impl Point {
    /// Its directory name.
    pub fn dir_name(&self) -> String {
        format!("{}_load{}_rep{}", self.scheme, self.load, self.rep)
    }
}

/// A scheme of a sweep split into its program (a registry name or `kernel`) and the plan
/// parameters it adds to `--set`'s: `p4te:routing=static:ecn=1` is `p4te` with `routing=static`
/// and `ecn=1`, so variants of one program are schemes of one sweep, paired per seed like any
/// other. The whole string names the scheme in every table.
pub fn scheme_parts(scheme: &str) -> anyhow::Result<(&str, Vec<(String, String)>)> {
    let mut it = scheme.split(':');
    let program = it.next().unwrap_or_default();
    let params = it
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(anyhow!(
                "scheme {scheme}: `{kv}` is not KEY=VALUE (a scheme is PROGRAM[:KEY=VALUE]...)"
            )),
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((program, params))
}

/// The program of a scheme (what precedes its parameters).
pub(super) fn scheme_program(scheme: &str) -> &str {
    scheme.split(':').next().unwrap_or_default()
}

/// The topology point `p` runs on: every switch runs its scheme's program with `--set`'s
/// parameters, then the scheme's own (which win).
pub(super) fn point_topology(e: &Fct, p: &Point) -> Topology {
    let mut topo = e.base.clone();
    // A scheme that does not parse was refused before any point ran (`run`).
    let (program, own) = scheme_parts(&p.scheme).unwrap_or((&p.scheme, Vec::new()));
    for s in &mut topo.switches {
        s.program = program.to_string();
        for (k, v) in e.sets.iter().chain(&own) {
            s.params.insert(k.clone(), v.clone());
        }
    }
    topo
}

/// Every point, scheme-major, then load, then rep.
pub fn points(e: &Fct) -> Vec<Point> {
    let mut v = Vec::new();
    for s in &e.schemes {
        for (li, &load) in e.loads.iter().enumerate() {
            for rep in 1..=e.reps {
                v.push(Point {
                    scheme: s.clone(),
                    load_index: li,
                    load,
                    rep,
                });
            }
        }
    }
    v
}

/// Sends `cmd` to a switch's admin socket; returns the reply lines.
pub fn admin(sock: &Path, cmd: &str) -> anyhow::Result<Vec<String>> {
    let s = UnixStream::connect(sock).with_context(|| format!("{}", sock.display()))?;
    let at = || format!("{}: {cmd}", sock.display());
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .with_context(at)?;
    let mut w = s.try_clone().with_context(at)?;
    w.write_all(format!("{cmd}\n").as_bytes())
        .with_context(at)?;
    let mut out = Vec::new();
    for line in BufReader::new(s).lines() {
        let line = line.with_context(at)?;
        if line == "ok" {
            return Ok(out);
        }
        if let Some(err) = line.strip_prefix("error: ") {
            bail!("{}: {cmd}: {err}", sock.display());
        }
        out.push(line);
    }
    bail!("{}: {cmd}: no answer", sock.display())
}

/// (enqueued, dropped, marked, depth) of a port, summed over its queues, from a switch's
/// admin socket.
pub fn port_queues(sock: &Path, port: u16) -> anyhow::Result<[u64; 4]> {
    let mut sum = [0u64; 4];
    for l in admin(sock, &format!("show_queues {port}"))?.iter().skip(1) {
        // queue depth bytes enqueued dropped marked
        let v: Vec<u64> = l
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if v.len() == 6 {
            sum[0] += v[3];
            sum[1] += v[4];
            sum[2] += v[5];
            sum[3] += v[1];
        }
    }
    Ok(sum)
}

/// The transport a run uses, and the guard that keeps our DCTCP registered while it runs: see
/// [`Transport::resolve`] (dctcp is our BPF DCTCP; cubic with RFC 3168 ECN where it cannot be
/// loaded, said on stderr).
pub fn effective_transport(t: &Transport) -> (Transport, Option<Dctcp>) {
    t.resolve("pisa-fabric")
}

/// The FCT comparison on the sweep driver.
struct FctSweep {
    e: Fct,
    /// The transport the hosts use (after [`effective_transport`]).
    transport: Transport,
    /// Keeps our DCTCP registered while the sweep runs.
    _dctcp: Option<Dctcp>,
}

impl crate::sweep::Experiment for FctSweep {
    type Point = Point;

    fn title(&self) -> String {
        "experiment".into()
    }
    fn out(&self) -> &Path {
        &self.e.out
    }
    fn points(&self) -> Vec<Point> {
        points(&self.e)
    }
    fn dir_name(&self, p: &Point) -> String {
        p.dir_name()
    }
    fn label(&self, p: &Point) -> String {
        format!("{} load {} rep {}", p.scheme, p.load, p.rep)
    }
    fn record(&self) -> String {
        record(&self.e)
    }
    fn describe(&self) -> Option<String> {
        let e = &self.e;
        Some(format!(
            "{} schemes x {} loads x {} reps; {} with {} flows, cc {} ecn {}",
            e.schemes.len(),
            e.loads.len(),
            e.reps,
            e.workload,
            e.pattern,
            self.transport.cc,
            self.transport.ecn
        ))
    }
    /// Every point's plans get the fabric's measured base RTT and one flowlet gap
    /// (calibrate.rs), each unless --set gives it.
    fn prepare(&mut self, ctx: &crate::sweep::Ctx) -> anyhow::Result<()> {
        let c = match self.e.place {
            Place::Namespaces => calibrate::calibrate(&self.e, ctx)?,
            Place::Sim => calibrate::calibrate_sim(&self.e)?,
        };
        for (k, v) in [("rtt_us", c.rtt_us), ("flowlet_gap_us", c.gap_us)] {
            match self.e.sets.iter().find(|(key, _)| key == k) {
                Some((_, given)) => {
                    eprintln!(
                        "experiment: {k} = {given} (--set), for every scheme that does not set it"
                    )
                }
                None => {
                    eprintln!(
                        "experiment: {k} = {v} (calibrated), for every scheme that does not set it"
                    );
                    self.e.sets.push((k.into(), v.to_string()));
                }
            }
        }
        Ok(())
    }
    /// A degraded point, while it has retries left (`--retry-degraded`).
    fn redo(&self, dir: &Path, attempts: usize) -> bool {
        attempts < self.e.retry_degraded
            && results::point_verdict(&dir.join("summary.csv")).is_some_and(|v| v != "ok")
    }
    /// Simulated points run `--jobs` at a time (they bring up no fabric and each is one
    /// deterministic process of its own); points in namespaces one at a time.
    fn parallel(&self) -> usize {
        match self.e.place {
            Place::Namespaces => 1,
            Place::Sim => self.e.jobs,
        }
    }
    fn measure(&self, p: &Point, dir: &Path, ctx: &crate::sweep::Ctx) -> anyhow::Result<String> {
        match self.e.place {
            Place::Namespaces => run_point(&self.e, &self.transport, p, dir, ctx),
            Place::Sim => sim_point::run_point_sim(&self.e, &self.transport, p, dir),
        }
    }
    fn tables(&self, done: &[(&Point, PathBuf)]) -> anyhow::Result<()> {
        let dirs: Vec<&Path> = done.iter().map(|(_, d)| d.as_path()).collect();
        let out = &self.e.out;
        merge(out, &dirs, "flows.csv", &flows_header())?;
        merge(out, &dirs, "summary.csv", SUMMARY_HEADER)?;
        merge(out, &dirs, "uplinks.csv", UPLINKS_HEADER)?;
        if !self.e.counters.is_empty() {
            merge(out, &dirs, "counters.csv", counters::COUNTERS_HEADER)?;
        }
        results::write_retries(out, &dirs)
    }
}

/// Runs the experiment on the sweep driver ([`crate::sweep`]), on fabric `e.name`, stopping
/// between steps when `cancel` is set.
pub fn run(e: &Fct, cancel: &Arc<AtomicBool>) -> anyhow::Result<crate::sweep::Done> {
    for s in &e.schemes {
        let (program, own) = scheme_parts(s)?;
        if programs::lookup(program).is_none() && !is_kernel(program) {
            bail!(
                "scheme {s}: no such program (this build has: {}; `kernel` is a fabric of Linux \
                 routers; plan parameters go in --set, or after the program: p4te:ecn=1)",
                programs::names().collect::<Vec<_>>().join(", ")
            );
        }
        if is_kernel(program) && !own.is_empty() {
            bail!("scheme {s}: Linux routers take no plan parameters");
        }
        if s.contains([',', '/', '|']) || s.contains(char::is_whitespace) {
            bail!(
                "scheme {s}: no commas, slashes, bars or spaces (it names files, CSV rows and table cells)"
            );
        }
        // A bad value fails here, not when its first point runs hours into a sweep. (A key no
        // plan reads is not caught: plans ignore keys that are not theirs, as `--set` needs.)
        if !is_kernel(program) {
            let p = Point {
                scheme: s.clone(),
                load_index: 0,
                load: e.loads.first().copied().unwrap_or(1.0),
                rep: 1,
            };
            programs::fabric_plan(&point_topology(e, &p))
                .map_err(|err| anyhow!("scheme {s}: {err}"))?;
        }
    }
    if e.loads.iter().any(|l| !(*l > 0.0 && l.is_finite())) || e.loads.is_empty() {
        bail!("--loads: positive fractions");
    }
    if !(e.seconds > 0.0 && e.drain >= 0.0 && e.reps > 0) {
        bail!("--seconds must be positive, --drain at least 0, --reps at least 1");
    }
    // Loaded once for every host's namespace (registration is global); the hosts' pisa-traffic
    // find it registered and select it. The simulator's hosts have their own DCTCP.
    let (transport, dctcp) = match e.place {
        Place::Namespaces => effective_transport(&e.transport),
        Place::Sim => (e.transport.clone(), None),
    };
    let mut ctx = crate::sweep::Ctx::new(&e.name, cancel.clone());
    ctx.links = e.links;
    ctx.rt_priority = e.rt_priority;
    let mut s = FctSweep {
        e: e.clone(),
        transport,
        _dctcp: dctcp,
    };
    crate::sweep::run(&mut s, &ctx)
}

#[cfg(test)]
mod tests;
