//! One point of the FCT comparison in namespaces (the steps are in the module documentation of
//! [`super`]): bring the scheme's fabric up, start the hosts' servers and clients on the point's
//! schedule, sample the queues and the machine while the flows run, read the switches'
//! counters and fidelity monitors, and write the point's CSVs.

use super::*;

/// Starts `pisa-traffic serve` (with the transport's arguments `targs`) in every one of `hosts`,
/// logs in `dir/serve-<host>.log`, and waits until each listens.
pub(super) fn start_servers(
    f: &Fabric,
    hosts: &[String],
    targs: &[&str],
    dir: &Path,
) -> anyhow::Result<Vec<Process>> {
    let bin = workspace_bin("pisa-traffic");
    let bin = bin.to_str().unwrap_or_default();
    let args = [&["serve"], targs].concat();
    let mut servers = Vec::new();
    for h in hosts {
        let log = dir.join(format!("serve-{h}.log"));
        servers.push(
            Process::spawn(f.ns(h), bin, &args, &log)
                .with_context(|| format!("pisa-traffic serve on host {h}"))?,
        );
    }
    wait_listening(f, hosts)?;
    Ok(servers)
}

/// Waits until `pisa-traffic serve` listens in every one of `hosts` (10 s at most).
fn wait_listening(f: &Fabric, hosts: &[String]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    for h in hosts {
        let left = deadline.saturating_duration_since(Instant::now());
        f.ns(h)
            .wait_listening(PORT, left)
            .with_context(|| format!("pisa-traffic serve on {h}"))?;
    }
    Ok(())
}

pub(super) fn run_point(
    e: &Fct,
    transport: &Transport,
    p: &Point,
    dir: &Path,
    ctx: &crate::sweep::Ctx,
) -> anyhow::Result<String> {
    let t0 = Instant::now();
    let cancel = &ctx.cancel;
    let topo = point_topology(e, p);
    let flows = schedule(e, &topo, p).map_err(anyhow::Error::msg)?;
    let opts = ctx.options(&dir.join("run"));
    let mut f = ctx.up(&topo, &opts)?;
    f.program()?;
    let hosts: Vec<String> = topo.hosts.iter().map(|h| h.name.clone()).collect();
    let bin = workspace_bin("pisa-traffic");
    let bin = bin.to_str().unwrap_or_default();
    let targs = transport.args();
    let targs: Vec<&str> = targs.iter().map(String::as_str).collect();
    let servers = start_servers(&f, &hosts, &targs, dir)?;
    // How the hosts' TCP takes reordering (the servers have set the namespaces' sysctls).
    if let Some(h) = hosts.first() {
        let line = crate::traffic::reordering_settings_of(f.ns(h));
        let path = dir.join("reordering.txt");
        std::fs::write(&path, line + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let before = port_tx_packets(&f)?;
    // The fidelity monitors, from before the clients start (their baselines are read here, not
    // in the clients' lead time).
    let watch = fidelity::Watch::start(&f)?;
    // Each host's schedule, to the destinations' IPv4 (or, with --ip 6, IPv6) addresses.
    let mut per_host: Vec<String> = vec![String::new(); hosts.len()];
    for fl in &flows {
        let d = &topo.hosts[fl.dst];
        let job = Job::Sized {
            id: fl.id,
            dst: d.name.clone(),
            addr: if e.ipv6 {
                std::net::SocketAddr::from((d.ipv6, PORT))
            } else {
                std::net::SocketAddr::from((d.ipv4, PORT))
            },
            start_ns: fl.start_ns,
            size: fl.size,
            class: fl.class,
            tos: fl.tos,
        };
        per_host[fl.src] += &(job.line() + "\n");
    }
    let epoch = crate::traffic::unix_now_ns() + 1_500_000_000;
    let drain = e.drain.to_string();
    let epoch_s = epoch.to_string();
    let mut clients = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let sched = dir.join(format!("{h}.sched"));
        std::fs::write(&sched, &per_host[i])
            .with_context(|| format!("writing {}", sched.display()))?;
        let out = dir.join(format!("{h}.csv"));
        let args = [
            "client",
            "--schedule",
            sched.to_str().unwrap_or_default(),
            "--src",
            h,
            "--out",
            out.to_str().unwrap_or_default(),
            "--epoch-ns",
            &epoch_s,
            "--drain",
            &drain,
        ];
        let args = [&args[..], &targs[..]].concat();
        clients.push(
            Process::spawn(f.ns(h), bin, &args, &dir.join(format!("client-{h}.log")))
                .with_context(|| format!("pisa-traffic client on host {h}"))?,
        );
    }
    // Sample every switch port's queue once a second while the flows run.
    let ports = topo.ports();
    let socks: Vec<(PathBuf, Vec<u16>)> = topo
        .switches
        .iter()
        .filter(|s| !is_kernel(&s.program))
        .map(|s| {
            (
                opts.dir.join(format!("{}.sock", s.name)),
                ports
                    .get(s.name.as_str())
                    .map(|m| m.keys().copied().collect())
                    .unwrap_or_default(),
            )
        })
        .collect();
    // Linux routers: their qdiscs' backlogs, sampled alike.
    let routers: Vec<String> = topo
        .switches
        .iter()
        .filter(|s| is_kernel(&s.program))
        .map(|s| s.name.clone())
        .collect();
    let limit = Duration::from_secs_f64(1.5 + e.seconds + e.drain + 20.0);
    let flow_start = Instant::now();
    let mut depths = Vec::new();
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    let mut last_note = Instant::now();
    while clients.iter_mut().any(Process::running) {
        if cancel.load(Ordering::Relaxed) {
            bail!("cancelled");
        }
        let dead = f.dead_switches();
        if !dead.is_empty() {
            bail!("switches exited during the run: {}", dead.join(", "));
        }
        if flow_start.elapsed() > limit {
            bail!(
                "the clients did not finish within {:.0} s",
                limit.as_secs_f64()
            );
        }
        if last_sample.elapsed() >= Duration::from_secs(1) {
            last_sample = Instant::now();
            for (sock, ps) in &socks {
                for &port in ps {
                    if let Ok(q) = port_queues(sock, port) {
                        depths.push(q[3]);
                    }
                }
            }
            for r in &routers {
                if let Ok(qs) = kernel::qdisc_stats(f.ns(r)) {
                    depths.extend(qs.values().map(|q| q.backlog_pkts));
                }
            }
        }
        if last_note.elapsed() >= Duration::from_secs(10) {
            last_note = Instant::now();
            eprintln!(
                "    flows running: {:.0} s of {:.0} s window + up to {:.0} s drain",
                flow_start.elapsed().as_secs_f64() - 1.5,
                e.seconds,
                e.drain
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = port_tx_packets(&f)?;
    let mut sw = SwitchStats {
        fidelity: watch.finish(&f, Some(&dir.join("fidelity.txt")))?,
        ..SwitchStats::default()
    };
    // The switch-local agents: every switch's `show_agent`, summed, and recorded as shown.
    // The flows' phase began 1.5 s after `flow_start` (the clients' common epoch).
    sw.agents.seconds = (flow_start.elapsed().as_secs_f64() - 1.5).max(0.0);
    let mut shown = String::new();
    for s in topo.switches.iter().filter(|s| !is_kernel(&s.program)) {
        let lines = admin(&opts.dir.join(format!("{}.sock", s.name)), "show_agent")?;
        if !lines.is_empty() {
            let text = lines.join("\n");
            sw.agents.add_shown(&text);
            let _ = writeln!(shown, "# {}\n{text}", s.name);
        }
    }
    if !shown.is_empty() {
        let path = dir.join("agent.txt");
        std::fs::write(&path, shown).with_context(|| format!("writing {}", path.display()))?;
    }
    sw.set_queue_samples(&depths);
    for (leaf, port, spine) in uplinks(&topo) {
        let key = (leaf.clone(), port);
        let n = after
            .get(&key)
            .copied()
            .unwrap_or(0)
            .saturating_sub(before.get(&key).copied().unwrap_or(0));
        sw.uplinks.push((leaf, port, spine, n));
    }
    // The scheme's reasons for packets that end by design (kernel routers have none).
    let consumed: Vec<&str> = programs::by_name(scheme_program(&p.scheme))
        .map(|prog| prog.schema().consumed.clone())
        .unwrap_or_default();
    for (sock, ps) in &socks {
        for &port in ps {
            let q = port_queues(sock, port)?;
            sw.tm_drops += q[1];
            sw.tm_ecn_marked += q[2];
        }
        for l in admin(sock, "show_drops")? {
            let mut w = l.split_whitespace();
            let (Some(reason), Some(n)) = (w.next(), w.next()) else {
                continue;
            };
            // Packets that end by design (a probe at its last hop) are not drops.
            if !consumed.contains(&reason) {
                sw.program_drops += n.parse::<u64>().unwrap_or(0);
            }
        }
    }
    for r in &routers {
        for q in kernel::qdisc_stats(f.ns(r))
            .map_err(|err| anyhow!("router {r}: {err}"))?
            .values()
        {
            sw.tm_drops += q.drops;
        }
        sw.program_drops +=
            kernel::ip_discards(f.ns(r)).map_err(|err| anyhow!("router {r}: {err}"))?;
    }
    if !e.counters.is_empty() {
        let prefix = format!("{},{},{}", p.scheme, p.load, p.rep);
        let rows = counters::counter_rows(&f, &e.counters, &prefix)?;
        let path = dir.join("counters.csv");
        std::fs::write(&path, format!("{}\n{rows}", counters::COUNTERS_HEADER))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    drop(servers);
    for c in &mut clients {
        c.wait(Duration::ZERO); // reaps the exited client, so its guard has nothing to kill
    }
    drop(clients);
    f.stop_switches();
    drop(f);
    crate::fabric::teardown(&e.name);
    // Collect the hosts' records.
    let prefix = format!("{},{},{}", p.scheme, p.load, p.rep);
    let mut flows_csv = flows_header() + "\n";
    let mut rows = Vec::new();
    for h in &hosts {
        let path = dir.join(format!("{h}.csv"));
        let text = std::fs::read_to_string(&path).map_err(|err| {
            let log =
                std::fs::read_to_string(dir.join(format!("client-{h}.log"))).unwrap_or_default();
            anyhow!("{}: {err} (client log: {})", path.display(), log.trim())
        })?;
        rows.extend(parse_flow_rows(&text).map_err(|err| anyhow!("{}: {err}", path.display()))?);
        for l in text.lines().skip(1) {
            let _ = writeln!(flows_csv, "{prefix},{l}");
        }
    }
    if rows.len() != flows.len() {
        bail!(
            "{} flows scheduled but {} recorded",
            flows.len(),
            rows.len()
        );
    }
    let path = dir.join("flows.csv");
    std::fs::write(&path, flows_csv).with_context(|| format!("writing {}", path.display()))?;
    let short: Vec<f64> = rows
        .iter()
        .filter(|r| r.class == Class::Short.name() && r.finished)
        .filter_map(|r| r.fct_us)
        .collect();
    sw.fidelity.start_lag_p99_us =
        traffic::quantile_nearest_rank(&rows.iter().map(|r| r.lag_us).collect::<Vec<_>>(), 0.99);
    // The schedule's arrival process: a host starts a flow every window x hosts / flows.
    sw.fidelity.interarrival_us =
        (!rows.is_empty()).then(|| e.seconds * 1e6 * hosts.len() as f64 / rows.len() as f64);
    let verdict = fidelity::verdict(&sw.fidelity, &fidelity::Thresholds::default());
    let wall = t0.elapsed().as_secs_f64();
    write_point_tables(dir, e, transport, p, &rows, &sw, wall)?;
    if verdict != "ok" {
        eprintln!("    fidelity {verdict}");
        if e.require_fidelity {
            bail!("fidelity {verdict} (--require-fidelity)");
        }
    }
    let fin = rows.iter().filter(|r| r.finished).count();
    Ok(format!(
        "{fin}/{} flows finished, short-flow FCT avg {:.0} us, {} TM drops, fidelity {}",
        rows.len(),
        Stats::of(&short).mean,
        sw.tm_drops,
        if verdict == "ok" { "ok" } else { "degraded" }
    ))
}
