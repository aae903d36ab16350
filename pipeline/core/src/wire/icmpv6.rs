//! ICMPv6 (RFC 4443) with Neighbor Discovery solicitation/advertisement (RFC 4861).

use std::net::Ipv6Addr;

use super::checksum;
use super::{Error, IpProtocol, MacAddr, Result, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::wire::{Field, Rest};
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: Field = 2..4;
    pub(super) const REST: Field = 4..8;
    pub(super) const ECHO_IDENT: Field = 4..6;
    pub(super) const ECHO_SEQ: Field = 6..8;
    pub(super) const NA_FLAGS: usize = 4;
    pub(super) const DATA: Rest = 8..;
    pub(super) const NDP_TARGET: Field = 8..24;
    pub(super) const NDP_OPTIONS: Rest = 24..;
}

/// Length of the ICMPv6 header.
pub const HEADER_LEN: usize = field::DATA.start;
/// Length of an NS/NA message without options.
pub const NDP_LEN: usize = field::NDP_OPTIONS.start;
/// Echo request.
pub const ECHO_REQUEST: u8 = 128;
/// Echo reply.
pub const ECHO_REPLY: u8 = 129;
/// Neighbor solicitation.
pub const NEIGHBOR_SOLICIT: u8 = 135;
/// Neighbor advertisement.
pub const NEIGHBOR_ADVERT: u8 = 136;
/// NDP option: source link-layer address.
pub const OPT_SOURCE_LL_ADDR: u8 = 1;
/// NDP option: target link-layer address.
pub const OPT_TARGET_LL_ADDR: u8 = 2;

const NA_ROUTER: u8 = 0x80;
const NA_SOLICITED: u8 = 0x40;
const NA_OVERRIDE: u8 = 0x20;

/// A parsed NDP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdpOption<'a> {
    /// Source link-layer address (type 1, Ethernet).
    SourceLinkLayerAddr(MacAddr),
    /// Target link-layer address (type 2, Ethernet).
    TargetLinkLayerAddr(MacAddr),
    /// Any other option (or a non-Ethernet link-layer address), data after type and length.
    Unknown {
        /// Option type.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

/// Iterator over NDP options; yields `Err(BadOption)` once and stops on a zero or overlong
/// length. Never panics.
#[derive(Debug, Clone)]
pub struct NdpOptionIter<'a> {
    data: &'a [u8],
}

impl<'a> NdpOptionIter<'a> {
    /// Iterates over raw option bytes.
    #[inline]
    pub fn new(data: &'a [u8]) -> Self {
        NdpOptionIter { data }
    }
}

impl<'a> Iterator for NdpOptionIter<'a> {
    type Item = Result<NdpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let d = self.data;
        if d.is_empty() {
            return None;
        }
        let len = d.get(1).map_or(0, |&l| usize::from(l) * 8);
        if len == 0 || len > d.len() {
            self.data = &[];
            return Some(Err(Error::BadOption));
        }
        self.data = &d[len..];
        let body = &d[2..len];
        Some(Ok(match (d[0], len) {
            (OPT_SOURCE_LL_ADDR, 8) => NdpOption::SourceLinkLayerAddr(MacAddr::from_bytes(body)),
            (OPT_TARGET_LL_ADDR, 8) => NdpOption::TargetLinkLayerAddr(MacAddr::from_bytes(body)),
            (kind, _) => NdpOption::Unknown { kind, data: body },
        }))
    }
}

/// A zero-copy view of an ICMPv6 message (the whole upper-layer payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    super::view_constructors!();

    /// Ensures the 8-byte header is present, and the 16-byte target for NS/NA (`Truncated`).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        if d.len() < HEADER_LEN || (self.is_ndp() && d.len() < NDP_LEN) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Header length (8).
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    #[inline]
    fn is_ndp(&self) -> bool {
        matches!(self.msg_type(), NEIGHBOR_SOLICIT | NEIGHBOR_ADVERT)
    }

    /// Message code.
    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// The 4 type-specific bytes after the checksum.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::REST.start)
    }

    /// Echo identifier.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_IDENT.start)
    }

    /// Echo sequence number.
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_SEQ.start)
    }

    /// NA router flag.
    #[inline]
    pub fn router_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & NA_ROUTER != 0
    }

    /// NA solicited flag.
    #[inline]
    pub fn solicited_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & NA_SOLICITED != 0
    }

    /// NA override flag.
    #[inline]
    pub fn override_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & NA_OVERRIDE != 0
    }

    /// Data after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// NS/NA target address; `None` for other types or a too-short buffer.
    #[inline]
    pub fn ndp_target_addr(&self) -> Option<Ipv6Addr> {
        if !self.is_ndp() {
            return None;
        }
        let b: [u8; 16] = self
            .buffer
            .as_ref()
            .get(field::NDP_TARGET)?
            .try_into()
            .ok()?;
        Some(Ipv6Addr::from(b))
    }

    /// Raw NDP options of an NS/NA (empty for other types).
    #[inline]
    pub fn ndp_options(&self) -> &[u8] {
        if !self.is_ndp() {
            return &[];
        }
        self.buffer.as_ref().get(field::NDP_OPTIONS).unwrap_or(&[])
    }

    /// Parsed NDP options of an NS/NA.
    #[inline]
    pub fn ndp_option_iter(&self) -> NdpOptionIter<'_> {
        NdpOptionIter::new(self.ndp_options())
    }

    /// First source link-layer address option (before any malformed option).
    #[inline]
    pub fn source_ll_addr(&self) -> Option<MacAddr> {
        self.ndp_option_iter()
            .map_while(|o| o.ok())
            .find_map(|o| match o {
                NdpOption::SourceLinkLayerAddr(m) => Some(m),
                _ => None,
            })
    }

    /// First target link-layer address option (before any malformed option).
    #[inline]
    pub fn target_ll_addr(&self) -> Option<MacAddr> {
        self.ndp_option_iter()
            .map_while(|o| o.ok())
            .find_map(|o| match o {
                NdpOption::TargetLinkLayerAddr(m) => Some(m),
                _ => None,
            })
    }

    /// Verifies the checksum with the IPv6 pseudo header.
    #[inline]
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        checksum::transport_sum(src, dst, IpProtocol::ICMPV6, self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the type.
    #[inline]
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    /// Sets the code.
    #[inline]
    pub fn set_msg_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    /// Sets the stored checksum.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Sets the rest-of-header word (NA flags, reserved, echo id/seq).
    #[inline]
    pub fn set_rest_of_header(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::REST.start, v);
    }

    /// Sets the echo identifier.
    #[inline]
    pub fn set_echo_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_IDENT.start, v);
    }

    /// Sets the echo sequence number.
    #[inline]
    pub fn set_echo_seq_no(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_SEQ.start, v);
    }

    /// Sets the NA flags (clears the reserved bits of the rest-of-header word).
    #[inline]
    pub fn set_na_flags(&mut self, router: bool, solicited: bool, override_: bool) {
        let f = if router { NA_ROUTER } else { 0 }
            | if solicited { NA_SOLICITED } else { 0 }
            | if override_ { NA_OVERRIDE } else { 0 };
        self.set_rest_of_header(u32::from(f) << 24);
    }

    /// Sets the NS/NA target address. Panics if the buffer is shorter than 24 bytes.
    #[inline]
    pub fn set_ndp_target_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::NDP_TARGET].copy_from_slice(&a.octets());
    }

    /// Mutable data after the 8-byte header.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// Computes and stores the checksum with the IPv6 pseudo header.
    #[inline]
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let c = !checksum::transport_sum(src, dst, IpProtocol::ICMPV6, self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// Owned ICMPv6 message, borrowing its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Echo request (128).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply (129).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Neighbor solicitation (135).
    NeighborSolicit {
        /// Target address.
        target_addr: Ipv6Addr,
        /// Source link-layer address option.
        source_ll_addr: Option<MacAddr>,
    },
    /// Neighbor advertisement (136).
    NeighborAdvert {
        /// Router flag.
        router: bool,
        /// Solicited flag.
        solicited: bool,
        /// Override flag.
        override_: bool,
        /// Target address.
        target_addr: Ipv6Addr,
        /// Target link-layer address option.
        target_ll_addr: Option<MacAddr>,
    },
    /// Any other message (including NS/NA with a non-zero code).
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// The 4 rest-of-header bytes.
        rest: u32,
        /// Data.
        data: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Parses a message (checksum not verified: it needs the IP addresses). Malformed NDP
    /// options give `BadOption` (RFC 4861 requires discarding such packets).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &'a Icmpv6Packet<&'a T>) -> Result<Self> {
        p.check_len()?;
        let data = &p.buffer.as_ref()[field::DATA];
        let (ident, seq_no) = (p.echo_ident(), p.echo_seq_no());
        let ndp_target = || -> Result<Ipv6Addr> {
            for o in p.ndp_option_iter() {
                o?;
            }
            p.ndp_target_addr().ok_or(Error::Truncated)
        };
        Ok(match (p.msg_type(), p.msg_code()) {
            (ECHO_REQUEST, 0) => Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            },
            (ECHO_REPLY, 0) => Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            },
            (NEIGHBOR_SOLICIT, 0) => Icmpv6Repr::NeighborSolicit {
                target_addr: ndp_target()?,
                source_ll_addr: p.source_ll_addr(),
            },
            (NEIGHBOR_ADVERT, 0) => Icmpv6Repr::NeighborAdvert {
                router: p.router_flag(),
                solicited: p.solicited_flag(),
                override_: p.override_flag(),
                target_addr: ndp_target()?,
                target_ll_addr: p.target_ll_addr(),
            },
            (msg_type, code) => Icmpv6Repr::Other {
                msg_type,
                code,
                rest: p.rest_of_header(),
                data,
            },
        })
    }

    /// Message length.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. }
            | Icmpv6Repr::Other { data, .. } => HEADER_LEN + data.len(),
            Icmpv6Repr::NeighborSolicit {
                source_ll_addr: ll, ..
            }
            | Icmpv6Repr::NeighborAdvert {
                target_ll_addr: ll, ..
            } => NDP_LEN + if ll.is_some() { 8 } else { 0 },
        }
    }

    /// Writes the whole message with checksum 0; call `fill_checksum(src, dst)` afterwards.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Icmpv6Packet<T>) {
        let echo = |ident: u16, seq: u16| (u32::from(ident) << 16) | u32::from(seq);
        let (t, code, rest, data) = match *self {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => (ECHO_REQUEST, 0, echo(ident, seq_no), data),
            Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => (ECHO_REPLY, 0, echo(ident, seq_no), data),
            Icmpv6Repr::Other {
                msg_type,
                code,
                rest,
                data,
            } => (msg_type, code, rest, data),
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_ll_addr,
            } => {
                p.set_msg_type(NEIGHBOR_SOLICIT);
                p.set_msg_code(0);
                p.set_checksum(0);
                p.set_rest_of_header(0);
                p.set_ndp_target_addr(target_addr);
                emit_ll(p, OPT_SOURCE_LL_ADDR, source_ll_addr);
                return;
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                target_ll_addr,
            } => {
                p.set_msg_type(NEIGHBOR_ADVERT);
                p.set_msg_code(0);
                p.set_checksum(0);
                p.set_na_flags(router, solicited, override_);
                p.set_ndp_target_addr(target_addr);
                emit_ll(p, OPT_TARGET_LL_ADDR, target_ll_addr);
                return;
            }
        };
        p.set_msg_type(t);
        p.set_msg_code(code);
        p.set_checksum(0);
        p.set_rest_of_header(rest);
        p.payload_mut()[..data.len()].copy_from_slice(data);
    }
}

fn emit_ll<T: AsRef<[u8]> + AsMut<[u8]>>(p: &mut Icmpv6Packet<T>, kind: u8, ll: Option<MacAddr>) {
    if let Some(m) = ll {
        let o = &mut p.buffer.as_mut()[NDP_LEN..NDP_LEN + 8];
        o[0] = kind;
        o[1] = 1;
        o[2..].copy_from_slice(&m.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// NS from fe80::1 to ff02::1:ff00:2 for fe80::2, source LL 52:54:00:12:34:56.
    const NS: [u8; 32] = [
        0x87, 0x00, 0xf5, 0xdb, 0, 0, 0, 0, //
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, //
        0x01, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56,
    ];

    fn addrs() -> (Ipv6Addr, Ipv6Addr) {
        (
            "fe80::1".parse().unwrap(),
            "ff02::1:ff00:2".parse().unwrap(),
        )
    }

    #[test]
    fn parse_and_emit_ns_fixture() {
        let p = Icmpv6Packet::new_checked(&NS[..]).unwrap();
        let (s, d) = addrs();
        assert_eq!(
            (p.msg_type(), p.msg_code(), p.checksum()),
            (NEIGHBOR_SOLICIT, 0, 0xf5db)
        );
        assert!(p.verify_checksum(s, d));
        let target: Ipv6Addr = "fe80::2".parse().unwrap();
        assert_eq!(p.ndp_target_addr(), Some(target));
        let mac = MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]);
        assert_eq!(p.source_ll_addr(), Some(mac));
        assert_eq!(p.target_ll_addr(), None);
        let r = Icmpv6Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Icmpv6Repr::NeighborSolicit {
                target_addr: target,
                source_ll_addr: Some(mac)
            }
        );
        let mut buf = [0xeeu8; 32];
        assert_eq!(r.buffer_len(), 32);
        let mut q = Icmpv6Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut q);
        q.fill_checksum(s, d);
        assert_eq!(buf, NS);
    }

    #[test]
    fn neighbor_advert_and_echo() {
        let (s, d) = addrs();
        let na = Icmpv6Repr::NeighborAdvert {
            router: true,
            solicited: true,
            override_: false,
            target_addr: s,
            target_ll_addr: Some(MacAddr([2, 0, 0, 0, 0, 9])),
        };
        let mut buf = vec![0u8; na.buffer_len()];
        let mut q = Icmpv6Packet::new_unchecked(&mut buf[..]);
        na.emit(&mut q);
        q.fill_checksum(s, d);
        assert!(q.verify_checksum(s, d));
        assert!(q.router_flag() && q.solicited_flag() && !q.override_flag());
        assert_eq!(&buf[..8], &[136, 0, buf[2], buf[3], 0xc0, 0, 0, 0]);
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&buf[..]).unwrap()),
            Ok(na)
        );

        let echo = [128u8, 0, 0, 0, 0xab, 0xcd, 0, 7, 1, 2, 3];
        let p = Icmpv6Packet::new_checked(&echo[..]).unwrap();
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (0xabcd, 7));
        assert_eq!(p.ndp_target_addr(), None);
        assert!(p.ndp_options().is_empty());
        assert_eq!(
            Icmpv6Repr::parse(&p),
            Ok(Icmpv6Repr::EchoRequest {
                ident: 0xabcd,
                seq_no: 7,
                data: &[1, 2, 3]
            })
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(Icmpv6Packet::new_checked(&NS[..23]), Err(Error::Truncated));
        assert_eq!(Icmpv6Packet::new_checked(&NS[..7]), Err(Error::Truncated));
        let mut b = NS;
        b[25] = 0; // option length 0
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::BadOption));
        assert_eq!(p.source_ll_addr(), None);
        b[25] = 2; // longer than the buffer
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::BadOption));
    }

    #[test]
    fn etherparse_icmpv6_echo_cross_check() {
        use crate::wire::Ipv6Packet;
        let (s, d) = addrs();
        let b = etherparse::PacketBuilder::ipv6(s.octets(), d.octets(), 255)
            .icmpv6_echo_request(0x1111, 0x2222);
        let payload = [9u8; 7];
        let mut out = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut out, &payload).unwrap();
        let ip = Ipv6Packet::new_checked(&out[..]).unwrap();
        assert_eq!(ip.next_header(), IpProtocol::ICMPV6);
        let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert!(p.verify_checksum(s, d));
        assert_eq!(
            Icmpv6Repr::parse(&p),
            Ok(Icmpv6Repr::EchoRequest {
                ident: 0x1111,
                seq_no: 0x2222,
                data: &payload
            })
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(mut data in proptest::collection::vec(any::<u8>(), 0..64),
                                       ndp in any::<bool>()) {
            if ndp && !data.is_empty() {
                data[0] = 135 + (data[0] & 1);
            }
            let (s, d) = addrs();
            if let Ok(p) = Icmpv6Packet::new_checked(&data[..]) {
                let _ = (p.msg_type(), p.msg_code(), p.checksum(), p.rest_of_header());
                let _ = (p.echo_ident(), p.echo_seq_no(), p.payload(), p.verify_checksum(s, d));
                let _ = (p.router_flag(), p.solicited_flag(), p.override_flag());
                let _ = (p.ndp_target_addr(), p.ndp_options(), p.ndp_option_iter().count());
                let _ = (p.source_ll_addr(), p.target_ll_addr(), Icmpv6Repr::parse(&p));
            }
            prop_assert!(NdpOptionIter::new(&data).count() <= data.len());
        }

        #[test]
        fn repr_roundtrip(kind in 0u8..5, t in any::<u128>(), ll in any::<Option<[u8; 6]>>(),
                          a in any::<u16>(), b in any::<u16>(), f in any::<[bool; 3]>(),
                          data in proptest::collection::vec(any::<u8>(), 0..32),
                          cut in any::<prop::sample::Index>()) {
            let target_addr = Ipv6Addr::from_bits(t);
            let r = match kind {
                0 => Icmpv6Repr::EchoRequest { ident: a, seq_no: b, data: &data },
                1 => Icmpv6Repr::EchoReply { ident: a, seq_no: b, data: &data },
                2 => Icmpv6Repr::NeighborSolicit { target_addr, source_ll_addr: ll.map(MacAddr) },
                3 => Icmpv6Repr::NeighborAdvert {
                    router: f[0], solicited: f[1], override_: f[2], target_addr,
                    target_ll_addr: ll.map(MacAddr),
                },
                _ => Icmpv6Repr::Other { msg_type: 1, code: 4, rest: t as u32, data: &data },
            };
            let mut buf = vec![0u8; r.buffer_len()];
            let (s, d) = addrs();
            let mut q = Icmpv6Packet::new_unchecked(&mut buf[..]);
            r.emit(&mut q);
            q.fill_checksum(s, d);
            let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum(s, d));
            prop_assert_eq!(Icmpv6Repr::parse(&p), Ok(r));
            let n = cut.index(buf.len());
            if kind == 2 || kind == 3 {
                prop_assert!(Icmpv6Packet::new_checked(&buf[..n.min(23)]).is_err());
            }
        }
    }
}
