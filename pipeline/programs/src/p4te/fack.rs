//! The fake ACK (FACK) of rate adaptation [P §4.3, §5.2b; docs/p4te.md, "Formats"].
//!
//! A switch that decides to slow a flow down (or speed it up) clones the data packet and
//! recirculates the clone; [`build`] turns it, in place, into a TCP ACK from the receiver to the
//! sender:
//! - MACs, addresses and ports swapped; IPv4 without options (ToS = [`FACK_MARK`], plus
//!   [`FACK_INC`] for an increase; ID 0, DF, TTL 64) or IPv6 (Traffic Class likewise, flow label
//!   0, hop limit 64);
//! - `seq` := the data's `ack_no` [P §7.1.2]; `ack_no` := the data's `seq` for now (the source
//!   leaf reads it to update its anti-repeat state, then replaces it); the ACK flag alone; no
//!   payload;
//! - the timestamp option, when the data had one, with TSval and TSecr swapped (what the
//!   receiver last echoed and the sender's own clock), so even an unpatched FACK passes the
//!   sender's PAWS check;
//! - valid IP and TCP checksums.
//!
//! The source leaf (the one the sender hangs off) [`patch`]es it on the way down [I,
//! A-P4TE-11]: `ack_no` and the timestamps from the last real ACK it forwarded to the sender for
//! this flow, the window halved (DEC) or grown by a quarter, saturating at 65,535 (INC), both of
//! that ACK's window ([P §6.1.5]: "of its current size", with shifts); the marks cleared.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::parse::{FACK_INC, FACK_MARK, Parsed, TCP_ACK, Tcp};
use pipeline::wire::{TcpPacket, checksum};

/// Increase (INC) or decrease (DEC) the sender's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Window × 1/2.
    Decrease,
    /// Window + 1/4 of it.
    Increase,
}

/// Bytes of the FACK's TCP header: 20, or 32 with NOP NOP Timestamp.
fn tcp_len(ts: bool) -> usize {
    if ts { 32 } else { 20 }
}

/// Rewrites the data packet in `frame` (parsed as `p`, TCP `t`) into a FACK; returns its
/// length (the caller truncates the frame to it).
pub fn build(frame: &mut [u8], p: &Parsed, t: &Tcp, action: Action) -> usize {
    let mark = FACK_MARK
        | if action == Action::Increase {
            FACK_INC
        } else {
            0
        };
    // MACs swapped (the route rewrites them anyway).
    let (dst, src) = frame.split_at_mut(6);
    dst.swap_with_slice(&mut src[..6]);
    let l3 = p.l3;
    let tl = tcp_len(t.ts.is_some());
    let l4 = if p.ipv4 {
        let ip = &mut frame[l3..l3 + 20];
        ip[0] = 0x45;
        ip[1] = mark;
        ip[2..4].copy_from_slice(&((20 + tl) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&[0, 0]);
        ip[6..8].copy_from_slice(&[0x40, 0]); // DF
        ip[8] = 64;
        ip[9] = 6;
        ip[10..12].copy_from_slice(&[0, 0]);
        ip[12..16].copy_from_slice(&(p.dst as u32).to_be_bytes());
        ip[16..20].copy_from_slice(&(p.src as u32).to_be_bytes());
        let sum = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        l3 + 20
    } else {
        let ip = &mut frame[l3..l3 + 40];
        ip[0] = 0x60 | (mark >> 4);
        ip[1] = mark << 4;
        ip[2..4].copy_from_slice(&[0, 0]);
        ip[4..6].copy_from_slice(&(tl as u16).to_be_bytes());
        ip[6] = 6;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&p.dst.to_be_bytes());
        ip[24..40].copy_from_slice(&p.src.to_be_bytes());
        l3 + 40
    };
    let tcp = &mut frame[l4..l4 + tl];
    tcp[0..2].copy_from_slice(&p.dport.to_be_bytes());
    tcp[2..4].copy_from_slice(&p.sport.to_be_bytes());
    tcp[4..8].copy_from_slice(&t.ack.to_be_bytes());
    tcp[8..12].copy_from_slice(&t.seq.to_be_bytes());
    tcp[12] = ((tl / 4) as u8) << 4;
    tcp[13] = TCP_ACK;
    tcp[14..16].copy_from_slice(&t.window.to_be_bytes());
    tcp[16..20].copy_from_slice(&[0, 0, 0, 0]);
    if let Some((tsval, tsecr)) = t.ts {
        tcp[20..24].copy_from_slice(&[1, 1, 8, 10]);
        tcp[24..28].copy_from_slice(&tsecr.to_be_bytes());
        tcp[28..32].copy_from_slice(&tsval.to_be_bytes());
    }
    fill_tcp_checksum(frame, p.ipv4, l3, l4, tl);
    l4 + tl
}

/// What the source leaf learnt from the last real ACK it forwarded to the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastAck {
    pub ack: u32,
    pub window: u16,
    /// (TSval, TSecr) of that ACK, if it had the option.
    pub ts: Option<(u32, u32)>,
}

/// The window a FACK carries: `window` halved, or grown by a quarter (saturating).
pub fn resized(window: u16, action: Action) -> u16 {
    match action {
        Action::Decrease => window >> 1,
        Action::Increase => window.saturating_add(window >> 2),
    }
}

/// The source leaf's patch of the FACK in `frame` (parsed as `p`, a FACK: ToS marked): ack_no,
/// window and timestamps from `last`, marks cleared, checksums recomputed.
pub fn patch(frame: &mut [u8], p: &Parsed, last: &LastAck) {
    let action = if p.tos & FACK_INC != 0 {
        Action::Increase
    } else {
        Action::Decrease
    };
    let Some(t) = p.tcp else { return };
    let (l3, l4, tl) = (p.l3, p.l4, t.header_len);
    {
        let tcp = &mut frame[l4..l4 + tl];
        tcp[8..12].copy_from_slice(&last.ack.to_be_bytes());
        tcp[14..16].copy_from_slice(&resized(last.window, action).to_be_bytes());
        if let (Some((tsval, tsecr)), true) = (last.ts, tl == 32 && tcp[22] == 8) {
            tcp[24..28].copy_from_slice(&tsval.to_be_bytes());
            tcp[28..32].copy_from_slice(&tsecr.to_be_bytes());
        }
    }
    if p.ipv4 {
        let ip = &mut frame[l3..l3 + 20];
        ip[1] = 0;
        ip[10..12].copy_from_slice(&[0, 0]);
        let sum = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
    } else {
        frame[l3] = 0x60;
        frame[l3 + 1] = 0;
    }
    fill_tcp_checksum(frame, p.ipv4, l3, l4, tl);
}

fn fill_tcp_checksum(frame: &mut [u8], ipv4: bool, l3: usize, l4: usize, tl: usize) {
    if ipv4 {
        let src = Ipv4Addr::from(read4(&frame[l3 + 12..]));
        let dst = Ipv4Addr::from(read4(&frame[l3 + 16..]));
        TcpPacket::new_unchecked(&mut frame[l4..l4 + tl]).fill_checksum(src, dst);
    } else {
        let src = Ipv6Addr::from(read16(&frame[l3 + 8..]));
        let dst = Ipv6Addr::from(read16(&frame[l3 + 24..]));
        TcpPacket::new_unchecked(&mut frame[l4..l4 + tl]).fill_checksum(src, dst);
    }
}

fn read4(b: &[u8]) -> [u8; 4] {
    [b[0], b[1], b[2], b[3]]
}

fn read16(b: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    a
}
