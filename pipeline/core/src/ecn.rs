//! Setting ECN CE on an ECN-capable IPv4 or IPv6 packet in place (RFC 3168), for the traffic
//! manager's marking threshold.

use crate::wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, VlanTag, checksum};

/// Sets CE when the packet is IPv4/IPv6 with ECT(0) or ECT(1); returns whether it did.
pub fn mark_ce(frame: &mut [u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(&*frame) else {
        return false;
    };
    let mut ethertype = eth.ethertype();
    let mut l3 = eth.header_len();
    if ethertype == EtherType::VLAN {
        let Ok(tag) = VlanTag::new_checked(&frame[l3..]) else {
            return false;
        };
        ethertype = tag.ethertype();
        l3 += tag.header_len();
    }
    let rest = &mut frame[l3..];
    match ethertype {
        EtherType::IPV4 => {
            let (b0, b1) = match rest {
                [b0, b1, ..] => (*b0, *b1),
                _ => return false,
            };
            let Ok(mut ip) = Ipv4Packet::new_checked(rest) else {
                return false;
            };
            let ecn = ip.ecn();
            if ecn == 0 || ecn == 3 {
                return false;
            }
            ip.set_ecn(3);
            let old = u16::from_be_bytes([b0, b1]);
            let new = u16::from_be_bytes([b0, b1 | 3]);
            let sum = checksum::update16(ip.checksum(), old, new);
            ip.set_checksum(sum);
            true
        }
        EtherType::IPV6 => {
            let Ok(mut ip) = Ipv6Packet::new_checked(rest) else {
                return false;
            };
            let tc = ip.traffic_class();
            if tc & 3 == 0 || tc & 3 == 3 {
                return false;
            }
            ip.set_traffic_class(tc | 3);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    #[test]
    fn marks_ect_ipv4_with_a_valid_checksum() {
        let b = PacketBuilder::ethernet2([2; 6], [3; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1, 2);
        let mut f = Vec::new();
        b.write(&mut f, b"x").unwrap();
        assert!(!mark_ce(&mut f), "not ECN-capable");
        f[15] |= 1; // ECT(1)
        let fix = etherparse::Ipv4HeaderSlice::from_slice(&f[14..])
            .unwrap()
            .to_header()
            .calc_header_checksum();
        f[24..26].copy_from_slice(&fix.to_be_bytes());
        assert!(mark_ce(&mut f));
        let h = etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).unwrap();
        assert_eq!(f[15] & 3, 3);
        assert_eq!(h.to_header().calc_header_checksum(), h.header_checksum());
        assert!(!mark_ce(&mut f), "already CE");
    }

    #[test]
    fn marks_ect_ipv6() {
        let b = PacketBuilder::ethernet2([2; 6], [3; 6])
            .ipv6([1; 16], [2; 16], 64)
            .udp(1, 2);
        let mut f = Vec::new();
        b.write(&mut f, b"x").unwrap();
        f[15] |= 0x20; // traffic class low bits live in the second byte's high nibble: ECT(0)
        assert!(mark_ce(&mut f));
        let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.traffic_class() & 3, 3);
    }
}
