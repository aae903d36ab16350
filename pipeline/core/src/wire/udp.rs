//! UDP (RFC 768).

use super::checksum::{self, PseudoHeaderAddr};
use super::{Error, IpProtocol, Result, get_u16, set_u16};

mod field {
    use crate::wire::Field;
    pub(super) const SRC_PORT: Field = 0..2;
    pub(super) const DST_PORT: Field = 2..4;
    pub(super) const LENGTH: Field = 4..6;
    pub(super) const CHECKSUM: Field = 6..8;
}

/// Length of a UDP header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

/// A zero-copy view of a UDP datagram. The buffer may extend past `len()`; the payload and
/// checksum cover exactly `len()` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    super::view_constructors!();

    /// Validates: buffer ≥ 8 (`Truncated`), length field ≥ 8 (`BadLength`), length field ≤
    /// buffer (`Truncated`).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        if d.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = usize::from(self.len());
        if l < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if l > d.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Header length (8).
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT.start)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT.start)
    }

    /// Length field (header + payload).
    #[inline]
    #[allow(
        clippy::len_without_is_empty,
        reason = "a header field, not a container length"
    )]
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Checksum as stored (0 = none over IPv4).
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Payload: bytes 8..len.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// Verifies the checksum with the pseudo header of `src`/`dst`. Over IPv4 a stored
    /// checksum of 0 means "not computed" and verifies; over IPv6 it never does.
    #[inline]
    pub fn verify_checksum<A: PseudoHeaderAddr>(&self, src: A, dst: A) -> bool {
        if self.checksum() == 0 {
            return A::IS_V4;
        }
        let d = &self.buffer.as_ref()[..usize::from(self.len())];
        checksum::transport_sum(src, dst, IpProtocol::UDP, d) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT.start, v);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT.start, v);
    }

    /// Sets the length field.
    #[inline]
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH.start, v);
    }

    /// Sets the stored checksum.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Mutable payload (8..len).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..l]
    }

    /// Computes and stores the checksum over pseudo header + `len()` bytes. A computed 0 is
    /// transmitted as 0xffff (RFC 768).
    #[inline]
    pub fn fill_checksum<A: PseudoHeaderAddr>(&mut self, src: A, dst: A) {
        self.set_checksum(0);
        let l = usize::from(self.len());
        let c = !checksum::transport_sum(src, dst, IpProtocol::UDP, &self.buffer.as_ref()[..l]);
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
}

/// Owned UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length (length field minus 8).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Parses the header (checksum not verified: it needs the IP addresses).
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Result<Self> {
        p.check_len()?;
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: usize::from(p.len()) - HEADER_LEN,
        })
    }

    /// Header length (8).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with checksum 0; call `fill_checksum` once the payload is in place.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut UdpPacket<T>) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len((HEADER_LEN + self.payload_len) as u16);
        p.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;

    /// DNS query header from 10.0.0.1:53000 to 10.0.0.2:53, 4-byte payload.
    const DATAGRAM: [u8; 12] = [0xcf, 0x08, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 1, 2, 3, 4];

    #[test]
    fn parse_and_emit_fixture() {
        let p = UdpPacket::new_checked(&DATAGRAM[..]).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.len(), p.checksum()),
            (53000, 53, 12, 0)
        );
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        assert!(
            p.verify_checksum(s, d),
            "zero checksum over IPv4 means none"
        );
        assert!(!p.verify_checksum(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST));
        let r = UdpRepr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 4);
        let mut buf = [0u8; 12];
        buf[8..].copy_from_slice(&DATAGRAM[8..]);
        let mut q = UdpPacket::new_unchecked(&mut buf[..]);
        r.emit(&mut q);
        assert_eq!(buf, DATAGRAM);
        let mut q = UdpPacket::new_unchecked(&mut buf[..]);
        q.fill_checksum(s, d);
        assert!(q.verify_checksum(s, d) && q.checksum() != 0);
        assert!(!q.verify_checksum(s, Ipv4Addr::new(10, 0, 0, 3)));
    }

    #[test]
    fn malformed() {
        let mut b = DATAGRAM;
        b[5] = 7;
        assert_eq!(UdpPacket::new_checked(&b[..]), Err(Error::BadLength));
        b[5] = 13;
        assert_eq!(UdpPacket::new_checked(&b[..]), Err(Error::Truncated));
        for n in 0..DATAGRAM.len() {
            assert_eq!(
                UdpPacket::new_checked(&DATAGRAM[..n]),
                Err(Error::Truncated)
            );
        }
    }

    #[test]
    fn etherparse_ipv6_udp_cross_check() {
        use crate::wire::{EtherType, EthernetFrame, Ipv6Packet};
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let payload = [0x5au8; 33];
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6(src, dst, 47)
            .udp(4789, 5353);
        let mut out = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut out, &payload).unwrap();
        let eth = EthernetFrame::new_checked(&out[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::IPV6);
        let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
        assert_eq!((ip.hop_limit(), ip.next_header()), (47, IpProtocol::UDP));
        assert_eq!(ip.payload_len(), 41);
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(
            (udp.src_port(), udp.dst_port(), udp.len()),
            (4789, 5353, 41)
        );
        assert_eq!(udp.payload(), &payload);
        assert!(udp.verify_checksum(ip.src_addr(), ip.dst_addr()));
        let mut copy = ip.payload().to_vec();
        let mut u2 = UdpPacket::new_unchecked(&mut copy[..]);
        u2.fill_checksum(Ipv6Addr::from(src), Ipv6Addr::from(dst));
        assert_eq!(u2.checksum(), udp.checksum());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = UdpPacket::new_checked(&data[..]) {
                let _ = (p.src_port(), p.dst_port(), p.len(), p.checksum(), p.payload());
                let _ = p.verify_checksum(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
                let _ = p.verify_checksum(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
                let _ = UdpRepr::parse(&p);
            }
        }

        #[test]
        fn roundtrip_checksum_truncation(sp in any::<u16>(), dp in any::<u16>(),
                                         payload in proptest::collection::vec(any::<u8>(), 0..40),
                                         s in any::<u128>(), d in any::<u128>(),
                                         cut in any::<prop::sample::Index>()) {
            let r = UdpRepr { src_port: sp, dst_port: dp, payload_len: payload.len() };
            let mut buf = vec![0u8; r.buffer_len() + payload.len()];
            let mut p = UdpPacket::new_unchecked(&mut buf[..]);
            r.emit(&mut p);
            p.payload_mut().copy_from_slice(&payload);
            let (s, d) = (Ipv6Addr::from_bits(s), Ipv6Addr::from_bits(d));
            p.fill_checksum(s, d);
            prop_assert!(p.verify_checksum(s, d));
            prop_assert_eq!(UdpRepr::parse(&UdpPacket::new_checked(&buf[..]).unwrap()), Ok(r));
            prop_assert!(UdpPacket::new_checked(&buf[..cut.index(buf.len())]).is_err());
        }
    }
}
