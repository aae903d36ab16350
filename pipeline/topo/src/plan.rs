//! What every switch of a fabric is told: its traffic-manager settings (from the links'
//! properties) and its L3 routes with ECMP groups over every equal-cost next hop (what the
//! controller writes over P4Runtime), in the BMv2-style command language both understand.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::{End, LinkProps, Switch, Topology};

/// A MAC address as text.
pub fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The router MAC of switch number `i` (0-based, in topology order).
pub fn switch_mac(i: usize) -> [u8; 6] {
    [0x02, 0x5e, 0, 0, (i >> 8) as u8, i as u8]
}

/// The MAC of host number `i` (0-based, in topology order).
pub fn host_mac(i: usize) -> [u8; 6] {
    [0x02, 0xee, 0, 0, (i >> 8) as u8, i as u8]
}

/// What one switch gets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchPlan {
    /// Traffic-manager settings per port, loaded at start (`--entries`).
    pub tm: Vec<String>,
    /// Members, groups and routes, written by the controller over P4Runtime.
    pub routes: Vec<String>,
}

/// Each switch's switch-to-switch links: (its port, the neighbour).
fn adjacency<'a>(
    ports: &'a BTreeMap<&'a str, BTreeMap<u16, (&'a End, &'a LinkProps)>>,
) -> HashMap<&'a str, Vec<(u16, &'a str)>> {
    let mut adj: HashMap<&str, Vec<(u16, &str)>> = HashMap::new();
    for (s, ps) in ports {
        for (p, (other, _)) in ps {
            if let End::Switch(n, _) = other {
                adj.entry(s).or_default().push((*p, n.as_str()));
            }
        }
    }
    adj
}

/// The most switches a packet between two hosts crosses on a shortest path (0 without hosts).
pub fn host_path_switches(t: &Topology) -> usize {
    let ports = t.ports();
    let adj = adjacency(&ports);
    let edges: BTreeSet<&str> = t
        .hosts
        .iter()
        .filter_map(|h| t.host_attachment(&h.name).map(|(s, _)| s))
        .collect();
    edges
        .iter()
        .filter_map(|a| {
            let d = distances(&adj, a);
            edges.iter().filter_map(|b| d.get(*b)).max().map(|m| m + 1)
        })
        .max()
        .unwrap_or(0)
}

/// Hop counts from every switch to switch `dst` over switch-to-switch links.
fn distances(adj: &HashMap<&str, Vec<(u16, &str)>>, dst: &str) -> HashMap<String, usize> {
    let mut dist = HashMap::new();
    dist.insert(dst.to_string(), 0usize);
    let mut queue = VecDeque::from([dst]);
    while let Some(s) = queue.pop_front() {
        let d = dist[s];
        for &(_, n) in adj.get(s).map(Vec::as_slice).unwrap_or_default() {
            if !dist.contains_key(n) {
                dist.insert(n.to_string(), d + 1);
                queue.push_back(n);
            }
        }
    }
    dist
}

/// The fabric plan of programs that route like `basic` (its `ipv4_lpm`, `ipv6_lpm` and
/// `ecmp_selector`), for the switches in `only`. It cannot fail; `programs::routed` is it as a
/// fabric plan (`programs::PlanFn`).
pub fn routed(t: &Topology, only: &[&Switch]) -> BTreeMap<String, SwitchPlan> {
    let mut all = plan(t);
    all.retain(|name, _| only.iter().any(|s| &s.name == name));
    all
}

/// A traffic-manager queue's byte limit unless raised (`pipeline`'s `PortConfig::default`).
pub const TM_DEFAULT_QUEUE_BYTES: u64 = 4 << 20;

/// The bytes a link's buffer allows per packet: above any frame the fabric carries (a 1,514-byte
/// frame and the programs' shims), so a link's buffer in packets is never cut short by bytes.
pub const BUFFER_BYTES_PER_PACKET: u64 = 2048;

/// The traffic-manager settings of switch `name`'s ports, from their links. A buffer deeper than
/// the queue's default byte limit allows (2,048 packets of [`BUFFER_BYTES_PER_PACKET`]) raises
/// that limit too, so deep buffers (0.2 s of a 1 Gb/s link is 16,667 packets) hold what they say.
pub fn tm_lines(t: &Topology, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (p, (_, props)) in t.ports().get(name).into_iter().flatten() {
        out.push(format!("set_port_rate {} {p}", props.rate_bps));
        out.push(format!("set_queue_depth {} {p}", props.buffer));
        let bytes = u64::from(props.buffer) * BUFFER_BYTES_PER_PACKET;
        if bytes > TM_DEFAULT_QUEUE_BYTES {
            out.push(format!("set_queue_bytes {bytes} {p}"));
        }
        if props.delay_us > 0 {
            out.push(format!("set_port_delay {} {p}", props.delay_us));
        }
    }
    out
}

/// The MAC at the far end of each port of switch `name`.
pub fn neighbour_macs(t: &Topology, name: &str) -> BTreeMap<u16, [u8; 6]> {
    let ports = t.ports();
    ports
        .get(name)
        .into_iter()
        .flatten()
        .map(|(p, (other, _))| {
            let mac = match other {
                End::Switch(n, _) => {
                    switch_mac(t.switches.iter().position(|s| &s.name == n).unwrap_or(0))
                }
                End::Host(h) => host_mac(t.hosts.iter().position(|x| &x.name == h).unwrap_or(0)),
            };
            (*p, mac)
        })
        .collect()
}

/// For every switch, by name: each reachable host (its index in `t.hosts`) with the ports one
/// hop closer to it (the host's own port at its switch; every equal-cost neighbour elsewhere).
pub fn next_hops(t: &Topology) -> BTreeMap<String, Vec<(usize, BTreeSet<u16>)>> {
    let ports = t.ports();
    let adj = adjacency(&ports);
    let dist: HashMap<&str, HashMap<String, usize>> = t
        .switches
        .iter()
        .map(|s| (s.name.as_str(), distances(&adj, &s.name)))
        .collect();
    let mut out = BTreeMap::new();
    for sw in &t.switches {
        let me = sw.name.as_str();
        let mut hops = Vec::new();
        for (hi, h) in t.hosts.iter().enumerate() {
            let Some((attach, port)) = t.host_attachment(&h.name) else {
                continue;
            };
            let next: BTreeSet<u16> = if attach == me {
                BTreeSet::from([port])
            } else {
                let d = &dist[attach];
                let Some(&mine) = d.get(me) else {
                    continue; // unreachable
                };
                adj.get(me)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter(|(_, n)| d.get(*n).is_some_and(|&x| x + 1 == mine))
                    .map(|(p, _)| *p)
                    .collect()
            };
            if !next.is_empty() {
                hops.push((hi, next));
            }
        }
        out.insert(sw.name.clone(), hops);
    }
    out
}

/// The plan of every switch, by name. Routes are per host (/32 and /128): at the host's own
/// switch to its port, elsewhere to every neighbour one hop closer (a group when there are
/// several).
pub fn plan(t: &Topology) -> BTreeMap<String, SwitchPlan> {
    let switch_index = t.switch_indices();
    let hops = next_hops(t);
    let mut out = BTreeMap::new();
    for sw in &t.switches {
        let me = sw.name.as_str();
        let my_mac = mac_text(switch_mac(switch_index[me]));
        let mut plan = SwitchPlan {
            tm: tm_lines(t, me),
            ..SwitchPlan::default()
        };
        // One member per port: set_nhop to whatever is at its other end.
        for (p, dmac) in neighbour_macs(t, me) {
            plan.routes.push(format!(
                "act_prof_create_member ecmp_selector {p} set_nhop {} {my_mac} {p}",
                mac_text(dmac)
            ));
        }
        let mut groups: BTreeMap<BTreeSet<u16>, u32> = BTreeMap::new();
        let mut routes = Vec::new();
        for (hi, next) in &hops[me] {
            let h = &t.hosts[*hi];
            let (verb, target) = match next.len() {
                1 => ("table_indirect_add", u32::from(*next.first().unwrap_or(&0))),
                _ => {
                    let n = groups.len() as u32 + 1;
                    (
                        "table_indirect_add_with_group",
                        *groups.entry(next.clone()).or_insert(n),
                    )
                }
            };
            routes.push(format!("{verb} ipv4_lpm {}/32 => {target}", h.ipv4));
            routes.push(format!("{verb} ipv6_lpm {}/128 => {target}", h.ipv6));
        }
        for (members, id) in &groups {
            let m: Vec<String> = members.iter().map(u16::to_string).collect();
            plan.routes.push(format!(
                "act_prof_create_group ecmp_selector {id} {}",
                m.join(" ")
            ));
        }
        plan.routes.extend(routes);
        out.insert(sw.name.clone(), plan);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GenProps, LinkProps, fat_tree, leaf_spine};

    #[test]
    fn leaf_spine_leaves_spread_over_every_spine() {
        let t = leaf_spine(4, 4, 4, 2.0, LinkProps::default());
        let p = plan(&t);
        let leaf1 = &p["leaf1"];
        // A host on another leaf: a group of the four uplinks (ports 5-8).
        assert!(
            leaf1
                .routes
                .contains(&"act_prof_create_group ecmp_selector 1 5 6 7 8".to_string()),
            "{:?}",
            leaf1.routes
        );
        assert!(
            leaf1
                .routes
                .contains(&"table_indirect_add_with_group ipv4_lpm 10.0.2.1/32 => 1".to_string())
        );
        // Its own host: the host port.
        assert!(
            leaf1
                .routes
                .contains(&"table_indirect_add ipv4_lpm 10.0.1.1/32 => 1".to_string())
        );
        // A spine reaches each host through that host's leaf only.
        assert!(
            p["spine1"]
                .routes
                .contains(&"table_indirect_add ipv6_lpm fd00::3:2/128 => 3".to_string())
        );
        assert!(leaf1.tm.contains(&"set_port_rate 500000000 5".to_string()));
    }

    #[test]
    fn fat_tree_edges_use_both_aggregations() {
        let g = GenProps {
            host: LinkProps::default(),
            fabric: LinkProps::default(),
        };
        let t = fat_tree(4, g);
        let p = plan(&t);
        // Edge p1e1 reaches a host in pod 2 over both aggregation switches (ports 3 and 4).
        let e = &p["p1e1"];
        assert!(
            e.routes
                .contains(&"act_prof_create_group ecmp_selector 1 3 4".to_string())
        );
        // Every switch has a route to every host, twice (IPv4 and IPv6).
        for (name, sp) in &p {
            let n = sp.routes.iter().filter(|r| r.contains("_lpm")).count();
            assert_eq!(n, 32, "{name}");
        }
    }
}
