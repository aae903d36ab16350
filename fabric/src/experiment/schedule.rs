//! The flows of one point: which hosts there are, the capacity a load refers to, the seeded
//! schedule every scheme of an experiment shares, and the uplinks whose balance is measured.

use super::*;

/// The hosts grouped by the switch they attach to (in topology order), as indices into
/// `t.hosts`; and the layout (equal groups) if they are equal.
pub fn host_groups(t: &Topology) -> (Vec<usize>, Option<Layout>) {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, h) in t.hosts.iter().enumerate() {
        let sw = t
            .host_attachment(&h.name)
            .map_or(String::new(), |(s, _)| s.to_string());
        match groups.iter_mut().find(|(s, _)| *s == sw) {
            Some((_, v)) => v.push(i),
            None => groups.push((sw, vec![i])),
        }
    }
    let per = groups.first().map_or(0, |g| g.1.len());
    let equal = per > 0 && groups.iter().all(|g| g.1.len() == per);
    let order = groups.iter().flat_map(|g| g.1.iter().copied()).collect();
    (
        order,
        equal.then_some(Layout {
            groups: groups.len(),
            per_group: per,
        }),
    )
}

/// The capacity per host (bits/s) that loads refer to.
pub fn capacity_per_host(t: &Topology, load_of: LoadOf) -> Result<f64, String> {
    let ports = t.ports();
    let h = t.hosts.first().ok_or("the topology has no hosts")?;
    let (sw, _) = t
        .host_attachment(&h.name)
        .ok_or_else(|| format!("host {} has no link", h.name))?;
    let sp = &ports[sw];
    let host_rate = sp
        .values()
        .find(|(e, _)| matches!(e, End::Host(n) if *n == h.name))
        .map_or(0, |(_, p)| p.rate_bps);
    match load_of {
        LoadOf::Host => Ok(host_rate as f64),
        LoadOf::Fabric => {
            let hosts = sp
                .values()
                .filter(|(e, _)| matches!(e, End::Host(_)))
                .count();
            let up: u64 = sp
                .values()
                .filter(|(e, _)| matches!(e, End::Switch(..)))
                .map(|(_, p)| p.rate_bps)
                .sum();
            if up == 0 || hosts == 0 {
                return Err(format!(
                    "switch {sw} has no uplinks: --load-of fabric needs them"
                ));
            }
            Ok(up as f64 / hosts as f64)
        }
    }
}

/// The seed of a point's flows, by the sweep's [`Seeding`]. With value seeding it is FNV-1a of
/// the point's workload, pattern, load and rep, mixed with the run's seed, so that it does not
/// depend on what else the sweep lists.
pub fn point_seed(e: &Fct, p: &Point) -> u64 {
    match e.seeding {
        Seeding::Position => e
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add((p.rep as u64) * 1000 + p.load_index as u64),
        Seeding::Value => {
            let key = format!("{}|{}|{}|{}", e.workload, e.pattern, p.load, p.rep);
            let h = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            h ^ e.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        }
    }
}

/// The flows of (load, rep): the same for every scheme. Host numbers are indices into
/// `t.hosts`.
pub fn schedule(e: &Fct, t: &Topology, p: &Point) -> Result<Vec<Flow>, String> {
    let cdf = Cdf::named(&e.workload)?;
    let mut tagging = Tagging::for_workload(&cdf);
    tagging.short_tos = e.short_tos;
    tagging.large_tos = e.large_tos;
    if let Some(path) = e.pattern.strip_prefix("flows:") {
        let text = std::fs::read_to_string(path).map_err(|err| format!("{path}: {err}"))?;
        return explicit(&text, t, &tagging).map_err(|err| format!("{path}: {err}"));
    }
    let (order, layout) = host_groups(t);
    let n = order.len();
    let seed = point_seed(e, p);
    let window_ns = (e.seconds * 1e9) as u64;
    // Pattern host numbers are positions in `order` (group-major); map them back.
    let flows = if e.pattern == "incast" {
        // One synchronised incast per second of the window; the receiver rotates over the
        // hosts, and the senders are every host on other switches (all others if there is one).
        let layout = layout.unwrap_or(Layout {
            groups: 1,
            per_group: n,
        });
        let groups = traffic::parse_incast(&e.incast, &tagging)?;
        let mut all = Vec::new();
        let mut rng = Rng::new(seed);
        let events = (e.seconds.ceil() as u64).max(1);
        for k in 0..events {
            let rx = rng.range(0, n as u64 - 1) as usize;
            let senders: Vec<usize> = (0..n)
                .filter(|&h| {
                    h != rx && (layout.groups == 1 || layout.position(h).1 != layout.position(rx).1)
                })
                .collect();
            all.extend(traffic::incast(
                rx,
                &senders,
                &groups,
                k * 1_000_000_000,
                &tagging,
            )?);
        }
        all.sort_by_key(|f| (f.start_ns, f.src, f.dst));
        for (i, f) in all.iter_mut().enumerate() {
            f.id = i as u64;
        }
        all
    } else {
        let pattern: Pattern = e.pattern.parse()?;
        let layout = match (layout, pattern) {
            (Some(l), _) => l,
            (None, Pattern::Stride) => {
                return Err("stride needs the same number of hosts on every leaf".into());
            }
            (None, _) => Layout {
                groups: 1,
                per_group: n,
            },
        };
        traffic::poisson(
            &layout,
            &traffic::PoissonSpec {
                cdf: &cdf,
                load: p.load,
                capacity_bps: capacity_per_host(t, e.load_of)?,
                window_ns,
                pattern,
                tagging,
                seed,
            },
        )?
    };
    Ok(flows
        .into_iter()
        .map(|f| Flow {
            src: order[f.src],
            dst: order[f.dst],
            ..f
        })
        .collect())
}

/// The flows of a `flows:FILE` pattern: one `SRC DST SIZE START` line each (host names, a size
/// as [`traffic::parse_size`] reads it, seconds from the epoch; `#` comments). Their class and
/// tag follow the workload's threshold; loads do not apply.
pub fn explicit(text: &str, t: &Topology, tagging: &Tagging) -> Result<Vec<Flow>, String> {
    let host = |name: &str| {
        t.hosts
            .iter()
            .position(|h| h.name == name)
            .ok_or(format!("no host {name}"))
    };
    let mut flows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |err: String| format!("line {}: {err}", n + 1);
        let w: Vec<&str> = line.split_whitespace().collect();
        let [src, dst, size, start] = w[..] else {
            return Err(at("expected `SRC DST SIZE START`".into()));
        };
        let (src, dst) = (host(src).map_err(at)?, host(dst).map_err(at)?);
        if src == dst {
            return Err(at("a flow needs two hosts".into()));
        }
        let size = traffic::parse_size(size).map_err(at)?;
        let start: f64 = start
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| at(format!("start {start}: seconds, at least 0")))?;
        let class = tagging.class_of(size);
        flows.push(Flow {
            id: 0,
            src,
            dst,
            start_ns: (start * 1e9) as u64,
            size,
            class,
            tos: tagging.tos(class),
        });
    }
    if flows.is_empty() {
        return Err("no flows".into());
    }
    flows.sort_by_key(|f| (f.start_ns, f.src, f.dst));
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = i as u64;
    }
    Ok(flows)
}

/// The upward links (leaf to spine; ToR to aggregation and aggregation to core): (switch, port,
/// the switch at the other end). Packet spraying and flowlet routing choose among these.
pub fn uplinks(t: &Topology) -> Vec<(String, u16, String)> {
    let tier = |sw: &str| match t.role_of(sw) {
        Some(Role::Tor) => 0,
        Some(Role::Leaf | Role::Agg) => 1,
        Some(Role::Spine | Role::Core) => 2,
        None => 3,
    };
    let mut v = Vec::new();
    for (sw, ports) in t.ports() {
        for (p, (other, _)) in ports {
            if let End::Switch(o, _) = other
                && tier(o) > tier(sw)
            {
                v.push((sw.to_string(), p, o.clone()));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use topo::{GenProps, LinkProps, fat_tree};

    use super::*;

    #[test]
    fn a_fat_trees_uplinks_are_tor_to_agg_and_agg_to_core() {
        let l = LinkProps::default();
        let t = fat_tree(4, GenProps { host: l, fabric: l });
        let up = uplinks(&t);
        let role = |s: &str| t.role_of(s);
        // k=4: 8 ToRs and 8 aggregation switches, each with k/2 = 2 links upward.
        assert_eq!(up.len(), 32);
        let tor_agg = up
            .iter()
            .filter(|(a, _, b)| role(a) == Some(Role::Tor) && role(b) == Some(Role::Agg))
            .count();
        let agg_core = up
            .iter()
            .filter(|(a, _, b)| role(a) == Some(Role::Agg) && role(b) == Some(Role::Core))
            .count();
        assert_eq!((tor_agg, agg_core), (16, 16));
    }

    #[test]
    fn explicit_flows_are_read_by_host_name_and_bad_lines_are_refused() {
        let l = LinkProps::default();
        let t = fat_tree(4, GenProps { host: l, fabric: l });
        let tag = Tagging::for_workload(&Cdf::named("websearch").unwrap());
        let f = explicit("h2 h3 8Mi 0.5 # B\nh1 h5 8Mi 0\n\nh4 h6 4K 0.5\n", &t, &tag).unwrap();
        let names = |i: usize| t.hosts[i].name.as_str();
        let got: Vec<_> = f
            .iter()
            .map(|f| (f.id, names(f.src), names(f.dst), f.start_ns, f.class))
            .collect();
        assert_eq!(
            got,
            [
                (0, "h1", "h5", 0, Class::Large),
                (1, "h2", "h3", 500_000_000, Class::Large),
                (2, "h4", "h6", 500_000_000, Class::Short),
            ]
        );
        for bad in [
            "h1 h99 1K 0",
            "h1 h1 1K 0",
            "h1 h2 0 0",
            "h1 h2 1K -1",
            "h1 h2 1K",
            "",
        ] {
            assert!(explicit(bad, &t, &tag).is_err(), "{bad}");
        }
    }
}
