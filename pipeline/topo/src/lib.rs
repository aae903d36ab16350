//! Fabrics as data: the topology format and its generators (this module), what each switch of a
//! fabric is told ([`plan`]), and the ToRs' address prefixes ([`tors`]). Both the namespace
//! tooling (`pisa-fabric`) and the simulator (`pisa-sim`) read topologies and program switches
//! from these, so a fabric behaves the same in both.
//!
//! Fabric topologies: a plain-text format a person can write by hand, and generators for the
//! topologies of the papers (leaf-spine, k-ary fat-tree, P4QCN's and DBB's).
//!
//! ```text
//! # 2 hosts behind one switch
//! defaults rate=1G delay=10us buffer=256
//! switch s1 program=basic
//! host h1 ipv4=10.0.1.1 ipv6=fd00::1:1
//! host h2 ipv4=10.0.1.2 ipv6=fd00::1:2
//! link s1:1 h1
//! link s1:2 h2 rate=100M delay=50us
//! ```
//!
//! `switch NAME [program=P]`; `host NAME ipv4=A ipv6=A`; `link END END [rate=R] [delay=D]
//! [buffer=N]` where an end is `SWITCH:PORT` or `HOST`. Rates take K/M/G suffixes (bits/s), delays
//! `us` or `ms`, buffers are packets per egress queue. `defaults` sets what links leave out. Link
//! rate, delay and buffer are enforced by the switches' traffic managers on both ends' egress.

pub mod plan;
pub mod tors;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Where a switch sits in the fabric (programs such as P4TE act by role).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A leaf (hosts below, spines above).
    Leaf,
    /// A spine.
    Spine,
    /// A top-of-rack (edge) switch.
    Tor,
    /// An aggregation switch.
    Agg,
    /// A core switch.
    Core,
}

impl Role {
    /// The role's name in the topology format.
    pub fn name(self) -> &'static str {
        match self {
            Role::Leaf => "leaf",
            Role::Spine => "spine",
            Role::Tor => "tor",
            Role::Agg => "agg",
            Role::Core => "core",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        Ok(match s {
            "leaf" => Role::Leaf,
            "spine" => Role::Spine,
            "tor" => Role::Tor,
            "agg" => Role::Agg,
            "core" => Role::Core,
            _ => return Err(format!("unknown role {s} (leaf, spine, tor, agg or core)")),
        })
    }
}

/// A switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Name (unique among nodes).
    pub name: String,
    /// The program it runs (a registry name, optionally a scheme such as `p4te-nra`).
    pub program: String,
    /// Its role, if the file or the generator gave one (plans derive it otherwise).
    pub role: Option<Role>,
    /// A 32-bit id, unique in the fabric (default: position among the switches, from 1).
    pub switch_id: u32,
    /// Further `key=value` parameters for the program's fabric plan.
    pub params: BTreeMap<String, String>,
}

/// A host (a namespace with the kernel's stack).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Name (unique among nodes).
    pub name: String,
    /// IPv4 address.
    pub ipv4: Ipv4Addr,
    /// IPv6 address.
    pub ipv6: Ipv6Addr,
}

/// One end of a link.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum End {
    /// A switch port.
    Switch(String, u16),
    /// A host's only interface.
    Host(String),
}

impl End {
    /// The node's name.
    pub fn node(&self) -> &str {
        match self {
            End::Switch(n, _) | End::Host(n) => n,
        }
    }
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Switch(n, p) => write!(f, "{n}:{p}"),
            End::Host(n) => write!(f, "{n}"),
        }
    }
}

/// Properties of a link (each direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkProps {
    /// Bits per second.
    pub rate_bps: u64,
    /// Propagation delay, microseconds.
    pub delay_us: u64,
    /// Egress queue depth, packets.
    pub buffer: u32,
}

impl Default for LinkProps {
    fn default() -> Self {
        LinkProps {
            rate_bps: 1_000_000_000,
            delay_us: 0,
            buffer: 256,
        }
    }
}

/// A link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// One end.
    pub a: End,
    /// The other end.
    pub b: End,
    /// Its properties.
    pub props: LinkProps,
}

/// A fabric.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Switches.
    pub switches: Vec<Switch>,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Links.
    pub links: Vec<Link>,
}

/// A rate in bits/s, with an optional K, M or G suffix.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1_000),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1_000_000),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1_000_000_000),
        _ => (s, 1),
    };
    let v: f64 = num.parse().map_err(|_| format!("bad rate {s}"))?;
    Ok((v * mult as f64) as u64)
}

/// A delay in microseconds, written with a `us` or `ms` suffix (or none: us).
pub fn parse_delay(s: &str) -> Result<u64, String> {
    if let Some(ms) = s.strip_suffix("ms") {
        let v: f64 = ms.parse().map_err(|_| format!("bad delay {s}"))?;
        return Ok((v * 1000.0) as u64);
    }
    let us = s.strip_suffix("us").unwrap_or(s);
    us.parse().map_err(|_| format!("bad delay {s}"))
}

/// A rate in bits/s as `parse_rate` reads it: `100M`, `2G`, `1500K`, `999`.
pub fn fmt_rate(bps: u64) -> String {
    match bps {
        b if b % 1_000_000_000 == 0 => format!("{}G", b / 1_000_000_000),
        b if b % 1_000_000 == 0 => format!("{}M", b / 1_000_000),
        b if b % 1_000 == 0 => format!("{}K", b / 1_000),
        b => b.to_string(),
    }
}

fn props(words: &[&str], mut p: LinkProps) -> Result<LinkProps, String> {
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, got {w}"))?;
        match k {
            "rate" => p.rate_bps = parse_rate(v)?,
            "delay" => p.delay_us = parse_delay(v)?,
            "buffer" => p.buffer = v.parse().map_err(|_| format!("bad buffer {v}"))?,
            _ => return Err(format!("unknown link property {k}")),
        }
    }
    Ok(p)
}

impl Topology {
    /// Parses the text format.
    pub fn parse(text: &str) -> Result<Topology, String> {
        let mut t = Topology::default();
        let mut defaults = LinkProps::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = |e: String| format!("line {}: {e}", n + 1);
            match words.as_slice() {
                [] => {}
                ["defaults", rest @ ..] => defaults = props(rest, defaults).map_err(at)?,
                ["switch", name, rest @ ..] => {
                    let mut sw = Switch {
                        name: name.to_string(),
                        program: "basic".to_string(),
                        role: None,
                        switch_id: u32::try_from(t.switches.len() + 1).unwrap_or(u32::MAX),
                        params: BTreeMap::new(),
                    };
                    for w in rest {
                        match w.split_once('=') {
                            Some(("program", p)) => sw.program = p.to_string(),
                            Some(("role", r)) => sw.role = Some(r.parse().map_err(at)?),
                            Some(("switch_id", v)) => {
                                sw.switch_id = v
                                    .parse()
                                    .map_err(|_| at(format!("bad switch_id {v} (32 bits)")))?;
                            }
                            Some((k, v)) if !k.is_empty() => {
                                sw.params.insert(k.to_string(), v.to_string());
                            }
                            _ => return Err(at(format!("unknown switch option {w}"))),
                        }
                    }
                    t.switches.push(sw);
                }
                ["host", name, rest @ ..] => {
                    let (mut v4, mut v6) = (None, None);
                    for w in rest {
                        match w.split_once('=') {
                            Some(("ipv4", a)) => {
                                v4 = Some(a.parse().map_err(|_| at(format!("bad IPv4 {a}")))?);
                            }
                            Some(("ipv6", a)) => {
                                v6 = Some(a.parse().map_err(|_| at(format!("bad IPv6 {a}")))?);
                            }
                            _ => return Err(at(format!("unknown host option {w}"))),
                        }
                    }
                    t.hosts.push(Host {
                        name: name.to_string(),
                        ipv4: v4.ok_or_else(|| at("host without ipv4=".into()))?,
                        ipv6: v6.ok_or_else(|| at("host without ipv6=".into()))?,
                    });
                }
                ["link", a, b, rest @ ..] => {
                    let end = |s: &str| -> Result<End, String> {
                        Ok(match s.split_once(':') {
                            Some((n, p)) => End::Switch(
                                n.to_string(),
                                p.parse().map_err(|_| format!("bad port in {s}"))?,
                            ),
                            None => End::Host(s.to_string()),
                        })
                    };
                    t.links.push(Link {
                        a: end(a).map_err(at)?,
                        b: end(b).map_err(at)?,
                        props: props(rest, defaults).map_err(at)?,
                    });
                }
                _ => return Err(at(format!("cannot read {line:?}"))),
            }
        }
        t.check()?;
        Ok(t)
    }

    /// Checks names, ports and links.
    pub fn check(&self) -> Result<(), String> {
        let mut names = HashSet::new();
        for n in self
            .switches
            .iter()
            .map(|s| &s.name)
            .chain(self.hosts.iter().map(|h| &h.name))
        {
            if !names.insert(n.as_str()) {
                return Err(format!("node {n} defined twice"));
            }
            if n.len() > 8 || !n.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(format!(
                    "node name {n}: use at most 8 letters and digits (it names namespaces)"
                ));
            }
        }
        let mut ids = HashSet::new();
        for s in &self.switches {
            if !ids.insert(s.switch_id) {
                return Err(format!(
                    "switch {}: switch_id {} is used twice",
                    s.name, s.switch_id
                ));
            }
        }
        let switches: HashSet<&str> = self.switches.iter().map(|s| s.name.as_str()).collect();
        let hosts: HashSet<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
        let mut used = HashSet::new();
        let mut host_links = HashMap::new();
        for l in &self.links {
            for e in [&l.a, &l.b] {
                match e {
                    End::Switch(n, p) => {
                        if !switches.contains(n.as_str()) {
                            return Err(format!("link end {e}: no switch {n}"));
                        }
                        if *p == 0 || *p >= 500 {
                            return Err(format!("link end {e}: ports are 1..=499"));
                        }
                    }
                    End::Host(n) => {
                        if !hosts.contains(n.as_str()) {
                            return Err(format!("link end {e}: no host {n}"));
                        }
                        *host_links.entry(n.as_str()).or_insert(0) += 1;
                    }
                }
                if !used.insert(e.clone()) {
                    return Err(format!("link end {e} used twice"));
                }
            }
            if matches!((&l.a, &l.b), (End::Host(_), End::Host(_))) {
                return Err(format!("link {} {}: hosts connect to switches", l.a, l.b));
            }
            if l.props.rate_bps == 0 || l.props.buffer == 0 {
                return Err(format!("link {} {}: rate and buffer must be > 0", l.a, l.b));
            }
        }
        let mut addrs = HashSet::new();
        for h in &self.hosts {
            if host_links.get(h.name.as_str()) != Some(&1) {
                return Err(format!("host {} needs exactly one link", h.name));
            }
            for a in [h.ipv4.to_string(), h.ipv6.to_string()] {
                if !addrs.insert(a.clone()) {
                    return Err(format!("address {a} of host {} is used twice", h.name));
                }
            }
        }
        Ok(())
    }

    /// The text form.
    pub fn to_text(&self, comment: &str) -> String {
        let mut s = String::new();
        for l in comment.lines() {
            let _ = writeln!(s, "# {l}");
        }
        for sw in &self.switches {
            let _ = write!(s, "switch {} program={}", sw.name, sw.program);
            if let Some(r) = sw.role {
                let _ = write!(s, " role={}", r.name());
            }
            let _ = write!(s, " switch_id={}", sw.switch_id);
            for (k, v) in &sw.params {
                let _ = write!(s, " {k}={v}");
            }
            s.push('\n');
        }
        for h in &self.hosts {
            let _ = writeln!(s, "host {} ipv4={} ipv6={}", h.name, h.ipv4, h.ipv6);
        }
        for l in &self.links {
            let _ = writeln!(
                s,
                "link {} {} rate={} delay={}us buffer={}",
                l.a,
                l.b,
                fmt_rate(l.props.rate_bps),
                l.props.delay_us,
                l.props.buffer
            );
        }
        s
    }

    /// The topology with every switch running `program`, with `params` (`key=value` of the
    /// switch lines) added to each.
    pub fn with_program(mut self, program: &str, params: &[(&str, &str)]) -> Self {
        for s in &mut self.switches {
            s.program = program.into();
            for (k, v) in params {
                s.params.insert((*k).into(), (*v).into());
            }
        }
        self
    }

    /// The role of switch `name`: the one its line gives, else derived from the wiring: a
    /// switch with hosts is a leaf; one whose switch neighbours all have hosts is a spine; one
    /// with some such neighbours is an aggregation switch; the rest are cores.
    pub fn role_of(&self, name: &str) -> Option<Role> {
        let sw = self.switches.iter().find(|s| s.name == name)?;
        if let Some(r) = sw.role {
            return Some(r);
        }
        let has_hosts = |n: &str| {
            self.links.iter().any(|l| {
                matches!((&l.a, &l.b), (End::Switch(s, _), End::Host(_)) | (End::Host(_), End::Switch(s, _)) if s == n)
            })
        };
        if has_hosts(name) {
            return Some(Role::Leaf);
        }
        let neighbours: Vec<&str> = self
            .links
            .iter()
            .filter_map(|l| match (&l.a, &l.b) {
                (End::Switch(a, _), End::Switch(b, _)) if a == name => Some(b.as_str()),
                (End::Switch(a, _), End::Switch(b, _)) if b == name => Some(a.as_str()),
                _ => None,
            })
            .collect();
        let leaves = neighbours.iter().filter(|n| has_hosts(n)).count();
        Some(if leaves > 0 && leaves == neighbours.len() {
            Role::Spine
        } else if leaves > 0 {
            Role::Agg
        } else {
            Role::Core
        })
    }

    /// Each switch's index in `switches` (its MAC, management address and simulator slot
    /// follow from it), by name.
    pub fn switch_indices(&self) -> BTreeMap<&str, usize> {
        self.switches
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i))
            .collect()
    }

    /// Each host's index in `hosts`, by name.
    pub fn host_indices(&self) -> BTreeMap<&str, usize> {
        self.hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.as_str(), i))
            .collect()
    }

    /// The switch a host hangs off, and the port.
    pub fn host_attachment(&self, host: &str) -> Option<(&str, u16)> {
        self.links.iter().find_map(|l| match (&l.a, &l.b) {
            (End::Host(h), End::Switch(s, p)) | (End::Switch(s, p), End::Host(h)) if h == host => {
                Some((s.as_str(), *p))
            }
            _ => None,
        })
    }

    /// Per switch: its ports and what is at the other end.
    pub fn ports(&self) -> BTreeMap<&str, BTreeMap<u16, (&End, &LinkProps)>> {
        let mut out: BTreeMap<&str, BTreeMap<u16, (&End, &LinkProps)>> = self
            .switches
            .iter()
            .map(|s| (s.name.as_str(), BTreeMap::new()))
            .collect();
        for l in &self.links {
            for (me, other) in [(&l.a, &l.b), (&l.b, &l.a)] {
                if let End::Switch(n, p) = me {
                    out.entry(n.as_str())
                        .or_default()
                        .insert(*p, (other, &l.props));
                }
            }
        }
        out
    }
}

/// Link properties for generated topologies.
#[derive(Clone, Copy, Debug)]
pub struct GenProps {
    /// Host links.
    pub host: LinkProps,
    /// Switch-to-switch links (leaf-spine: set from the oversubscription).
    pub fabric: LinkProps,
}

/// Generated addresses: 10.0.G.N and fd00::G:N, for G <= 255 groups of N <= 254 hosts (the
/// generators check their sizes against that).
fn host_addr(group: usize, n: usize) -> (Ipv4Addr, Ipv6Addr) {
    let (g, n) = (group as u8, (n + 1) as u8);
    (
        Ipv4Addr::new(10, 0, g, n),
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, u16::from(g), u16::from(n)),
    )
}

fn add_host(
    t: &mut Topology,
    name: String,
    group: usize,
    n: usize,
    sw: &str,
    port: u16,
    p: LinkProps,
) {
    let (ipv4, ipv6) = host_addr(group, n);
    t.hosts.push(Host {
        name: name.clone(),
        ipv4,
        ipv6,
    });
    t.links.push(Link {
        a: End::Switch(sw.to_string(), port),
        b: End::Host(name),
        props: p,
    });
}

fn switch(t: &mut Topology, name: String, role: Role) {
    let switch_id = u32::try_from(t.switches.len() + 1).unwrap_or(u32::MAX);
    t.switches.push(Switch {
        name,
        program: "basic".into(),
        role: Some(role),
        switch_id,
        params: BTreeMap::new(),
    });
}

/// A leaf-spine: every leaf connects to every spine; `hosts_per_leaf` hosts per leaf. With
/// `oversubscription` r, each uplink runs at `hosts_per_leaf * host rate / (spines * r)`.
pub fn leaf_spine(
    leaves: usize,
    spines: usize,
    hosts_per_leaf: usize,
    oversubscription: f64,
    host: LinkProps,
) -> Topology {
    let mut t = Topology::default();
    let uplink = LinkProps {
        rate_bps: (hosts_per_leaf as f64 * host.rate_bps as f64
            / (spines as f64 * oversubscription.max(0.01))) as u64,
        ..host
    };
    for s in 0..spines {
        switch(&mut t, format!("spine{}", s + 1), Role::Spine);
    }
    for l in 0..leaves {
        let leaf = format!("leaf{}", l + 1);
        switch(&mut t, leaf.clone(), Role::Leaf);
        for h in 0..hosts_per_leaf {
            let name = format!("h{}", l * hosts_per_leaf + h + 1);
            add_host(&mut t, name, l + 1, h, &leaf, (h + 1) as u16, host);
        }
        for s in 0..spines {
            t.links.push(Link {
                a: End::Switch(leaf.clone(), (hosts_per_leaf + s + 1) as u16),
                b: End::Switch(format!("spine{}", s + 1), (l + 1) as u16),
                props: uplink,
            });
        }
    }
    t
}

/// A k-ary fat-tree (k even): (k/2)^2 cores, k pods of k/2 aggregation and k/2 edge switches,
/// k/2 hosts per edge switch; k^3/4 hosts and 5k^2/4 switches in all.
pub fn fat_tree(k: usize, p: GenProps) -> Topology {
    let half = k / 2;
    let mut t = Topology::default();
    for c in 0..half * half {
        switch(&mut t, format!("core{}", c + 1), Role::Core);
    }
    for pod in 0..k {
        for a in 0..half {
            let agg = format!("p{}a{}", pod + 1, a + 1);
            switch(&mut t, agg.clone(), Role::Agg);
            // Aggregation a connects to cores a*half+1 ..= a*half+half, on its ports half+1...
            for c in 0..half {
                t.links.push(Link {
                    a: End::Switch(agg.clone(), (half + c + 1) as u16),
                    b: End::Switch(format!("core{}", a * half + c + 1), (pod + 1) as u16),
                    props: p.fabric,
                });
            }
        }
        for e in 0..half {
            let edge = format!("p{}e{}", pod + 1, e + 1);
            switch(&mut t, edge.clone(), Role::Tor);
            for h in 0..half {
                let n = pod * half * half + e * half + h + 1;
                add_host(
                    &mut t,
                    format!("h{n}"),
                    pod * half + e + 1,
                    h,
                    &edge,
                    (h + 1) as u16,
                    p.host,
                );
            }
            for a in 0..half {
                t.links.push(Link {
                    a: End::Switch(edge.clone(), (half + a + 1) as u16),
                    b: End::Switch(format!("p{}a{}", pod + 1, a + 1), (e + 1) as u16),
                    props: p.fabric,
                });
            }
        }
    }
    t
}

/// P4QCN's topology (P4QCN §4, Fig. 10): 2 spines, 4 leaves, 4 ToRs. The paper's host and ToR
/// attachment is not in the text; ours [I]: each ToR hangs off two leaves (ToRs 1-2 off leaves
/// 1-2, ToRs 3-4 off leaves 3-4), every leaf connects to both spines, and ToR r has hosts
/// `host<r>1`.. `host<r><hosts_per_tor>`.
pub fn p4qcn(hosts_per_tor: usize, p: GenProps) -> Topology {
    let mut t = Topology::default();
    for s in 1..=2 {
        switch(&mut t, format!("spine{s}"), Role::Spine);
    }
    for l in 1..=4 {
        switch(&mut t, format!("leaf{l}"), Role::Leaf);
        for s in 1..=2u16 {
            t.links.push(Link {
                a: End::Switch(format!("leaf{l}"), 2 + s),
                b: End::Switch(format!("spine{s}"), l),
                props: p.fabric,
            });
        }
    }
    for r in 1..=4usize {
        let tor = format!("tor{r}");
        switch(&mut t, tor.clone(), Role::Tor);
        let first_leaf = if r <= 2 { 1 } else { 3 };
        for (i, leaf) in [first_leaf, first_leaf + 1].iter().enumerate() {
            let leaf_port = if r % 2 == 1 { 1 } else { 2 };
            t.links.push(Link {
                a: End::Switch(tor.clone(), (hosts_per_tor + i + 1) as u16),
                b: End::Switch(format!("leaf{leaf}"), leaf_port),
                props: p.fabric,
            });
        }
        // Named as the paper names them: host11 is host 1 of ToR 1.
        for h in 0..hosts_per_tor {
            add_host(
                &mut t,
                format!("host{r}{}", h + 1),
                r,
                h,
                &tor,
                (h + 1) as u16,
                p.host,
            );
        }
    }
    t
}

/// DBB's evaluation topology (DBB §IV): 8 switches, 12 hosts, every stage four parallel
/// paths. The paper's wiring (its Fig. 6) is not in the text; this one is our reading [I]: ToR s1
/// (hosts h1-h8) sprays over s2-s5, which pair up into s6 and s7, which reach ToR s8 (hosts
/// h9-h12) over two links each.
pub fn dbb(p: GenProps) -> Topology {
    let mut t = Topology::default();
    for s in 1..=8 {
        // The two ToRs at the ends, the stages between them aggregation switches.
        let role = if s == 1 || s == 8 {
            Role::Tor
        } else {
            Role::Agg
        };
        switch(&mut t, format!("s{s}"), role);
    }
    let fabric: &[(&str, u16, &str, u16)] = &[
        ("s1", 9, "s2", 1),
        ("s1", 10, "s3", 1),
        ("s1", 11, "s4", 1),
        ("s1", 12, "s5", 1),
        ("s2", 2, "s6", 1),
        ("s3", 2, "s6", 2),
        ("s4", 2, "s7", 1),
        ("s5", 2, "s7", 2),
        ("s6", 3, "s8", 5),
        ("s6", 4, "s8", 6),
        ("s7", 3, "s8", 7),
        ("s7", 4, "s8", 8),
    ];
    for &(a, pa, b, pb) in fabric {
        t.links.push(Link {
            a: End::Switch(a.into(), pa),
            b: End::Switch(b.into(), pb),
            props: p.fabric,
        });
    }
    for n in 0..8 {
        add_host(
            &mut t,
            format!("h{}", n + 1),
            1,
            n,
            "s1",
            (n + 1) as u16,
            p.host,
        );
    }
    for n in 0..4 {
        add_host(
            &mut t,
            format!("h{}", n + 9),
            8,
            n,
            "s8",
            (n + 1) as u16,
            p.host,
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_lines_carry_program_role_id_and_parameters() {
        let t = Topology::parse(
            "switch leaf1 program=p4te role=leaf switch_id=17 gap_us=500\n\
             switch s2\n\
             host h1 ipv4=10.0.1.1 ipv6=fd00::1:1\n\
             link leaf1:1 h1\n\
             link leaf1:2 s2:1\n",
        )
        .unwrap();
        let l = &t.switches[0];
        assert_eq!(
            (l.program.as_str(), l.role, l.switch_id),
            ("p4te", Some(Role::Leaf), 17)
        );
        assert_eq!(l.params.get("gap_us").map(String::as_str), Some("500"));
        // Defaults: basic, no role given (derived from the wiring), id = position from 1.
        let s = &t.switches[1];
        assert_eq!(
            (s.program.as_str(), s.role, s.switch_id),
            ("basic", None, 2)
        );
        assert_eq!(t.role_of("s2"), Some(Role::Spine));
        assert_eq!(Topology::parse(&t.to_text("")).unwrap(), t);
        for bad in [
            "switch a role=boss",
            "switch a switch_id=x",
            "switch a switch_id=4294967296",
            "switch a switch_id=1\nswitch b switch_id=1",
        ] {
            assert!(Topology::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn roles_are_derived_from_the_wiring_when_missing() {
        let p = GenProps {
            host: LinkProps::default(),
            fabric: LinkProps::default(),
        };
        let mut t = fat_tree(4, p);
        t.switches.iter_mut().for_each(|s| s.role = None);
        assert_eq!(t.role_of("p1e1"), Some(Role::Leaf));
        assert_eq!(t.role_of("p1a1"), Some(Role::Agg));
        assert_eq!(t.role_of("core1"), Some(Role::Core));
        assert_eq!(t.role_of("nosuch"), None);
    }

    #[test]
    fn text_round_trips() {
        let t = leaf_spine(4, 4, 4, 2.0, LinkProps::default());
        let back = Topology::parse(&t.to_text("4x4")).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn sizes_and_oversubscription() {
        let t = leaf_spine(4, 4, 4, 2.0, LinkProps::default());
        assert_eq!(
            (t.switches.len(), t.hosts.len(), t.links.len()),
            (8, 16, 32)
        );
        let up = t
            .links
            .iter()
            .find(|l| matches!(l.b, End::Switch(..)))
            .unwrap();
        assert_eq!(up.props.rate_bps, 500_000_000);
        let p = GenProps {
            host: LinkProps::default(),
            fabric: LinkProps::default(),
        };
        let f = fat_tree(4, p);
        assert_eq!(
            (f.switches.len(), f.hosts.len(), f.links.len()),
            (20, 16, 48)
        );
        f.check().unwrap();
        let q = p4qcn(2, p);
        assert_eq!((q.switches.len(), q.hosts.len()), (10, 8));
        q.check().unwrap();
        let d = dbb(p);
        assert_eq!((d.switches.len(), d.hosts.len()), (8, 12));
        d.check().unwrap();
    }

    #[test]
    fn parse_errors_say_where() {
        let e = Topology::parse("switch s1\nlink s1:1 h9\n").unwrap_err();
        assert!(e.contains("link end h9: no host h9"), "{e}");
        let e = Topology::parse("switch s1\nlink s1:x h1\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("bad port"), "{e}");
        let e = Topology::parse("switch s1\nswitch s1\n").unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let t = Topology::parse(
            "defaults rate=100M delay=1ms\nswitch s1\nhost h1 ipv4=10.0.0.1 ipv6=fd00::1\nlink s1:1 h1 buffer=64\n",
        )
        .unwrap();
        assert_eq!(
            t.links[0].props,
            LinkProps {
                rate_bps: 100_000_000,
                delay_us: 1000,
                buffer: 64
            }
        );
    }
}
