//! Counters read from a running fabric: the switches' P4Runtime counters (through `pisa-fabric
//! counters` in the management namespace) and the Linux routers' interface counters.

use std::collections::BTreeMap;

use anyhow::{Context as _, anyhow, bail};
use programs::is_kernel;

use crate::fabric::{Fabric, kernel};
use crate::workspace_bin;

/// The counter every program has: packets and bytes sent per port.
pub const PORT_TX: &str = "egress.port_tx";

/// (switch, port) -> packets sent, from every switch's `egress.port_tx` over P4Runtime (the
/// controller in the management namespace), and from every Linux router's interface counters.
pub fn port_tx_packets(f: &Fabric) -> anyhow::Result<BTreeMap<(String, u16), u64>> {
    port_tx(f, |packets, _| packets)
}

/// (switch, port) -> bytes sent, likewise.
pub fn port_tx_bytes(f: &Fabric) -> anyhow::Result<BTreeMap<(String, u16), u64>> {
    port_tx(f, |_, bytes| bytes)
}

fn port_tx(
    f: &Fabric,
    pick: impl Fn(u64, u64) -> u64,
) -> anyhow::Result<BTreeMap<(String, u16), u64>> {
    let mut out = BTreeMap::new();
    let ports = f.topo.ports();
    for s in f.topo.switches.iter().filter(|s| is_kernel(&s.program)) {
        let ps: Vec<u16> = ports
            .get(s.name.as_str())
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default();
        let tx =
            kernel::port_tx(f.ns(&s.name), &ps).map_err(|e| anyhow!("router {}: {e}", s.name))?;
        for (p, (packets, bytes)) in tx {
            out.insert((s.name.clone(), p), pick(packets, bytes));
        }
    }
    for (sw, index, packets, bytes) in switch_counters(f, PORT_TX)? {
        out.insert((sw, index as u16), pick(packets, bytes));
    }
    Ok(out)
}

/// Every non-zero cell of the counter `name` on every switch whose program has it:
/// (switch, index, packets, bytes). Linux routers have no program counters.
pub fn switch_counters(f: &Fabric, name: &str) -> anyhow::Result<Vec<(String, u64, u64, u64)>> {
    if f.topo.switches.iter().all(|s| is_kernel(&s.program)) {
        return Ok(Vec::new());
    }
    let topo_file = f.opts.dir.join("topology.txt");
    let bin = workspace_bin("pisa-fabric");
    let cmd = f
        .mgmt()
        .exec(
            bin.to_str().unwrap_or_default(),
            &[
                "counters",
                topo_file.to_str().unwrap_or_default(),
                "--counter",
                name,
            ],
        )
        .with_context(|| format!("pisa-fabric counters --counter {name}"))?;
    if !cmd.status.success() {
        bail!(
            "pisa-fabric counters --counter {name}: {}",
            String::from_utf8_lossy(&cmd.stderr).trim()
        );
    }
    Ok(parse_counter_lines(&String::from_utf8_lossy(&cmd.stdout)))
}

/// `SWITCH INDEX PACKETS BYTES` lines, as `pisa-fabric counters` prints them; others are skipped.
fn parse_counter_lines(text: &str) -> Vec<(String, u64, u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                [sw, i, p, b] => Some((
                    sw.to_string(),
                    i.parse().ok()?,
                    p.parse().ok()?,
                    b.parse().ok()?,
                )),
                _ => None,
            }
        })
        .collect()
}

/// `counters.csv` rows of a point (after `prefix`, the point's `scheme,load,rep`) for the
/// counters `names`: `switch,counter,index,packets,bytes`.
pub(super) fn counter_rows(f: &Fabric, names: &[String], prefix: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    for name in names {
        for (sw, index, packets, bytes) in switch_counters(f, name)? {
            text += &format!("{prefix},{sw},{name},{index},{packets},{bytes}\n");
        }
    }
    Ok(text)
}

/// Every pisa-switch's `show_ports` (Linux routers have none): (switch, port) -> that port's
/// numeric columns by name (`rx`, `tx`, `pfc_rx`, `pfc_tx`, `pfc_paused_us`, `qdelay_p50_us`,
/// ...). A `-` (nothing measured yet) or a column an older build lacks is absent.
pub(crate) fn show_ports(
    f: &Fabric,
) -> anyhow::Result<BTreeMap<(String, u16), BTreeMap<String, f64>>> {
    let mut out = BTreeMap::new();
    for s in f.topo.switches.iter().filter(|s| !is_kernel(&s.program)) {
        let sock = f.opts.dir.join(format!("{}.sock", s.name));
        for (port, cols) in parse_show_ports(&super::admin(&sock, "show_ports")?) {
            out.insert((s.name.clone(), port), cols);
        }
    }
    Ok(out)
}

/// `show_ports`' lines (its header first) as port -> numeric columns by the header's names.
fn parse_show_ports(lines: &[String]) -> Vec<(u16, BTreeMap<String, f64>)> {
    let Some((head, rows)) = lines.split_first() else {
        return Vec::new();
    };
    let names: Vec<&str> = head.split_whitespace().collect();
    rows.iter()
        .filter_map(|l| {
            let mut port = None;
            let mut cols = BTreeMap::new();
            for (name, v) in names.iter().zip(l.split_whitespace()) {
                if *name == "port" {
                    port = v.parse().ok();
                } else if let Ok(x) = v.parse::<f64>() {
                    cols.insert(name.to_string(), x);
                }
            }
            Some((port?, cols))
        })
        .collect()
}

/// The header of `counters.csv`.
pub(super) const COUNTERS_HEADER: &str = "scheme,load,rep,switch,counter,index,packets,bytes";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_ports_is_read_by_column_name_and_unmeasured_cells_are_absent() {
        let lines: Vec<String> = [
            "port rx tx errors pfc_rx pfc_tx pfc_paused_us qdelay_p50_us qdelay_p99_us qdelay_max_us",
            "1 10 12 0 0 3 7 3.5 40.25 81",
            "2 0 0 0 0 0 0 - - -",
            "noise",
        ]
        .map(String::from)
        .to_vec();
        let v = parse_show_ports(&lines);
        assert_eq!(v.len(), 2);
        let (port, one) = &v[0];
        assert_eq!(*port, 1);
        assert_eq!(
            (
                one["tx"],
                one["pfc_tx"],
                one["pfc_paused_us"],
                one["qdelay_p99_us"]
            ),
            (12.0, 3.0, 7.0, 40.25)
        );
        // Nothing has left port 2: its queueing delays are absent, not 0.
        assert!(!v[1].1.contains_key("qdelay_p99_us"));
        assert_eq!(v[1].1["rx"], 0.0);
    }

    #[test]
    fn counter_lines_parse_and_odd_lines_are_skipped() {
        let v = parse_counter_lines("leaf1 3 10 15000\nnoise\nspine2 0 1 64\nleaf1 x 1 1\n");
        assert_eq!(
            v,
            vec![
                ("leaf1".to_string(), 3, 10, 15000),
                ("spine2".to_string(), 0, 1, 64)
            ]
        );
    }
}
