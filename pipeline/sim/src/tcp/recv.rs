//! The receiving half of a connection: reassembly, what each ACK says (the cumulative point,
//! SACK blocks and a D-SACK, the window, ECE) and when it is sent (Linux's delayed ACKs).
//!
//! **When an ACK goes** (Linux's rules, simplified where noted):
//! - at once in quick-ACK mode, which lasts `quickacks` ACKs (Linux's `TCP_MAX_QUICKACKS` = 16):
//!   entered at the connection's first data, after a receive gap longer than the RTO, on a
//!   duplicate segment, and (2 ACKs) on a first CE mark without DCTCP;
//! - at once for a segment that fills a hole, a duplicate, or one with CWR;
//! - for a segment out of order: at once for the first three ACKs at the same cumulative point,
//!   then compressed (Linux's `tcp_comp_sack`): one ACK after 5% of the RTT (at most 1 ms) or
//!   after 44 held back, whichever is first;
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
    /// ACKs sent at the current cumulative point while data was out of order.
    dup_acks: u32,
    /// ACKs held back by SACK compression since the last one sent.
    compressed: u32,
    /// When a compressed ACK is due.
    pub comp_at: Option<u64>,
    /// When the last data segment arrived.
    last_rx: Option<u64>,
    max_quickacks: u32,
}

/// SACK compression holds at most this many ACKs (`net.ipv4.tcp_comp_sack_nr`).
const COMP_SACK_NR: u32 = 44;
/// Nor longer than this, ns (`net.ipv4.tcp_comp_sack_delay_ns`).
const COMP_SACK_DELAY_NS: u64 = 1_000_000;
/// Duplicate ACKs sent at once before compressing (`TCP_FASTRETRANS_THRESH`).
const DUP_ACKS_AT_ONCE: u32 = 3;

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
            dup_acks: 0,
            compressed: 0,
            comp_at: None,
            last_rx: None,
            max_quickacks: quickacks,
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

    /// A segment with CWR arrived (RFC 3168: the sender reacted); with data, Linux acknowledges
    /// it at once (the sender's window may be one segment).
    pub fn on_cwr(&mut self, data: bool) {
        self.ece_latched = false;
        if data {
            self.ack_now = true;
        }
    }

    /// A data segment `[start, end)` (relative) arrived at `now`, CE-marked or not; `rto_ns` and
    /// `rtt_ns` are the connection's (for quick ACKs after a gap and for SACK compression).
    /// Returns the in-order bytes it delivered to the application.
    pub fn on_data(
        &mut self,
        (start, end): (u64, u64),
        ce: bool,
        now: u64,
        (rto_ns, rtt_ns): (u64, Option<u64>),
    ) -> u64 {
        if ce {
            self.ce_packets += 1;
        }
        // A long gap: the sender restarts from a small window; acknowledge quickly.
        if self.last_rx.is_some_and(|t| now.saturating_sub(t) > rto_ns) {
            self.quickacks = self.quickacks.max(self.max_quickacks);
        }
        self.last_rx = Some(now);
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
            // All of it was here already: a D-SACK, quick-ACK mode and an ACK at once.
            self.dsack = Some((start, end));
            self.quickacks = self.quickacks.max(self.max_quickacks);
            self.ack_now = true;
            return 0;
        }
        let before = self.nxt;
        let had_holes = !self.ooo.is_empty();
        if start > self.nxt {
            self.ooo_packets += 1;
            self.hold(start, end);
            self.out_of_order_ack(now, rtt_ns);
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
        self.dup_acks = 0;
        if had_holes && !self.ooo.is_empty() {
            // Still a hole above: the ACK says so at once.
            self.ack_now = true;
        } else if had_holes || self.quickacks > 0 {
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

    /// An ACK for data out of order: the first three at a cumulative point at once, then
    /// compressed.
    fn out_of_order_ack(&mut self, now: u64, rtt_ns: Option<u64>) {
        if self.dup_acks < DUP_ACKS_AT_ONCE || self.quickacks > 0 {
            self.dup_acks += 1;
            self.ack_now = true;
            return;
        }
        self.compressed += 1;
        if self.compressed >= COMP_SACK_NR {
            self.ack_now = true;
            return;
        }
        let delay = rtt_ns.map_or(0, |r| r / 20).min(COMP_SACK_DELAY_NS);
        if delay == 0 {
            self.ack_now = true;
        } else if self.comp_at.is_none() {
            self.comp_at = Some(now + delay);
        }
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

    /// An ACK went (alone or on data): nothing is pending any more, and quick-ACK mode has one
    /// ACK fewer to go.
    pub fn acked(&mut self) {
        self.ack_now = false;
        self.delack_at = None;
        self.comp_at = None;
        self.compressed = 0;
        self.unacked_bytes = 0;
        self.dsack = None;
        // Quick-ACK mode starts with the first data (Linux's tcp_event_data_recv): a SYN-ACK
        // or an ACK before any data does not use it up.
        if self.last_rx.is_some() {
            self.quickacks = self.quickacks.saturating_sub(1);
        }
    }

    /// The earliest of the delayed-ACK and compressed-ACK deadlines.
    pub fn deadline(&self) -> Option<u64> {
        [self.delack_at, self.comp_at].into_iter().flatten().min()
    }

    /// The ACK timers at `now`.
    pub fn on_timer(&mut self, now: u64) {
        if self.deadline().is_some_and(|t| t <= now) {
            self.delack_at = None;
            self.comp_at = None;
            self.ack_now = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;
    const RTO: (u64, Option<u64>) = (200_000_000, Some(100_000));

    fn rx(echo: Echo, quickacks: u32) -> Receiver {
        Receiver::new(echo, MSS as u32, quickacks, 40_000_000, 1 << 20)
    }

    #[test]
    fn every_second_full_segment_is_acked_and_a_lone_one_waits_for_the_timer() {
        let mut r = rx(Echo::Off, 2);
        // Quick ACKs first.
        for k in 0..2 {
            r.on_data((k * MSS, (k + 1) * MSS), false, 0, RTO);
            assert!(r.ack_now);
            r.acked();
        }
        r.on_data((2 * MSS, 3 * MSS), false, 10, RTO);
        assert!(!r.ack_now);
        assert_eq!(r.delack_at, Some(10 + 40_000_000));
        r.on_data((3 * MSS, 4 * MSS), false, 20, RTO);
        assert!(r.ack_now, "the second full segment");
        r.acked();
        r.on_data((4 * MSS, 5 * MSS), false, 30, RTO);
        r.on_timer(30 + 39_999_999);
        assert!(!r.ack_now);
        r.on_timer(30 + 40_000_000);
        assert!(r.ack_now);
        assert_eq!(r.nxt, 5 * MSS);
    }

    #[test]
    fn holes_give_sack_blocks_newest_first_and_filling_them_acks_at_once() {
        let mut r = rx(Echo::Off, 0);
        r.on_data((0, MSS), false, 0, RTO);
        r.acked();
        r.on_data((2 * MSS, 3 * MSS), false, 1, RTO);
        assert!(r.ack_now);
        r.on_data((5 * MSS, 6 * MSS), false, 2, RTO);
        r.on_data((3 * MSS, 4 * MSS), false, 3, RTO);
        assert_eq!(
            r.sack_blocks(),
            vec![(2 * MSS, 4 * MSS), (5 * MSS, 6 * MSS)]
        );
        assert_eq!(r.ooo_packets, 3);
        assert_eq!(r.window(), (1 << 20) - 3 * MSS);
        r.acked();
        // The hole: delivered with what it joins, acknowledged at once.
        assert_eq!(r.on_data((MSS, 2 * MSS), false, 4, RTO), 3 * MSS);
        assert!(r.ack_now);
        assert_eq!(r.nxt, 4 * MSS);
        assert_eq!(r.sack_blocks(), vec![(5 * MSS, 6 * MSS)]);
        // A duplicate: a D-SACK first.
        r.acked();
        r.on_data((0, MSS), false, 5, RTO);
        assert!(r.ack_now);
        assert_eq!(r.sack_blocks(), vec![(0, MSS), (5 * MSS, 6 * MSS)]);
    }

    #[test]
    fn classic_ecn_echoes_until_cwr_and_dctcp_echoes_each_state_change_at_once() {
        let mut r = rx(Echo::Classic, 0);
        r.on_data((0, MSS), true, 0, RTO);
        assert!(
            r.ece() && r.ack_now,
            "a first CE mark is acknowledged at once"
        );
        r.acked();
        r.on_data((MSS, 2 * MSS), false, 1, RTO);
        assert!(r.ece(), "latched until CWR");
        r.on_cwr(false);
        assert!(!r.ece());

        let mut d = rx(Echo::Dctcp, 0);
        d.on_data((0, MSS), false, 0, RTO);
        assert!(!d.ack_now && d.delack_at.is_some());
        // CE while an ACK is delayed: the delayed one goes first, without ECE, then one with it.
        d.on_data((MSS, 2 * MSS), true, 1, RTO);
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

    #[test]
    fn out_of_order_acks_go_at_once_three_times_then_compressed() {
        let mut r = rx(Echo::Off, 0);
        // A hole at 0; segments 1.. arrive.
        for k in 1..=3 {
            r.on_data((k * MSS, (k + 1) * MSS), false, k, RTO);
            assert!(r.ack_now, "duplicate ACK {k} at once");
            r.acked();
        }
        r.on_data((4 * MSS, 5 * MSS), false, 10, RTO);
        assert!(!r.ack_now);
        // 5% of the 100 µs RTT.
        assert_eq!(r.deadline(), Some(10 + 5_000));
        r.on_timer(10 + 5_000);
        assert!(r.ack_now);
        r.acked();
        // 44 held back: the 44th goes at once.
        for k in 5..5 + 43 {
            r.on_data((k * MSS, (k + 1) * MSS), false, 20, RTO);
            assert!(!r.ack_now);
        }
        r.on_data((48 * MSS, 49 * MSS), false, 20, RTO);
        assert!(r.ack_now);
        // Filling the hole resets the count: ACK at once, and the next hole's first three too.
        r.acked();
        assert_eq!(r.on_data((0, MSS), false, 30, RTO), 49 * MSS);
        assert!(r.ack_now);
    }
}
