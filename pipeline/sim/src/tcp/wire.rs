//! A [`Segment`] on the wire: an Ethernet/IPv4/TCP or Ethernet/IPv6/TCP frame with Linux's
//! option layout and valid checksums, its payload zeros; and back.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use pipeline::wire::{IpProtocol, checksum};

use super::segment::{MAX_SACK_BLOCKS, SYN, Segment};

/// Who a frame is from and to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ends {
    /// Destination MAC.
    pub dmac: [u8; 6],
    /// Source MAC.
    pub smac: [u8; 6],
    /// Source address (both addresses of one family).
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

const NOP: u8 = 1;

/// The IP header's length for `e`'s family.
fn ip_header_len(e: &Ends) -> usize {
    if e.src.is_ipv4() { 20 } else { 40 }
}

/// Writes `s` from `e` into `out` (cleared first). `dscp_tos` is the ToS byte's (IPv6: the
/// traffic class's) DSCP part; its ECN bits are the segment's: ECT(0) when `s.ect`.
pub fn encode(out: &mut Vec<u8>, e: &Ends, dscp_tos: u8, s: &Segment) {
    let th = s.header_len();
    let ih = ip_header_len(e);
    let seg_len = th + s.len as usize;
    let tos = (dscp_tos & !3) | if s.ect { 2 } else { 0 };
    out.clear();
    out.resize(14 + ih + seg_len, 0);
    out[0..6].copy_from_slice(&e.dmac);
    out[6..12].copy_from_slice(&e.smac);
    let pseudo = match (e.src, e.dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            out[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip = &mut out[14..34];
            ip[0] = 0x45;
            ip[1] = tos;
            ip[2..4].copy_from_slice(&((ih + seg_len) as u16).to_be_bytes());
            ip[6] = 0x40; // DF
            ip[8] = 64;
            ip[9] = 6;
            ip[12..16].copy_from_slice(&src.octets());
            ip[16..20].copy_from_slice(&dst.octets());
            let sum = checksum::checksum(ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            checksum::pseudo_header_v4(src, dst, IpProtocol(6), seg_len as u32)
        }
        (src, dst) => {
            let (src, dst) = (v6(src), v6(dst));
            out[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            let ip = &mut out[14..54];
            // Version 6, the traffic class, flow label 0.
            ip[0..4].copy_from_slice(&((6u32 << 28) | (u32::from(tos) << 20)).to_be_bytes());
            ip[4..6].copy_from_slice(&(seg_len as u16).to_be_bytes());
            ip[6] = 6;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&src.octets());
            ip[24..40].copy_from_slice(&dst.octets());
            checksum::pseudo_header_v6(src, dst, IpProtocol(6), seg_len as u32)
        }
    };
    let l4 = 14 + ih;
    let t = &mut out[l4..l4 + th];
    t[0..2].copy_from_slice(&e.sport.to_be_bytes());
    t[2..4].copy_from_slice(&e.dport.to_be_bytes());
    t[4..8].copy_from_slice(&s.seq.to_be_bytes());
    t[8..12].copy_from_slice(&s.ack.to_be_bytes());
    t[12] = ((th / 4) as u8) << 4;
    t[13] = s.flags;
    t[14..16].copy_from_slice(&s.window.to_be_bytes());
    let mut o = 20;
    let mut put = |bytes: &[u8]| {
        t[o..o + bytes.len()].copy_from_slice(bytes);
        o += bytes.len();
    };
    if let Some(m) = s.mss {
        put(&[2, 4]);
        put(&m.to_be_bytes());
    }
    match (s.ts, s.sack_permitted) {
        (Some((v, r)), sp) => {
            put(&if sp { [4, 2] } else { [NOP, NOP] });
            put(&[8, 10]);
            put(&v.to_be_bytes());
            put(&r.to_be_bytes());
        }
        (None, true) => put(&[NOP, NOP, 4, 2]),
        (None, false) => {}
    }
    if let Some(w) = s.wscale {
        put(&[NOP, 3, 3, w]);
    }
    if s.sack_n > 0 {
        put(&[NOP, NOP, 5, 2 + 8 * s.sack_n]);
        for &(l, r) in s.sack_blocks() {
            put(&l.to_be_bytes());
            put(&r.to_be_bytes());
        }
    }
    // The payload is zeros: only the header counts.
    let sum = !checksum::combine(&[pseudo, checksum::sum(&out[l4..l4 + th])]);
    out[l4 + 16..l4 + 18].copy_from_slice(&sum.to_be_bytes());
}

/// An address as IPv6 (an IPv4 one mapped, which `encode` never mixes with IPv6).
fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V6(a) => a,
        IpAddr::V4(a) => a.to_ipv6_mapped(),
    }
}

/// Reads a TCP segment from an Ethernet/IPv4 or Ethernet/IPv6 frame: the segment, whether the
/// IP header says CE, and its ends; `None` for anything else.
pub fn decode(frame: &[u8]) -> Option<(Segment, bool, Ends)> {
    let (ip, t, th) = locate(frame)?;
    let ecn = if ip[0] >> 4 == 4 {
        ip[1] & 3
    } else {
        (ip[1] >> 4) & 3
    };
    let mut s = Segment {
        seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        ack: u32::from_be_bytes([t[8], t[9], t[10], t[11]]),
        flags: t[13],
        window: u16::from_be_bytes([t[14], t[15]]),
        len: (t.len() - th) as u32,
        ect: ecn != 0,
        ..Segment::default()
    };
    let mut opts = &t[20..th];
    while let Some(&kind) = opts.first() {
        match kind {
            0 => break,
            NOP => {
                opts = &opts[1..];
                continue;
            }
            _ => {}
        }
        let len = usize::from(*opts.get(1)?);
        if len < 2 || len > opts.len() {
            return None;
        }
        let body = &opts[2..len];
        match (kind, body.len()) {
            (2, 2) => s.mss = Some(u16::from_be_bytes([body[0], body[1]])),
            (3, 1) => s.wscale = Some(body[0]),
            (4, 0) => s.sack_permitted = true,
            (8, 8) => {
                s.ts = Some((
                    u32::from_be_bytes([body[0], body[1], body[2], body[3]]),
                    u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
                ));
            }
            (5, n) if n % 8 == 0 => {
                for b in body.chunks_exact(8).take(MAX_SACK_BLOCKS) {
                    s.sack[usize::from(s.sack_n)] = (
                        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                        u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
                    );
                    s.sack_n += 1;
                }
            }
            _ => {}
        }
        opts = &opts[len..];
    }
    if s.flags & SYN == 0 {
        s.mss = None;
        s.wscale = None;
        s.sack_permitted = false;
    }
    Some((s, ecn == 3, ends_of(frame, ip, t)?))
}

/// The IP header, the TCP segment and its header's length, of an Ethernet/IPv4/TCP or
/// Ethernet/IPv6/TCP frame (no IPv4 options' worth of IPv6 extension headers: TCP must follow
/// the fixed header, as our hosts send it).
fn locate(frame: &[u8]) -> Option<(&[u8], &[u8], usize)> {
    let ip = frame.get(14..)?;
    let (hl, total) = match frame.get(12..14)? {
        [0x08, 0x00] if ip.len() >= 20 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            if ip[0] >> 4 != 4 || ip[9] != 6 || ihl < 20 {
                return None;
            }
            (ihl, usize::from(u16::from_be_bytes([ip[2], ip[3]])))
        }
        [0x86, 0xdd] if ip.len() >= 40 => {
            if ip[0] >> 4 != 6 || ip[6] != 6 {
                return None;
            }
            (40, 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])))
        }
        _ => return None,
    };
    let total = total.min(ip.len());
    if total < hl + 20 {
        return None;
    }
    let t = &ip[hl..total];
    let th = usize::from(t[12] >> 4) * 4;
    (th >= 20 && th <= t.len()).then_some((ip, t, th))
}

fn ends_of(frame: &[u8], ip: &[u8], t: &[u8]) -> Option<Ends> {
    let (src, dst) = if ip[0] >> 4 == 4 {
        (
            IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15])),
            IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19])),
        )
    } else {
        let a = |o: usize| -> Option<IpAddr> {
            Some(IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(&ip[o..o + 16]).ok()?,
            )))
        };
        (a(8)?, a(24)?)
    };
    Some(Ends {
        dmac: frame[0..6].try_into().ok()?,
        smac: frame[6..12].try_into().ok()?,
        src,
        dst,
        sport: u16::from_be_bytes([t[0], t[1]]),
        dport: u16::from_be_bytes([t[2], t[3]]),
    })
}

/// Only who a TCP frame is from and to (what a host needs to find the connection a departing
/// frame belongs to, without reading its options).
pub fn ends(frame: &[u8]) -> Option<Ends> {
    let (ip, t, _) = locate(frame)?;
    ends_of(frame, ip, t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::segment::{ACK, CWR, ECE};

    fn ends() -> Ends {
        Ends {
            dmac: [2, 0, 0, 0, 0, 1],
            smac: [2, 0, 0, 0, 0, 2],
            src: Ipv4Addr::new(10, 0, 0, 1).into(),
            dst: Ipv4Addr::new(10, 0, 1, 1).into(),
            sport: 40_000,
            dport: 5001,
        }
    }

    #[test]
    fn segments_survive_the_wire_and_parse_as_real_tcp() {
        let syn = Segment {
            seq: 7,
            flags: SYN | ECE | CWR,
            window: 64_240,
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            ts: Some((123, 0)),
            ..Segment::default()
        };
        let mut data = Segment {
            seq: 1_000,
            ack: 2_000,
            flags: ACK,
            window: 500,
            len: 1448,
            ts: Some((5, 6)),
            ect: true,
            ..Segment::default()
        };
        data.sack[0] = (3_000, 4_000);
        data.sack[1] = (5_000, 6_000);
        data.sack_n = 2;
        let mut buf = Vec::new();
        for s in [syn, data] {
            encode(&mut buf, &ends(), 0x10, &s);
            assert_eq!(buf.len(), 14 + 20 + s.header_len() + s.len as usize);
            let (got, ce, e) = decode(&buf).unwrap();
            assert_eq!(got, s);
            assert!(!ce);
            assert_eq!(e, ends());
            assert_eq!(super::ends(&buf), Some(ends()));
            // etherparse reads the same header, options and a valid checksum.
            let p = etherparse::SlicedPacket::from_ethernet(&buf).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
                panic!("not IPv4")
            };
            assert_eq!(ip.header().dcp().value() << 2, 0x10);
            let Some(etherparse::TransportSlice::Tcp(t)) = &p.transport else {
                panic!("not TCP")
            };
            assert_eq!(t.sequence_number(), s.seq);
            let h = t.to_header();
            let want = h
                .calc_checksum_ipv4(&ip.header().to_header(), t.payload())
                .unwrap();
            assert_eq!(h.checksum, want);
        }
        // A switch's CE mark reads as CE.
        encode(&mut buf, &ends(), 0, &data);
        buf[15] |= 3;
        assert!(decode(&buf).unwrap().1);
    }

    #[test]
    fn ipv6_segments_survive_the_wire_and_parse_as_real_tcp() {
        let e = Ends {
            src: "fd00::1:1".parse().unwrap(),
            dst: "fd00::3:2".parse().unwrap(),
            ..ends()
        };
        let mut s = Segment {
            seq: 1_000,
            ack: 2_000,
            flags: ACK,
            window: 500,
            len: 1428,
            ts: Some((5, 6)),
            ect: true,
            ..Segment::default()
        };
        s.sack[0] = (3_000, 4_000);
        s.sack_n = 1;
        let mut buf = Vec::new();
        encode(&mut buf, &e, 0x10, &s);
        assert_eq!(buf.len(), 14 + 40 + s.header_len() + s.len as usize);
        let (got, ce, ends) = decode(&buf).unwrap();
        assert_eq!((got, ce, ends), (s, false, e));
        assert_eq!(super::ends(&buf), Some(e));
        let p = etherparse::SlicedPacket::from_ethernet(&buf).unwrap();
        let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else {
            panic!("not IPv6")
        };
        // The traffic class: the DSCP part and ECT(0).
        assert_eq!(ip.header().traffic_class(), 0x10 | 2);
        let Some(etherparse::TransportSlice::Tcp(t)) = &p.transport else {
            panic!("not TCP")
        };
        let h = t.to_header();
        let want = h
            .calc_checksum_ipv6(&ip.header().to_header(), t.payload())
            .unwrap();
        assert_eq!(h.checksum, want);
        // A switch's CE mark (the traffic class's low bits, in the first two bytes) reads as CE.
        buf[15] |= 3 << 4;
        assert!(decode(&buf).unwrap().1);
    }
}
