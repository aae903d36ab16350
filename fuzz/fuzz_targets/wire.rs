//! Every wire view on arbitrary bytes: `new_checked` then every getter must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline::wire::*;

fuzz_target!(|data: &[u8]| {
    if let Ok(eth) = EthernetFrame::new_checked(data) {
        let _ = (eth.dst_addr(), eth.src_addr(), eth.ethertype(), eth.payload());
        let _ = EthernetRepr::parse(&eth);
    }
    if let Ok(v) = VlanTag::new_checked(data) {
        let _ = VlanRepr::parse(&v);
    }
    if let Ok(a) = ArpPacket::new_checked(data) {
        let _ = ArpRepr::parse(&a);
    }
    if let Ok(ip) = Ipv4Packet::new_checked(data) {
        let _ = (ip.options(), ip.payload(), ip.verify_checksum(), ip.src_addr(), ip.dst_addr());
        let _ = Ipv4Repr::parse(&ip);
    }
    if let Ok(ip) = Ipv6Packet::new_checked(data) {
        let _ = (ip.payload(), ip.flow_label(), ip.src_addr(), ip.dst_addr());
        let _ = Ipv6Repr::parse(&ip);
    }
    if let Ok(t) = TcpPacket::new_checked(data) {
        let _ = (t.flags(), t.options(), t.payload());
        for o in t.option_iter() {
            let _ = o;
        }
        let _ = TcpRepr::parse(&t);
    }
    if let Ok(u) = UdpPacket::new_checked(data) {
        let _ = (u.payload(), UdpRepr::parse(&u));
    }
    if let Ok(i) = IcmpPacket::new_checked(data) {
        let _ = IcmpRepr::parse(&i);
    }
    if let Ok(i) = Icmpv6Packet::new_checked(data) {
        let _ = (i.ndp_target_addr(), i.source_ll_addr(), i.target_ll_addr());
        for o in i.ndp_option_iter() {
            let _ = o;
        }
    }
    if let Ok(p) = PfcFrame::new_checked(data) {
        let _ = (p.class_pause_times(), PfcRepr::parse(&p));
    }
});
