//! The `kernel` baseline (issue 11 §3): a switch whose topology line says `program=kernel` is a
//! Linux router in its namespace instead of a `pisa-switch` process. Same namespaces, same veths,
//! same host addresses, gateways and MACs; only the forwarding is the kernel's:
//!
//! - IPv4 and IPv6 forwarding on, reverse-path filtering and redirects off;
//! - every port `pN` takes the switch's router MAC ([`plan::switch_mac`]), so the hosts' static
//!   gateway neighbours (and any `pisa-switch` neighbour) stay valid;
//! - a /32 and a /128 route per host, from [`plan::next_hops`] (the same equal-cost next hops
//!   the switch plans use): to the host's port at its own switch, elsewhere through every
//!   neighbour one hop closer, a multipath route when there are several;
//! - next hops are addresses of no interface (`169.254.x.y` onlink, `fe80::ff:x`) with static
//!   neighbour entries to the neighbour switch's router MAC: no ARP or NDP anywhere, as with
//!   `pisa-switch`;
//! - `fib_multipath_hash_policy=1` for IPv4 and IPv6: the multipath choice hashes the 5-tuple;
//! - each port's egress: tbf at the link's rate (burst 1 ms of the rate, at least two full
//!   frames, as the hosts' side) with a pfifo of the link's buffer in packets under it.
//!
//! What it cannot do here: this kernel has no RED, fq_codel or PIE, so nothing marks ECN, and no
//! netem, so a link delay cannot be modelled (a topology with one is refused).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

use super::ip_batch;
use crate::{Netns, run};
use topo::plan;
use topo::{End, Topology};

/// The IPv4 next-hop address standing for switch number `j` (0-based, topology order) in its
/// neighbours' routes: a link-local address no interface has, resolved by a static neighbour.
pub fn gw4(j: usize) -> Ipv4Addr {
    let n = u32::try_from(j + 1).unwrap_or(u32::MAX) & 0xffff;
    Ipv4Addr::from(u32::from(Ipv4Addr::new(169, 254, 0, 0)) | n)
}

/// The IPv6 next-hop address standing for switch number `j`, likewise.
pub fn gw6(j: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0xff, (j + 1) as u16)
}

/// What one Linux router is told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouterConfig {
    /// `sysctl -w` settings.
    pub sysctls: Vec<String>,
    /// `ip -batch` lines: MACs, links up, static neighbours, routes.
    pub ip: Vec<String>,
    /// `tc -batch` lines: each port's shaping.
    pub tc: Vec<String>,
}

/// The configuration of router `name` of `t` (a switch of `t`).
pub fn router_config(t: &Topology, name: &str) -> Result<RouterConfig, String> {
    let index = t.switch_indices();
    let me = *index.get(name).ok_or_else(|| format!("no switch {name}"))?;
    let all_ports = t.ports();
    let ports = all_ports
        .get(name)
        .ok_or_else(|| format!("switch {name} has no links"))?;
    let my_mac = plan::mac_text(plan::switch_mac(me));
    let mut c = RouterConfig::default();
    for s in [
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.fib_multipath_hash_policy=1",
        "net.ipv6.fib_multipath_hash_policy=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv4.conf.all.send_redirects=0",
    ] {
        c.sysctls.push(s.to_string());
    }
    for (p, (other, props)) in ports {
        if props.delay_us > 0 {
            return Err(format!(
                "switch {name} port {p}: a link delay of {} us needs netem, which this kernel \
                 lacks; the kernel baseline runs without link delays",
                props.delay_us
            ));
        }
        c.sysctls.push(format!("net.ipv4.conf.p{p}.rp_filter=0"));
        c.ip.push(format!("link set p{p} address {my_mac}"));
        c.ip.push(format!("link set p{p} up"));
        if let End::Switch(n, _) = other {
            let j = index[n.as_str()];
            let mac = plan::mac_text(plan::switch_mac(j));
            c.ip.push(format!(
                "neigh add {} lladdr {mac} dev p{p} nud permanent",
                gw4(j)
            ));
            c.ip.push(format!(
                "neigh add {} lladdr {mac} dev p{p} nud permanent",
                gw6(j)
            ));
        }
        let burst = (props.rate_bps / 8_000).max(3028);
        let limit = (u64::from(props.buffer) * 1514).max(3028);
        c.tc.push(format!(
            "qdisc add dev p{p} root handle 1: tbf rate {}bit burst {burst} limit {limit}",
            props.rate_bps
        ));
        c.tc.push(format!(
            "qdisc add dev p{p} parent 1:1 handle 10: pfifo limit {}",
            props.buffer
        ));
    }
    let hops = plan::next_hops(t);
    for (hi, next) in hops.get(name).into_iter().flatten() {
        let h = &t.hosts[*hi];
        let mut via4 = Vec::new();
        let mut via6 = Vec::new();
        for p in next {
            match ports.get(p).map(|(o, _)| *o) {
                Some(End::Host(_)) => {
                    let mac = plan::mac_text(plan::host_mac(*hi));
                    for a in [h.ipv4.to_string(), h.ipv6.to_string()] {
                        c.ip.push(format!("neigh add {a} lladdr {mac} dev p{p} nud permanent"));
                    }
                    via4.push(format!("dev p{p}"));
                    via6.push(format!("dev p{p}"));
                }
                Some(End::Switch(n, _)) => {
                    let j = index[n.as_str()];
                    via4.push(format!("via {} dev p{p} onlink", gw4(j)));
                    via6.push(format!("via {} dev p{p}", gw6(j)));
                }
                None => return Err(format!("switch {name}: next hop port {p} has no link")),
            }
        }
        for (dst, via) in [
            (format!("{}/32", h.ipv4), via4),
            (format!("{}/128", h.ipv6), via6),
        ] {
            match via.as_slice() {
                [one] => c.ip.push(format!("route add {dst} {one}")),
                many => c.ip.push(format!(
                    "route add {dst} {}",
                    many.iter()
                        .map(|v| format!("nexthop {v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                )),
            }
        }
    }
    Ok(c)
}

/// Sets router `name` up in its namespace `ns` (its ports exist already).
pub fn set_up(ns: &Netns, t: &Topology, name: &str, dir: &Path) -> Result<(), String> {
    let c = router_config(t, name)?;
    let mut args = vec!["-q", "-w"];
    args.extend(c.sysctls.iter().map(String::as_str));
    // A NetError's text names the command, hence the namespace and the batch file.
    ns.exec("sysctl", &args)?;
    ip_batch(Some(ns.name()), &c.ip, dir)?;
    let file = dir.join(format!("tc-{}.batch", ns.name()));
    std::fs::write(&file, c.tc.join("\n") + "\n")
        .map_err(|e| format!("writing {}: {e}", file.display()))?;
    run(
        "tc",
        &["-n", ns.name(), "-batch", file.to_str().unwrap_or_default()],
    )?;
    Ok(())
}

/// Per port `pN` of a router: packets and bytes its interface sent (`tx_packets`, `tx_bytes` of
/// `/sys/class/net/pN/statistics`, read inside the namespace).
pub fn port_tx(ns: &Netns, ports: &[u16]) -> Result<BTreeMap<u16, (u64, u64)>, String> {
    if ports.is_empty() {
        return Ok(BTreeMap::new());
    }
    let files: Vec<String> = ports
        .iter()
        .flat_map(|p| {
            ["tx_packets", "tx_bytes"].map(|c| format!("/sys/class/net/p{p}/statistics/{c}"))
        })
        .collect();
    let mut args = vec!["--"];
    args.extend(files.iter().map(String::as_str));
    let out = ns.exec("cat", &args)?;
    let v: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|x| {
            x.parse()
                .map_err(|_| format!("{}: {x}: not a count", ns.name()))
        })
        .collect::<Result<_, _>>()?;
    if v.len() != 2 * ports.len() {
        return Err(format!(
            "{}: {} counters for {} ports",
            ns.name(),
            v.len(),
            ports.len()
        ));
    }
    Ok(ports
        .iter()
        .enumerate()
        .map(|(i, p)| (*p, (v[2 * i], v[2 * i + 1])))
        .collect())
}

/// A port's root qdisc statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Packets dropped (the pfifo's tail drops, counted by the tbf above it too).
    pub drops: u64,
    /// Packets queued now.
    pub backlog_pkts: u64,
}

/// Parses `tc -s qdisc show` output: the root qdisc of each `pN`.
pub fn parse_qdisc_stats(text: &str) -> BTreeMap<u16, QdiscStats> {
    let mut out = BTreeMap::new();
    let mut current: Option<u16> = None;
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"qdisc") {
            current = None;
            let dev = w
                .iter()
                .position(|x| *x == "dev")
                .and_then(|i| w.get(i + 1));
            if w.contains(&"root")
                && let Some(p) = dev.and_then(|d| d.strip_prefix('p')?.parse().ok())
            {
                current = Some(p);
                out.insert(p, QdiscStats::default());
            }
            continue;
        }
        let Some(p) = current else { continue };
        let e = out.entry(p).or_insert_with(QdiscStats::default);
        match w.first() {
            // Sent 123 bytes 4 pkt (dropped 5, overlimits 6 requeues 0)
            Some(&"Sent") => {
                if let Some(i) = w.iter().position(|x| *x == "(dropped") {
                    e.drops = w
                        .get(i + 1)
                        .and_then(|x| x.trim_end_matches(',').parse().ok())
                        .unwrap_or(0);
                }
            }
            // backlog 0b 0p requeues 0
            Some(&"backlog") => {
                e.backlog_pkts = w
                    .get(2)
                    .and_then(|x| x.strip_suffix('p')?.parse().ok())
                    .unwrap_or(0);
            }
            _ => {}
        }
    }
    out
}

/// Every port's root qdisc statistics of the router in `ns`.
pub fn qdisc_stats(ns: &Netns) -> Result<BTreeMap<u16, QdiscStats>, String> {
    let out = run("tc", &["-n", ns.name(), "-s", "qdisc", "show"])?;
    Ok(parse_qdisc_stats(&String::from_utf8_lossy(&out.stdout)))
}

/// The IP-layer discards of a router (`/proc/net/snmp`, `/proc/net/snmp6`, `/proc/net/netstat`
/// in its namespace): IPv4 `InHdrErrors` (TTL expired, bad headers), `InAddrErrors`,
/// `InDiscards`, `OutNoRoutes`, `InNoRoutes`, and the IPv6 counterparts with `InTooBigErrors`.
/// Queue drops are not in here: they are the qdiscs'.
pub fn ip_discards(ns: &Netns) -> Result<u64, String> {
    let out = ns.exec(
        "cat",
        &["/proc/net/snmp", "/proc/net/snmp6", "/proc/net/netstat"],
    )?;
    Ok(parse_ip_discards(&String::from_utf8_lossy(&out.stdout)))
}

/// The sum [`ip_discards`] reads, from the files' text.
pub fn parse_ip_discards(text: &str) -> u64 {
    const V4: [&str; 4] = ["InHdrErrors", "InAddrErrors", "InDiscards", "OutNoRoutes"];
    const EXT: [&str; 1] = ["InNoRoutes"];
    const V6: [&str; 6] = [
        "Ip6InHdrErrors",
        "Ip6InAddrErrors",
        "Ip6InDiscards",
        "Ip6InNoRoutes",
        "Ip6OutNoRoutes",
        "Ip6InTooBigErrors",
    ];
    let mut sum = 0;
    let lines: Vec<&str> = text.lines().collect();
    // snmp and netstat: a header line and a value line with the same "Prefix:".
    for pair in lines.windows(2) {
        let (h, v) = (
            pair[0].split_whitespace().collect::<Vec<_>>(),
            pair[1].split_whitespace().collect::<Vec<_>>(),
        );
        let wanted: &[&str] = match h.first() {
            Some(&"Ip:") => &V4,
            Some(&"IpExt:") => &EXT,
            _ => continue,
        };
        if v.first() != h.first()
            || v.len() != h.len()
            || v.get(1).is_some_and(|x| x.parse::<u64>().is_err())
        {
            continue;
        }
        for (k, x) in h.iter().zip(&v).skip(1) {
            if wanted.contains(k) {
                sum += x.parse::<u64>().unwrap_or(0);
            }
        }
    }
    // snmp6: "Name value" lines.
    for l in &lines {
        let mut w = l.split_whitespace();
        if let (Some(k), Some(x), None) = (w.next(), w.next(), w.next())
            && V6.contains(&k)
        {
            sum += x.parse::<u64>().unwrap_or(0);
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo::{LinkProps, leaf_spine};

    fn ls() -> Topology {
        leaf_spine(
            2,
            2,
            2,
            1.0,
            LinkProps {
                rate_bps: 100_000_000,
                delay_us: 0,
                buffer: 64,
            },
        )
    }

    #[test]
    fn a_leaf_routes_its_hosts_directly_and_the_others_over_both_spines() {
        let t = ls();
        // Switches in order: spine1 (0), spine2 (1), leaf1 (2), leaf2 (3); leaf1's hosts on
        // ports 1-2, spines on ports 3-4.
        let c = router_config(&t, "leaf1").unwrap();
        let has = |l: &str| assert!(c.ip.iter().any(|x| x == l), "no {l} in {:#?}", c.ip);
        has("link set p3 address 02:5e:00:00:00:02");
        has("route add 10.0.1.1/32 dev p1");
        has("neigh add 10.0.1.1 lladdr 02:ee:00:00:00:00 dev p1 nud permanent");
        has("neigh add fd00::1:1 lladdr 02:ee:00:00:00:00 dev p1 nud permanent");
        has(
            "route add 10.0.2.2/32 nexthop via 169.254.0.1 dev p3 onlink nexthop via 169.254.0.2 dev p4 onlink",
        );
        has("route add fd00::2:2/128 nexthop via fe80::ff:1 dev p3 nexthop via fe80::ff:2 dev p4");
        has("neigh add 169.254.0.2 lladdr 02:5e:00:00:00:01 dev p4 nud permanent");
        assert!(
            c.sysctls
                .contains(&"net.ipv4.fib_multipath_hash_policy=1".to_string())
        );
        assert!(
            c.sysctls
                .contains(&"net.ipv6.fib_multipath_hash_policy=1".to_string())
        );
        assert!(
            c.tc.contains(
                &"qdisc add dev p3 root handle 1: tbf rate 100000000bit burst 12500 limit 96896"
                    .to_string()
            )
        );
        assert!(
            c.tc.contains(&"qdisc add dev p3 parent 1:1 handle 10: pfifo limit 64".to_string())
        );
        // A spine has one way to each host: through that host's leaf.
        let s = router_config(&t, "spine2").unwrap();
        assert!(
            s.ip.contains(&"route add 10.0.2.1/32 via 169.254.0.4 dev p2 onlink".to_string()),
            "{:#?}",
            s.ip
        );
        // Every host twice (IPv4 and IPv6) on every router.
        for r in ["spine1", "spine2", "leaf1", "leaf2"] {
            let c = router_config(&t, r).unwrap();
            assert_eq!(
                c.ip.iter().filter(|l| l.starts_with("route add")).count(),
                8
            );
        }
    }

    #[test]
    fn a_link_delay_is_refused_for_want_of_netem() {
        let mut t = ls();
        t.links[0].props.delay_us = 50;
        let e = router_config(&t, "leaf1").unwrap_err();
        assert!(e.contains("netem"), "{e}");
    }

    #[test]
    fn qdisc_and_snmp_counters_parse() {
        let tc = "qdisc tbf 1: dev p3 root refcnt 3 rate 100Mbit burst 12500b lat 30ms \n \
                  Sent 4542 bytes 3 pkt (dropped 7, overlimits 2 requeues 0) \n \
                  backlog 3028b 2p requeues 0\n\
                  qdisc pfifo 10: dev p3 parent 1:1 limit 64p\n \
                  Sent 4542 bytes 3 pkt (dropped 7, overlimits 0 requeues 0) \n \
                  backlog 3028b 2p requeues 0\n\
                  qdisc noqueue 0: dev lo root refcnt 2 \n \
                  Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n";
        let q = parse_qdisc_stats(tc);
        assert_eq!(q.len(), 1);
        assert_eq!(
            q[&3],
            QdiscStats {
                drops: 7,
                backlog_pkts: 2
            }
        );
        let snmp = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes\n\
                    Ip: 1 64 100 2 0 90 0 1 0 0 50 3\n\
                    Icmp: InMsgs InErrors\nIcmp: 4 4\n\
                    Ip6InReceives                   	12\n\
                    Ip6InHdrErrors                  	5\n\
                    Ip6InNoRoutes                   	1\n\
                    IpExt: InNoRoutes InTruncatedPkts\nIpExt: 10 3\n";
        // 2 + 1 + 3 (v4; OutDiscards is not counted), 10 (IpExt), 5 + 1 (v6).
        assert_eq!(parse_ip_discards(snmp), 22);
    }
}
