//! IPv6 fixed header (RFC 8200). Extension headers are not walked: `next_header` names the
//! first one and `payload` starts right after the fixed 40 bytes.

use std::net::Ipv6Addr;

use super::{Error, IpProtocol, Result, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::wire::Field;
    pub(super) const VER_TC_FLOW: Field = 0..4;
    pub(super) const PAYLOAD_LEN: Field = 4..6;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC: Field = 8..24;
    pub(super) const DST: Field = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST.end;

/// A zero-copy view of an IPv6 packet. The buffer may extend past the payload (link padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    super::view_constructors!();

    /// Validates: buffer ≥ 40 (`Truncated`), version 6 (`BadVersion`), 40 + payload length ≤
    /// buffer (`Truncated`).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        if d.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::BadVersion);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > d.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Header length (40).
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    #[inline]
    fn ver_tc_flow(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW.start)
    }

    /// Version nibble.
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// DSCP part of the traffic class.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// ECN part of the traffic class.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 3
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header, extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PAYLOAD_LEN.start)
    }

    /// Next header (first extension header or upper-layer protocol).
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Ipv6Addr::from(a)
    }

    /// Payload: `payload_len` bytes after the fixed header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    #[inline]
    fn set_ver_tc_flow(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::VER_TC_FLOW.start, v);
    }

    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let w = self.ver_tc_flow() & 0x0fff_ffff;
        self.set_ver_tc_flow(w | (u32::from(v & 0xf) << 28));
    }

    /// Sets the traffic class.
    #[inline]
    pub fn set_traffic_class(&mut self, v: u8) {
        let w = self.ver_tc_flow() & 0xf00f_ffff;
        self.set_ver_tc_flow(w | (u32::from(v) << 20));
    }

    /// Sets the flow label (low 20 bits used).
    #[inline]
    pub fn set_flow_label(&mut self, v: u32) {
        let w = self.ver_tc_flow() & 0xfff0_0000;
        self.set_ver_tc_flow(w | (v & 0x000f_ffff));
    }

    /// Sets the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PAYLOAD_LEN.start, v);
    }

    /// Sets the next header.
    #[inline]
    pub fn set_next_header(&mut self, v: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v.0;
    }

    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Decrements the hop limit (saturating at 0) and returns the new value.
    #[inline]
    pub fn decrement_hop_limit(&mut self) -> u8 {
        let h = self.hop_limit().saturating_sub(1);
        self.set_hop_limit(h);
        h
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// Owned IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: IpProtocol,
    /// Payload length.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parses the fixed header.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<Self> {
        p.check_len()?;
        Ok(Ipv6Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: usize::from(p.payload_len()),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }

    /// Header length (40).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv6Packet<T>) {
        p.set_ver_tc_flow(
            (6 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff),
        );
        p.set_payload_len(self.payload_len as u16);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// TC 0xb8 (EF), flow 0x12345, 4-byte UDP-ish payload, hop limit 64, fe80::1 -> ff02::1.
    const PACKET: [u8; 44] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x04, 17, 64, //
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        1, 2, 3, 4,
    ];

    #[test]
    fn parse_and_emit_fixture() {
        let p = Ipv6Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(
            (p.version(), p.traffic_class(), p.dscp(), p.ecn()),
            (6, 0xb8, 46, 0)
        );
        assert_eq!(
            (p.flow_label(), p.payload_len(), p.hop_limit()),
            (0x12345, 4, 64)
        );
        assert_eq!(p.next_header(), IpProtocol::UDP);
        assert_eq!(p.src_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "ff02::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        let r = Ipv6Repr::parse(&p).unwrap();
        let mut buf = [0u8; 44];
        buf[40..].copy_from_slice(&PACKET[40..]);
        r.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PACKET);
    }

    #[test]
    fn malformed() {
        let mut b = PACKET;
        b[0] = 0x4b;
        assert_eq!(Ipv6Packet::new_checked(&b[..]), Err(Error::BadVersion));
        let mut b = PACKET;
        b[5] = 5;
        assert_eq!(Ipv6Packet::new_checked(&b[..]), Err(Error::Truncated));
        for n in 0..PACKET.len() {
            assert_eq!(Ipv6Packet::new_checked(&PACKET[..n]), Err(Error::Truncated));
        }
        let mut b = PACKET;
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        assert_eq!(p.decrement_hop_limit(), 63);
        p.set_flow_label(0xfffff);
        p.set_traffic_class(1);
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 1, 0xfffff)
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(mut data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if !data.is_empty() {
                data[0] = 0x60 | (data[0] & 0x0f);
            }
            if data.len() > 5 {
                data[4] = 0;
                data[5] &= 0x3f;
            }
            if let Ok(p) = Ipv6Packet::new_checked(&data[..]) {
                let _ = (p.version(), p.traffic_class(), p.flow_label(), p.payload_len());
                let _ = (p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr(), p.payload());
                let _ = Ipv6Repr::parse(&p);
            }
        }

        #[test]
        fn roundtrip_and_truncation(s in any::<u128>(), d in any::<u128>(), nh in any::<u8>(),
                                    plen in 0usize..32, hl in any::<u8>(), tc in any::<u8>(),
                                    fl in 0u32..0x10_0000, cut in any::<prop::sample::Index>()) {
            let r = Ipv6Repr {
                src_addr: Ipv6Addr::from_bits(s), dst_addr: Ipv6Addr::from_bits(d),
                next_header: IpProtocol(nh), payload_len: plen, hop_limit: hl,
                traffic_class: tc, flow_label: fl,
            };
            let mut buf = vec![0u8; r.buffer_len() + plen];
            r.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&buf[..]).unwrap()), Ok(r));
            prop_assert!(Ipv6Packet::new_checked(&buf[..cut.index(buf.len())]).is_err());
        }
    }
}
