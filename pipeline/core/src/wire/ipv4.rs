//! IPv4 (RFC 791).

use std::net::Ipv4Addr;

use super::checksum;
use super::{Error, IpProtocol, OptionBytes, Result, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::wire::Field;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const TOTAL_LEN: Field = 2..4;
    pub(super) const IDENT: Field = 4..6;
    pub(super) const FLAGS_FRAG: Field = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Field = 10..12;
    pub(super) const SRC: Field = 12..16;
    pub(super) const DST: Field = 16..20;
    pub(super) const OPTIONS: usize = 20;
}

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = field::OPTIONS;
/// Maximum length of an IPv4 header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

/// A zero-copy view of an IPv4 packet. The buffer may extend beyond `total_len` (link padding);
/// [`payload`](Self::payload) stops at `total_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    super::view_constructors!();

    /// Validates: buffer ≥ 20 bytes (`Truncated`), version 4 (`BadVersion`), IHL ≥ 5 and
    /// IHL·4 ≤ buffer (`BadIhl`), IHL·4 ≤ total length (`BadLength`), total length ≤ buffer
    /// (`Truncated`).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        if d.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if d[field::VER_IHL] >> 4 != 4 {
            return Err(Error::BadVersion);
        }
        let hl = self.header_len();
        if hl < MIN_HEADER_LEN || hl > d.len() {
            return Err(Error::BadIhl);
        }
        let tl = usize::from(self.total_len());
        if tl < hl {
            return Err(Error::BadLength);
        }
        if tl > d.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Version nibble.
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// IHL in 32-bit words.
    #[inline]
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0f
    }

    /// Header length in bytes (IHL·4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// Differentiated services code point.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification bits.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length (header + payload).
    #[inline]
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::TOTAL_LEN.start)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT.start)
    }

    #[inline]
    fn flags_frag(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::FLAGS_FRAG.start)
    }

    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & 0x4000 != 0
    }

    /// More-fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & 0x2000 != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & 0x1fff) << 3
    }

    /// True if this is a fragment (MF set or non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & 0x3fff != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Alias of [`protocol`](Self::protocol), matching the IPv6 view.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        self.protocol()
    }

    /// Header checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from_bits(get_u32(self.buffer.as_ref(), field::SRC.start))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from_bits(get_u32(self.buffer.as_ref(), field::DST.start))
    }

    /// Option bytes (between byte 20 and the header length).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// Payload: from the header length to the total length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// True if the header checksum verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(&self.buffer.as_ref()[..self.header_len()]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (v << 4);
    }

    /// Sets the header length in bytes (a multiple of 4 in 20..=60).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len.is_multiple_of(4) && (MIN_HEADER_LEN..=MAX_HEADER_LEN).contains(&len));
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the DSCP (6 bits).
    #[inline]
    pub fn set_dscp(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (v << 2);
    }

    /// Sets the ECN bits (2 bits).
    #[inline]
    pub fn set_ecn(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (v & 0x03);
    }

    /// Sets the total length.
    #[inline]
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::TOTAL_LEN.start, v);
    }

    /// Sets the identification.
    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT.start, v);
    }

    #[inline]
    fn set_flags_frag(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::FLAGS_FRAG.start, v);
    }

    /// Sets the don't-fragment flag.
    #[inline]
    pub fn set_dont_frag(&mut self, v: bool) {
        let f = self.flags_frag() & !0x4000;
        self.set_flags_frag(f | if v { 0x4000 } else { 0 });
    }

    /// Sets the more-fragments flag.
    #[inline]
    pub fn set_more_frags(&mut self, v: bool) {
        let f = self.flags_frag() & !0x2000;
        self.set_flags_frag(f | if v { 0x2000 } else { 0 });
    }

    /// Sets the fragment offset in bytes (must be a multiple of 8).
    #[inline]
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let f = self.flags_frag() & !0x1fff;
        self.set_flags_frag(f | (bytes >> 3));
    }

    /// Sets the TTL (checksum not updated).
    #[inline]
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol.
    #[inline]
    pub fn set_protocol(&mut self, v: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = v.0;
    }

    /// Sets the stored checksum.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Sets the source address (checksum not updated).
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        set_u32(self.buffer.as_mut(), field::SRC.start, a.to_bits());
    }

    /// Sets the destination address (checksum not updated).
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        set_u32(self.buffer.as_mut(), field::DST.start, a.to_bits());
    }

    /// Mutable option bytes.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..hl]
    }

    /// Mutable payload (header length to total length).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[hl..tl]
    }

    /// Recomputes and stores the header checksum.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.buffer.as_ref()[..hl]);
        self.set_checksum(c);
    }

    /// Decrements the TTL (saturating at 0) and updates the checksum incrementally
    /// (RFC 1624). Returns the new TTL; a TTL of 0 is left untouched.
    #[inline]
    pub fn decrement_ttl_update_checksum(&mut self) -> u8 {
        let ttl = self.ttl();
        if ttl == 0 {
            return 0;
        }
        let proto = u16::from(self.protocol().0);
        let old = (u16::from(ttl) << 8) | proto;
        let new = old - 0x0100;
        let c = checksum::update16(self.checksum(), old, new);
        self.set_ttl(ttl - 1);
        self.set_checksum(c);
        ttl - 1
    }

    /// Rewrites the source address, updating the header checksum incrementally.
    #[inline]
    pub fn set_src_addr_update_checksum(&mut self, a: Ipv4Addr) {
        let c = checksum::update32(self.checksum(), self.src_addr().to_bits(), a.to_bits());
        self.set_src_addr(a);
        self.set_checksum(c);
    }

    /// Rewrites the destination address, updating the header checksum incrementally.
    #[inline]
    pub fn set_dst_addr_update_checksum(&mut self, a: Ipv4Addr) {
        let c = checksum::update32(self.checksum(), self.dst_addr().to_bits(), a.to_bits());
        self.set_dst_addr(a);
        self.set_checksum(c);
    }
}

/// Owned IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// Payload length (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't fragment.
    pub dont_frag: bool,
    /// More fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes (multiple of 8).
    pub frag_offset: u16,
    /// Raw options (multiple of 4, ≤ 40 bytes).
    pub options: OptionBytes,
}

impl Ipv4Repr {
    /// Parses a header, verifying its checksum (`BadChecksum`).
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        Ok(Ipv4Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: usize::from(p.total_len()) - p.header_len(),
            ttl: p.ttl(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            options: OptionBytes::new(p.options())?,
        })
    }

    /// Header length (20 + options).
    #[inline]
    pub fn buffer_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len()
    }

    /// Writes the header (total length = header + `payload_len`) and fills the checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv4Packet<T>) {
        let hl = self.buffer_len();
        p.set_version(4);
        p.set_header_len(hl);
        p.set_dscp(self.dscp);
        p.set_ecn(self.ecn);
        p.set_total_len((hl + self.payload_len) as u16);
        p.set_ident(self.ident);
        p.set_flags_frag(
            if self.dont_frag { 0x4000 } else { 0 }
                | if self.more_frags { 0x2000 } else { 0 }
                | (self.frag_offset >> 3),
        );
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.options_mut().copy_from_slice(self.options.as_slice());
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// IHL 6 with a Router Alert option, DF, TTL 64, TCP, 10.0.0.1 -> 10.0.0.2, 4-byte payload.
    const PACKET: [u8; 28] = [
        0x46, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00, //
        0x40, 0x06, 0x7f, 0xa1, 10, 0, 0, 1, 10, 0, 0, 2, //
        0x94, 0x04, 0x00, 0x00, // router alert
        0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn parse_fixture() {
        let p = Ipv4Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!((p.version(), p.ihl(), p.header_len()), (4, 6, 24));
        assert_eq!(
            (p.dscp(), p.ecn(), p.total_len(), p.ident()),
            (0, 0, 28, 0x1234)
        );
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(
            (p.frag_offset(), p.ttl(), p.protocol()),
            (0, 64, IpProtocol::TCP)
        );
        assert_eq!(p.checksum(), 0x7fa1);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(p.options(), &[0x94, 0x04, 0, 0]);
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn emit_fixture() {
        let r = Ipv4Repr::parse(&Ipv4Packet::new_checked(&PACKET[..]).unwrap()).unwrap();
        assert_eq!(r.payload_len, 4);
        let mut buf = [0u8; 28];
        buf[24..].copy_from_slice(&PACKET[24..]);
        assert_eq!(r.buffer_len(), 24);
        r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, PACKET);
    }

    #[test]
    fn payload_excludes_link_padding() {
        let mut buf = [0u8; 46];
        buf[..28].copy_from_slice(&PACKET);
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload().len(), 4);
    }

    #[test]
    fn malformed() {
        let with = |f: &dyn Fn(&mut [u8; 28])| {
            let mut b = PACKET;
            f(&mut b);
            Ipv4Packet::new_checked(b).map(|_| ())
        };
        assert_eq!(with(&|b| b[0] = 0x66), Err(Error::BadVersion));
        assert_eq!(with(&|b| b[0] = 0x44), Err(Error::BadIhl));
        assert_eq!(with(&|b| b[0] = 0x40), Err(Error::BadIhl));
        assert_eq!(with(&|b| b[0] = 0x48), Err(Error::BadIhl)); // 32 > 28 bytes
        assert_eq!(with(&|b| b[3] = 23), Err(Error::BadLength)); // total < IHL*4
        assert_eq!(with(&|b| b[3] = 29), Err(Error::Truncated)); // total > buffer
        assert_eq!(with(&|b| b[11] ^= 1), Ok(()));
        let mut b = PACKET;
        b[11] ^= 1;
        assert_eq!(
            Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&b[..])),
            Err(Error::BadChecksum)
        );
        for n in 0..PACKET.len() {
            assert!(Ipv4Packet::new_checked(&PACKET[..n]).is_err(), "len {n}");
        }
    }

    #[test]
    fn ttl_decrement_and_rewrite_keep_checksum_valid() {
        let mut b = PACKET;
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        assert_eq!(p.decrement_ttl_update_checksum(), 63);
        assert!(p.verify_checksum());
        p.set_src_addr_update_checksum(Ipv4Addr::new(192, 168, 255, 254));
        p.set_dst_addr_update_checksum(Ipv4Addr::new(1, 2, 3, 4));
        assert!(p.verify_checksum());
        p.set_ttl(0);
        p.fill_checksum();
        assert_eq!(p.decrement_ttl_update_checksum(), 0);
        assert!(p.verify_checksum());
    }

    #[test]
    fn etherparse_cross_check() {
        use etherparse::{IpNumber, Ipv4Header, Ipv4Options};
        let mut h = Ipv4Header::new(100, 17, IpNumber::UDP, [172, 16, 0, 1], [8, 8, 8, 8]).unwrap();
        h.options = Ipv4Options::try_from(&[0x94u8, 4, 0, 0, 1, 1, 1, 0][..]).unwrap();
        h.set_payload_len(100).unwrap();
        h.identification = 0xbeef;
        h.more_fragments = true;
        h.dont_fragment = false;
        h.fragment_offset = 10.try_into().unwrap();
        h.header_checksum = h.calc_header_checksum();
        let mut bytes = h.to_bytes().to_vec();
        bytes.resize(h.header_len() + 100, 0xab);
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.checksum(), h.header_checksum);
        assert_eq!(p.header_len(), 28);
        assert_eq!(p.options(), h.options.as_slice());
        assert_eq!(
            (p.ttl(), p.protocol(), p.ident()),
            (17, IpProtocol::UDP, 0xbeef)
        );
        assert!(p.more_frags() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 80);
        assert_eq!(p.payload().len(), 100);
        assert_eq!(p.dst_addr(), Ipv4Addr::new(8, 8, 8, 8));
    }

    fn arb_repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            (
                any::<u32>(),
                any::<u32>(),
                any::<u8>(),
                0usize..64,
                any::<u8>(),
            ),
            (
                0u8..64,
                0u8..4,
                any::<u16>(),
                any::<bool>(),
                any::<bool>(),
                0u16..8192,
            ),
            proptest::collection::vec(any::<u8>(), 0..=10),
        )
            .prop_map(
                |((s, d, proto, plen, ttl), (dscp, ecn, ident, df, mf, off), words)| {
                    let opts: Vec<u8> = words.iter().flat_map(|w| [*w, 1, 1, 1]).collect();
                    Ipv4Repr {
                        src_addr: Ipv4Addr::from_bits(s),
                        dst_addr: Ipv4Addr::from_bits(d),
                        protocol: IpProtocol(proto),
                        payload_len: plen,
                        ttl,
                        dscp,
                        ecn,
                        ident,
                        dont_frag: df,
                        more_frags: mf,
                        frag_offset: off << 3,
                        options: OptionBytes::new(&opts).unwrap(),
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(mut data in proptest::collection::vec(any::<u8>(), 0..100), v4 in any::<bool>()) {
            if v4 && !data.is_empty() {
                data[0] = 0x40 | (data[0] & 0x0f);
            }
            if let Ok(p) = Ipv4Packet::new_checked(&data[..]) {
                let _ = (p.version(), p.ihl(), p.dscp(), p.ecn(), p.total_len(), p.ident());
                let _ = (p.dont_frag(), p.more_frags(), p.frag_offset(), p.ttl(), p.protocol());
                let _ = (p.checksum(), p.src_addr(), p.dst_addr(), p.options(), p.payload());
                let _ = (p.verify_checksum(), Ipv4Repr::parse(&p));
            }
        }

        #[test]
        fn truncation_is_an_error(r in arb_repr(), cut in any::<prop::sample::Index>()) {
            let mut buf = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
            let n = cut.index(buf.len());
            prop_assert!(Ipv4Packet::new_checked(&buf[..n]).is_err());
        }

        #[test]
        fn repr_roundtrip(r in arb_repr()) {
            let mut buf = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
            let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(Ipv4Repr::parse(&p), Ok(r));
        }

        #[test]
        fn incremental_ttl_matches_full(r in arb_repr()) {
            let mut buf = vec![0u8; r.buffer_len() + r.payload_len];
            r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
            let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
            p.decrement_ttl_update_checksum();
            let inc = p.checksum();
            p.fill_checksum();
            prop_assert_eq!(inc, p.checksum());
        }
    }
}
