//! The stamp every measured packet carries after its transport header (`pisa-sim`'s sources and
//! the real host tools write it; their receivers read it): the marker `PSIM`, the flow number,
//! the sequence number and the send time, so a receiver counts loss, reordering and one-way
//! latency per flow.

/// The stamp's marker.
pub const MAGIC: [u8; 4] = *b"PSIM";
/// Bytes of the stamp.
pub const STAMP_LEN: usize = 24;

/// The stamp of packet `seq` of flow `flow`, sent at `sent_ns`.
pub fn stamp(flow: u32, seq: u64, sent_ns: u64) -> [u8; STAMP_LEN] {
    let mut s = [0u8; STAMP_LEN];
    s[0..4].copy_from_slice(&MAGIC);
    s[4..8].copy_from_slice(&flow.to_be_bytes());
    s[8..16].copy_from_slice(&seq.to_be_bytes());
    s[16..24].copy_from_slice(&sent_ns.to_be_bytes());
    s
}

/// The stamp (flow, seq, sent at) at the start of a payload, if there is one.
pub fn read_stamp(payload: &[u8]) -> Option<(u32, u64, u64)> {
    let s = payload.get(..STAMP_LEN)?;
    if s[0..4] != MAGIC {
        return None;
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_be_bytes(w)
    };
    Some((
        u32::from_be_bytes([s[4], s[5], s[6], s[7]]),
        word(8),
        word(16),
    ))
}
