//! What leaves a connection and when: the probe and retransmission timers, the segments
//! (SYN, data, retransmissions, FIN, ACKs), and the share of the host's queue it may hold.

use super::*;

impl Conn {
    /// Linux's `tcp_schedule_loss_probe`: in Open or CWR, with SACK and an RTT, one probe at a
    /// time, two smoothed RTTs plus 2 ms (plus the minimum RTO instead with one segment out),
    /// rounded up to the clock tick, never after the RTO.
    pub(super) fn schedule_probe(&mut self, now: u64) {
        if !self.cfg.tlp
            || !self.sack_ok
            || !matches!(self.ca, Ca::Open | Ca::Cwr)
            || self.probe_high.is_some()
        {
            self.probe_at = None;
            return;
        }
        let Some(srtt) = self.rtt.srtt() else {
            return;
        };
        if self.sb.packets_out() == 0 {
            return;
        }
        let slack = if self.sb.packets_out() == 1 {
            self.cfg.rto_min_ns
        } else {
            self.cfg.tlp_min_ns
        };
        let tick = self.cfg.jiffy_ns.max(1);
        let at = now + (2 * srtt + slack).div_ceil(tick) * tick;
        self.probe_at = Some(match self.rto_at {
            Some(r) => at.min(r),
            None => at,
        });
    }

    // ---- Timers ----

    /// The earliest deadline, ns.
    pub fn poll_timeout(&self) -> Option<u64> {
        [self.rto_at, self.probe_at, self.reo_at, self.rx.deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Runs the timers due at `now`.
    pub fn on_timeout(&mut self, now: u64) {
        self.rx.on_timer(now);
        if self.reo_at.is_some_and(|t| t <= now) {
            self.reo_at = None;
            self.rack_timeout(now);
        }
        // Linux runs the probe on the RTO's timer: a probe due (at the latest when the RTO
        // would be) goes instead of the RTO, which restarts.
        if self.probe_at.is_some_and(|t| t <= now) {
            self.probe_at = None;
            self.probe_due = true;
            self.rto_at = Some(now + self.rtt.rto());
            return;
        }
        if self.rto_at.is_some_and(|t| t <= now) {
            self.rto_at = None;
            self.retransmission_timeout(now);
        }
    }

    pub(super) fn retransmission_timeout(&mut self, now: u64) {
        self.rtt.back_off();
        match self.state {
            State::SynSent | State::SynReceived => {
                self.syn_pending = true;
                self.syn_retransmits += 1;
                self.stats.retransmits += 1;
                self.stats.timeouts += 1;
                return;
            }
            State::Closed => return,
            State::Established => {}
        }
        if self.sb.packets_out() == 0 {
            if self.fin_sent && !self.fin_acked {
                // Only the FIN is out: send it again.
                self.fin_sent = false;
                self.stats.timeouts += 1;
            } else if self.nxt < self.written {
                // The persist timer's work: the window held data back with nothing in flight;
                // the next segment goes as a probe.
                self.probe_due = true;
            }
            return;
        }
        self.stats.timeouts += 1;
        self.undo_forget();
        // Linux's tcp_enter_loss: a new threshold unless this timeout continues a recovery or
        // a loss episode still under way.
        let recompute = self.ca == Ca::Open
            || self.una >= self.high_seq
            || (self.ca == Ca::Loss && self.consecutive_rtos == 0);
        // Reordering overestimated: a timeout in the open state with many SACKed segments.
        if self.ca == Ca::Open && self.sb.sacked_out >= self.cfg.reordering {
            self.sb.reordering = self.sb.reordering.min(self.cfg.reordering);
        }
        self.consecutive_rtos += 1;
        self.cc.on_timeout(recompute);
        if self.ecn_ok {
            self.cwr_pending = true;
        }
        self.sb.mark_all_lost();
        self.reo_at = None;
        self.ca = Ca::Loss;
        self.high_seq = self.nxt;
        self.dupacks = 0;
        self.probe_at = None;
        self.probe_due = false;
        self.probe_high = None;
        self.rto_at = Some(now + self.rtt.rto());
    }

    // ---- Departures ----

    pub(super) fn segment(&mut self, flags: u8, seq: u32, len: u32, now: u64) -> Segment {
        let mut s = Segment {
            seq,
            flags,
            len,
            ..Segment::default()
        };
        // DCTCP's segments are all ECT, SYN and pure ACKs included (Linux's tcp_ecn_send for a
        // congestion control that needs ECN); with RFC 3168 only new data is.
        s.ect = self.cfg.ecn && self.cfg.cc == Kind::Dctcp;
        if self.ts_ok || (flags & SYN != 0 && self.cfg.timestamps) {
            s.ts = Some((self.tsval(now), self.ts_recent));
        }
        if flags & ACK != 0 {
            s.ack = self
                .wire_rcv(self.rx.nxt)
                .wrapping_add(u32::from(self.peer_fin));
            if self.rx.ece() {
                s.flags |= ECE;
            }
            if self.sack_ok {
                for (l, r) in self.rx.sack_blocks() {
                    s.sack[usize::from(s.sack_n)] = (self.wire_rcv(l), self.wire_rcv(r));
                    s.sack_n += 1;
                }
            }
            self.rx.acked();
        }
        let w = if flags & SYN != 0 {
            self.rx.window().min(0xffff)
        } else {
            (self.rx.window() >> self.rcv_wscale).min(0xffff)
        };
        s.window = w as u16;
        self.stats.segs_out += 1;
        s
    }

    pub(super) fn syn(&mut self, now: u64) -> Segment {
        let flags = match self.state {
            State::SynSent if self.cfg.ecn => SYN | ECE | CWR,
            State::SynSent => SYN,
            _ if self.ecn_ok => SYN | ACK | ECE,
            _ => SYN | ACK,
        };
        let mut s = self.segment(flags, self.iss, 0, now);
        s.mss = Some(self.cfg.mss);
        s.sack_permitted = self.cfg.sack && (self.state == State::SynSent || self.sack_ok);
        let offer_ws = self.state == State::SynSent || self.rcv_wscale > 0;
        if offer_ws {
            s.wscale = Some(self.rcv_wscale);
        }
        if self.state == State::SynReceived && !self.ts_ok {
            s.ts = None;
        }
        self.syn_sent_at = now;
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
        s
    }

    pub(super) fn data(&mut self, start: u64, end: u64, retransmission: bool, now: u64) -> Segment {
        let mut flags = ACK;
        if !retransmission && self.cwr_pending {
            flags |= CWR;
            self.cwr_pending = false;
        }
        let seq = self.wire_snd(start);
        let mut s = self.segment(flags, seq, (end - start) as u32, now);
        // RFC 3168 §6.1.5: no ECT on retransmissions (Linux keeps it for DCTCP).
        s.ect |= self.ecn_ok && !retransmission;
        self.stats.data_segs_out += 1;
        if retransmission {
            self.stats.retransmits += 1;
        }
        if self.reducing() {
            self.prr_out += 1;
        }
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
        s
    }

    pub(super) fn new_data(&mut self, now: u64) -> Segment {
        let start = self.nxt;
        let end = (start + u64::from(self.mss)).min(self.written);
        self.sb.sent(start, end, now);
        self.nxt = end;
        self.data(start, end, false, now)
    }

    /// Retransmits scoreboard segment `i`; the head's retransmission restarts the RTO
    /// (`tcp_xmit_retransmit_queue`).
    pub(super) fn retransmit(&mut self, i: usize, now: u64) -> Segment {
        let (s, e) = self.sb.retransmit(i, now);
        if i == 0 {
            self.rto_at = Some(now + self.rtt.rto());
        }
        self.data(s, e, true, now)
    }

    /// The pacing rate Linux computes for this connection (`tcp_update_pacing_rate`), bytes/s:
    /// twice (slow start) or 1.2 times the window per smoothed RTT; `None` before an RTT.
    pub fn pacing_rate(&self) -> Option<u64> {
        let srtt = self.rtt.srtt()?;
        let ratio = if self.cc.in_slow_start() { 200 } else { 120 };
        let bytes = u64::from(self.cc.cwnd.max(1)) * u64::from(self.mss);
        Some(bytes * ratio / 100 * 1_000_000_000 / srtt.max(1))
    }

    /// How many bytes of this connection Linux lets wait in its host's queue (TCP Small
    /// Queues, `tcp_small_queue_check`): about 1 ms at the pacing rate (`sk_pacing_shift` 10),
    /// but at least two of the socket's buffers, at most `tcp_limit_output_bytes` (1 MB); twice
    /// that for a retransmission is not modelled. The hosts send GSO buffers (GSO stays on in
    /// the namespaces): each holds about 1 ms at the pacing rate and at least two segments
    /// (`tcp_tso_autosize`, `tcp_min_tso_segs` 2), and its truesize adds about 850 bytes.
    pub fn queue_limit(&self) -> u64 {
        let ms = self.pacing_rate().map_or(u64::MAX, |r| r >> 10);
        let buffer = ms.min(1 << 16).max(2 * u64::from(self.mss)) + 856;
        ms.max(2 * buffer).min(1 << 20)
    }

    /// Whether one segment or none is unacknowledged: Linux lets such a socket send whatever
    /// its queue holds (`tcp_rtx_queue_empty_or_single_skb`).
    pub fn at_most_one_out(&self) -> bool {
        self.sb.packets_out() <= 1
    }

    /// Whether new data and retransmissions may go now (the host's TCP Small Queues check);
    /// ACKs and control segments go regardless.
    pub fn allow_data(&mut self, allowed: bool) {
        self.data_allowed = allowed;
    }

    /// The next segment to send at `now`, if any (call until `None`).
    pub fn poll_transmit(&mut self, now: u64) -> Option<Segment> {
        if self.state == State::Closed {
            return None;
        }
        if self.syn_pending {
            self.syn_pending = false;
            return Some(self.syn(now));
        }
        if let Some(AckOut { ack, ece }) = self.rx.pending_old.take() {
            let mut s = self.segment(0, self.wire_snd(self.nxt), 0, now);
            s.flags = ACK | if ece { ECE } else { 0 };
            s.ack = self.wire_rcv(ack);
            return Some(s);
        }
        if self.state != State::Established {
            return None;
        }
        let seg = self.poll_data(now);
        if seg.is_some() {
            self.schedule_probe(now);
            return seg;
        }
        if self.rx.ack_now {
            let seq = self.wire_snd(self.nxt + u64::from(self.fin_sent));
            return Some(self.segment(ACK, seq, 0, now));
        }
        None
    }

    pub(super) fn poll_data(&mut self, now: u64) -> Option<Segment> {
        if !self.data_allowed {
            return None;
        }
        let window_fits = |c: &Conn| {
            let end = (c.nxt + u64::from(c.mss)).min(c.written);
            end <= c.una + c.snd_wnd
        };
        if self.probe_due {
            self.probe_due = false;
            self.stats.probes += 1;
            let seg = if self.nxt < self.written && window_fits(self) {
                self.probe_retrans = false;
                Some(self.new_data(now))
            } else if let Some(i) = self.sb.last() {
                self.probe_retrans = true;
                Some(self.retransmit(i, now))
            } else if self.nxt < self.written {
                // A persist probe: the window is closed and nothing is in flight.
                self.probe_retrans = false;
                Some(self.new_data(now))
            } else {
                None
            };
            self.probe_high = Some(self.nxt);
            if seg.is_some() {
                return seg;
            }
        }
        if self.sb.in_flight() >= self.cc.cwnd {
            if self.nxt < self.written || self.sb.next_lost().is_some() {
                self.validate_cwnd(true);
            }
            return None;
        }
        if let Some(i) = self.sb.next_lost() {
            // A lost segment's retransmission counts toward the episode's undo; a probe's,
            // timer-driven, does not.
            let tsval = self.tsval(now);
            self.undo_on_retransmit(tsval);
            return Some(self.retransmit(i, now));
        }
        if self.nxt < self.written {
            if window_fits(self) {
                let s = self.new_data(now);
                let limited = self.sb.in_flight() >= self.cc.cwnd;
                self.validate_cwnd(limited);
                return Some(s);
            }
            if self.sb.packets_out() == 0 && self.rto_at.is_none() {
                // Nothing in flight to bring a window update: the persist timer.
                self.rto_at = Some(now + self.rtt.rto());
            }
            return None;
        }
        if self.fin_queued && !self.fin_sent {
            self.fin_sent = true;
            let seq = self.wire_snd(self.written);
            let s = self.segment(FIN | ACK, seq, 0, now);
            if self.rto_at.is_none() {
                self.rto_at = Some(now + self.rtt.rto());
            }
            return Some(s);
        }
        None
    }
}
