//! What several namespace tests share: a small leaf-spine, pisa-ctl against one of a fabric's
//! switches, its output's cells, the experiment runner's CSVs, a teardown guard, and the Python
//! venvs of the client tests.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::path::{Path, PathBuf};

use pisa_fabric::fabric::{Fabric, GRPC_PORT, mgmt_addrs, teardown};
use pisa_fabric::workspace_bin;
use topo::{LinkProps, Topology, leaf_spine};

/// A 2x2 leaf-spine, two hosts per leaf, every link 100 Mb/s with a 64-packet buffer and no
/// delay, every switch running `program`. Spines come first: leaf1 is switch 2, with h1, h2 on
/// ports 1, 2 and uplinks 3 (spine1), 4 (spine2).
pub(crate) fn two_by_two(program: &str) -> Topology {
    let host = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 0,
        buffer: 64,
    };
    let mut t = leaf_spine(2, 2, 2, 1.0, host);
    for s in &mut t.switches {
        s.program = program.into();
    }
    t
}

/// Runs `pisa-ctl ARGS` against switch number `switch` (topology order) of `f`, over its
/// P4Runtime server on the management network; its standard output.
pub(crate) fn ctl(f: &Fabric, switch: usize, args: &[&str]) -> String {
    let (_, sw) = mgmt_addrs(switch);
    let addr = format!("{sw}:{GRPC_PORT}");
    let bin = workspace_bin("pisa-ctl").display().to_string();
    let mut a = vec!["--addr", addr.as_str()];
    a.extend_from_slice(args);
    let out = f.mgmt().exec(&bin, &a).expect("pisa-ctl");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `name[index]` in pisa-ctl's `registers` (`name[i] = v`, hex from 1024) or
/// `counters` (`name[i] N packets M bytes`) output; 0 if absent (pisa-ctl skips zero counters).
pub(crate) fn cell(out: &str, name: &str, index: u32) -> u64 {
    let prefix = format!("{name}[{index}]");
    out.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(&prefix)?.trim();
            let v = rest
                .strip_prefix("= ")
                .or_else(|| rest.split_once(" packets").map(|(n, _)| n))?;
            match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .unwrap_or(0)
}

/// A CSV the experiment runner wrote: its header and rows (every row as wide as the header).
pub(crate) fn csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let head: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect();
    for r in &rows {
        assert_eq!(r.len(), head.len(), "{}: {r:?}", path.display());
    }
    (head, rows)
}

/// The index of column `name`.
pub(crate) fn col(head: &[String], name: &str) -> usize {
    head.iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {head:?}"))
}

/// Removes fabric `name` (its namespaces and processes) whatever happens to the test.
pub(crate) struct Cleanup(pub(crate) String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        teardown(&self.0);
    }
}

/// Runs `iperf3 -c DST ARGS` in host `src`'s namespace against a one-shot server in `dst`'s
/// (its log in `dir`); the client's output.
pub(crate) fn iperf3(
    f: &Fabric,
    dir: &Path,
    src: &topo::Host,
    dst: &topo::Host,
    args: &[&str],
) -> std::process::Output {
    let addr = dst.ipv4.to_string();
    let log = dir.join(format!("iperf-server-{}.log", dst.name));
    let _server =
        pisa_fabric::Process::spawn(f.ns(&dst.name), "iperf3", &["-s", "-1", "-B", &addr], &log)
            .expect("iperf3 server");
    f.ns(&dst.name)
        .wait_listening(5201, std::time::Duration::from_secs(30))
        .expect("iperf3 server listening");
    let mut a = vec!["-c", addr.as_str()];
    a.extend_from_slice(args);
    f.ns(&src.name).exec("iperf3", &a).expect("iperf3 client")
}

/// The arguments of the CI-sized `pisa-fabric experiment` point: a 2x2 leaf-spine with two hosts
/// per leaf at `rate`, `schemes`, Hadoop flows at load 0.3 for 2 s (20 s to drain), into `out`
/// as fabric `name`, then `extra`.
pub(crate) fn small_experiment(
    rate: &str,
    schemes: &str,
    out: &Path,
    name: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut a: Vec<String> = [
        "experiment",
        "--leaves",
        "2",
        "--spines",
        "2",
        "--hosts-per-leaf",
        "2",
        "--host-rate",
        rate,
        "--schemes",
        schemes,
        "--workload",
        "hadoop",
        "--loads",
        "0.3",
        "--seconds",
        "2",
        "--drain",
        "20",
        "--out",
        out.to_str().unwrap_or_default(),
        "--name",
        name,
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    a.extend(extra.iter().map(|x| x.to_string()));
    a
}

/// The python of venv `name` (scripts/py-clients.sh makes them under
/// `${PISA_VENV_DIR:-/var/cache/pisa-switch/venvs}`); panics (fails the test) if the venv is
/// missing or incomplete.
pub(crate) fn venv_python(name: &str) -> PathBuf {
    let root = std::env::var_os("PISA_VENV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/pisa-switch/venvs"));
    let dir = root.join(name);
    let py = dir.join("bin/python");
    assert!(
        py.exists() && dir.join(".pisa-pins").exists(),
        "the Python venv '{name}' is missing or incomplete at {}: run scripts/py-clients.sh",
        dir.display()
    );
    py
}
