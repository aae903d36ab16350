//! Whether the emulator kept up during a namespace point (issue 30), after Mininet-HiFi
//! (Handigol, Heller, Jeyakumar, Lantz, McKeown: "Reproducible Network Experiments Using
//! Container-Based Emulation", CoNEXT 2012): an emulation is trustworthy when the invariants
//! real hardware keeps held, and the run shows they did. Each point records
//! - **links**: every switch's traffic manager measures how late each departure from a
//!   backlogged port left against its ideal time (`show_fidelity` on the admin socket): a busy
//!   link of real hardware sends back to back at its rate;
//! - **switch input**: frames the kernel dropped before a switch took them (AF_XDP's
//!   `XDP_STATISTICS`, AF_PACKET's `PACKET_STATISTICS`): real hardware does not lose a frame
//!   waiting for a CPU;
//! - **hosts**: the flows' start lag (scheduled against actual, from the hosts' records), and the
//!   drops of the hosts' interfaces, less the PFC frames the switches sent to hosts (a Linux host
//!   has no handler for MAC control frames and counts each as an `rx_dropped`: they are not
//!   frames the emulator lost);
//! - **machine**: CPU busy and steal over the point (`/proc/stat`), and the run queue sampled
//!   once a second.
//!
//! [`verdict`] turns them into `ok` or `degraded: reasons` by the thresholds in [`Thresholds`]
//! (docs/experiments.md, "Fidelity", says why each is what it is).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};

use crate::fabric::Fabric;

use crate::Netns;

/// CPU time of the whole machine, in clock ticks (`/proc/stat`'s first line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Every tick.
    pub total: u64,
    /// Idle and waiting for I/O.
    pub idle: u64,
    /// Taken by the hypervisor for other guests.
    pub steal: u64,
}

/// The machine's CPU times and the number of runnable threads, from `/proc/stat`'s text.
pub fn parse_proc_stat(text: &str) -> (CpuTimes, Option<u64>) {
    let mut cpu = CpuTimes::default();
    let mut running = None;
    for l in text.lines() {
        let mut w = l.split_whitespace();
        match w.next() {
            Some("cpu") => {
                // user nice system idle iowait irq softirq steal guest guest_nice; guest time
                // is already in user and nice.
                let v: Vec<u64> = w.take(8).filter_map(|x| x.parse().ok()).collect();
                cpu.total = v.iter().sum();
                cpu.idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
                cpu.steal = v.get(7).copied().unwrap_or(0);
            }
            Some("procs_running") => running = w.next().and_then(|x| x.parse().ok()),
            _ => {}
        }
    }
    (cpu, running)
}

/// `/proc/stat` now.
pub fn proc_stat() -> (CpuTimes, Option<u64>) {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

/// The machine over a point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Machine {
    /// Fraction of CPU time not idle.
    pub busy: f64,
    /// Fraction of CPU time stolen.
    pub steal: f64,
    /// Runnable threads, mean of the samples (the sampler itself is one of them).
    pub runq_mean: f64,
    /// Runnable threads, the largest sample.
    pub runq_max: u64,
    /// CPUs of the machine.
    pub cpus: usize,
}

/// Samples the machine: [`Monitor::start`] at the start of the flows, [`Monitor::sample`] about
/// once a second, [`Monitor::finish`] at their end.
#[derive(Clone, Debug)]
pub struct Monitor {
    start: CpuTimes,
    runq: Vec<u64>,
}

impl Monitor {
    /// Starts measuring now.
    pub fn start() -> Monitor {
        Monitor {
            start: proc_stat().0,
            runq: Vec::new(),
        }
    }

    /// Takes one run-queue sample.
    pub fn sample(&mut self) {
        if let Some(r) = proc_stat().1 {
            self.runq.push(r);
        }
    }

    /// The machine since [`Monitor::start`].
    pub fn finish(&self) -> Machine {
        machine(
            self.start,
            proc_stat().0,
            &self.runq,
            std::thread::available_parallelism().map_or(1, usize::from),
        )
    }
}

/// Every fidelity monitor of a fabric over one measured phase (a point's flows): the machine
/// (sampled once a second by a thread of its own), the hosts' interface drops and the switches'
/// `show_fidelity` (kernel routers have none). [`Watch::start`] before the phase,
/// [`Watch::finish`] after it; the caller adds what only it knows (the flows' start lag).
#[derive(Debug)]
pub struct Watch {
    /// (switch, admin socket) of every pisa-switch of the fabric.
    monitored: Vec<(String, PathBuf)>,
    host_drops: u64,
    host_pauses: u64,
    input_drops: u64,
    stop: Arc<AtomicBool>,
    /// The sampler thread (taken by [`Watch::finish`]).
    sampler: Option<JoinHandle<Monitor>>,
}

/// A watch given up (its run failed) stops its sampler.
impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Watch {
    /// Starts watching `f` now.
    pub fn start(f: &Fabric) -> anyhow::Result<Watch> {
        let monitored = f
            .topo
            .switches
            .iter()
            .filter(|s| !programs::is_kernel(&s.program))
            .map(|s| (s.name.clone(), f.opts.dir.join(format!("{}.sock", s.name))))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let mut w = Watch {
            monitored,
            host_drops: host_drops(f),
            host_pauses: pauses_to_hosts(f)?,
            input_drops: 0,
            stop,
            sampler: Some(std::thread::spawn(move || {
                let mut m = Monitor::start();
                let mut last = Instant::now() - Duration::from_secs(1);
                while !flag.load(Ordering::Relaxed) {
                    if last.elapsed() >= Duration::from_secs(1) {
                        last = Instant::now();
                        m.sample();
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                m
            })),
        };
        w.input_drops = input_drops(&w.switches(None)?);
        Ok(w)
    }

    /// Every monitored switch's `show_fidelity`, parsed; written to `record` if given.
    fn switches(&self, record: Option<&Path>) -> anyhow::Result<Vec<(String, Switch)>> {
        let mut text = String::new();
        let v = self
            .monitored
            .iter()
            .map(|(name, sock)| {
                let lines = super::admin(sock, "show_fidelity")?;
                let _ = writeln!(text, "# {name}\n{}", lines.join("\n"));
                let parsed = parse_show_fidelity(&lines)
                    .map_err(|err| anyhow!("switch {name}: show_fidelity: {err}"))?;
                Ok((name.clone(), parsed))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        if let Some(path) = record {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(v)
    }

    /// What the monitors saw since [`Watch::start`] (no start lag: the caller's); the switches'
    /// full tables go to `record` (e.g. `fidelity.txt`) if given.
    pub fn finish(mut self, f: &Fabric, record: Option<&Path>) -> anyhow::Result<Measured> {
        self.stop.store(true, Ordering::Relaxed);
        let monitor = self
            .sampler
            .take()
            .ok_or_else(|| anyhow!("the fidelity sampler is gone"))?
            .join()
            .map_err(|_| anyhow!("the fidelity sampler panicked"))?;
        let mut m = Measured {
            machine: monitor.finish(),
            host_drops: host_drops(f).saturating_sub(self.host_drops),
            host_pauses: pauses_to_hosts(f)?.saturating_sub(self.host_pauses),
            ..Measured::default()
        };
        if !self.monitored.is_empty() {
            let switches = self.switches(record)?;
            m.link_late_p99 = worst_link(&switches, Thresholds::default().min_departures);
            m.link_departures = switches
                .iter()
                .flat_map(|(_, s)| s.links.iter().map(|l| l.departures))
                .sum();
            m.switch_input_drops = Some(input_drops(&switches).saturating_sub(self.input_drops));
        }
        Ok(m)
    }
}

/// Frames the kernel dropped before the switches took them, all of `switches`.
fn input_drops(switches: &[(String, Switch)]) -> u64 {
    switches.iter().map(|(_, s)| s.input_drops).sum()
}

/// Drops at every host interface of `f`.
fn host_drops(f: &Fabric) -> u64 {
    f.topo
        .hosts
        .iter()
        .map(|h| interface_drops(f.ns(&h.name)).values().sum::<u64>())
        .sum()
}

/// PFC frames every pisa-switch sent on its ports that face a host (`show_ports`' `pfc_tx`).
fn pauses_to_hosts(f: &Fabric) -> anyhow::Result<u64> {
    let ports = super::counters::show_ports(f)?;
    Ok(host_ports(&f.topo)
        .iter()
        .filter_map(|k| ports.get(k)?.get("pfc_tx"))
        .map(|&n| n as u64)
        .sum())
}

/// The (switch, port) at the other end of every host's link.
pub fn host_ports(t: &topo::Topology) -> Vec<(String, u16)> {
    t.links
        .iter()
        .filter_map(|l| match (&l.a, &l.b) {
            (topo::End::Switch(s, p), topo::End::Host(_))
            | (topo::End::Host(_), topo::End::Switch(s, p)) => Some((s.clone(), *p)),
            _ => None,
        })
        .collect()
}

/// The verdict of a run that has none: pisa-sim's (its virtual time no CPU can make late), or one
/// recorded before verdicts existed.
pub fn no_verdict() -> String {
    "-".into()
}

/// The verdict in a runner's JSON report ([`to_json`] under `fidelity`), or [`no_verdict`].
pub fn verdict_of(report: &serde_json::Value) -> String {
    report["fidelity"]["verdict"]
        .as_str()
        .map_or_else(no_verdict, str::to_string)
}

/// A measured phase's verdict and monitors as JSON, for the runners that report in JSON (E10's
/// and E11's hosts, DBB's points): `{"verdict": "ok", "link_late_p99_frames": 0.3, ...}`.
pub fn to_json(m: &Measured) -> serde_json::Value {
    serde_json::json!({
        "verdict": verdict(m, &Thresholds::default()),
        "link_late_p99_frames": m.link_late_p99.as_ref().map(|(v, _)| *v),
        "link_late_port": m.link_late_p99.as_ref().map(|(_, p)| p.clone()),
        "switch_input_drops": m.switch_input_drops,
        "host_drops": m.host_drops,
        "host_pause_frames": m.host_pauses,
        "cpu_busy": m.machine.busy,
        "cpu_steal": m.machine.steal,
        "runq_mean": m.machine.runq_mean,
        "runq_max": m.machine.runq_max,
    })
}

/// The machine between two readings, with run-queue samples.
pub fn machine(a: CpuTimes, b: CpuTimes, runq: &[u64], cpus: usize) -> Machine {
    let total = b.total.saturating_sub(a.total).max(1) as f64;
    let idle = b.idle.saturating_sub(a.idle) as f64;
    let steal = b.steal.saturating_sub(a.steal) as f64;
    Machine {
        busy: (1.0 - idle / total).clamp(0.0, 1.0),
        steal: (steal / total).clamp(0.0, 1.0),
        runq_mean: if runq.is_empty() {
            0.0
        } else {
            runq.iter().sum::<u64>() as f64 / runq.len() as f64
        },
        runq_max: runq.iter().copied().max().unwrap_or(0),
        cpus,
    }
}

/// The drops of every interface of a namespace (`rx_dropped + tx_dropped` of
/// `/sys/class/net/*/statistics`, loopback left out), by interface.
pub fn interface_drops(ns: &Netns) -> BTreeMap<String, u64> {
    let script = "for d in /sys/class/net/*; do n=${d##*/}; [ \"$n\" = lo ] && continue; \
                  echo \"$n $(cat $d/statistics/rx_dropped) $(cat $d/statistics/tx_dropped)\"; \
                  done";
    ns.exec("sh", &["-c", script])
        .map(|o| parse_interface_drops(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_default()
}

/// `NAME RX_DROPPED TX_DROPPED` lines.
pub fn parse_interface_drops(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?;
            let rx: u64 = w.next()?.parse().ok()?;
            let tx: u64 = w.next()?.parse().ok()?;
            Some((name.to_string(), rx + tx))
        })
        .collect()
}

/// One port's link lateness, from a `link` line of `show_fidelity`.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// The port.
    pub port: u16,
    /// Departures from a backlogged port measured.
    pub departures: u64,
    /// p99 lateness, µs (`None`: nothing measured).
    pub p99_us: Option<f64>,
    /// How long a full frame ([`FULL_FRAME`] bytes) takes at the port's rate, µs (`None`:
    /// unshaped).
    pub full_frame_us: Option<f64>,
}

/// The frame the link criterion is stated in: a full Ethernet frame (1500 bytes of IP, its
/// header and FCS). The switch also reports lateness in each departing frame's own
/// serialisation times, but a 66-byte ACK 100 µs late is 20 of those at 100 Mb/s while the link
/// lost less than one full frame's time: judged that way, ports that carry ACKs look late.
pub const FULL_FRAME: f64 = 1518.0;

impl Link {
    /// The p99 lateness in full-frame serialisation times.
    pub fn p99_frames(&self) -> Option<f64> {
        Some(self.p99_us? / self.full_frame_us?)
    }
}

/// A `show_fidelity` rate (`<n>bps`, `<n>pps`, `unshaped`): a full frame's time, µs.
fn full_frame_us(rate: &str) -> Option<f64> {
    if let Some(bps) = rate.strip_suffix("bps") {
        let bps: f64 = bps.parse().ok()?;
        return (bps > 0.0).then(|| FULL_FRAME * 8.0 * 1e6 / bps);
    }
    let pps: f64 = rate.strip_suffix("pps")?.parse().ok()?;
    (pps > 0.0).then(|| 1e6 / pps)
}

/// What a switch's `show_fidelity` says (docs/dataplane.md, "Fidelity monitors").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Switch {
    /// Shaped ports.
    pub links: Vec<Link>,
    /// Frames the kernel dropped before the switch took them, all ports: AF_XDP's
    /// `rx_dropped + rx_ring_full + rx_invalid_descs`, AF_PACKET's `tp_drops`.
    pub input_drops: u64,
}

/// Parses the lines of `show_fidelity` (without its closing `ok`): each table's rows start
/// with its name (`link`, `input`, `loop`); a header line names its columns.
pub fn parse_show_fidelity(lines: &[String]) -> Result<Switch, String> {
    let mut heads: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut sw = Switch::default();
    for l in lines {
        let w: Vec<&str> = l.split_whitespace().collect();
        let Some(&table) = w.first() else { continue };
        // A header: its second word is a column name, not a number.
        if w.get(1).is_some_and(|x| x.parse::<u64>().is_err()) {
            heads.insert(table, w[1..].to_vec());
            continue;
        }
        let Some(head) = heads.get(table) else {
            return Err(format!(
                "show_fidelity: a {table} row before its header: {l}"
            ));
        };
        let get = |c: &str| -> Option<&str> {
            let i = head.iter().position(|h| *h == c)?;
            w.get(i + 1).copied()
        };
        let num = |c: &str| get(c).and_then(|x| x.parse::<u64>().ok());
        match table {
            "link" => sw.links.push(Link {
                port: num("port").ok_or_else(|| format!("show_fidelity: {l}"))? as u16,
                departures: num("backlogged_departures").unwrap_or(0),
                p99_us: get("p99_us").and_then(|x| x.parse().ok()),
                full_frame_us: get("rate").and_then(full_frame_us),
            }),
            "input" => {
                sw.input_drops += ["rx_dropped", "rx_ring_full", "rx_invalid_descs", "tp_drops"]
                    .iter()
                    .filter_map(|c| num(c))
                    .sum::<u64>();
            }
            _ => {}
        }
    }
    Ok(sw)
}

/// The worst port of `switches` (name, its `show_fidelity`) with at least `min_departures`
/// backlogged departures: its p99 lateness in full-frame serialisation times and `switch:port`.
pub fn worst_link(switches: &[(String, Switch)], min_departures: u64) -> Option<(f64, String)> {
    switches
        .iter()
        .flat_map(|(name, s)| {
            s.links
                .iter()
                .filter(|l| l.departures >= min_departures)
                .filter_map(move |l| Some((l.p99_frames()?, format!("{name}:{}", l.port))))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// What a point measured of its own fidelity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    /// The machine.
    pub machine: Machine,
    /// Drops at the hosts' interfaces over the point.
    pub host_drops: u64,
    /// PFC frames the switches sent to hosts over the point: a Linux host counts each as a drop
    /// at its interface (it has no handler for MAC control frames), so the verdict leaves them
    /// out of [`Measured::host_drops`].
    pub host_pauses: u64,
    /// The flows' p99 start lag, µs.
    pub start_lag_p99_us: f64,
    /// The mean time between two flows' starts at one host, µs (the window times the hosts over
    /// the flows): the start lag is judged against it.
    pub interarrival_us: Option<f64>,
    /// The worst port of any switch: p99 lateness of departures from a backlogged port, in
    /// serialisation times of a full frame at the port's rate, with the port (`switch:port`);
    /// `None`: no switch reported (e.g. Linux routers).
    pub link_late_p99: Option<(f64, String)>,
    /// Backlogged departures the lateness is over, all ports.
    pub link_departures: u64,
    /// Frames the kernel dropped before a switch took them, all switches.
    pub switch_input_drops: Option<u64>,
}

/// The thresholds of the verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// A port's p99 lateness, in full-frame serialisation times, above which its link did not
    /// keep its rate (1: the 99th percentile departure left a whole frame's time late).
    pub link_late_p99: f64,
    /// Ports with fewer backlogged departures than this are not judged (too few to have a p99).
    pub min_departures: u64,
    /// Frames the kernel may drop before the switches take them.
    pub switch_input_drops: u64,
    /// Drops at the hosts' interfaces allowed.
    pub host_drops: u64,
    /// The p99 start lag, as a fraction of the mean time between two flows' starts at a host.
    pub start_lag_of_interarrival: f64,
    /// CPU busy above which the machine counts as saturated.
    pub busy: f64,
    /// CPU steal allowed.
    pub steal: f64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            link_late_p99: 1.0,
            min_departures: 100,
            switch_input_drops: 0,
            host_drops: 0,
            start_lag_of_interarrival: 0.1,
            busy: 0.95,
            steal: 0.05,
        }
    }
}

/// `ok`, or `degraded: ` and the reasons, `; `-separated (no commas: it is a CSV cell).
pub fn verdict(m: &Measured, t: &Thresholds) -> String {
    let mut why: Vec<String> = Vec::new();
    if let Some((late, port)) = &m.link_late_p99
        && *late > t.link_late_p99
    {
        why.push(format!(
            "link {port} p99 departure {late:.1} full-frame times late"
        ));
    }
    if let Some(d) = m.switch_input_drops
        && d > t.switch_input_drops
    {
        why.push(format!("{d} frames dropped before a switch took them"));
    }
    let lost = m.host_drops.saturating_sub(m.host_pauses);
    if lost > t.host_drops {
        why.push(format!("{lost} drops at the hosts' interfaces"));
    }
    if let Some(gap) = m.interarrival_us
        && m.start_lag_p99_us > t.start_lag_of_interarrival * gap
    {
        why.push(format!(
            "flows started {:.0} us late (p99) against {gap:.0} us between a host's flows",
            m.start_lag_p99_us
        ));
    }
    if m.machine.busy > t.busy {
        why.push(format!("CPU {:.0}% busy", m.machine.busy * 100.0));
    }
    if m.machine.steal > t.steal {
        why.push(format!("CPU {:.0}% stolen", m.machine.steal * 100.0));
    }
    if why.is_empty() {
        "ok".into()
    } else {
        let mut s = String::from("degraded: ");
        let _ = write!(s, "{}", why.join("; "));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_gives_busy_steal_and_the_run_queue() {
        let a = "cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\nprocs_running 3\n";
        let b = "cpu  400 0 200 1000 100 0 0 100 0 0\nprocs_running 5\n";
        let (ca, ra) = parse_proc_stat(a);
        let (cb, rb) = parse_proc_stat(b);
        assert_eq!((ra, rb), (Some(3), Some(5)));
        assert_eq!(ca.total, 1000);
        let m = machine(ca, cb, &[3, 5, 4], 2);
        // 800 ticks passed: 300 idle, 100 stolen.
        assert!((m.busy - 5.0 / 8.0).abs() < 1e-9, "{m:?}");
        assert!((m.steal - 1.0 / 8.0).abs() < 1e-9, "{m:?}");
        assert_eq!((m.runq_mean, m.runq_max), (4.0, 5));
    }

    #[test]
    fn show_fidelity_gives_each_ports_lateness_and_the_kernels_drops() {
        let text = "link port rate backlogged_departures late late_share p50_us p99_us max_us p50_ser p99_ser max_ser
link 1 unshaped 0 0 - - - - - - -
link 2 100000000bps 29935 412 0.013763 0.000 458.751 5128.460 0.000 2.996 55.578
link 3 100000000bps 50 3 0.06 0.000 458.751 5128.460 0.000 9.5 55.578
input port socket rx_dropped rx_invalid_descs tx_invalid_descs rx_ring_full rx_fill_ring_empty_descs tx_ring_empty_descs tp_packets tp_drops
input 1 af_xdp 120 0 0 3 120 1704 - -
input 2 af_packet - - - - - - 500 7
loop worker busy_loops p50_us p99_us max_us
loop 0 15377 16.383 589.823 5355.335";
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let s = parse_show_fidelity(&lines).unwrap();
        assert_eq!(s.links.len(), 3);
        assert_eq!(s.links[0].p99_frames(), None);
        assert_eq!(s.links[1].departures, 29935);
        // 458.751 us against 121.44 us for 1518 bytes at 100 Mb/s.
        let f = s.links[1].p99_frames().unwrap();
        assert!((f - 458.751 / 121.44).abs() < 1e-6, "{f}");
        // rx_dropped + rx_ring_full, and AF_PACKET's tp_drops; the fill-ring events are the
        // same frames as rx_dropped.
        assert_eq!(s.input_drops, 130);
        // Port 3 has too few departures to judge.
        let w = worst_link(&[("leaf1".into(), s)], 100).unwrap();
        assert_eq!(w, (f, "leaf1:2".into()));
        assert_eq!(full_frame_us("1000pps"), Some(1000.0));
        assert_eq!(full_frame_us("unshaped"), None);
        assert!(parse_show_fidelity(&["link 2 100bps 1 1".to_string()]).is_err());
    }

    #[test]
    fn interface_drops_parse() {
        let d = parse_interface_drops("eth0 1 2\nh1 0 0\nbad line\n");
        assert_eq!(d.get("eth0"), Some(&3));
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn a_quiet_point_is_ok_and_each_broken_invariant_is_named() {
        let t = Thresholds::default();
        let quiet = Measured {
            machine: Machine {
                busy: 0.6,
                cpus: 2,
                ..Default::default()
            },
            start_lag_p99_us: 50.0,
            interarrival_us: Some(2000.0),
            link_late_p99: Some((0.2, "leaf1:3".into())),
            link_departures: 5000,
            switch_input_drops: Some(0),
            ..Default::default()
        };
        assert_eq!(verdict(&quiet, &t), "ok");
        let mut busy = quiet.clone();
        busy.machine.busy = 0.99;
        busy.link_late_p99 = Some((3.5, "leaf1:3".into()));
        busy.switch_input_drops = Some(12);
        busy.start_lag_p99_us = 900.0;
        let v = verdict(&busy, &t);
        assert!(v.starts_with("degraded: "), "{v}");
        for why in [
            "leaf1:3",
            "3.5 full-frame",
            "12 frames",
            "900 us late (p99) against 2000 us",
            "99% busy",
        ] {
            assert!(v.contains(why), "{why}: {v}");
        }
        assert!(!v.contains(','), "a CSV cell: {v}");
        // Kernel routers report no switch-side monitors: only the rest is judged.
        let kernel = Measured {
            link_late_p99: None,
            switch_input_drops: None,
            ..quiet
        };
        assert_eq!(verdict(&kernel, &t), "ok");
    }

    /// A Linux host drops the PAUSE frames a switch sends it (no handler for MAC control): the
    /// drops they explain are not the emulator's loss; any beyond them are.
    #[test]
    fn pause_frames_sent_to_hosts_are_not_host_drops() {
        let t = Thresholds::default();
        let mut m = Measured {
            host_drops: 12,
            host_pauses: 12,
            ..Default::default()
        };
        assert_eq!(verdict(&m, &t), "ok");
        m.host_drops = 14;
        assert_eq!(
            verdict(&m, &t),
            "degraded: 2 drops at the hosts' interfaces"
        );
        let link = topo::LinkProps {
            rate_bps: 25_000_000,
            delay_us: 0,
            buffer: 200,
        };
        let topo = topo::leaf_spine(2, 2, 2, 1.0, link);
        let mut ports = host_ports(&topo);
        ports.sort();
        assert_eq!(ports.len(), 4);
        assert!(
            ports.iter().all(|(s, _)| s.starts_with("leaf")),
            "{ports:?}"
        );
    }
}
