//! A TCP segment as the models exchange it: the header fields and options a connection reads
//! and writes, the payload as a length (the simulator's payloads carry no data), and the IP
//! header's ECN field.

/// FIN.
pub const FIN: u8 = 0x01;
/// SYN.
pub const SYN: u8 = 0x02;
/// RST.
pub const RST: u8 = 0x04;
/// PSH.
pub const PSH: u8 = 0x08;
/// ACK.
pub const ACK: u8 = 0x10;
/// ECE (RFC 3168).
pub const ECE: u8 = 0x40;
/// CWR (RFC 3168).
pub const CWR: u8 = 0x80;

/// At most this many SACK blocks fit beside the timestamp option (RFC 2018 §3).
pub const MAX_SACK_BLOCKS: usize = 3;

/// One segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// Sequence number of the first byte (of the SYN or FIN when it carries no data).
    pub seq: u32,
    /// Acknowledgment number (with [`ACK`]).
    pub ack: u32,
    /// The flags byte ([`SYN`], [`ACK`], ...).
    pub flags: u8,
    /// The window field as sent: the receive window shifted right by the sender's scale (not
    /// scaled on a SYN, RFC 7323 §2.2).
    pub window: u16,
    /// Payload bytes.
    pub len: u32,
    /// MSS option (SYN only).
    pub mss: Option<u16>,
    /// Window-scale option (SYN only).
    pub wscale: Option<u8>,
    /// SACK-permitted option (SYN only).
    pub sack_permitted: bool,
    /// Timestamps option: (TSval, TSecr).
    pub ts: Option<(u32, u32)>,
    /// SACK blocks (left, right), the most recent first; `sack_n` of them are used.
    pub sack: [(u32, u32); MAX_SACK_BLOCKS],
    /// How many of `sack` are used.
    pub sack_n: u8,
    /// The IP header says ECT(0): the sender is ECN-capable for this segment.
    pub ect: bool,
}

impl Segment {
    /// Whether `f` is set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    /// The sequence space it takes: its payload, plus one for a SYN and one for a FIN.
    pub fn seq_len(&self) -> u32 {
        self.len + u32::from(self.has(SYN)) + u32::from(self.has(FIN))
    }

    /// The SACK blocks in use.
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..usize::from(self.sack_n)]
    }

    /// The TCP header's length in bytes with its options, padded to 32 bits, as Linux lays them
    /// out (a SYN: MSS, SACK-permitted with timestamps, window scale).
    pub fn header_len(&self) -> usize {
        let mut opts = 0;
        if self.mss.is_some() {
            opts += 4;
        }
        opts += match (self.ts.is_some(), self.sack_permitted) {
            (true, _) => 12, // SACK-permitted rides in the timestamp option's two NOPs
            (false, true) => 4,
            (false, false) => 0,
        };
        if self.wscale.is_some() {
            opts += 4;
        }
        if self.sack_n > 0 {
            opts += 4 + 8 * usize::from(self.sack_n);
        }
        20 + opts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lengths_are_linuxs() {
        let syn = Segment {
            flags: SYN,
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            ts: Some((1, 0)),
            ..Segment::default()
        };
        assert_eq!(syn.header_len(), 40);
        assert_eq!(syn.seq_len(), 1);
        let mut data = Segment {
            flags: ACK,
            len: 1448,
            ts: Some((1, 1)),
            ..Segment::default()
        };
        assert_eq!(data.header_len(), 32);
        data.sack_n = 3;
        assert_eq!(data.header_len(), 60);
        assert_eq!(data.sack_blocks().len(), 3);
    }
}
