//! The sender's record of what it sent and what came back (RFC 6675's scoreboard, kept per
//! segment as Linux keeps its retransmission queue): which segments are SACKed, which are
//! deemed lost, which lost ones were retransmitted, and Linux's counters from which the
//! packets in flight follow (`tcp_packets_in_flight`: sent − SACKed − lost + retransmitted).
//!
//! Offsets are the connection's relative sequence space (bytes from the first data byte, as
//! `u64`, so no comparison wraps). Segments keep the boundaries they were first sent with.
//!
//! Loss is inferred in one of two ways, as Linux does with `net.ipv4.tcp_recovery` 1 (its
//! default) or 0:
//! - **RACK** (RFC 8985; [`Scoreboard::rack_detect`]): a segment is lost once a segment sent
//!   after it has been delivered and the RTT of that delivery plus a reordering window has
//!   passed since it was sent. This catches lost retransmissions and holes near the tail,
//!   which the threshold below cannot.
//! - **A threshold** ([`Scoreboard::mark_lost`]): a segment is lost once `reordering` SACKed
//!   segments lie above it (RFC 6675's DupThresh, `tp->reordering`, 3 at first).
//!
//! Reordering raises the threshold, which RACK also consults: when an original transmission is
//! SACKed or acknowledged below the highest SACKed byte, the distance in segments becomes the
//! new threshold (Linux's `tcp_check_sack_reordering`), up to `max_reordering`.

use std::collections::VecDeque;

/// One transmitted segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// First byte (relative).
    pub start: u64,
    /// One past the last byte (relative).
    pub end: u64,
    /// When it was last sent, ns.
    pub sent_at: u64,
    /// It was sent more than once.
    pub retransmitted: bool,
    /// A SACK covered it.
    pub sacked: bool,
    /// Deemed lost.
    pub lost: bool,
    /// A retransmission of it is in flight (counted in `retrans_out`).
    pub retrans_in_flight: bool,
}

/// What an acknowledgment did to the scoreboard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delivered {
    /// Segments newly delivered: cumulatively acknowledged (and not SACKed before) or SACKed.
    pub segments: u32,
    /// Send time of the oldest newly delivered segment sent only once (an RTT sample, Karn).
    pub oldest_sent_at: Option<u64>,
    /// Send time of the newest such segment.
    pub newest_sent_at: Option<u64>,
    /// An original transmission arrived out of order (the threshold may have risen).
    pub reordered: bool,
    /// RACK took a delivery: loss detection should run.
    pub rack_advanced: bool,
    /// The newest-sent segment delivered by this ACK that RACK may take.
    rack_newest: Option<Rack>,
}

/// RACK's reference (RFC 8985 §6.2's `RACK.xmit_ts`, `RACK.end_seq`, `RACK.rtt`): the most
/// recently sent of the segments delivered so far, and the RTT of the last delivery taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rack {
    /// When that segment was (last) sent, ns.
    pub sent_at: u64,
    /// Its end (relative).
    pub end: u64,
    /// The RTT of the last delivery RACK took, ns.
    pub rtt: u64,
}

/// Whether a segment sent at `t1` ending at `end1` went after one sent at `t2` ending at `end2`
/// (Linux's `tcp_skb_sent_after`: the end breaks ties of the clock).
fn sent_after(t1: u64, end1: u64, t2: u64, end2: u64) -> bool {
    t1 > t2 || (t1 == t2 && end1 > end2)
}

impl Delivered {
    fn took(&mut self, s: &Sent) {
        self.segments += 1;
        if !s.retransmitted {
            self.oldest_sent_at = Some(self.oldest_sent_at.map_or(s.sent_at, |t| t.min(s.sent_at)));
            self.newest_sent_at = Some(self.newest_sent_at.map_or(s.sent_at, |t| t.max(s.sent_at)));
        }
    }
}

/// The scoreboard.
#[derive(Clone, Debug)]
pub struct Scoreboard {
    segs: VecDeque<Sent>,
    /// SACKed segments.
    pub sacked_out: u32,
    /// Segments deemed lost.
    pub lost_out: u32,
    /// Retransmissions in flight.
    pub retrans_out: u32,
    /// The highest SACKed byte's end (relative), if any SACK arrived.
    pub high_sacked: Option<u64>,
    /// The loss threshold in segments (Linux's `tp->reordering`).
    pub reordering: u32,
    max_reordering: u32,
    mss: u64,
    /// How often an original transmission arrived out of order (Linux's `reord_seen`).
    pub reord_seen: u64,
    /// RACK's reference, once anything was delivered.
    pub rack: Option<Rack>,
}

impl Scoreboard {
    /// An empty scoreboard with loss threshold `dupthresh`, at most `max_reordering`, for
    /// segments of `mss` bytes.
    pub fn new(dupthresh: u32, max_reordering: u32, mss: u32) -> Scoreboard {
        Scoreboard {
            segs: VecDeque::new(),
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            high_sacked: None,
            reordering: dupthresh.max(1),
            max_reordering: max_reordering.max(dupthresh),
            mss: u64::from(mss.max(1)),
            reord_seen: 0,
            rack: None,
        }
    }

    /// Segments sent and not cumulatively acknowledged.
    pub fn packets_out(&self) -> u32 {
        self.segs.len() as u32
    }

    /// Linux's packets in flight.
    pub fn in_flight(&self) -> u32 {
        (self.packets_out() + self.retrans_out).saturating_sub(self.sacked_out + self.lost_out)
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> &VecDeque<Sent> {
        &self.segs
    }

    /// A first transmission of `[start, end)` at `now`.
    pub fn sent(&mut self, start: u64, end: u64, now: u64) {
        self.segs.push_back(Sent {
            start,
            end,
            sent_at: now,
            retransmitted: false,
            sacked: false,
            lost: false,
            retrans_in_flight: false,
        });
    }

    /// The oldest lost segment not yet retransmitted since it was deemed lost, by index.
    pub fn next_lost(&self) -> Option<usize> {
        if self.lost_out == 0 {
            return None;
        }
        self.segs
            .iter()
            .position(|s| s.lost && !s.sacked && !s.retrans_in_flight)
    }

    /// Segment `i` is retransmitted at `now`; returns its range.
    pub fn retransmit(&mut self, i: usize, now: u64) -> (u64, u64) {
        let s = &mut self.segs[i];
        s.sent_at = now;
        s.retransmitted = true;
        if !s.retrans_in_flight {
            s.retrans_in_flight = true;
            self.retrans_out += 1;
        }
        (s.start, s.end)
    }

    /// The newest segment, for a tail-loss probe that has no new data to send.
    pub fn last(&self) -> Option<usize> {
        self.segs.len().checked_sub(1)
    }

    fn forget(&mut self, s: &Sent) {
        if s.sacked {
            self.sacked_out -= 1;
        }
        if s.lost {
            self.lost_out -= 1;
        }
        if s.retrans_in_flight {
            self.retrans_out -= 1;
        }
    }

    fn check_reordering(&mut self, s: &Sent, d: &mut Delivered) {
        if s.retransmitted {
            return;
        }
        if self.high_sacked.is_some_and(|high| s.end <= high) {
            self.reordered_from(s.start);
            d.reordered = true;
        }
    }

    /// Reordering whose low end is `low` (relative): the loss threshold rises to the distance
    /// from it to the highest SACKed byte, in segments, up to `max_reordering` (Linux's
    /// `tcp_check_sack_reordering`), and the event is counted.
    pub fn reordered_from(&mut self, low: u64) {
        let Some(high) = self.high_sacked.filter(|&h| h > low) else {
            return;
        };
        let metric = u32::try_from((high - low).div_ceil(self.mss)).unwrap_or(u32::MAX);
        if metric > self.reordering {
            self.reordering = metric.min(self.max_reordering);
        }
        self.reord_seen += 1;
    }

    /// A D-SACK for `[l, r)` above the cumulative ACK: a retransmitted segment in it whose
    /// original had already been SACKed arrived twice because the original was only late, so
    /// it shows reordering from its start (Linux's `tcp_sacktag_one` for a D-SACKed
    /// retransmission that is `TCPCB_SACKED_ACKED`).
    pub fn dsack_reordered(&mut self, l: u64, r: u64) {
        let low = self
            .segs
            .iter()
            .find(|s| s.start >= l && s.end <= r && s.sacked && s.retransmitted)
            .map(|s| s.start);
        if let Some(low) = low {
            self.reordered_from(low);
        }
    }

    /// Every segment's lost mark cleared: a recovery undone as spurious retransmits nothing
    /// more (Linux's `tcp_undo_cwnd_reduction` with `unmark_loss`).
    pub fn unmark_lost(&mut self) {
        for s in &mut self.segs {
            s.lost = false;
        }
        self.lost_out = 0;
    }

    /// A cumulative acknowledgment up to `una` (relative) and SACK blocks `[l, r)` (relative,
    /// already clipped to the sent range; sorted here, as Linux sorts them, so that a lower
    /// block's segments are not taken for reordered below a higher one of the same ACK):
    /// updates the scoreboard and says what was delivered. `now` and the path's `min_rtt` so
    /// far feed RACK.
    pub fn on_ack(
        &mut self,
        una: u64,
        sacks: &mut [(u64, u64)],
        now: u64,
        min_rtt: Option<u64>,
    ) -> Delivered {
        let mut d = Delivered::default();
        sacks.sort_unstable();
        // SACKs first, so the highest SACKed byte of this ACK counts for reordering below.
        for &(l, r) in sacks.iter() {
            for i in 0..self.segs.len() {
                let s = self.segs[i];
                if s.start >= r {
                    break;
                }
                if s.sacked || s.start < l || s.end > r || s.end <= una {
                    continue;
                }
                self.check_reordering(&s, &mut d);
                let s = &mut self.segs[i];
                s.sacked = true;
                self.sacked_out += 1;
                if s.lost {
                    s.lost = false;
                    self.lost_out -= 1;
                }
                if s.retrans_in_flight {
                    s.retrans_in_flight = false;
                    self.retrans_out -= 1;
                }
                let s = *s;
                d.took(&s);
                self.rack_advance(&s, now, min_rtt, &mut d);
                self.high_sacked = Some(self.high_sacked.map_or(s.end, |h| h.max(s.end)));
            }
        }
        while let Some(s) = self.segs.front().copied() {
            if s.end > una {
                break;
            }
            self.segs.pop_front();
            if !s.sacked {
                self.check_reordering(&s, &mut d);
                d.took(&s);
                self.rack_advance(&s, now, min_rtt, &mut d);
            }
            self.forget(&s);
        }
        if self.segs.is_empty() {
            self.high_sacked = None;
        }
        self.rack_update(&mut d);
        d
    }

    /// RACK takes the delivery of `s` at `now` (RFC 8985 §6.2 step 2, which takes an ACK's
    /// deliveries in the order they were sent: the newest-sent of them gives RACK its RTT, and
    /// becomes the reference if it was sent after the one before). A retransmitted segment
    /// delivered sooner than the path's minimum RTT is ambiguous (the original may have
    /// arrived) and is not taken.
    fn rack_advance(&mut self, s: &Sent, now: u64, min_rtt: Option<u64>, d: &mut Delivered) {
        let rtt = now.saturating_sub(s.sent_at);
        if s.retransmitted && min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        if d.rack_newest
            .is_none_or(|r| sent_after(s.sent_at, s.end, r.sent_at, r.end))
        {
            d.rack_newest = Some(Rack {
                sent_at: s.sent_at,
                end: s.end,
                rtt,
            });
        }
    }

    fn rack_update(&mut self, d: &mut Delivered) {
        let Some(n) = d.rack_newest else { return };
        d.rack_advanced = true;
        match &mut self.rack {
            Some(r) if !sent_after(n.sent_at, n.end, r.sent_at, r.end) => r.rtt = n.rtt,
            r => *r = Some(n),
        }
    }

    /// RACK's loss detection at `now` with reordering window `reo_wnd` (RFC 8985 §6.2 step 5,
    /// Linux's `tcp_rack_detect_loss`): every segment sent before RACK's reference, neither
    /// SACKed nor already lost and waiting for its retransmission, is lost once `RACK.rtt +
    /// reo_wnd` has passed since it was sent; a lost retransmission becomes lost again, to be
    /// retransmitted once more. Returns how many segments were newly marked (retransmissions
    /// included) and, if some may still be lost, how long until the first of them can be.
    pub fn rack_detect(&mut self, now: u64, reo_wnd: u64) -> (u32, Option<u64>) {
        let Some(r) = self.rack else {
            return (0, None);
        };
        let (mut newly, mut wait) = (0, None::<u64>);
        for s in self.segs.iter_mut() {
            if s.sacked || (s.lost && !s.retrans_in_flight) {
                continue;
            }
            if !sent_after(r.sent_at, r.end, s.sent_at, s.end) {
                // First transmissions go in sequence order, so none after this one was sent
                // before the reference; a retransmission here may have been.
                if s.retransmitted {
                    continue;
                }
                break;
            }
            let deadline = s.sent_at.saturating_add(r.rtt).saturating_add(reo_wnd);
            if deadline <= now {
                newly += 1;
                if s.retrans_in_flight {
                    s.retrans_in_flight = false;
                    self.retrans_out -= 1;
                }
                if !s.lost {
                    s.lost = true;
                    self.lost_out += 1;
                }
            } else {
                let left = deadline - now;
                wait = Some(wait.map_or(left, |w| w.max(left)));
            }
        }
        (newly, wait)
    }

    /// Marks lost every unSACKed segment with at least `reordering` SACKed segments above it
    /// (one that was retransmitted without being deemed lost, by a tail-loss probe, too: its
    /// retransmission no longer counts in flight); returns whether the oldest segment is lost
    /// (the trigger of fast retransmit) and how many were newly marked.
    pub fn mark_lost(&mut self) -> (bool, u32) {
        let mut newly = 0;
        if self.sacked_out >= self.reordering {
            let mut above = 0;
            for s in self.segs.iter_mut().rev() {
                if s.sacked {
                    above += 1;
                } else if above >= self.reordering && !s.lost {
                    s.lost = true;
                    self.lost_out += 1;
                    newly += 1;
                    if s.retrans_in_flight {
                        s.retrans_in_flight = false;
                        self.retrans_out -= 1;
                    }
                }
            }
        }
        (self.segs.front().is_some_and(|s| s.lost), newly)
    }

    /// Marks the oldest segment lost (a fast retransmit on its own evidence: three duplicate
    /// ACKs without SACK).
    pub fn mark_head_lost(&mut self) {
        if let Some(s) = self.segs.front_mut()
            && !s.lost
            && !s.sacked
        {
            s.lost = true;
            if s.retrans_in_flight {
                s.retrans_in_flight = false;
                self.retrans_out -= 1;
            }
            self.lost_out += 1;
        }
    }

    /// A retransmission timeout: every unSACKed segment is lost, no retransmission is in flight
    /// any more (Linux's `tcp_timeout_mark_lost`).
    pub fn mark_all_lost(&mut self) {
        for s in self.segs.iter_mut() {
            s.retrans_in_flight = false;
            if !s.sacked && !s.lost {
                s.lost = true;
                self.lost_out += 1;
            }
        }
        self.retrans_out = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(n: u64) -> Scoreboard {
        let mut b = Scoreboard::new(3, 300, 100);
        for i in 0..n {
            b.sent(i * 100, (i + 1) * 100, i);
        }
        b
    }

    #[test]
    fn three_sacked_segments_above_a_hole_make_it_lost() {
        let mut b = board(10);
        // Segment 0 is missing; 1 and 2 SACKed: not yet.
        let d = b.on_ack(0, &mut [(100, 300)], 1000, None);
        assert_eq!(d.segments, 2);
        assert!(!b.mark_lost().0);
        assert_eq!(b.in_flight(), 8);
        // A third: segment 0 is lost, nothing else (nothing unSACKed has three above it).
        b.on_ack(0, &mut [(100, 400)], 1000, None);
        assert_eq!(b.mark_lost(), (true, 1));
        assert_eq!((b.sacked_out, b.lost_out), (3, 1));
        assert_eq!(b.in_flight(), 10 - 3 - 1);
        // Retransmitted: in flight again.
        let i = b.next_lost().unwrap();
        assert_eq!(b.retransmit(i, 50), (0, 100));
        assert_eq!(b.in_flight(), 7);
        assert_eq!(b.next_lost(), None);
        // Its ACK takes everything up to 400: 1 newly delivered, and no RTT sample from it.
        let d = b.on_ack(400, &mut [], 1000, None);
        assert_eq!(d.segments, 1);
        assert_eq!(d.oldest_sent_at, None);
        assert_eq!(
            (b.packets_out(), b.sacked_out, b.lost_out, b.retrans_out),
            (6, 0, 0, 0)
        );
    }

    #[test]
    fn a_dsack_of_a_retransmission_whose_original_was_sacked_raises_the_threshold() {
        let mut b = board(10);
        // Segment 0 missing, 1-3 SACKed: lost, and retransmitted.
        b.on_ack(0, &mut [(100, 400)], 1000, None);
        assert_eq!(b.mark_lost(), (true, 1));
        // Segment 5 missing, 6-8 SACKed: lost and retransmitted too.
        b.on_ack(0, &mut [(100, 500), (600, 900)], 2000, None);
        assert_eq!(b.mark_lost(), (true, 1));
        let i = b.next_lost().unwrap();
        assert_eq!(b.retransmit(i, 2100), (0, 100));
        let i = b.next_lost().unwrap();
        assert_eq!(b.retransmit(i, 2100), (500, 600));
        // Segment 5's original arrives (a retransmitted segment: no reordering yet) ...
        b.on_ack(0, &mut [(100, 900)], 2200, None);
        assert_eq!((b.reordering, b.reord_seen), (3, 0));
        // ... then its retransmission, reported by a D-SACK above the cumulative ACK: the
        // original was late by the four segments from it to the highest SACK.
        b.dsack_reordered(500, 600);
        assert_eq!((b.reordering, b.reord_seen), (4, 1));
        // A D-SACK of a segment whose original never arrived first shows nothing.
        b.dsack_reordered(0, 100);
        assert_eq!(b.reord_seen, 1);
    }

    #[test]
    fn an_original_arriving_below_the_highest_sack_raises_the_threshold() {
        let mut b = board(10);
        b.on_ack(0, &mut [(500, 600)], 1000, None);
        // Segment 0 was only late: its cumulative ACK shows a reordering of 6 segments.
        let d = b.on_ack(100, &mut [(500, 600)], 1000, None);
        assert!(d.reordered);
        assert_eq!(b.reordering, 6);
        assert_eq!(b.reord_seen, 1);
        assert_eq!(d.oldest_sent_at, Some(0));
        // Now 3 SACKed segments above a hole are not enough.
        b.on_ack(100, &mut [(500, 800)], 1000, None);
        assert!(!b.mark_lost().0);
    }

    #[test]
    fn rack_finds_a_tail_hole_the_threshold_does_not() {
        // Segments 0..5 sent at 0..5 ns; 3 and 4 are missing, 5 (sent last) is SACKed at 100:
        // one SACKed segment above the holes, so the threshold sees nothing.
        let mut b = board(6);
        let d = b.on_ack(300, &mut [(500, 600)], 100, None);
        assert!(d.rack_advanced);
        assert_eq!(
            b.rack,
            Some(Rack {
                sent_at: 5,
                end: 600,
                rtt: 95
            })
        );
        assert_eq!(b.mark_lost(), (false, 0));
        // With no reordering window both holes are lost at once (sent before segment 5, which
        // took 95 ns, and sent at least 95 ns ago).
        assert_eq!(b.clone().rack_detect(100, 0), (2, None));
        // With a 10 ns window, segment 3 (sent at 3) is lost from 108 and segment 4 from 109.
        let mut w = b.clone();
        assert_eq!(w.rack_detect(100, 10), (0, Some(9)));
        assert_eq!(w.rack_detect(108, 10), (1, Some(1)));
        assert_eq!(w.rack_detect(109, 10), (1, None));
        assert_eq!(w.lost_out, 2);
    }

    #[test]
    fn rack_marks_a_lost_retransmission_lost_again() {
        let mut b = board(10);
        // Segment 0 is lost and retransmitted at 20; segments 1-5 are SACKed at 30.
        b.mark_head_lost();
        b.retransmit(0, 20);
        assert_eq!(b.retrans_out, 1);
        b.on_ack(0, &mut [(100, 600)], 30, None);
        // The retransmission was sent after everything SACKed so far: not yet judged.
        assert_eq!(b.rack_detect(30, 0), (0, None));
        // A new segment, sent at 25 after the retransmission, is SACKed: the retransmission
        // can now be judged, and is lost.
        b.sent(1000, 1100, 25);
        b.on_ack(0, &mut [(1000, 1100)], 60, None);
        assert_eq!(b.rack.map(|r| (r.sent_at, r.rtt)), Some((25, 35)));
        // Sent at 20, 35 ns of RTT: lost from 55 on; segments 6-8 (sent at 6-8) too.
        let (newly, _) = b.rack_detect(60, 0);
        assert_eq!(newly, 5);
        assert_eq!((b.retrans_out, b.lost_out), (0, 5));
        assert_eq!(b.next_lost(), Some(0));
    }

    #[test]
    fn a_timeout_marks_all_but_the_sacked_lost() {
        let mut b = board(5);
        b.on_ack(0, &mut [(200, 300)], 1000, None);
        let i = 0;
        b.mark_head_lost();
        b.retransmit(i, 9);
        b.mark_all_lost();
        assert_eq!((b.lost_out, b.sacked_out, b.retrans_out), (4, 1, 0));
        assert_eq!(b.in_flight(), 0);
        assert_eq!(b.next_lost(), Some(0));
    }
}
