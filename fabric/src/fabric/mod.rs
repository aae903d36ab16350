//! Fabrics in namespaces: one namespace and one `pisa-switch` per switch, one namespace per host
//! (the kernel's TCP/UDP stack), veth pairs for links (or shared-memory rings between switches,
//! [`Links::Shm`]), and a management namespace from which the
//! controller reaches every switch's P4Runtime server over its own veth (a management network, as
//! in a data centre; no traffic leaves the fabric's namespaces).
//!
//! Names: the namespaces of fabric `F` are `pf<F>-<node>` and `pf<F>--mgmt`; inside a switch's
//! namespace port N is interface `pN` and the management interface is `mgmt`; a host's interface
//! is `eth0`. [`teardown`] removes everything of a fabric by those names, so a fabric left behind by
//! a crash or Ctrl-C is removed by the next `down` or `up`.
//!
//! A switch whose program is `kernel` ([`programs::KERNEL`]) is a Linux router instead
//! of a `pisa-switch` process: see [`kernel`].

pub mod kernel;

use programs::is_kernel;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};

use crate::{Netns, Process, run, workspace_bin};
use topo::{End, Topology, plan};

/// The P4Runtime port every switch serves on its management address.
pub const GRPC_PORT: u16 = 9559;

/// How a fabric's switch workers wait: after traffic, poll for up to 200 us (adaptive, as every
/// switch's window: regular gaps below it are polled through, longer lulls sleep at once),
/// yielding the CPU between loops, as by default. A fabric runs many switches on few CPUs: a
/// yielding worker lets the other switches on its CPU run, and a worker on no wait queue costs
/// its neighbours no wake-up per frame; a window shorter than the default's 2 ms keeps lightly
/// loaded switches from polling. docs/performance.md, "Fabric capacity" and "Per-hop latency",
/// measure it.
pub const SWITCH_WAIT: [&str; 2] = ["--poll-window-us", "200"];

/// The namespace of `node` in fabric `fabric`.
pub fn ns_name(fabric: &str, node: &str) -> String {
    format!("pf{fabric}-{node}")
}

/// The management namespace of fabric `fabric` (where the controller runs).
pub fn mgmt_ns(fabric: &str) -> String {
    format!("pf{fabric}--mgmt")
}

/// Switch `i`'s management address (a /30 per switch in 172.30.0.0/16): (controller side,
/// switch side).
pub fn mgmt_addrs(i: usize) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(Ipv4Addr::new(172, 30, 0, 0)) + 4 * i as u32;
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
}

/// How switches are linked to each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Links {
    /// veth pairs, as every other link (each hop a copy-mode AF_XDP transmit and receive).
    #[default]
    Veth,
    /// Shared-memory rings in /dev/shm between two `pisa-switch` processes
    /// ([`dataplane::io::shm`]); links to hosts and to Linux routers stay veth pairs.
    Shm,
}

impl std::str::FromStr for Links {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "veth" => Ok(Links::Veth),
            "shm" => Ok(Links::Shm),
            _ => Err(format!("links {s}: veth or shm")),
        }
    }
}

/// The file of shared-memory link `index` of fabric `fabric`.
pub fn shm_link_path(fabric: &str, index: usize) -> PathBuf {
    PathBuf::from(format!("/dev/shm/pisa-{fabric}-l{index}"))
}

/// Removes every shared-memory link file (and doorbell) of fabric `name`.
fn remove_shm_links(name: &str) {
    let prefix = format!("pisa-{name}-l");
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    for e in dir.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        // pisa-<name>-l<digits>[.a|.b]: the digits keep fabric "a1" from matching "a12".
        if let Some(rest) = n.strip_prefix(&prefix)
            && rest
                .split('.')
                .next()
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Options of a bring-up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The fabric's name (at most 6 letters and digits).
    pub name: String,
    /// Port I/O of the switches (`af-xdp` or `af-packet`).
    pub io: String,
    /// Where logs, entries files and the topology copy go.
    pub dir: PathBuf,
    /// Set (e.g. by a signal handler) to stop a bring-up between steps.
    pub cancel: Arc<AtomicBool>,
    /// Whether every switch captures its ports (`--pcap DIR/<switch>-pcap`: files
    /// `port<N>-rx.pcap` and `port<N>-tx.pcap`, complete once the switch has stopped).
    pub capture: bool,
    /// How switches are linked to each other.
    pub links: Links,
    /// The switches' workers run in SCHED_FIFO at this priority (`pisa-switch --rt-priority`;
    /// 0: the normal scheduler).
    pub rt_priority: u8,
}

impl Options {
    /// Options for a test's fabric: AF_XDP switches, a name unique to this process (`tag` and
    /// the pid, at most 6 characters), files in a temporary directory of that name.
    pub fn for_test(tag: char) -> Options {
        // Once per process, before its first test fabric: what killed test processes left.
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(|| {
            for name in remove_dead_test_fabrics(&std::env::temp_dir()) {
                eprintln!("removed test fabric {name}: its process no longer runs");
            }
        });
        let name = format!("{tag}{}", std::process::id() % 100_000);
        Options {
            dir: std::env::temp_dir().join(format!("pisa-fabric-test-{name}")),
            name,
            io: "af-xdp".into(),
            cancel: Default::default(),
            capture: false,
            links: Links::Veth,
            rt_priority: 0,
        }
    }
}

/// A fabric that is up. Dropping it tears it down; [`Fabric::keep`] leaves it running.
#[derive(Debug)]
pub struct Fabric {
    /// The topology.
    pub topo: Topology,
    /// The options it was brought up with.
    pub opts: Options,
    /// Switch processes by switch name (dropped first: stopped before their namespaces go).
    switches: BTreeMap<String, Process>,
    /// Namespaces by node name, plus the management namespace under "".
    namespaces: BTreeMap<String, Netns>,
}

/// Runs `ip -batch` with `lines` (in namespace `ns`, or the root one).
fn ip_batch(ns: Option<&str>, lines: &[String], dir: &Path) -> Result<(), String> {
    if lines.is_empty() {
        return Ok(());
    }
    let file = dir.join(format!("ip-{}.batch", ns.unwrap_or("root")));
    std::fs::write(&file, lines.join("\n") + "\n")
        .map_err(|e| format!("writing {}: {e}", file.display()))?;
    let f = file.to_str().unwrap_or_default();
    let args: Vec<&str> = match ns {
        Some(n) => vec!["-n", n, "-batch", f],
        None => vec!["-batch", f],
    };
    // The error names the command, hence the namespace and the batch file.
    run("ip", &args).map(|_| ()).map_err(String::from)
}

/// Removes every namespace of fabric `name` and the processes in them. Returns how many
/// namespaces it removed.
pub fn teardown(name: &str) -> usize {
    if name.is_empty() {
        return 0; // no fabric has an empty name; "pf-" would match other things
    }
    let prefix = format!("pf{name}-");
    let list = run("ip", &["netns", "list"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mine: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    // Stop the switches first (SIGTERM: they detach their XDP programs), then anything else.
    let pids: Vec<String> = mine
        .iter()
        .flat_map(|ns| {
            run("ip", &["netns", "pids", ns])
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    // Alive: /proc/<pid> exists and is not a zombie.
    let alive = |pid: &String| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')))
    };
    for signal in ["-TERM", "-KILL"] {
        let left: Vec<&String> = pids.iter().filter(|p| alive(p)).collect();
        if left.is_empty() {
            break;
        }
        for pid in &left {
            let _ = run("kill", &[signal, pid]);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && pids.iter().any(alive) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for ns in &mine {
        let _ = run("ip", &["netns", "del", ns]);
    }
    remove_shm_links(name);
    mine.len()
}

/// Tears down the test fabrics ([`Options::for_test`]) of processes that no longer run, and
/// removes their directories under `tmp`: a test killed outright (SIGKILL, a CI timeout) never
/// runs its fabric's `Drop`. A test fabric is known by its directory, `pisa-fabric-test-` and
/// its name (a tag letter and its process's pid modulo 100,000); it is left alone while any
/// live process has that residue. Returns the names of the fabrics whose namespaces it removed.
pub fn remove_dead_test_fabrics(tmp: &Path) -> Vec<String> {
    let live = crate::live_pid_residues();
    let mut gone = Vec::new();
    for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
        let Some(name) = e
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("pisa-fabric-test-"))
            .map(str::to_string)
        else {
            continue;
        };
        let mut chars = name.chars();
        let tagged = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
        let Some(pid) = chars.as_str().parse::<u32>().ok().filter(|_| tagged) else {
            continue;
        };
        if !live.contains(&pid) {
            let removed = teardown(&name);
            let _ = std::fs::remove_dir_all(e.path());
            if removed > 0 {
                gone.push(name);
            }
        }
    }
    gone
}

impl Fabric {
    /// Brings `topo` up: namespaces, links, hosts (addresses, default routes through their
    /// switch with a static neighbour entry, checksum offload off) and one `pisa-switch` per
    /// switch with its traffic-manager settings. The routes come from [`Fabric::program`].
    /// Switches named `kernel` are Linux routers set up completely here ([`kernel::set_up`]).
    pub fn up(
        topo: &Topology,
        opts: &Options,
        mut progress: impl FnMut(&str),
    ) -> anyhow::Result<Fabric> {
        topo.check().map_err(anyhow::Error::msg)?;
        if opts.name.is_empty()
            || opts.name.len() > 6
            || !opts.name.chars().all(|c| c.is_ascii_alphanumeric())
        {
            bail!("a fabric name is 1-6 letters and digits");
        }
        std::fs::create_dir_all(&opts.dir)
            .with_context(|| format!("creating {}", opts.dir.display()))?;
        let cancelled = || {
            if opts.cancel.load(Ordering::Relaxed) {
                Err(anyhow!("bring-up cancelled"))
            } else {
                Ok(())
            }
        };
        let removed = teardown(&opts.name);
        if removed > 0 {
            progress(&format!(
                "removed {removed} namespaces left from an earlier run"
            ));
        }
        let mut fabric = Fabric {
            topo: topo.clone(),
            opts: opts.clone(),
            switches: BTreeMap::new(),
            namespaces: BTreeMap::new(),
        };
        let nodes = topo
            .switches
            .iter()
            .map(|s| &s.name)
            .chain(topo.hosts.iter().map(|h| &h.name));
        for n in nodes {
            cancelled()?;
            let ns = Netns::named(&ns_name(&opts.name, n)).with_context(|| n.clone())?;
            fabric.namespaces.insert(n.clone(), ns);
        }
        let mgmt = Netns::named(&mgmt_ns(&opts.name)).context("the management namespace")?;
        fabric.namespaces.insert(String::new(), mgmt);
        progress(&format!(
            "{} namespaces ({} switches, {} hosts, 1 management)",
            fabric.namespaces.len(),
            topo.switches.len(),
            topo.hosts.len()
        ));

        // Links: veth ends created straight into their namespaces with their final names.
        let ifname = |e: &End| match e {
            End::Switch(_, p) => format!("p{p}"),
            End::Host(_) => "eth0".to_string(),
        };
        // Shared-memory links: switch to switch, both ends pisa-switch processes.
        let mut shm: BTreeMap<(String, u16), String> = BTreeMap::new();
        let mut root = Vec::new();
        for (i, l) in topo.links.iter().enumerate() {
            if let (Links::Shm, End::Switch(a, pa), End::Switch(b, pb)) = (opts.links, &l.a, &l.b) {
                let program = |n: &str| topo.switches.iter().find(|s| s.name == n);
                if program(a)
                    .zip(program(b))
                    .is_some_and(|(x, y)| !is_kernel(&x.program) && !is_kernel(&y.program))
                {
                    let path = shm_link_path(&opts.name, i);
                    let path = path.to_string_lossy();
                    shm.insert((a.clone(), *pa), format!("shm:{path}:a"));
                    shm.insert((b.clone(), *pb), format!("shm:{path}:b"));
                    continue;
                }
            }
            root.push(format!(
                "link add {} netns {} type veth peer name {} netns {}",
                ifname(&l.a),
                ns_name(&opts.name, l.a.node()),
                ifname(&l.b),
                ns_name(&opts.name, l.b.node())
            ));
        }
        for (i, s) in topo.switches.iter().enumerate() {
            root.push(format!(
                "link add m{i} netns {} type veth peer name mgmt netns {}",
                mgmt_ns(&opts.name),
                ns_name(&opts.name, &s.name)
            ));
        }
        ip_batch(None, &root, &opts.dir).map_err(anyhow::Error::msg)?;
        progress(&format!(
            "{} links ({} in shared memory) and {} management links",
            topo.links.len(),
            shm.len() / 2,
            topo.switches.len()
        ));

        // Management addresses.
        let mut mgmt_lines = Vec::new();
        for (i, s) in topo.switches.iter().enumerate() {
            let (ctl, sw) = mgmt_addrs(i);
            mgmt_lines.push(format!("addr add {ctl}/30 dev m{i}"));
            mgmt_lines.push(format!("link set m{i} up"));
            let lines = vec![
                format!("addr add {sw}/30 dev mgmt"),
                "link set mgmt up".to_string(),
            ];
            ip_batch(Some(&ns_name(&opts.name, &s.name)), &lines, &opts.dir)
                .map_err(anyhow::Error::msg)?;
        }
        ip_batch(Some(&mgmt_ns(&opts.name)), &mgmt_lines, &opts.dir).map_err(anyhow::Error::msg)?;

        // Hosts: /32 and /128 addresses, default routes via their switch (link-local
        // gateways with static neighbour entries: the switches do not answer ARP or NDP).
        for (i, h) in topo.hosts.iter().enumerate() {
            cancelled()?;
            let (sw, _) = topo
                .host_attachment(&h.name)
                .ok_or_else(|| anyhow!("host {} has no link", h.name))?;
            let si = topo
                .switches
                .iter()
                .position(|s| s.name == sw)
                .unwrap_or_default();
            let gw = plan::mac_text(plan::switch_mac(si));
            let ns = ns_name(&opts.name, &h.name);
            let lines = vec![
                format!(
                    "link set eth0 address {}",
                    plan::mac_text(plan::host_mac(i))
                ),
                format!("addr add {}/32 dev eth0", h.ipv4),
                format!("addr add {}/128 dev eth0 nodad", h.ipv6),
                "link set eth0 up".to_string(),
                "route add default via 169.254.1.1 dev eth0 onlink".to_string(),
                format!("neigh add 169.254.1.1 lladdr {gw} dev eth0 nud permanent"),
                "route add default via fe80::1 dev eth0".to_string(),
                format!("neigh add fe80::1 lladdr {gw} dev eth0 nud permanent"),
            ];
            ip_batch(Some(&ns), &lines, &opts.dir).map_err(anyhow::Error::msg)?;
            run(
                "ip",
                &["netns", "exec", &ns, "ethtool", "-K", "eth0", "tx", "off"],
            )
            .with_context(|| format!("host {}", h.name))?;
            // The host's side of its link: the kernel's token bucket at the link rate (the
            // switch's traffic manager shapes the other direction). Burst: 1 ms of the rate,
            // at least two full frames; queue: the link's buffer in full frames.
            let props = topo
                .links
                .iter()
                .find(|l| l.a.node() == h.name || l.b.node() == h.name)
                .map(|l| l.props)
                .unwrap_or_default();
            let burst = (props.rate_bps / 8_000).max(3028).to_string();
            let limit = (u64::from(props.buffer) * 1514).max(3028).to_string();
            let rate = format!("{}bit", props.rate_bps);
            let tbf = [
                "netns", "exec", &ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
                &rate, "burst", &burst, "limit", &limit,
            ];
            run("ip", &tbf).with_context(|| format!("host {}", h.name))?;
        }
        progress(&format!("{} hosts addressed and routed", topo.hosts.len()));

        // Switches.
        let plans = programs::fabric_plan(topo)?;
        // What a plan warns of (a DBB pair that falls back to ECMP, ...).
        for (switch, plan) in &plans {
            for w in plan.routes.iter().filter(|l| l.starts_with("# warning:")) {
                progress(&format!("{switch}: {w}"));
            }
        }
        let bin = workspace_bin("pisa-switch");
        let mut routers = 0;
        for (i, s) in topo.switches.iter().enumerate() {
            cancelled()?;
            let ns = &fabric.namespaces[&s.name];
            if is_kernel(&s.program) {
                kernel::set_up(ns, topo, &s.name, &opts.dir)
                    .map_err(|e| anyhow!("router {}: {e}", s.name))?;
                routers += 1;
                continue;
            }
            let ports: Vec<u16> = topo.ports()[s.name.as_str()].keys().copied().collect();
            let port_if = |p: &u16| {
                shm.get(&(s.name.clone(), *p))
                    .cloned()
                    .unwrap_or_else(|| format!("p{p}"))
            };
            let mut up = vec!["link set mgmt up".to_string()];
            up.extend(
                ports
                    .iter()
                    .filter(|p| !shm.contains_key(&(s.name.clone(), **p)))
                    .map(|p| format!("link set p{p} up")),
            );
            ip_batch(Some(ns.name()), &up, &opts.dir)
                .map_err(|e| anyhow!("switch {}: {e}", s.name))?;
            let entries = opts.dir.join(format!("{}.tm", s.name));
            let tm = plans
                .get(&s.name)
                .map(|p| p.tm.join("\n"))
                .unwrap_or_default();
            std::fs::write(&entries, tm + "\n")
                .with_context(|| format!("switch {}: writing {}", s.name, entries.display()))?;
            let (_, addr) = mgmt_addrs(i);
            let grpc = format!("{addr}:{GRPC_PORT}");
            let log = opts.dir.join(format!("{}.log", s.name));
            let sock = opts.dir.join(format!("{}.sock", s.name));
            // A socket left by an earlier run would pass for this switch being ready.
            let _ = std::fs::remove_file(&sock);
            let iface: Vec<String> = ports
                .iter()
                .map(|p| format!("{p}@{}", port_if(p)))
                .collect();
            let mut args: Vec<&str> = vec![
                "--program",
                &s.program,
                "--io",
                &opts.io,
                "--workers",
                "1",
                "--grpc-addr",
                &grpc,
                "--entries",
                entries.to_str().unwrap_or_default(),
                "--admin-socket",
                sock.to_str().unwrap_or_default(),
                "--log-level",
                "warn",
            ];
            args.extend(SWITCH_WAIT);
            let rt = opts.rt_priority.to_string();
            if opts.rt_priority > 0 {
                args.extend(["--rt-priority", rt.as_str()]);
            }
            for f in &iface {
                args.extend(["-i", f]);
            }
            let pcap = opts.dir.join(format!("{}-pcap", s.name));
            if opts.capture {
                std::fs::create_dir_all(&pcap)
                    .with_context(|| format!("switch {}: creating {}", s.name, pcap.display()))?;
                args.extend(["--pcap", pcap.to_str().unwrap_or_default()]);
            }
            let p = Process::spawn(ns, bin.to_str().unwrap_or_default(), &args, &log)
                .with_context(|| format!("switch {}", s.name))?;
            fabric.switches.insert(s.name.clone(), p);
        }
        // Ready when each has bound its admin socket (after loading its entries).
        let deadline = Instant::now() + Duration::from_secs(60);
        for s in topo.switches.iter().filter(|s| !is_kernel(&s.program)) {
            let sock = opts.dir.join(format!("{}.sock", s.name));
            while !sock.exists() {
                cancelled()?;
                let proc = fabric.switches.get_mut(&s.name).expect("spawned");
                if !proc.running() || Instant::now() > deadline {
                    let log = std::fs::read_to_string(opts.dir.join(format!("{}.log", s.name)))
                        .unwrap_or_default();
                    bail!("switch {} did not start:\n{log}", s.name);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        progress(&format!(
            "{} switches running, {routers} Linux routers routed and shaped",
            topo.switches.len() - routers
        ));
        let copy = opts.dir.join("topology.txt");
        std::fs::write(&copy, topo.to_text(&opts.name))
            .with_context(|| format!("writing {}", copy.display()))?;
        Ok(fabric)
    }

    /// Programs every switch over P4Runtime from the management namespace (runs
    /// `pisa-fabric program` there); returns its output.
    /// Linux routers are skipped (they were routed at bring-up).
    pub fn program(&self) -> anyhow::Result<String> {
        if self.topo.switches.iter().all(|s| is_kernel(&s.program)) {
            return Ok(format!(
                "{} Linux routers: routed at bring-up, nothing to program\n",
                self.topo.switches.len()
            ));
        }
        let topo_file = self.opts.dir.join("topology.txt");
        let bin = workspace_bin("pisa-fabric");
        let out = self.mgmt().exec(
            bin.to_str().unwrap_or_default(),
            &["program", topo_file.to_str().unwrap_or_default()],
        );
        match out {
            Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
            // The error names the command: `pisa-fabric program` in the management namespace.
            Err(e) => Err(e.into()),
        }
    }

    /// Asks every switch's gRPC health service whether it answers (runs `pisa-fabric health` in
    /// the management namespace, 2 s per switch); `Err` names the switches that do not.
    pub fn health(&self) -> anyhow::Result<String> {
        if self.topo.switches.iter().all(|s| is_kernel(&s.program)) {
            return Ok("only Linux routers: no switch to ask\n".into());
        }
        let topo_file = self.opts.dir.join("topology.txt");
        let bin = workspace_bin("pisa-fabric");
        match self.mgmt().exec(
            bin.to_str().unwrap_or_default(),
            &["health", topo_file.to_str().unwrap_or_default()],
        ) {
            Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
            Err(crate::NetError::Failed { stderr, .. }) => Err(anyhow!("{}", stderr.trim())),
            Err(e) => Err(e.into()),
        }
    }

    /// Pings every host from every other host (IPv4 or IPv6), all sources at once; returns
    /// (answered, total) and the failures.
    pub fn all_pairs(&self, v6: bool) -> (usize, usize, Vec<String>) {
        let hosts = &self.topo.hosts;
        let mut children = Vec::new();
        for src in hosts {
            let dsts: Vec<String> = hosts
                .iter()
                .filter(|h| h.name != src.name)
                .map(|h| {
                    if v6 {
                        h.ipv6.to_string()
                    } else {
                        h.ipv4.to_string()
                    }
                })
                .collect();
            let script = format!(
                "for d in {}; do if ping {} -c 1 -W 2 -q $d >/dev/null 2>&1; then echo ok $d; else echo fail $d; fi; done",
                dsts.join(" "),
                if v6 { "-6" } else { "-4" }
            );
            let child = std::process::Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    self.ns(&src.name).name(),
                    "sh",
                    "-c",
                    &script,
                ])
                .stdout(std::process::Stdio::piped())
                .spawn();
            children.push((src.name.clone(), child));
        }
        let (mut ok, mut total, mut failed) = (0, 0, Vec::new());
        for (src, child) in children {
            let Ok(out) = child.and_then(std::process::Child::wait_with_output) else {
                continue;
            };
            for l in String::from_utf8_lossy(&out.stdout).lines() {
                total += 1;
                match l.split_once(' ') {
                    Some(("ok", _)) => ok += 1,
                    Some((_, d)) => failed.push(format!("{src} -> {d}")),
                    None => {}
                }
            }
        }
        (ok, total, failed)
    }

    /// The management namespace.
    pub fn mgmt(&self) -> &Netns {
        &self.namespaces[""]
    }

    /// The namespace of node `name`.
    pub fn ns(&self, name: &str) -> &Netns {
        &self.namespaces[name]
    }

    /// The switch processes by name.
    pub fn switch_processes(&self) -> impl Iterator<Item = (&String, &Process)> {
        self.switches.iter()
    }

    /// The switches whose process has exited.
    pub fn dead_switches(&mut self) -> Vec<String> {
        self.switches
            .iter_mut()
            .filter_map(|(n, p)| (!p.running()).then(|| n.clone()))
            .collect()
    }

    /// Whether every switch is still running.
    pub fn switches_running(&mut self) -> bool {
        self.switches.values_mut().all(Process::running)
    }

    /// Leaves the fabric running after this process exits (torn down later by [`teardown`]).
    pub fn keep(mut self) {
        for (_, p) in std::mem::take(&mut self.switches) {
            p.detach();
        }
        for (_, ns) in std::mem::take(&mut self.namespaces) {
            ns.keep();
        }
    }

    /// Stops every switch (SIGTERM) and returns how many exited cleanly; the namespaces go when
    /// the fabric drops.
    pub fn stop_switches(&mut self) -> usize {
        let mut clean = 0;
        for p in self.switches.values_mut() {
            if p.terminate(Duration::from_secs(10))
                .is_some_and(|s| s.success())
            {
                clean += 1;
            }
        }
        self.switches.clear();
        clean
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // Switches first (their guards send SIGTERM and wait), then the namespaces, then the
        // shared-memory links (files, not namespaced).
        self.switches.clear();
        self.namespaces.clear();
        remove_shm_links(&self.opts.name);
    }
}
