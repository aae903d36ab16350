//! A CI-sized `pisa-fabric experiment`: a 2x2 leaf-spine with two hosts per leaf, `basic` and
//! `ecmp`, Hadoop flows at one load for 2 s. The CSVs are well-formed, every flow finished, both
//! schemes ran the same flows, the uplinks carried them, a recorded program counter is there
//! for every switch, the hosts' `tcp_reordering` is the one
//! asked for and recorded, SIGINT during the second point tears the fabric down and a rerun
//! resumes at that point, a further rerun runs no point again, and no namespace is left. Needs
//! root, iproute2, ethtool and the workspace binaries (pisa-switch, pisa-fabric, pisa-traffic).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use pisa_fabric::{run, workspace_bin};

mod common;
use common::{Cleanup, col, csv, small_experiment};

#[test]
fn a_small_experiment_writes_well_formed_results_and_resumes() {
    let name = format!("x{}", std::process::id() % 100_000);
    let _cleanup = Cleanup(name.clone());
    let out = std::env::temp_dir().join(format!("pisa-experiment-test-{name}"));
    let _ = std::fs::remove_dir_all(&out);
    let bin = workspace_bin("pisa-fabric");
    let args = small_experiment(
        "100M",
        "basic,ecmp",
        &out,
        &name,
        &[
            "--tcp-reordering",
            "10",
            "--record-counter",
            "egress.port_tx",
            "--record-counter",
            "egress.no_such_counter",
        ],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Ctrl-C once the first point has finished: the fabric goes, the process exits with 130.
    let first_done = out.join("points").join("basic_load0.3_rep1").join("done");
    let stderr = out.with_extension("log");
    let mut child = std::process::Command::new(&bin)
        .args(&args)
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("pisa-fabric experiment");
    let deadline = Instant::now() + Duration::from_secs(300);
    while !first_done.exists() {
        assert!(Instant::now() < deadline, "the first point did not finish");
        assert!(
            child.try_wait().unwrap().is_none(),
            "pisa-fabric exited early"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Into the second point's bring-up or flows.
    std::thread::sleep(Duration::from_secs(3));
    run("kill", &["-INT", &child.id().to_string()]).unwrap();
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(&stderr).unwrap();
    let _ = std::fs::remove_file(&stderr);
    eprint!("{log}");
    assert_eq!(status.code(), Some(130), "exit on SIGINT");
    assert!(log.contains("ETA"), "no progress line with an ETA");
    assert!(log.contains("tearing fabric"), "{log}");
    assert!(!left_namespaces(&name), "namespaces left after SIGINT");
    assert!(
        !out.join("points/ecmp_load0.3_rep1/done").exists(),
        "the interrupted point is not done"
    );

    // The rerun resumes at the interrupted point.
    let o = run(bin.to_str().unwrap(), &args).expect("pisa-fabric experiment, resumed");
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    eprint!("{log}");
    assert!(log.contains("1 done already, 1 to run"), "{log}");
    assert!(log.contains("ecmp load 0.3 rep 1: starting"), "{log}");

    // summary.csv: one row per point, every flow finished.
    let (h, rows) = csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 2);
    let (scheme, flows, fin) = (col(&h, "scheme"), col(&h, "flows"), col(&h, "finished"));
    assert_eq!(
        rows.iter().map(|r| r[scheme].as_str()).collect::<Vec<_>>(),
        ["basic", "ecmp"]
    );
    for r in &rows {
        let n: usize = r[flows].parse().unwrap();
        assert!(n > 20, "{r:?}");
        assert_eq!(r[fin], r[flows], "unfinished flows: {r:?}");
        let short_avg: f64 = r[col(&h, "short_avg_fct_us")].parse().unwrap();
        assert!(short_avg > 0.0);
        for c in ["retransmits", "tm_drops", "queue_max_pkts"] {
            r[col(&h, c)].parse::<u64>().unwrap();
        }
        for c in ["uplink_pkts_std_mean", "start_lag_p99_us", "wall_s"] {
            r[col(&h, c)].parse::<f64>().unwrap();
        }
        assert_eq!(r[col(&h, "cc")], "cubic");
    }

    // flows.csv: the columns the issue names, and the same flows for both schemes.
    let (h, rows) = csv(&out.join("flows.csv"));
    for c in [
        "scheme",
        "load",
        "rep",
        "src",
        "dst",
        "size_bytes",
        "class",
        "finished",
        "fct_us",
        "retransmits",
    ] {
        col(&h, c);
    }
    let key = |r: &Vec<String>| {
        (
            r[col(&h, "id")].clone(),
            r[col(&h, "src")].clone(),
            r[col(&h, "dst")].clone(),
            r[col(&h, "start_ns")].clone(),
            r[col(&h, "size_bytes")].clone(),
        )
    };
    let of = |s: &str| -> BTreeSet<_> {
        rows.iter()
            .filter(|r| r[col(&h, "scheme")] == s)
            .map(key)
            .collect()
    };
    assert_eq!(of("basic"), of("ecmp"));
    for r in &rows {
        assert_eq!(r[col(&h, "finished")], "true", "{r:?}");
        assert!(r[col(&h, "fct_us")].parse::<f64>().unwrap() > 0.0);
        assert!(["short", "large"].contains(&r[col(&h, "class")].as_str()));
        assert_ne!(r[col(&h, "src")], r[col(&h, "dst")]);
    }

    // uplinks.csv: each leaf's two uplinks, per point, together carrying the cross-leaf flows.
    let (h, rows) = csv(&out.join("uplinks.csv"));
    assert_eq!(rows.len(), 8);
    let total: u64 = rows
        .iter()
        .map(|r| r[col(&h, "packets")].parse::<u64>().unwrap())
        .sum();
    assert!(total > 1000, "{rows:?}");
    let uplink_packets: Vec<(String, String, String, String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r[col(&h, "scheme")].clone(),
                r[col(&h, "rep")].clone(),
                r[col(&h, "leaf")].clone(),
                r[col(&h, "port")].clone(),
                r[col(&h, "packets")].parse().unwrap(),
            )
        })
        .collect();

    // counters.csv: the recorded counter on all four switches of both points (a counter no
    // program has adds no rows); an uplink's cell holds at least what uplinks.csv counted
    // during the flows, since it counts from the fabric's start.
    let (h, rows) = csv(&out.join("counters.csv"));
    let switches: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| (r[col(&h, "scheme")].clone(), r[col(&h, "switch")].clone()))
        .collect();
    assert_eq!(switches.len(), 8, "{switches:?}");
    assert!(
        rows.iter()
            .all(|r| r[col(&h, "counter")] == "egress.port_tx")
    );
    for (scheme, rep, leaf, port, n) in &uplink_packets {
        let cell = rows
            .iter()
            .find(|r| {
                (
                    &r[col(&h, "scheme")],
                    &r[col(&h, "rep")],
                    &r[col(&h, "switch")],
                    &r[col(&h, "index")],
                ) == (scheme, rep, leaf, port)
            })
            .unwrap_or_else(|| panic!("no counter cell for {scheme} {leaf} port {port}"));
        assert!(
            cell[col(&h, "packets")].parse::<u64>().unwrap() >= *n,
            "{cell:?}"
        );
    }

    // Every point records its hosts' reordering settings, with the one asked for.
    for p in ["basic_load0.3_rep1", "ecmp_load0.3_rep1"] {
        let r = std::fs::read_to_string(out.join("points").join(p).join("reordering.txt"))
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(
            r.starts_with("tcp_reordering=10 tcp_max_reordering="),
            "{p}: {r}"
        );
        assert!(!r.contains('?'), "{p}: {r}");
    }

    // A rerun skips both points.
    let o = run(bin.to_str().unwrap(), &args).expect("rerun");
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(log.contains("2 done already, 0 to run"), "{log}");
    let (_, again) = csv(&out.join("summary.csv"));
    assert_eq!(again.len(), 2);

    assert!(!left_namespaces(&name), "namespaces left behind");
    let _ = std::fs::remove_dir_all(&out);
}

/// Whether any namespace of fabric `name` exists.
fn left_namespaces(name: &str) -> bool {
    let left = run("ip", &["netns", "list"]).unwrap();
    String::from_utf8_lossy(&left.stdout).contains(&format!("pf{name}-"))
}
