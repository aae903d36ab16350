//! ICMP for IPv4 (RFC 792).

use super::checksum;
use super::{Error, Result, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::wire::{Field, Rest};
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: Field = 2..4;
    pub(super) const REST: Field = 4..8;
    pub(super) const ECHO_IDENT: Field = 4..6;
    pub(super) const ECHO_SEQ: Field = 6..8;
    pub(super) const DATA: Rest = 8..;
}

/// Length of the ICMP header (type, code, checksum, rest-of-header).
pub const HEADER_LEN: usize = field::DATA.start;
/// Echo reply.
pub const ECHO_REPLY: u8 = 0;
/// Destination unreachable.
pub const DEST_UNREACHABLE: u8 = 3;
/// Echo request.
pub const ECHO_REQUEST: u8 = 8;
/// Time exceeded.
pub const TIME_EXCEEDED: u8 = 11;

/// A zero-copy view of an ICMPv4 message (the whole IP payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    super::view_constructors!();

    /// Ensures the 8-byte header is present.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
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

    /// Data after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// True if the checksum over the whole message verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
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

    /// Sets the rest-of-header word.
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

    /// Mutable data.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// Computes and stores the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// Owned ICMPv4 message, borrowing its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpRepr<'a> {
    /// Echo request (type 8).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply (type 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Any other message.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// The 4 rest-of-header bytes.
        rest: u32,
        /// Data (e.g. the offending IP header for errors).
        data: &'a [u8],
    },
}

impl<'a> IcmpRepr<'a> {
    /// Parses a message, verifying its checksum (`BadChecksum`).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &'a IcmpPacket<&'a T>) -> Result<Self> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let data = &p.buffer.as_ref()[field::DATA];
        Ok(match (p.msg_type(), p.msg_code()) {
            (ECHO_REQUEST, 0) => IcmpRepr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            (ECHO_REPLY, 0) => IcmpRepr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            (msg_type, code) => IcmpRepr::Other {
                msg_type,
                code,
                rest: p.rest_of_header(),
                data,
            },
        })
    }

    /// Message length: 8 + data.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        match self {
            IcmpRepr::EchoRequest { data, .. }
            | IcmpRepr::EchoReply { data, .. }
            | IcmpRepr::Other { data, .. } => HEADER_LEN + data.len(),
        }
    }

    /// Writes the whole message (exactly `buffer_len()` bytes) and fills the checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut IcmpPacket<T>) {
        let (t, c, rest, data) = match *self {
            IcmpRepr::EchoRequest {
                ident,
                seq_no,
                data,
            } => (
                ECHO_REQUEST,
                0,
                (u32::from(ident) << 16) | u32::from(seq_no),
                data,
            ),
            IcmpRepr::EchoReply {
                ident,
                seq_no,
                data,
            } => (
                ECHO_REPLY,
                0,
                (u32::from(ident) << 16) | u32::from(seq_no),
                data,
            ),
            IcmpRepr::Other {
                msg_type,
                code,
                rest,
                data,
            } => (msg_type, code, rest, data),
        };
        p.set_msg_type(t);
        p.set_msg_code(c);
        p.set_rest_of_header(rest);
        p.payload_mut()[..data.len()].copy_from_slice(data);
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Echo request, id 0x1234, seq 1, odd-length data "abcde".
    const ECHO: [u8; 13] = [
        8, 0, 0xbc, 0x03, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd', b'e',
    ];

    #[test]
    fn parse_and_emit_fixture() {
        let p = IcmpPacket::new_checked(&ECHO[..]).unwrap();
        assert_eq!((p.msg_type(), p.msg_code(), p.checksum()), (8, 0, 0xbc03));
        assert_eq!(
            (p.echo_ident(), p.echo_seq_no(), p.rest_of_header()),
            (0x1234, 1, 0x1234_0001)
        );
        assert_eq!(p.payload(), b"abcde");
        assert!(p.verify_checksum());
        let r = IcmpRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            IcmpRepr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: b"abcde"
            }
        );
        let mut buf = [0u8; 13];
        assert_eq!(r.buffer_len(), 13);
        r.emit(&mut IcmpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, ECHO);
        let mut bad = ECHO;
        bad[12] = b'x';
        assert_eq!(
            IcmpRepr::parse(&IcmpPacket::new_unchecked(&bad[..])),
            Err(Error::BadChecksum)
        );
        for n in 0..8 {
            assert_eq!(IcmpPacket::new_checked(&ECHO[..n]), Err(Error::Truncated));
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = IcmpPacket::new_checked(&data[..]) {
                let _ = (p.msg_type(), p.msg_code(), p.checksum(), p.rest_of_header());
                let _ = (p.echo_ident(), p.echo_seq_no(), p.payload(), p.verify_checksum());
                let _ = IcmpRepr::parse(&p);
            }
        }

        #[test]
        fn repr_roundtrip(t in any::<u8>(), c in any::<u8>(), rest in any::<u32>(),
                          data in proptest::collection::vec(any::<u8>(), 0..40)) {
            let r = match t % 3 {
                0 => IcmpRepr::EchoRequest { ident: rest as u16, seq_no: c.into(), data: &data },
                1 => IcmpRepr::EchoReply { ident: rest as u16, seq_no: c.into(), data: &data },
                _ => IcmpRepr::Other { msg_type: DEST_UNREACHABLE, code: c, rest, data: &data },
            };
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut IcmpPacket::new_unchecked(&mut buf[..]));
            let p = IcmpPacket::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(IcmpRepr::parse(&p), Ok(r));
        }
    }
}
