//! The FCT experiment runner's tests: schedules, points, sweeps in pisa-sim, summary rows.

use super::*;
use topo::{LinkProps, leaf_spine};

/// A small experiment on `t` for the tests (rate.rs's too).
pub(super) fn exp(t: Topology) -> Fct {
    Fct {
        base: t,
        schemes: vec!["basic".into(), "ecmp".into()],
        sets: vec![],
        workload: "hadoop".into(),
        loads: vec![0.2, 0.5],
        pattern: "random".into(),
        incast: "24x512Ki:short,8x1024Ki:large".into(),
        load_of: LoadOf::Host,
        seconds: 2.0,
        drain: 5.0,
        reps: 2,
        out: PathBuf::from("/nonexistent"),
        transport: Transport {
            cc: "cubic".into(),
            ecn: 1,
            reordering: None,
        },
        short_tos: 8,
        large_tos: 16,
        seed: 1,
        seeding: Seeding::Value,
        name: "x".into(),
        links: Default::default(),
        counters: vec![],
        require_fidelity: false,
        retry_degraded: 0,
        rt_priority: 0,
        place: Place::Namespaces,
        sim_hop_us: 0,
        sim_store_and_forward: false,
        sim_stalls: None,
        jobs: 1,
        ipv6: false,
    }
}

fn ls() -> Topology {
    leaf_spine(
        4,
        2,
        3,
        2.0,
        LinkProps {
            rate_bps: 100_000_000,
            ..LinkProps::default()
        },
    )
}

#[test]
fn a_sweep_in_the_simulator_runs_the_namespace_schedule_and_writes_the_same_files() {
    let host = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer: 64,
    };
    let mut e = exp(leaf_spine(2, 2, 2, 1.0, host));
    e.place = Place::Sim;
    // A scheme with parameters of its own: spray-rr spelled as the program and its mode.
    e.schemes = vec!["ecmp".into(), "spray:mode=rr".into(), "p4te".into()];
    e.counters = vec![PORT_TX.into()];
    e.loads = vec![0.3];
    e.reps = 1;
    e.seconds = 0.5;
    e.drain = 5.0;
    // Both points at once: the tables still list them in sweep order.
    e.jobs = 2;
    // An empty name: the driver's teardown touches no namespace.
    e.name = String::new();
    e.out = std::env::temp_dir().join(format!("pisa-exp-sim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&e.out);
    let cancel = Arc::new(AtomicBool::new(false));
    let d = run(&e, &cancel).unwrap();
    assert_eq!((d.points, d.ran), (3, 3));
    assert!(record(&e).contains("where=sim\n"));
    let want = schedule(&e, &e.base, &points(&e)[0]).unwrap();
    let summary = std::fs::read_to_string(e.out.join("summary.csv")).unwrap();
    let mut lines = summary.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |k: &str| head.iter().position(|h| *h == k).unwrap();
    for line in lines {
        let v: Vec<&str> = line.split(',').collect();
        assert_eq!(v[col("fidelity")], "-", "{line}");
        assert_eq!(v[col("flows")], want.len().to_string());
        assert_eq!(v[col("finished")], want.len().to_string(), "{line}");
        // Only P4TE's switches run an agent; its reports and moves are counted.
        let agent = |k: &str| v[col(k)].parse::<f64>().ok();
        if v[0] == "p4te" {
            assert!(agent("agent_reports") > Some(0.0), "{line}");
            assert!(agent("agent_writes") >= agent("agent_moves"), "{line}");
            assert!(agent("agent_moves_per_s").is_some(), "{line}");
            assert_eq!(agent("agent_dropped"), Some(0.0), "{line}");
        } else {
            assert_eq!(agent("agent_reports"), None, "{line}");
        }
    }
    // The flows are the schedule's, in order, and every one has an FCT.
    let flows = std::fs::read_to_string(e.out.join("flows.csv")).unwrap();
    let rows: Vec<&str> = flows.lines().skip(1).collect();
    assert_eq!(rows.len(), e.schemes.len() * want.len());
    for (r, f) in rows.iter().zip(&want) {
        let v: Vec<&str> = r.split(',').collect();
        assert_eq!(
            (v[3], v[7]),
            (f.id.to_string().as_str(), f.size.to_string().as_str())
        );
        assert!(v[14].parse::<f64>().unwrap() > 0.0, "{r}");
    }
    // The recorded counter, per scheme, from the simulated switches: every packet a host
    // sent left some switch port, so each scheme's cells sum to more than its flows' bytes.
    let bytes_of = |out: &Path, scheme: &str| -> u64 {
        std::fs::read_to_string(out.join("counters.csv"))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with(&format!("{scheme},")))
            .map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let v4 = bytes_of(&e.out, "ecmp");
    for scheme in &e.schemes {
        let bytes = bytes_of(&e.out, scheme);
        let sent: u64 = want.iter().map(|f| f.size).sum();
        assert!(bytes > sent, "{scheme}: {bytes} bytes counted, {sent} sent");
    }
    std::fs::remove_dir_all(&e.out).unwrap();
    // The same flows over IPv6: every one finishes, and the switches carry more bytes for
    // them (a 40-byte IP header, and a 20-byte smaller MSS so more segments).
    e.ipv6 = true;
    e.schemes = vec!["ecmp".into()];
    let d = run(&e, &cancel).unwrap();
    assert_eq!(d.ran, 1);
    let summary = std::fs::read_to_string(e.out.join("summary.csv")).unwrap();
    let row: Vec<&str> = summary.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[col("finished")], want.len().to_string(), "{summary}");
    let v6 = bytes_of(&e.out, "ecmp");
    assert!(v6 > v4, "IPv6 {v6} bytes against IPv4 {v4}");
    std::fs::remove_dir_all(&e.out).unwrap();
}

#[test]
fn a_scheme_carries_plan_parameters_of_its_own_over_the_sweeps() {
    let mut e = exp(ls());
    e.sets = vec![("ecn".into(), "0".into()), ("delta".into(), "3".into())];
    let p = |scheme: &str| Point {
        scheme: scheme.into(),
        load_index: 0,
        load: 0.2,
        rep: 1,
    };
    let t = point_topology(&e, &p("p4te:routing=static:ecn=1"));
    for s in &t.switches {
        assert_eq!(s.program, "p4te");
        assert_eq!(s.params["routing"], "static");
        assert_eq!(
            s.params["ecn"], "1",
            "the scheme's own value wins over --set's"
        );
        assert_eq!(s.params["delta"], "3");
    }
    assert_eq!(
        point_topology(&e, &p("ecmp")).switches[0].params["ecn"],
        "0"
    );
    assert_eq!(scheme_parts("ecmp").unwrap(), ("ecmp", vec![]));
    for bad in ["p4te:routing", "p4te:=1", "p4te:routing="] {
        assert!(scheme_parts(bad).is_err(), "{bad}");
    }
    let cancel = Arc::new(AtomicBool::new(false));
    for bad in [
        "nosuch:ecn=1",
        "kernel:ecn=1",
        "p4te:x",
        "p4te:routing=ecmp",
        "p4te:ecn=1/2",
    ] {
        e.schemes = vec![bad.into()];
        let err = run(&e, &cancel).unwrap_err().to_string();
        assert!(err.contains(bad), "{bad}: {err}");
    }
}

#[test]
fn the_setup_record_holds_what_a_point_depends_on_but_not_the_point_list() {
    let e = exp(ls());
    let r = record(&e);
    assert!(
        r.contains("links=veth\n") && r.contains("seeding=value\n"),
        "{r}"
    );
    assert!(r.contains("topology:\n") && r.contains("leaf1"), "{r}");
    // More schemes, loads or reps: the same sweep.
    let mut more = e.clone();
    more.schemes.push("hula".into());
    more.loads.push(0.8);
    more.reps = 5;
    assert_eq!(record(&more), r);
    // Another fabric, window, seed, seeding or plan parameter: another sweep.
    let mut other = e.clone();
    other.links = crate::fabric::Links::Shm;
    assert_ne!(record(&other), r);
    let mut other = e.clone();
    other.seconds = 3.0;
    assert_ne!(record(&other), r);
    let mut other = e.clone();
    other.ipv6 = true;
    assert!(record(&other).contains("ip=6\n") && !r.contains("ip="));
    let mut other = e.clone();
    other.rt_priority = 10;
    assert!(record(&other).contains("rt_priority=10\n"));
    let mut other = e.clone();
    other.seeding = Seeding::Position;
    assert_ne!(record(&other), r);
    let mut other = e.clone();
    other.sets.push(("flowlet_gap_us".into(), "200".into()));
    assert_ne!(record(&other), r);
    let mut other = e.clone();
    other.base = leaf_spine(4, 2, 3, 1.0, LinkProps::default());
    assert_ne!(record(&other), r);
}

#[test]
fn every_scheme_sees_the_same_flows_and_loads_scale_arrivals() {
    let t = ls();
    let e = exp(t.clone());
    let pts = points(&e);
    assert_eq!(pts.len(), 8);
    let a = schedule(&e, &t, &pts[0]).unwrap(); // basic, 0.2, rep 1
    let b = schedule(&e, &t, &pts[4]).unwrap(); // ecmp, 0.2, rep 1
    assert_eq!(pts[4].scheme, "ecmp");
    assert_eq!(a, b);
    let rep2 = schedule(&e, &t, &pts[1]).unwrap();
    assert_ne!(a, rep2);
    let heavy = schedule(&e, &t, &pts[2]).unwrap(); // load 0.5
    let ratio = heavy.len() as f64 / a.len() as f64;
    assert!((2.0..3.0).contains(&ratio), "{ratio}");
    assert!(a.iter().all(|f| f.src != f.dst && f.dst < 12));
}

#[test]
fn a_load_gets_the_same_flows_whatever_else_the_sweep_lists() {
    let t = ls();
    let mut one = exp(t.clone());
    one.loads = vec![0.8];
    let mut two = exp(t.clone());
    two.loads = vec![0.2, 0.8];
    let at = |e: &Fct, load: f64, rep: usize| {
        let p = points(e)
            .into_iter()
            .find(|p| p.load == load && p.rep == rep)
            .unwrap();
        schedule(e, &t, &p).unwrap()
    };
    let a = at(&one, 0.8, 2);
    assert!(!a.is_empty());
    assert_eq!(a, at(&two, 0.8, 2));
    assert_ne!(a, at(&two, 0.8, 1));
    // The seeding of the sweeps recorded before: by the load's position.
    one.seeding = Seeding::Position;
    two.seeding = Seeding::Position;
    assert_ne!(at(&one, 0.8, 2), at(&two, 0.8, 2));
    assert_ne!(at(&one, 0.8, 2), a);
}

#[test]
fn capacities_and_uplinks_follow_the_topology() {
    let t = ls();
    assert_eq!(capacity_per_host(&t, LoadOf::Host).unwrap(), 100e6);
    // 3 hosts x 100M over 2 uplinks at 2:1: 150M of uplinks per leaf, 50M per host.
    assert_eq!(capacity_per_host(&t, LoadOf::Fabric).unwrap(), 50e6);
    let up = uplinks(&t);
    assert_eq!(up.len(), 8);
    assert!(
        up.iter()
            .all(|(l, _, s)| l.starts_with("leaf") && s.starts_with("spine"))
    );
    let (order, layout) = host_groups(&t);
    assert_eq!(order, (0..12).collect::<Vec<_>>());
    assert_eq!(
        layout,
        Some(Layout {
            groups: 4,
            per_group: 3
        })
    );
    // Stride goes to the next leaf.
    let mut e = exp(t.clone());
    e.pattern = "stride".into();
    let f = schedule(&e, &t, &points(&e)[0]).unwrap();
    assert!(f.iter().all(|f| f.dst / 3 == (f.src / 3 + 1) % 4));
}

#[test]
fn incast_events_come_from_other_leaves_with_their_classes() {
    let t = ls();
    let mut e = exp(t.clone());
    e.pattern = "incast".into();
    let f = schedule(&e, &t, &points(&e)[0]).unwrap();
    assert_eq!(f.len(), 64); // two events of 32 flows
    for ev in [0u64, 1_000_000_000] {
        let v: Vec<&Flow> = f.iter().filter(|x| x.start_ns == ev).collect();
        assert_eq!(v.len(), 32);
        let rx = v[0].dst;
        assert!(v.iter().all(|x| x.dst == rx && x.src / 3 != rx / 3));
        assert_eq!(v.iter().filter(|x| x.class == Class::Large).count(), 8);
    }
}

#[test]
fn summaries_give_fct_statistics_per_class_and_uplink_balance() {
    let csv = format!(
        "{FLOW_CSV_HEADER}\n\
         0,h1,h2,0,1000,short,0x08,cubic,1,1,true,100.0,0,0,3,0,0,4,50,700,\n\
         1,h1,h3,0,2000,short,0x08,cubic,1,1,true,300.0,2,0,3,0,0,0,50,1,\n\
         2,h1,h3,0,9000000,large,0x10,cubic,1,1,false,,1,0,3,0,0,0,50,1,not finished\n"
    );
    let rows = parse_flow_rows(&csv).unwrap();
    assert_eq!(rows.len(), 3);
    assert!(parse_flow_rows("a,b\n1").is_err());
    let sw = SwitchStats {
        uplinks: vec![
            ("leaf1".into(), 4, "spine1".into(), 100),
            ("leaf1".into(), 5, "spine2".into(), 300),
            ("leaf2".into(), 4, "spine1".into(), 50),
            ("leaf2".into(), 5, "spine2".into(), 50),
        ],
        ..Default::default()
    };
    assert_eq!(uplink_balance(&sw.uplinks), (50.0, 100.0));
    let e = exp(ls());
    let row = summary_row(&e, &e.transport, &points(&e)[0], &rows, &sw, 12.0);
    let head: Vec<&str> = SUMMARY_HEADER.split(',').collect();
    let v: Vec<&str> = row.split(',').collect();
    assert_eq!(head.len(), v.len());
    let get = |k: &str| v[head.iter().position(|h| *h == k).unwrap()];
    assert_eq!(get("flows"), "3");
    assert_eq!(get("finished"), "2");
    assert_eq!(get("short_n"), "2");
    assert_eq!(get("short_avg_fct_us"), "200.0");
    assert_eq!(get("short_p99_fct_us"), "300.0");
    assert_eq!(get("large_n"), "0");
    assert_eq!(get("retransmits"), "3");
    assert_eq!(get("delivered_ce"), "4");
    assert_eq!(get("start_lag_p99_us"), "700");
    assert_eq!(get("uplink_pkts_std_mean"), "50.0");
}

#[test]
fn queue_samples_give_max_mean_and_p90() {
    let mut sw = SwitchStats::default();
    let depths: Vec<u64> = (1..=20).collect();
    sw.set_queue_samples(&depths);
    assert_eq!((sw.queue_max, sw.queue_p90), (20, 18));
    assert!((sw.queue_mean - 10.5).abs() < 1e-9);
    sw.set_queue_samples(&[]);
    assert_eq!((sw.queue_max, sw.queue_p90, sw.queue_mean), (0, 0, 0.0));
}
