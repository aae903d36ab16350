//! TCP (RFC 9293) header view, option iterator and `Repr`.

use super::checksum::{self, PseudoHeaderAddr};
use super::{Error, IpProtocol, OptionBytes, Result, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::wire::Field;
    pub(super) const SRC_PORT: Field = 0..2;
    pub(super) const DST_PORT: Field = 2..4;
    pub(super) const SEQ: Field = 4..8;
    pub(super) const ACK: Field = 8..12;
    pub(super) const OFF_FLAGS: Field = 12..14;
    pub(super) const WINDOW: Field = 14..16;
    pub(super) const CHECKSUM: Field = 16..18;
    pub(super) const URGENT: Field = 18..20;
    pub(super) const OPTIONS: usize = 20;
}

/// Length of a TCP header without options.
pub const MIN_HEADER_LEN: usize = field::OPTIONS;

/// TCP control flags (the low 9 bits of bytes 12..14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// FIN.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// SYN.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// RST.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// PSH.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// ACK.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// URG.
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECE.
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// CWR.
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// NS (historic ECN nonce).
    pub const NS: TcpFlags = TcpFlags(0x100);
    /// Mask of all flag bits.
    pub const ALL: u16 = 0x1ff;

    /// True if every bit of `other` is set.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    #[inline]
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

/// A parsed TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// End of option list (kind 0). Iteration stops after it.
    EndOfList,
    /// No-operation (kind 1).
    NoOperation,
    /// Maximum segment size (kind 2).
    MaxSegmentSize(u16),
    /// Window scale shift (kind 3).
    WindowScale(u8),
    /// SACK permitted (kind 4).
    SackPermitted,
    /// SACK blocks (kind 5), 1 to 4 `(left, right)` edges.
    SackRange([Option<(u32, u32)>; 4]),
    /// Timestamps (kind 8).
    Timestamp {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// Any other kind with its data (without kind and length bytes).
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

impl TcpOption<'_> {
    /// Encoded length in bytes.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::SackRange(b) => 2 + 8 * b.iter().flatten().count(),
            TcpOption::Timestamp { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Encodes the option at the start of `buf` (which must hold `buffer_len()` bytes) and
    /// returns the number of bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let (kind, body) = buf[..len].split_at_mut(1.min(len));
        match *self {
            TcpOption::EndOfList => kind[0] = 0,
            TcpOption::NoOperation => kind[0] = 1,
            _ => {
                body[0] = len as u8;
                let data = &mut body[1..];
                kind[0] = match *self {
                    TcpOption::MaxSegmentSize(m) => {
                        data.copy_from_slice(&m.to_be_bytes());
                        2
                    }
                    TcpOption::WindowScale(s) => {
                        data[0] = s;
                        3
                    }
                    TcpOption::SackPermitted => 4,
                    TcpOption::SackRange(blocks) => {
                        for (chunk, (l, r)) in data.chunks_exact_mut(8).zip(blocks.iter().flatten())
                        {
                            chunk[..4].copy_from_slice(&l.to_be_bytes());
                            chunk[4..].copy_from_slice(&r.to_be_bytes());
                        }
                        5
                    }
                    TcpOption::Timestamp { tsval, tsecr } => {
                        data[..4].copy_from_slice(&tsval.to_be_bytes());
                        data[4..].copy_from_slice(&tsecr.to_be_bytes());
                        8
                    }
                    TcpOption::Unknown { kind, data: d } => {
                        data.copy_from_slice(d);
                        kind
                    }
                    TcpOption::EndOfList | TcpOption::NoOperation => unreachable!(),
                };
            }
        }
        len
    }
}

/// Iterator over TCP options. Yields `Err(BadOption)` once and stops on a malformed option
/// (length < 2, beyond the buffer, or wrong for a known kind); never panics.
#[derive(Debug, Clone)]
pub struct TcpOptionIter<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptionIter<'a> {
    /// Iterates over raw option bytes.
    #[inline]
    pub fn new(data: &'a [u8]) -> Self {
        TcpOptionIter { data }
    }

    #[inline]
    fn fail(&mut self) -> Option<Result<TcpOption<'a>>> {
        self.data = &[];
        Some(Err(Error::BadOption))
    }
}

impl<'a> Iterator for TcpOptionIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let data = self.data;
        let (&kind, rest) = data.split_first()?;
        match kind {
            0 => {
                self.data = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            1 => {
                self.data = rest;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let Some(&len) = rest.first() else {
            return self.fail();
        };
        let len = usize::from(len);
        if len < 2 || len > data.len() {
            return self.fail();
        }
        let body = &data[2..len];
        self.data = &data[len..];
        let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let opt = match (kind, body.len()) {
            (2, 2) => TcpOption::MaxSegmentSize(u16::from_be_bytes([body[0], body[1]])),
            (3, 1) => TcpOption::WindowScale(body[0]),
            (4, 0) => TcpOption::SackPermitted,
            (5, n) if n > 0 && n <= 32 && n.is_multiple_of(8) => {
                let mut blocks = [None; 4];
                for (slot, c) in blocks.iter_mut().zip(body.chunks_exact(8)) {
                    *slot = Some((be32(&c[..4]), be32(&c[4..])));
                }
                TcpOption::SackRange(blocks)
            }
            (8, 8) => TcpOption::Timestamp {
                tsval: be32(&body[..4]),
                tsecr: be32(&body[4..]),
            },
            (2..=5 | 8, _) => return self.fail(),
            _ => TcpOption::Unknown { kind, data: body },
        };
        Some(Ok(opt))
    }
}

/// A zero-copy view of a TCP segment. The buffer must be exactly the segment (the IP payload):
/// the payload and checksum extend to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    super::view_constructors!();

    /// Validates: buffer ≥ 20 (`Truncated`), data offset ≥ 5 and ≤ buffer (`BadDataOffset`).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        if d.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < MIN_HEADER_LEN || hl > d.len() {
            return Err(Error::BadDataOffset);
        }
        Ok(())
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

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SEQ.start)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ACK.start)
    }

    /// Data offset in 32-bit words.
    #[inline]
    pub fn data_offset(&self) -> u8 {
        self.buffer.as_ref()[field::OFF_FLAGS.start] >> 4
    }

    /// Header length in bytes (data offset · 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.data_offset()) * 4
    }

    /// Control flags.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(get_u16(self.buffer.as_ref(), field::OFF_FLAGS.start) & TcpFlags::ALL)
    }

    /// FIN flag.
    #[inline]
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// SYN flag.
    #[inline]
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// RST flag.
    #[inline]
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// PSH flag.
    #[inline]
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// ACK flag.
    #[inline]
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// URG flag.
    #[inline]
    pub fn urg(&self) -> bool {
        self.flags().contains(TcpFlags::URG)
    }

    /// ECE flag.
    #[inline]
    pub fn ece(&self) -> bool {
        self.flags().contains(TcpFlags::ECE)
    }

    /// CWR flag.
    #[inline]
    pub fn cwr(&self) -> bool {
        self.flags().contains(TcpFlags::CWR)
    }

    /// Window.
    #[inline]
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::WINDOW.start)
    }

    /// Checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_pointer(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::URGENT.start)
    }

    /// Raw option bytes.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// Parsed options.
    #[inline]
    pub fn option_iter(&self) -> TcpOptionIter<'_> {
        TcpOptionIter::new(self.options())
    }

    /// Payload (header end to buffer end).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Verifies the checksum over pseudo header + whole buffer.
    #[inline]
    pub fn verify_checksum<A: PseudoHeaderAddr>(&self, src: A, dst: A) -> bool {
        checksum::transport_sum(src, dst, IpProtocol::TCP, self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
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

    /// Sets the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::SEQ.start, v);
    }

    /// Sets the acknowledgment number.
    #[inline]
    pub fn set_ack_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::ACK.start, v);
    }

    /// Sets the header length in bytes (multiple of 4 in 20..=60).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len.is_multiple_of(4) && (MIN_HEADER_LEN..=60).contains(&len));
        let b = &mut self.buffer.as_mut()[field::OFF_FLAGS.start];
        *b = (*b & 0x0f) | (((len / 4) as u8) << 4);
    }

    /// Sets the control flags (bits outside [`TcpFlags::ALL`] ignored).
    #[inline]
    pub fn set_flags(&mut self, f: TcpFlags) {
        let d = self.buffer.as_mut();
        let w = get_u16(d, field::OFF_FLAGS.start) & !TcpFlags::ALL;
        set_u16(d, field::OFF_FLAGS.start, w | (f.0 & TcpFlags::ALL));
    }

    /// Sets the window.
    #[inline]
    pub fn set_window_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WINDOW.start, v);
    }

    /// Sets the stored checksum.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Sets the urgent pointer.
    #[inline]
    pub fn set_urgent_pointer(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::URGENT.start, v);
    }

    /// Mutable raw options.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..hl]
    }

    /// Mutable payload.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }

    /// Computes and stores the checksum over pseudo header + whole buffer.
    #[inline]
    pub fn fill_checksum<A: PseudoHeaderAddr>(&mut self, src: A, dst: A) {
        self.set_checksum(0);
        let c = !checksum::transport_sum(src, dst, IpProtocol::TCP, self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// Owned TCP header; options are kept as raw bytes (see [`TcpOptionIter`], [`TcpOption::emit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number.
    pub ack_number: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Window.
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_pointer: u16,
    /// Raw options (multiple of 4, ≤ 40 bytes).
    pub options: OptionBytes,
}

impl TcpRepr {
    /// Parses the header (checksum not verified: it needs the IP addresses). Options are
    /// checked to parse (`BadOption`).
    pub fn parse<T: AsRef<[u8]>>(p: &TcpPacket<T>) -> Result<Self> {
        p.check_len()?;
        for o in p.option_iter() {
            o?;
        }
        Ok(TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq_number: p.seq_number(),
            ack_number: p.ack_number(),
            flags: p.flags(),
            window_len: p.window_len(),
            urgent_pointer: p.urgent_pointer(),
            options: OptionBytes::new(p.options())?,
        })
    }

    /// Header length (20 + options).
    #[inline]
    pub fn buffer_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len()
    }

    /// Writes the header with checksum 0 (reserved bits cleared); call `fill_checksum` after
    /// the payload is in place.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut TcpPacket<T>) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number);
        set_u16(p.buffer.as_mut(), field::OFF_FLAGS.start, 0);
        p.set_header_len(self.buffer_len());
        p.set_flags(self.flags);
        p.set_window_len(self.window_len);
        p.set_checksum(0);
        p.set_urgent_pointer(self.urgent_pointer);
        p.options_mut().copy_from_slice(self.options.as_slice());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    use proptest::prelude::*;

    /// SYN 10.0.0.1:40000 -> 10.0.0.2:80 with MSS 1460, SACK-permitted, TS, NOP, WS 7.
    const SYN: [u8; 40] = [
        0x9c, 0x40, 0x00, 0x50, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 0x00, //
        0xa0, 0x02, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, //
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x64, //
        0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn parse_and_emit_fixture() {
        let p = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (40000, 80));
        assert_eq!((p.seq_number(), p.ack_number()), (0x1122_3344, 0));
        assert_eq!((p.data_offset(), p.header_len()), (10, 40));
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst() && !p.psh() && !p.urg());
        assert!(!p.ece() && !p.cwr());
        assert_eq!(
            (p.window_len(), p.urgent_pointer(), p.checksum()),
            (64240, 0, 0)
        );
        assert!(p.payload().is_empty());
        let opts: Vec<_> = p.option_iter().collect::<Result<_>>().unwrap();
        assert_eq!(
            opts,
            [
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamp {
                    tsval: 100,
                    tsecr: 0
                },
                TcpOption::NoOperation,
                TcpOption::WindowScale(7),
            ]
        );
        let mut enc = [0u8; 20];
        let mut at = 0;
        for o in &opts {
            at += o.emit(&mut enc[at..]);
        }
        assert_eq!(&enc[..at], p.options());

        let r = TcpRepr::parse(&p).unwrap();
        let mut buf = [0xffu8; 40];
        r.emit(&mut TcpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, SYN);
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut q = TcpPacket::new_unchecked(&mut buf[..]);
        q.fill_checksum(s, d);
        assert!(q.verify_checksum(s, d));
        assert!(!q.verify_checksum(d, d));
    }

    #[test]
    fn malformed() {
        let mut b = SYN;
        b[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&b[..]), Err(Error::BadDataOffset));
        b[12] = 0xb0;
        assert_eq!(TcpPacket::new_checked(&b[..]), Err(Error::BadDataOffset));
        for n in 0..SYN.len() {
            assert!(TcpPacket::new_checked(&SYN[..n]).is_err());
        }
        fn bad(o: &[u8]) -> Vec<Result<TcpOption<'_>>> {
            TcpOptionIter::new(o).collect()
        }
        assert_eq!(bad(&[2, 4, 5]), [Err(Error::BadOption)]);
        assert_eq!(bad(&[2, 3, 5, 0]), [Err(Error::BadOption)]);
        assert_eq!(
            bad(&[1, 30, 0]),
            [Ok(TcpOption::NoOperation), Err(Error::BadOption)]
        );
        assert_eq!(
            bad(&[99, 3, 7]),
            [Ok(TcpOption::Unknown {
                kind: 99,
                data: &[7]
            })]
        );
        assert_eq!(bad(&[0, 2, 4]), [Ok(TcpOption::EndOfList)]);
        assert_eq!(bad(&[5, 10, 0, 0, 0, 1, 0, 0, 0, 2]).len(), 1);
        let mut b = SYN;
        b[20] = 9;
        b[21] = 1;
        assert_eq!(
            TcpRepr::parse(&TcpPacket::new_checked(&b[..]).unwrap()),
            Err(Error::BadOption)
        );
    }

    #[test]
    fn etherparse_ipv4_options_tcp_options_cross_check() {
        use crate::wire::{EtherType, EthernetFrame, Ipv4Packet};
        use etherparse::{IpHeaders, IpNumber, Ipv4Header, Ipv4Options, TcpOptionElement as E};
        let mut ip = Ipv4Header::new(0, 33, IpNumber::TCP, [10, 1, 1, 1], [10, 2, 2, 2]).unwrap();
        ip.options = Ipv4Options::try_from(&[0x94u8, 4, 0, 0][..]).unwrap();
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ip(IpHeaders::Ipv4(ip, Default::default()))
            .tcp(1234, 443, 0xdead_beef, 29200)
            .syn()
            .ack(77)
            .options(&[
                E::MaximumSegmentSize(1400),
                E::Noop,
                E::WindowScale(9),
                E::SelectiveAcknowledgementPermitted,
                E::Timestamp(5, 6),
                E::SelectiveAcknowledgement((1, 2), [Some((3, 4)), None, None]),
            ])
            .unwrap();
        let payload = *b"hello world!";
        let mut out = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut out, &payload).unwrap();

        let eth = EthernetFrame::new_checked(&out[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::IPV4);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(
            (ip.header_len(), ip.ttl(), ip.protocol()),
            (24, 33, IpProtocol::TCP)
        );
        assert_eq!(ip.options(), &[0x94, 4, 0, 0]);
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(tcp.verify_checksum(ip.src_addr(), ip.dst_addr()));
        assert_eq!((tcp.src_port(), tcp.dst_port()), (1234, 443));
        assert_eq!((tcp.seq_number(), tcp.ack_number()), (0xdead_beef, 77));
        assert_eq!(tcp.flags(), TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(tcp.window_len(), 29200);
        assert_eq!(tcp.payload(), &payload);
        let opts: Vec<_> = tcp.option_iter().filter_map(|o| o.ok()).collect();
        assert!(opts.contains(&TcpOption::MaxSegmentSize(1400)));
        assert!(opts.contains(&TcpOption::WindowScale(9)));
        assert!(opts.contains(&TcpOption::SackPermitted));
        assert!(opts.contains(&TcpOption::Timestamp { tsval: 5, tsecr: 6 }));
        assert!(opts.contains(&TcpOption::SackRange([
            Some((1, 2)),
            Some((3, 4)),
            None,
            None
        ])));
        assert!(tcp.option_iter().all(|o| o.is_ok()));
    }

    fn arb_repr() -> impl Strategy<Value = TcpRepr> {
        (
            (any::<u16>(), any::<u16>(), any::<u32>(), any::<u32>()),
            (0u16..0x200, any::<u16>(), any::<u16>()),
            proptest::collection::vec(any::<u8>(), 0..=10),
        )
            .prop_map(|((sp, dp, seq, ack), (fl, win, urg), words)| {
                let opts: Vec<u8> = words.iter().flat_map(|w| [1, 3, 3, *w]).collect();
                TcpRepr {
                    src_port: sp,
                    dst_port: dp,
                    seq_number: seq,
                    ack_number: ack,
                    flags: TcpFlags(fl),
                    window_len: win,
                    urgent_pointer: urg,
                    options: OptionBytes::new(&opts).unwrap(),
                }
            })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = TcpPacket::new_checked(&data[..]) {
                let _ = (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number(), p.flags());
                let _ = (p.window_len(), p.checksum(), p.urgent_pointer(), p.options(), p.payload());
                let _ = p.verify_checksum(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
                let _ = p.option_iter().count();
                let _ = TcpRepr::parse(&p);
            }
            // Raw garbage as options: terminates and never panics.
            prop_assert!(TcpOptionIter::new(&data).count() <= data.len());
        }

        #[test]
        fn options_emit_parse_roundtrip(mss in any::<u16>(), ws in any::<u8>(), a in any::<u32>(),
                                        b in any::<u32>(), n in 1usize..=4, kind in 9u8..=255,
                                        data in proptest::collection::vec(any::<u8>(), 0..6)) {
            let mut blocks = [None; 4];
            for (i, s) in blocks.iter_mut().take(n).enumerate() {
                *s = Some((a.wrapping_add(i as u32), b));
            }
            let opts = [
                TcpOption::MaxSegmentSize(mss), TcpOption::WindowScale(ws), TcpOption::SackPermitted,
                TcpOption::Timestamp { tsval: a, tsecr: b }, TcpOption::SackRange(blocks),
                TcpOption::Unknown { kind, data: &data }, TcpOption::NoOperation, TcpOption::EndOfList,
            ];
            let mut buf = [0u8; 96];
            let mut at = 0;
            for o in &opts {
                prop_assert_eq!(o.emit(&mut buf[at..]), o.buffer_len());
                at += o.buffer_len();
            }
            let parsed: Vec<_> = TcpOptionIter::new(&buf[..at]).collect::<Result<_>>().unwrap();
            prop_assert_eq!(&parsed[..], &opts[..]);
        }

        #[test]
        fn repr_roundtrip_and_truncation(r in arb_repr(), plen in 0usize..16,
                                         cut in any::<prop::sample::Index>()) {
            let mut buf = vec![0u8; r.buffer_len() + plen];
            r.emit(&mut TcpPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(TcpRepr::parse(&TcpPacket::new_checked(&buf[..]).unwrap()), Ok(r));
            let n = cut.index(r.buffer_len());
            prop_assert!(TcpPacket::new_checked(&buf[..n]).is_err());
        }
    }
}
