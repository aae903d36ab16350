//! `pisa-latency` (issue 17), short: one run of a few probes at two gaps, one background load,
//! and the 3-hop leaf-spine path. Every forwarder it compares must answer every probe set (a
//! cell of zeros is a forwarder that dropped the probes), and the tool must leave no namespace
//! behind. Needs root, iproute2, iputils-ping, ethtool, clang and the workspace binaries.

use std::process::Command;

use pisa_fabric::workspace_bin;

/// The p50s of a report's measurement rows (`| name | p50 / p99 / max | ...`), by row name.
fn p50s(report: &str) -> Vec<(String, Vec<f64>)> {
    report
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains(" / ") && !l.contains("p50 / p99"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            let name = cells.first()?.to_string();
            let v: Vec<f64> = cells[1..]
                .iter()
                .filter(|c| c.matches(" / ").count() == 2)
                .filter_map(|c| c.split(" / ").next()?.parse().ok())
                .collect();
            // Ratio rows have two numbers a cell: not a measurement.
            (!v.is_empty()).then_some((name, v))
        })
        .collect()
}

fn namespaces() -> usize {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn every_forwarder_answers_at_every_gap_and_no_namespace_is_left() {
    let before = namespaces();
    let out = Command::new(workspace_bin("pisa-latency"))
        .args([
            "--runs", "1", "--count", "10", "--gaps", "1ms,10ms", "--loads", "50",
        ])
        .output()
        .expect("pisa-latency");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pisa-latency failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{report}");
    let rows = p50s(&report);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    for want in [
        "direct veth",
        "Linux router",
        "pisa-switch, default",
        "pisa-switch, --busy-poll",
        "Linux routers",
        "pisa-switch (basic)",
    ] {
        assert!(names.contains(&want), "no row {want} in {names:?}");
    }
    for (name, v) in &rows {
        assert!(
            v.iter().all(|p50| *p50 > 0.0),
            "{name}: a probe set got no answer: {v:?}"
        );
    }
    assert_eq!(namespaces(), before, "pisa-latency left namespaces behind");
}
