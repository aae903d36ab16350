//! The ToRs of a fabric (the switches with hosts) and, for each, the address prefixes that cover
//! its hosts and no other host of the fabric: what a key matches to tell a packet's source or
//! destination ToR (DBB's pair identification, A-DBB-3 in docs/dbb.md; `spray`'s per-ToR routes).
//!
//! A ToR's prefix is the longest one common to all its hosts' addresses (`10.0.1.0/30` for
//! `10.0.1.1`-`10.0.1.4`). If that prefix would also cover a host of another switch (hand-written
//! topologies need not number racks apart), the ToR gets one full-length prefix per host instead.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::Topology;

/// A switch with hosts and the prefixes of its hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tor {
    /// The switch.
    pub switch: String,
    /// Its hosts, as indices into `Topology::hosts`.
    pub hosts: Vec<usize>,
    /// IPv4 prefixes (value, length) covering exactly its hosts among the fabric's.
    pub v4: Vec<(u128, u8)>,
    /// IPv6 prefixes (value, length) covering exactly its hosts among the fabric's.
    pub v6: Vec<(u128, u8)>,
}

/// The mask of a `len`-bit prefix of a `width`-bit value.
pub fn prefix_mask(len: u8, width: u8) -> u128 {
    if len == 0 {
        0
    } else {
        (u128::MAX << (128 - u32::from(len.min(width)))) >> (128 - u32::from(width))
    }
}

/// Prefixes that cover every address of `mine` and none of `others` (`width`-bit addresses).
fn cover(mine: &[u128], others: &[u128], width: u8) -> Vec<(u128, u8)> {
    let Some(&first) = mine.first() else {
        return Vec::new();
    };
    let diff = mine.iter().fold(0u128, |acc, &a| acc | (a ^ first));
    let len = if diff == 0 {
        width
    } else {
        // diff < 2^width, so it has at least 128 - width leading zeros.
        (diff.leading_zeros() - (128 - u32::from(width))) as u8
    };
    let mask = prefix_mask(len, width);
    if others.iter().any(|&o| o & mask == first & mask) {
        mine.iter().map(|&a| (a, width)).collect()
    } else {
        vec![(first & mask, len)]
    }
}

/// The ToRs of `t`, in topology order, with their hosts' prefixes.
pub fn tors(t: &Topology) -> Vec<Tor> {
    let attached: Vec<Option<&str>> = t
        .hosts
        .iter()
        .map(|h| t.host_attachment(&h.name).map(|(s, _)| s))
        .collect();
    let v4 = |i: usize| u128::from(u32::from(t.hosts[i].ipv4));
    let v6 = |i: usize| u128::from(t.hosts[i].ipv6);
    t.switches
        .iter()
        .filter_map(|s| {
            let (mine, others): (Vec<usize>, Vec<usize>) =
                (0..t.hosts.len()).partition(|&i| attached[i] == Some(s.name.as_str()));
            if mine.is_empty() {
                return None;
            }
            let addrs = |f: &dyn Fn(usize) -> u128, v: &[usize]| v.iter().map(|&i| f(i)).collect();
            let (m4, o4): (Vec<u128>, Vec<u128>) = (addrs(&v4, &mine), addrs(&v4, &others));
            let (m6, o6): (Vec<u128>, Vec<u128>) = (addrs(&v6, &mine), addrs(&v6, &others));
            Some(Tor {
                switch: s.name.clone(),
                v4: cover(&m4, &o4, 32),
                v6: cover(&m6, &o6, 128),
                hosts: mine,
            })
        })
        .collect()
}

impl Tor {
    /// Its IPv4 prefixes as LPM keys of the command language (`10.0.1.0/30`).
    pub fn v4_lpm(&self) -> Vec<String> {
        self.v4
            .iter()
            .map(|&(v, l)| format!("{}/{l}", Ipv4Addr::from(v as u32)))
            .collect()
    }

    /// Its IPv6 prefixes as LPM keys (`fd00::1:0/126`).
    pub fn v6_lpm(&self) -> Vec<String> {
        self.v6
            .iter()
            .map(|&(v, l)| format!("{}/{l}", Ipv6Addr::from(v)))
            .collect()
    }

    /// Its IPv4 prefixes as ternary keys (`10.0.1.0&&&255.255.255.252`).
    pub fn v4_ternary(&self) -> Vec<String> {
        self.v4
            .iter()
            .map(|&(v, l)| {
                let m = prefix_mask(l, 32) as u32;
                format!("{}&&&{}", Ipv4Addr::from(v as u32), Ipv4Addr::from(m))
            })
            .collect()
    }

    /// Its IPv6 prefixes as ternary keys.
    pub fn v6_ternary(&self) -> Vec<String> {
        self.v6
            .iter()
            .map(|&(v, l)| {
                let m = prefix_mask(l, 128);
                format!("{}&&&{}", Ipv6Addr::from(v), Ipv6Addr::from(m))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkProps, leaf_spine};

    #[test]
    fn generated_racks_get_one_prefix_each() {
        let t = leaf_spine(2, 2, 4, 1.0, LinkProps::default());
        let tors = tors(&t);
        assert_eq!(tors.len(), 2);
        assert_eq!(tors[0].switch, "leaf1");
        assert_eq!(tors[0].hosts, vec![0, 1, 2, 3]);
        // 10.0.1.1 - 10.0.1.4 share 29 bits: 10.0.1.0/29.
        assert_eq!(tors[0].v4_lpm(), vec!["10.0.1.0/29"]);
        assert_eq!(tors[0].v4_ternary(), vec!["10.0.1.0&&&255.255.255.248"]);
        assert_eq!(tors[1].v6_lpm(), vec!["fd00::2:0/125"]);
        assert_eq!(prefix_mask(0, 32), 0);
        assert_eq!(prefix_mask(32, 32), 0xffff_ffff);
        assert_eq!(prefix_mask(128, 128), u128::MAX);
    }

    #[test]
    fn interleaved_racks_fall_back_to_one_prefix_per_host() {
        let t = Topology::parse(
            "switch a\nswitch b\n\
             host h1 ipv4=10.0.0.1 ipv6=fd00::1\nhost h2 ipv4=10.0.0.3 ipv6=fd00::3\n\
             host h3 ipv4=10.0.0.2 ipv6=fd00::2\n\
             link a:1 h1\nlink a:2 h2\nlink b:1 h3\nlink a:3 b:2\n",
        )
        .unwrap();
        let tors = tors(&t);
        // 10.0.0.1 and 10.0.0.3 share 10.0.0.0/30, which holds b's 10.0.0.2.
        assert_eq!(tors[0].v4_lpm(), vec!["10.0.0.1/32", "10.0.0.3/32"]);
        assert_eq!(tors[1].v4_lpm(), vec!["10.0.0.2/32"]);
    }
}
