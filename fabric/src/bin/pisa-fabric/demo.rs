//! `pisa-fabric demo`: the iperf3 demo of a leaf-spine (`--fabric-demo` of scripts/demo.sh).

use anyhow::Context as _;

use super::*;

#[derive(clap::Args, Debug)]
pub(super) struct DemoArgs {
    #[command(flatten)]
    shape: Shape,
    /// How switches are linked to each other: veth or shm.
    #[arg(long, default_value = "shm")]
    links: pisa_fabric::fabric::Links,
    /// Host link rate; uplinks get hosts_per_leaf * rate / (spines * 2): 2:1 oversubscribed.
    #[arg(long, default_value = "100M")]
    host_rate: String,
    /// iperf3 flows (from hosts of the first half of the leaves to hosts of the second half).
    #[arg(long, default_value_t = 8)]
    flows: usize,
    /// Seconds of iperf3.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Where the report, CSV and plot go.
    #[arg(long, default_value = "fabric-demo")]
    out: PathBuf,
    /// Fabric name (1-6 letters and digits): namespaces are pf<NAME>-<node>.
    #[arg(long, default_value = "demo")]
    pub(super) name: String,
    /// The program of every switch (`kernel`: Linux routers instead of pisa-switch).
    #[arg(long, default_value = "basic")]
    program: String,
}

fn mbits(line: &str) -> Option<f64> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let i = w.iter().position(|x| *x == "Mbits/sec")?;
    w.get(i.checked_sub(1)?)?.parse().ok()
}

pub(super) fn demo(a: &DemoArgs, cancel: Arc<AtomicBool>) -> anyhow::Result<()> {
    let Shape {
        leaves,
        spines,
        hosts_per_leaf,
    } = a.shape;
    if leaves < 2 || spines < 1 || hosts_per_leaf < 1 {
        bail!("the demo needs at least 2 leaves, 1 spine and 1 host per leaf");
    }
    let (host_rate, seconds, out) = (a.host_rate.as_str(), a.seconds, &a.out);
    let t0 = Instant::now();
    let step = |msg: &str| println!("[{:6.1} s] {msg}", t0.elapsed().as_secs_f64());
    let host = LinkProps {
        rate_bps: topo::parse_rate(host_rate).map_err(anyhow::Error::msg)?,
        ..LinkProps::default()
    };
    let mut t = topo::leaf_spine(leaves, spines, hosts_per_leaf, 2.0, host);
    set_program(&mut t, &a.program)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let opts = Options {
        name: a.name.clone(),
        io: "af-xdp".into(),
        dir: out.join("run"),
        cancel,
        capture: false,
        links: a.links,
        rt_priority: 0,
    };
    step(&format!(
        "bringing up a {leaves}x{spines} leaf-spine of {}, {hosts_per_leaf} hosts per leaf, host \
         links {host_rate}b/s, uplinks {:.0} Mb/s (2:1)",
        a.program,
        host.rate_bps as f64 * hosts_per_leaf as f64 / (spines as f64 * 2.0) / 1e6
    ));
    let mut f = sweep::bring_up(&t, &opts, |m| step(m))?;
    step("programming the switches over P4Runtime (from the management namespace)");
    print!("{}", f.program()?);
    step("all pairs, IPv4 and IPv6");
    for v6 in [false, true] {
        let (ok, total, failed) = f.all_pairs(v6);
        step(&format!(
            "  {}: {ok}/{total} pairs answered{}",
            if v6 { "IPv6" } else { "IPv4" },
            if failed.is_empty() {
                String::new()
            } else {
                format!(" (failed: {})", failed.join(", "))
            }
        ));
        if ok != total || total == 0 {
            bail!("not every pair reached every other");
        }
    }
    // Flows: host i of the first half of the leaves to a host of the second half.
    let n = t.hosts.len();
    let half = (leaves / 2).max(1) * hosts_per_leaf;
    let pairs: Vec<(usize, usize)> = (0..a.flows.min(half))
        .map(|i| (i, half + (i * 5 + 1) % (n - half).max(1)))
        .collect();
    step(&format!(
        "{} iperf3 TCP flows for {seconds} s across the spines",
        pairs.len()
    ));
    let before = pisa_fabric::experiment::port_tx_bytes(&f)?;
    let mut servers = Vec::new();
    for &(_, d) in &pairs {
        let h = &t.hosts[d];
        let log = opts.dir.join(format!("iperf-s-{}.log", h.name));
        let addr = h.ipv4.to_string();
        servers.push(
            pisa_fabric::Process::spawn(f.ns(&h.name), "iperf3", &["-s", "-1", "-B", &addr], &log)
                .with_context(|| format!("iperf3 server on host {}", h.name))?,
        );
    }
    for &(_, d) in &pairs {
        let h = &t.hosts[d].name;
        f.ns(h)
            .wait_listening(5201, Duration::from_secs(30))
            .with_context(|| format!("iperf3 server on host {h}"))?;
    }
    let secs = seconds.to_string();
    let mut clients = Vec::new();
    for &(s, d) in &pairs {
        let (src, dst) = (&t.hosts[s], &t.hosts[d]);
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", f.ns(&src.name).name(), "iperf3", "-c"])
            .arg(dst.ipv4.to_string())
            .args(["-t", &secs, "-f", "m", "--connect-timeout", "5000"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("iperf3 client on host {} to {}", src.name, dst.name))?;
        clients.push((src.name.clone(), dst.name.clone(), child));
    }
    let flow_start = Instant::now();
    // iperf3 has no deadline of its own once connected: a switch that stops forwarding leaves
    // its clients waiting forever. The flows get their seconds plus 30 s; past that, or when a
    // switch exits, the run stops and says which switches still answer.
    let limit = Duration::from_secs(seconds + 30);
    let mut results = Vec::new();
    let mut pending = clients;
    while !pending.is_empty() {
        let mut still = Vec::new();
        for (src, dst, mut child) in pending {
            match child.try_wait() {
                Ok(Some(_)) => {
                    let o = child
                        .wait_with_output()
                        .with_context(|| format!("iperf3 client {src} -> {dst}"))?;
                    let text = String::from_utf8_lossy(&o.stdout);
                    let rate = text
                        .lines()
                        .filter(|l| l.contains("receiver"))
                        .find_map(mbits);
                    results.push((src, dst, rate));
                }
                Ok(None) => still.push((src, dst, child)),
                Err(e) => {
                    return Err(e).with_context(|| format!("iperf3 client {src} -> {dst}"));
                }
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        let dead = f.dead_switches();
        let overrun = flow_start.elapsed() > limit;
        if !dead.is_empty() || overrun {
            for (_, _, child) in &mut pending {
                let _ = child.kill();
                let _ = child.wait();
            }
            let flows: Vec<String> = pending
                .iter()
                .map(|(s, d, _)| format!("{s}->{d}"))
                .collect();
            let why = if dead.is_empty() {
                format!(
                    "{} iperf3 flows ({}) did not finish within {} s",
                    flows.len(),
                    flows.join(", "),
                    limit.as_secs()
                )
            } else {
                format!("switches exited during the run: {}", dead.join(", "))
            };
            let health = match f.health() {
                Ok(_) => "every switch answers its health check".to_string(),
                Err(e) => format!("{e:#}"),
            };
            bail!("{why}; {health}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let elapsed = flow_start.elapsed().as_secs_f64().max(1.0);
    drop(servers);
    let after = pisa_fabric::experiment::port_tx_bytes(&f)?;
    // Uplinks: leaf ports that face a spine.
    let ports = t.ports();
    let mut uplinks = Vec::new();
    for (sw, ps) in &ports {
        if !sw.starts_with("leaf") {
            continue;
        }
        for (p, (other, _)) in ps {
            if let End::Switch(spine, _) = other {
                let key = (sw.to_string(), *p);
                let bytes = after
                    .get(&key)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(before.get(&key).copied().unwrap_or(0));
                uplinks.push((
                    sw.to_string(),
                    *p,
                    spine.clone(),
                    bytes as f64 * 8.0 / elapsed / 1e6,
                ));
            }
        }
    }
    let mut report = String::new();
    report += &format!("\nPer-flow throughput (iperf3 TCP, {seconds} s):\n");
    for (s, d, r) in &results {
        report += &format!(
            "  {s:>4} -> {d:<4} {}\n",
            r.map_or("failed".into(), |r| format!("{r:7.1} Mb/s"))
        );
    }
    let total: f64 = results.iter().filter_map(|r| r.2).sum();
    report += &format!("  total {total:.1} Mb/s\n\nUplink load (leaf -> spine, Mb/s):\n");
    for (leaf, p, spine, mb) in &uplinks {
        report += &format!("  {leaf}:{p} -> {spine:<7} {mb:7.1}\n");
    }
    print!("{report}");
    let report_path = out.join("report.txt");
    std::fs::write(&report_path, &report)
        .with_context(|| format!("writing {}", report_path.display()))?;
    let csv: String = std::iter::once("leaf,port,spine,mbps\n".to_string())
        .chain(
            uplinks
                .iter()
                .map(|(l, p, s, m)| format!("{l},{p},{s},{m:.3}\n")),
        )
        .collect();
    let csv_path = out.join("uplinks.csv");
    std::fs::write(&csv_path, csv).with_context(|| format!("writing {}", csv_path.display()))?;
    let png = out.join("uplinks.png");
    let venv =
        std::env::var("PISA_VENV_DIR").unwrap_or_else(|_| "/var/cache/pisa-switch/venvs".into());
    let python = PathBuf::from(venv).join("plot/bin/python");
    let scripts = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts");
    match std::process::Command::new(&python)
        .args(["-m", "pisa_analysis", "uplinks-plot"])
        .args([&csv_path, &png])
        .env("PYTHONPATH", scripts)
        .status()
    {
        Ok(s) if s.success() => step(&format!("plot of the uplink load: {}", png.display())),
        _ => step(&format!(
            "no plot: {} could not run `-m pisa_analysis uplinks-plot` from scripts/ \
             (run scripts/py-clients.sh)",
            python.display()
        )),
    }
    if results.iter().any(|r| r.2.is_none()) {
        bail!("an iperf3 flow failed");
    }
    step("tearing down");
    let running = f.switch_processes().count(); // none for Linux routers
    let clean = f.stop_switches();
    drop(f);
    let left = fabric::teardown(&opts.name);
    step(&format!(
        "done: {clean}/{running} switches stopped cleanly, {left} namespaces left behind"
    ));
    Ok(())
}
