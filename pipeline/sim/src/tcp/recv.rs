//! The receiving half of a connection: reassembly, what each ACK says (the cumulative point,
//! SACK blocks and a D-SACK, the window, ECE) and when it is sent (Linux's delayed ACKs).
//!
//! **When an ACK goes** (Linux's rules, simplified where noted):
//! - at once for the first `quickacks` data segments of the connection (Linux's quick-ACK mode,
//!   `TCP_MAX_QUICKACKS` = 16, entered at the start and again on a first CE mark without DCTCP);
//! - at once for a segment out of order, one that fills a hole, or a duplicate;
//! - at once when more than one full segment is unacknowledged (every second full segment);
//! - otherwise after the delayed-ACK timer (`delack`, Linux's minimum ATO of 40 ms; Linux adapts
//!   its ATO to the arrival pattern between 40 and 200 ms, which is not modelled);
//! - any data segment the host sends carries the ACK and cancels a pending one.
//!
//! **ECN** (RFC 3168 §6.1.3): a CE mark makes every ACK carry ECE until a segment with CWR
//! arrives. **DCTCP** (RFC 8257 §3.2): ECE echoes the CE state of the last data segment; when the
//! state changes while an ACK is being delayed, that ACK goes at once with the old state, then
//! an ACK for the new segment with the new one.
//!
//! **The window** is the receive buffer less the out-of-order bytes held; the application reads
//! in-order data at once. Linux's receive-buffer autotuning is not modelled: the buffer is fixed.

use std::collections::BTreeMap;

use super::segment::MAX_SACK_BLOCKS;

/// How the receiver echoes congestion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Echo {
    /// No ECN.
    Off,
    /// RFC 3168: ECE from a CE mark until CWR.
    Classic,
    /// RFC 8257 (DCTCP): ECE = the last data segment's CE.
    Dctcp,
}

/// An ACK the receiver wants sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckOut {
    /// Cumulative point (relative to the first data byte).
    pub ack: u64,
    /// ECE on it.
    pub ece: bool,
}

/// The receiver.
#[derive(Clone, Debug)]
pub struct Receiver {
    /// Next byte expected (relative).
    pub nxt: u64,
    /// Out-of-order ranges held, start -> end (relative).
    ooo: BTreeMap<u64, u64>,
    /// The starts of held ranges, the most recently changed first (RFC 2018 block order).
    recent: Vec<u64>,
    /// A duplicate range to report first in the next ACK (RFC 2883).
    dsack: Option<(u64, u64)>,
    echo: Echo,
    ece_latched: bool,
    ce_state: bool,
    quickacks: u32,
    unacked_bytes: u64,
    mss: u64,
    delack_ns: u64,
    rcv_buf: u64,
    /// When the delayed ACK is due.
    pub delack_at: Option<u64>,
    /// An ACK is due now.
    pub ack_now: bool,
    /// DCTCP: an ACK for these bytes with the old CE state, to go before the current one.
    pub pending_old: Option<AckOut>,
    /// Out-of-order data segments received (Linux's `rcv_ooopack`).
    pub ooo_packets: u64,
    /// Data segments that carried CE.
    pub ce_packets: u64,
}

impl Receiver {
    /// A receiver for segments of up to `mss` bytes.
    pub fn new(echo: Echo, mss: u32, quickacks: u32, delack_ns: u64, rcv_buf: u32) -> Receiver {
        Receiver {
            nxt: 0,
            ooo: BTreeMap::new(),
            recent: Vec::new(),
            dsack: None,
            echo,
            ece_latched: false,
            ce_state: false,
            quickacks,
            unacked_bytes: 0,
            mss: u64::from(mss.max(1)),
            delack_ns,
            rcv_buf: u64::from(rcv_buf),
            delack_at: None,
            ack_now: false,
            pending_old: None,
            ooo_packets: 0,
            ce_packets: 0,
        }
    }

    /// The window to advertise, bytes.
    pub fn window(&self) -> u64 {
        let held: u64 = self.ooo.iter().map(|(s, e)| e - s).sum();
        self.rcv_buf.saturating_sub(held)
    }

    /// Whether ACKs carry ECE now.
    pub fn ece(&self) -> bool {
        match self.echo {
            Echo::Off => false,
            Echo::Classic => self.ece_latched,
            Echo::Dctcp => self.ce_state,
        }
    }

    /// A segment with CWR arrived (RFC 3168: the sender reacted).
    pub fn on_cwr(&mut self) {
        self.ece_latched = false;
    }

    /// A data segment `[start, end)` (relative) arrived at `now`, CE-marked or not. Returns the
    /// in-order bytes it delivered to the application.
    pub fn on_data(&mut self, start: u64, end: u64, ce: bool, now: u64) -> u64 {
        if ce {
            self.ce_packets += 1;
        }
        match self.echo {
            Echo::Off => {}
            Echo::Classic => {
                if ce && !self.ece_latched {
                    self.ece_latched = true;
                    // Linux: do not delay ACKs while the sender may have a small window.
                    self.quickacks = self.quickacks.max(2);
                }
            }
            Echo::Dctcp => {
                if ce != self.ce_state {
                    if self.delack_at.is_some() || self.unacked_bytes > 0 {
                        self.pending_old = Some(AckOut {
                            ack: self.nxt,
                            ece: self.ce_state,
                        });
                    }
                    self.ce_state = ce;
                    self.ack_now = true;
                }
            }
        }
        if end <= self.nxt {
            // All of it was here already: a D-SACK and an ACK at once.
            self.dsack = Some((start, end));
            self.ack_now = true;
            return 0;
        }
        let before = self.nxt;
        let had_holes = !self.ooo.is_empty();
        if start > self.nxt {
            self.ooo_packets += 1;
            self.hold(start, end);
            self.ack_now = true;
            return 0;
        }
        // In order (perhaps overlapping what was delivered): deliver, then what it joins.
        self.nxt = end;
        while let Some((&s, &e)) = self.ooo.first_key_value() {
            if s > self.nxt {
                break;
            }
            self.ooo.remove(&s);
            self.recent.retain(|&x| x != s);
            self.nxt = self.nxt.max(e);
        }
        let delivered = self.nxt - before;
        if had_holes {
            self.ack_now = true;
        } else if self.quickacks > 0 {
            self.quickacks -= 1;
            self.ack_now = true;
        } else {
            self.unacked_bytes += delivered;
            if self.unacked_bytes > self.mss {
                self.ack_now = true;
            } else if self.delack_at.is_none() {
                self.delack_at = Some(now + self.delack_ns);
            }
        }
        delivered
    }

    fn hold(&mut self, start: u64, end: u64) {
        // Merge with every held range it touches.
        let (mut s, mut e) = (start, end);
        let touching: Vec<(u64, u64)> = self
            .ooo
            .range(..=end)
            .filter(|&(&a, &b)| b >= start && a <= end)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (a, b) in touching {
            if a <= start && b >= end {
                // A duplicate of held data.
                self.dsack = Some((start, end));
            }
            self.ooo.remove(&a);
            self.recent.retain(|&x| x != a);
            s = s.min(a);
            e = e.max(b);
        }
        self.ooo.insert(s, e);
        self.recent.insert(0, s);
    }

    /// The SACK blocks for the next ACK (relative): a D-SACK first if any, then the held
    /// ranges, the most recently changed first; at most [`MAX_SACK_BLOCKS`].
    pub fn sack_blocks(&self) -> Vec<(u64, u64)> {
        let mut v = Vec::with_capacity(MAX_SACK_BLOCKS);
        if let Some(d) = self.dsack {
            v.push(d);
        }
        for s in &self.recent {
            if v.len() == MAX_SACK_BLOCKS {
                break;
            }
            if let Some(&e) = self.ooo.get(s) {
                v.push((*s, e));
            }
        }
        v
    }

    /// An ACK went (alone or on data): nothing is pending any more.
    pub fn acked(&mut self) {
        self.ack_now = false;
        self.delack_at = None;
        self.unacked_bytes = 0;
        self.dsack = None;
    }

    /// The delayed-ACK timer at `now`.
    pub fn on_timer(&mut self, now: u64) {
        if self.delack_at.is_some_and(|t| t <= now) {
            self.delack_at = None;
            self.ack_now = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn rx(echo: Echo, quickacks: u32) -> Receiver {
        Receiver::new(echo, MSS as u32, quickacks, 40_000_000, 1 << 20)
    }

    #[test]
    fn every_second_full_segment_is_acked_and_a_lone_one_waits_for_the_timer() {
        let mut r = rx(Echo::Off, 2);
        // Quick ACKs first.
        for k in 0..2 {
            r.on_data(k * MSS, (k + 1) * MSS, false, 0);
            assert!(r.ack_now);
            r.acked();
        }
        r.on_data(2 * MSS, 3 * MSS, false, 10);
        assert!(!r.ack_now);
        assert_eq!(r.delack_at, Some(10 + 40_000_000));
        r.on_data(3 * MSS, 4 * MSS, false, 20);
        assert!(r.ack_now, "the second full segment");
        r.acked();
        r.on_data(4 * MSS, 5 * MSS, false, 30);
        r.on_timer(30 + 39_999_999);
        assert!(!r.ack_now);
        r.on_timer(30 + 40_000_000);
        assert!(r.ack_now);
        assert_eq!(r.nxt, 5 * MSS);
    }

    #[test]
    fn holes_give_sack_blocks_newest_first_and_filling_them_acks_at_once() {
        let mut r = rx(Echo::Off, 0);
        r.on_data(0, MSS, false, 0);
        r.acked();
        r.on_data(2 * MSS, 3 * MSS, false, 1);
        assert!(r.ack_now);
        r.on_data(5 * MSS, 6 * MSS, false, 2);
        r.on_data(3 * MSS, 4 * MSS, false, 3);
        assert_eq!(
            r.sack_blocks(),
            vec![(2 * MSS, 4 * MSS), (5 * MSS, 6 * MSS)]
        );
        assert_eq!(r.ooo_packets, 3);
        assert_eq!(r.window(), (1 << 20) - 3 * MSS);
        r.acked();
        // The hole: delivered with what it joins, acknowledged at once.
        assert_eq!(r.on_data(MSS, 2 * MSS, false, 4), 3 * MSS);
        assert!(r.ack_now);
        assert_eq!(r.nxt, 4 * MSS);
        assert_eq!(r.sack_blocks(), vec![(5 * MSS, 6 * MSS)]);
        // A duplicate: a D-SACK first.
        r.acked();
        r.on_data(0, MSS, false, 5);
        assert!(r.ack_now);
        assert_eq!(r.sack_blocks(), vec![(0, MSS), (5 * MSS, 6 * MSS)]);
    }

    #[test]
    fn classic_ecn_echoes_until_cwr_and_dctcp_echoes_each_state_change_at_once() {
        let mut r = rx(Echo::Classic, 0);
        r.on_data(0, MSS, true, 0);
        assert!(
            r.ece() && r.ack_now,
            "a first CE mark is acknowledged at once"
        );
        r.acked();
        r.on_data(MSS, 2 * MSS, false, 1);
        assert!(r.ece(), "latched until CWR");
        r.on_cwr();
        assert!(!r.ece());

        let mut d = rx(Echo::Dctcp, 0);
        d.on_data(0, MSS, false, 0);
        assert!(!d.ack_now && d.delack_at.is_some());
        // CE while an ACK is delayed: the delayed one goes first, without ECE, then one with it.
        d.on_data(MSS, 2 * MSS, true, 1);
        assert_eq!(
            d.pending_old,
            Some(AckOut {
                ack: MSS,
                ece: false
            })
        );
        assert!(d.ack_now && d.ece());
        assert_eq!(d.ce_packets, 1);
    }
}
