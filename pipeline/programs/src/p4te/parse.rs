//! The headers P4TE reads and rewrites: Ethernet (one optional 802.1Q tag), IPv4 or IPv6, TCP or
//! UDP; and the class and flag bits of the IPv4 ToS / IPv6 Traffic Class byte.

use pipeline::metadata::HeaderKind;
use pipeline::wire::{
    self, EtherType, EthernetFrame, Icmpv6Packet, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket,
    UdpPacket, VlanTag, checksum,
};

/// Traffic-class tag of a latency-sensitive short flow [P Fig. 5d, §7.1].
pub const CLASS_SHORT: u8 = 0x08;
/// Traffic-class tag of a throughput-oriented large flow.
pub const CLASS_LARGE: u8 = 0x10;
/// The bits of the ToS byte holding the class tag.
pub const CLASS_MASK: u8 = 0x18;
/// Flag (a), set by the source leaf: "no rate control for the next B bytes" [P §4.3.1]; its
/// place in the ToS byte is ours [X].
pub const FLAG_A: u8 = 0x20;
/// Flag (b): "rate control already applied by a switch on this path" [X: place].
pub const FLAG_B: u8 = 0x40;
/// Both flags together mark a FACK on its way to the source leaf (a data packet never carries
/// both: (a) is set only by the first switch, before anyone could set (b)) [X].
pub const FACK_MARK: u8 = FLAG_A | FLAG_B;
/// On a FACK: the window is to grow (INC); without it, to shrink (DEC) [X].
pub const FACK_INC: u8 = 0x80;
/// Every bit P4TE uses outside the class tag and ECN.
pub const P4TE_BITS: u8 = FLAG_A | FLAG_B | FACK_INC;

/// A flow's class, from its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Tagged 0x08.
    Short,
    /// Tagged 0x10.
    Large,
}

impl Class {
    /// Index of the class in per-class arrays.
    pub fn index(self) -> usize {
        match self {
            Class::Short => 0,
            Class::Large => 1,
        }
    }
}

/// A TCP header's fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tcp {
    pub seq: u32,
    pub ack: u32,
    /// Flags byte (FIN 0x01 … CWR 0x80).
    pub flags: u8,
    pub window: u16,
    /// Header length, bytes.
    pub header_len: usize,
    /// Payload bytes.
    pub payload_len: usize,
    /// The timestamp option (TSval, TSecr), if present.
    pub ts: Option<(u32, u32)>,
}

/// TCP flag bits.
pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_ACK: u8 = 0x10;

/// What the parser found.
#[derive(Clone, Copy, Debug, Default)]
pub struct Parsed {
    /// Offset of the L3 header.
    pub l3: usize,
    pub ipv4: bool,
    pub ipv6: bool,
    pub arp: bool,
    pub ndp: bool,
    /// IPv4 ToS or IPv6 Traffic Class.
    pub tos: u8,
    pub proto: u8,
    /// Addresses (IPv4 in the low 32 bits).
    pub src: u128,
    pub dst: u128,
    /// TTL or hop limit.
    pub ttl: u8,
    /// IPv6 flow label (0 for IPv4).
    pub flow_label: u32,
    /// Offset of the L4 header (0: none parsed).
    pub l4: usize,
    /// Length of the IP header (with options).
    pub ip_header_len: usize,
    pub sport: u16,
    pub dport: u16,
    pub tcp: Option<Tcp>,
}

pub type ParseResult = Result<Parsed, (HeaderKind, wire::Error)>;

/// Parses Ethernet, one optional 802.1Q tag, ARP / IPv4 / IPv6 and TCP / UDP / ICMPv6.
pub fn parse(data: &[u8]) -> ParseResult {
    let eth = EthernetFrame::new_checked(data).map_err(|e| (HeaderKind::Ethernet, e))?;
    let mut p = Parsed::default();
    let mut ether_type = eth.ethertype();
    let mut l3 = eth.header_len();
    if ether_type == EtherType::VLAN {
        let tag = VlanTag::new_checked(&data[l3..]).map_err(|e| (HeaderKind::Vlan, e))?;
        ether_type = tag.ethertype();
        l3 += tag.header_len();
    }
    p.l3 = l3;
    let rest = &data[l3..];
    let (l4, l4_off) = match ether_type {
        EtherType::ARP => {
            p.arp = true;
            return Ok(p);
        }
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(rest).map_err(|e| (HeaderKind::Ipv4, e))?;
            p.ipv4 = true;
            p.tos = rest[1];
            p.proto = ip.protocol().0;
            p.src = u128::from(u32::from(ip.src_addr()));
            p.dst = u128::from(u32::from(ip.dst_addr()));
            p.ttl = ip.ttl();
            p.ip_header_len = ip.header_len();
            if ip.frag_offset() != 0 {
                return Ok(p);
            }
            (
                &rest[ip.header_len()..usize::from(ip.total_len())],
                l3 + ip.header_len(),
            )
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked(rest).map_err(|e| (HeaderKind::Ipv6, e))?;
            p.ipv6 = true;
            p.tos = ip.traffic_class();
            p.proto = ip.next_header().0;
            p.src = u128::from(ip.src_addr());
            p.dst = u128::from(ip.dst_addr());
            p.ttl = ip.hop_limit();
            p.flow_label = ip.flow_label();
            p.ip_header_len = ip.header_len();
            let end = ip.header_len() + usize::from(ip.payload_len());
            (&rest[ip.header_len()..end], l3 + ip.header_len())
        }
        _ => return Ok(p),
    };
    p.l4 = l4_off;
    match IpProtocol(p.proto) {
        IpProtocol::TCP => {
            let tcp = TcpPacket::new_checked(l4).map_err(|e| (HeaderKind::Tcp, e))?;
            p.sport = tcp.src_port();
            p.dport = tcp.dst_port();
            let ts = tcp.option_iter().find_map(|o| match o {
                Ok(wire::TcpOption::Timestamp { tsval, tsecr }) => Some((tsval, tsecr)),
                _ => None,
            });
            p.tcp = Some(Tcp {
                seq: tcp.seq_number(),
                ack: tcp.ack_number(),
                flags: tcp.flags().0 as u8,
                window: tcp.window_len(),
                header_len: tcp.header_len(),
                payload_len: l4.len() - tcp.header_len(),
                ts,
            });
        }
        IpProtocol::UDP => {
            let udp = UdpPacket::new_checked(l4).map_err(|e| (HeaderKind::Udp, e))?;
            p.sport = udp.src_port();
            p.dport = udp.dst_port();
        }
        IpProtocol::ICMPV6 if p.ipv6 => {
            let icmp = Icmpv6Packet::new_checked(l4).map_err(|e| (HeaderKind::Icmpv6, e))?;
            p.ndp = (133..=137).contains(&icmp.msg_type());
        }
        _ => {}
    }
    Ok(p)
}

impl Parsed {
    /// The flow's class, from its tag (None: untagged, or a FACK).
    pub fn class(&self) -> Option<Class> {
        if self.tos & FACK_MARK == FACK_MARK {
            return None;
        }
        match self.tos & CLASS_MASK {
            CLASS_SHORT => Some(Class::Short),
            CLASS_LARGE => Some(Class::Large),
            _ => None,
        }
    }

    /// A FACK on its way to the source leaf.
    pub fn is_fack(&self) -> bool {
        self.tos & FACK_MARK == FACK_MARK
    }

    /// A TCP segment carrying data (not SYN, FIN or RST).
    pub fn tcp_data(&self) -> Option<Tcp> {
        self.tcp
            .filter(|t| t.payload_len > 0 && t.flags & (TCP_SYN | TCP_FIN | TCP_RST) == 0)
    }

    /// The flowlet key: source address and port, destination address and port, and the IPv6
    /// flow label (the protocol for IPv4 [A-P4TE-21]) [P Alg. 2 l.3].
    pub fn flowlet_key(&self, buf: &mut [u8; 40]) -> usize {
        self.key(buf, false, true)
    }

    /// The key of the flow in per-flow rate-control state, as the data's direction sees it:
    /// `swap` for a packet travelling the other way (an ACK or FACK toward the data's source).
    pub fn flow_key(&self, buf: &mut [u8; 40], swap: bool) -> usize {
        self.key(buf, swap, false)
    }

    fn key(&self, buf: &mut [u8; 40], swap: bool, label: bool) -> usize {
        let (a, ap, b, bp) = if swap {
            (self.dst, self.dport, self.src, self.sport)
        } else {
            (self.src, self.sport, self.dst, self.dport)
        };
        let w = if self.ipv4 { 4 } else { 16 };
        buf[..w].copy_from_slice(&a.to_be_bytes()[16 - w..]);
        buf[w..w + 2].copy_from_slice(&ap.to_be_bytes());
        buf[w + 2..2 * w + 2].copy_from_slice(&b.to_be_bytes()[16 - w..]);
        buf[2 * w + 2..2 * w + 4].copy_from_slice(&bp.to_be_bytes());
        let mut n = 2 * w + 4;
        if label {
            let l = if self.ipv4 {
                u32::from(self.proto)
            } else {
                self.flow_label
            };
            buf[n..n + 4].copy_from_slice(&l.to_be_bytes());
            n += 4;
        }
        n
    }
}

/// Rewrites the ToS / Traffic Class byte of the parsed packet in `frame` to `tos` (the IPv4
/// header checksum updated incrementally, RFC 1624).
pub fn set_tos(frame: &mut [u8], p: &Parsed, tos: u8) {
    if p.ipv4 {
        let l3 = p.l3;
        let old = u16::from_be_bytes([frame[l3], frame[l3 + 1]]);
        frame[l3 + 1] = tos;
        let new = u16::from_be_bytes([frame[l3], tos]);
        let sum = u16::from_be_bytes([frame[l3 + 10], frame[l3 + 11]]);
        let sum = checksum::update16(sum, old, new);
        frame[l3 + 10..l3 + 12].copy_from_slice(&sum.to_be_bytes());
    } else if p.ipv6 {
        let mut ip = Ipv6Packet::new_unchecked(&mut frame[p.l3..]);
        ip.set_traffic_class(tos);
    }
}

/// Decrements the TTL / hop limit (IPv4 checksum updated).
pub fn decrement_ttl(frame: &mut [u8], p: &Parsed) {
    let l3 = &mut frame[p.l3..];
    if p.ipv4 {
        Ipv4Packet::new_unchecked(l3).decrement_ttl_update_checksum();
    } else {
        Ipv6Packet::new_unchecked(l3).decrement_hop_limit();
    }
}
