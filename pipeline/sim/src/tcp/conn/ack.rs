//! What an ACK does to the sender: the window update rule, the scoreboard, RTT samples, the
//! algorithm's measurements, loss recovery and ECE reductions with PRR, window growth, and the
//! outcome of a tail-loss probe.

use super::*;

impl Conn {
    pub(super) fn on_ack(&mut self, seg: &Segment, now: u64) {
        let snd_max = self.nxt + u64::from(self.fin_sent);
        let Some(ack) = self.rel_snd(seg.ack, self.una) else {
            return;
        };
        if ack > snd_max {
            // It acknowledges what was never sent.
            self.rx.ack_now = true;
            return;
        }
        // The window (Linux's tcp_may_update_window): from an ACK that advances, a newer
        // segment, or the same segment with a larger (or zero) window. A duplicate ACK that only
        // shrinks the window leaves it as it was.
        let win = u64::from(seg.window) << self.snd_wscale;
        let advanced = ack > self.ack_max;
        let mut window_changed = false;
        if advanced
            || seq::gt(seg.seq, self.snd_wl1)
            || (seg.seq == self.snd_wl1 && (win > self.snd_wnd || win == 0))
        {
            window_changed = win != self.snd_wnd;
            self.snd_wnd = win;
            self.snd_wl1 = seg.seq;
        }
        if ack < self.ack_max {
            return;
        }
        let data_ack = ack.min(self.written);
        let prior_una = self.una;
        let mut sacks = [(0u64, 0u64); MAX_SACK_BLOCKS];
        let mut n = 0;
        // A D-SACK above the cumulative ACK, for the reordering it may show.
        let mut dsack_above = None;
        if self.sack_ok {
            // A D-SACK (RFC 2883 §4): the first block, below the cumulative ACK or inside the
            // second block.
            let blocks = seg.sack_blocks();
            let rel = |&(l, r): &(u32, u32)| {
                Some((self.rel_snd(l, self.una)?, self.rel_snd(r, self.una)?))
            };
            if let Some((l, r)) = blocks.first().and_then(rel)
                && l < r
                && (r <= ack
                    || blocks
                        .get(1)
                        .and_then(rel)
                        .is_some_and(|(l1, r1)| l >= l1 && r <= r1))
            {
                self.undo_on_dsack(l, r);
                dsack_above = (r > data_ack).then_some((l, r));
            }
            self.undo_update_reo_wnd(prior_una);
            for &(l, r) in seg.sack_blocks() {
                let (Some(l), Some(r)) = (self.rel_snd(l, self.una), self.rel_snd(r, self.una))
                else {
                    continue;
                };
                // D-SACKs (counted above) and nonsense are not SACK evidence.
                if r <= data_ack || l >= r || r > self.nxt {
                    continue;
                }
                sacks[n] = (l.max(data_ack), r);
                n += 1;
            }
        }
        let d = self
            .sb
            .on_ack(data_ack, &mut sacks[..n], now, self.rtt.min_rtt());
        if let Some((l, r)) = dsack_above {
            self.sb.dsack_reordered(l, r);
        }
        self.una = data_ack;
        self.ack_max = ack;
        if self.fin_sent && ack == self.written + 1 {
            self.fin_acked = true;
        }
        if advanced {
            self.consecutive_rtos = 0;
        }
        let ece = self.ecn_ok && seg.has(ECE);
        if let Some(t) = d.oldest_sent_at {
            self.rtt.sample(now.saturating_sub(t));
        }
        if ece {
            self.stats.delivered_ce += u64::from(d.segments);
        }
        self.cc.on_ack(&Acked {
            now,
            segments: d.segments,
            rtt: d.newest_sent_at.map(|t| now.saturating_sub(t)),
            ece,
            snd_una: self.wire_snd(self.una),
            snd_nxt: self.wire_snd(self.nxt),
            ack_delay_ns: self.hystart_ack_delay(),
        });
        // Duplicate ACKs, the loss signal without SACK.
        let sacked_new = n > 0 && d.segments > 0 && !advanced;
        if !advanced && seg.len == 0 && !window_changed && self.sb.packets_out() > 0 {
            self.dupacks += 1;
        } else if advanced {
            self.dupacks = 0;
        }
        self.tlp_ack(ack, advanced || window_changed || sacked_new);
        // Leaving a reduction or the loss state: CWR once something above high_seq is
        // acknowledged (so the CWR flag reached the receiver), recovery and loss at high_seq.
        let leave = match self.ca {
            Ca::Open => false,
            Ca::Cwr => self.una > self.high_seq,
            Ca::Recovery | Ca::Loss => self.una >= self.high_seq,
        };
        if leave && advanced {
            // Linux's tcp_try_undo_recovery: every retransmission D-SACKed, or the original
            // acknowledged (Eifel), undoes the reduction.
            if self.ca == Ca::Recovery && (self.undo_all_dsacked() || self.undo_packet_delayed(seg))
            {
                self.undo_reduction();
            } else {
                if self.reducing() {
                    self.cc.end_reduction();
                }
                if self.ca == Ca::Recovery {
                    self.undo_recovery_ended();
                }
                self.ca = Ca::Open;
                self.dupacks = 0;
            }
        }
        // Linux's tcp_try_undo_partial: an ACK that advances in recovery but not to its end,
        // for data the original transmission brought (its echoed timestamp predates the first
        // retransmission, Eifel), shows the hole was only late. The loss threshold rises to the
        // distance from the old cumulative ACK to the highest SACK; with retransmissions still
        // in flight this ACK marks nothing more lost, else the reduction is undone and the
        // lost marks cleared.
        let mut hold_losses = false;
        if self.ca == Ca::Recovery && advanced && !leave && self.undo_packet_delayed(seg) {
            self.sb.reordered_from(prior_una);
            if self.sb.retrans_out > 0 {
                hold_losses = true;
            } else {
                self.sb.unmark_lost();
                self.undo_reduction();
            }
        }
        // Linux's tcp_try_undo_dsack, in recovery or once open again: late D-SACKs for every
        // retransmission of the last recovery undo it.
        if matches!(self.ca, Ca::Open | Ca::Recovery) && self.undo_all_dsacked() {
            self.undo_reduction();
        }
        // ECE: one reduction per window (RFC 3168 §6.1.2).
        if ece && self.ca == Ca::Open {
            self.start_reduction(false);
            self.ca = Ca::Cwr;
            self.stats.cwr += 1;
        }
        let (lost_head, newly_lost) = if hold_losses {
            (false, 0)
        } else if self.sack_ok && self.cfg.rack {
            // Linux's tcp_time_to_recover with RACK: anything deemed lost starts recovery.
            let newly = if d.rack_advanced {
                self.rack_mark_lost(now)
            } else {
                0
            };
            (self.sb.lost_out > 0, newly)
        } else if self.sack_ok {
            self.sb.mark_lost()
        } else if self.dupacks >= self.sb.reordering {
            self.sb.mark_head_lost();
            (true, 1)
        } else {
            (false, 0)
        };
        if lost_head && matches!(self.ca, Ca::Open | Ca::Cwr) {
            self.enter_recovery();
        }
        if self.reducing() {
            self.prr(d.segments, advanced && newly_lost == 0);
        } else if self.may_raise_cwnd(advanced, d.segments) && self.is_cwnd_limited() {
            self.cc.grow(&Acked {
                now,
                segments: d.segments,
                ..Acked::default()
            });
        }
        // Timers: the RTO restarts when data is acknowledged (RFC 6298 §5.3) and stops when
        // nothing is outstanding.
        if self.sb.packets_out() == 0 && (!self.fin_sent || self.fin_acked) {
            self.rto_at = None;
            self.probe_at = None;
            self.reo_at = None;
        } else if advanced {
            self.rto_at = Some(now + self.rtt.rto());
            self.schedule_probe(now);
        }
    }

    /// Fast recovery begins from the open or CWR state (Linux's `tcp_enter_recovery`), keeping
    /// what an undo may restore: from the open state the window now and the threshold
    /// `tcp_current_ssthresh` gives (at least three quarters of the window); from CWR the window
    /// before the ECE reduction, which goes on with its high_seq.
    fn enter_recovery(&mut self) {
        if self.ca == Ca::Open {
            let (cwnd, ssthresh) = (self.cc.cwnd, self.cc.ssthresh);
            self.undo_begin(cwnd, Some(ssthresh.max(cwnd / 2 + cwnd / 4)));
            self.start_reduction(true);
        } else {
            self.undo_begin(self.prior_cwnd, None);
            self.cc.enter_recovery_reducing();
        }
        self.ca = Ca::Recovery;
        self.stats.recoveries += 1;
    }

    /// RACK's reordering window (Linux's `tcp_rack_reo_wnd`): none while no reordering has
    /// been seen and the connection is recovering or holds `reordering` SACKed segments (so
    /// RACK is at least as quick as the duplicate-ACK threshold); else a quarter of the minimum
    /// RTT times the steps D-SACKs have added (`undo.rs`), at most the smoothed RTT.
    pub(super) fn rack_reo_wnd(&self) -> u64 {
        if self.sb.reord_seen == 0
            && (matches!(self.ca, Ca::Recovery | Ca::Loss)
                || self.sb.sacked_out >= self.sb.reordering)
        {
            return 0;
        }
        let quarter = self.rtt.min_rtt().unwrap_or(0) / 4;
        (quarter * u64::from(self.undo.reo_steps)).min(self.rtt.srtt().unwrap_or(u64::MAX))
    }

    /// RACK's loss detection (Linux's `tcp_rack_mark_lost`); arms the reordering timer for
    /// segments that may yet be lost, rounded up to the clock tick plus two ticks (Linux's
    /// `TCP_TIMEOUT_MIN`). Returns how many segments were newly deemed lost.
    pub(super) fn rack_mark_lost(&mut self, now: u64) -> u32 {
        let (newly, wait) = self.sb.rack_detect(now, self.rack_reo_wnd());
        self.reo_at = wait.map(|w| {
            let tick = self.cfg.jiffy_ns.max(1);
            now + (w.div_ceil(tick) + 2) * tick
        });
        newly
    }

    /// The reordering timer fired (Linux's `tcp_rack_reo_timeout`): what RACK now finds lost
    /// starts recovery if none is under way, with one segment allowed at once.
    pub(super) fn rack_timeout(&mut self, now: u64) {
        if self.rack_mark_lost(now) == 0 {
            return;
        }
        if matches!(self.ca, Ca::Recovery | Ca::Loss) {
            return;
        }
        self.enter_recovery();
        self.prr(1, false);
    }

    /// Linux's `tcp_may_raise_cwnd`: on cumulatively acknowledged data, or on any delivery once
    /// reordering has raised the loss threshold.
    pub(super) fn may_raise_cwnd(&self, advanced: bool, delivered: u32) -> bool {
        delivered > 0 && (advanced || self.sb.reordering > self.cfg.reordering)
    }

    /// HyStart's cushion (`hystart_ack_delay`): four 64 KB GSO bursts at the pacing rate Linux
    /// computes (twice cwnd × MSS per smoothed RTT in slow start), at most 1 ms.
    pub(super) fn hystart_ack_delay(&self) -> u64 {
        let Some(srtt) = self.rtt.srtt() else {
            return 0;
        };
        let rate = 2 * u64::from(self.cc.cwnd) * u64::from(self.mss) * 1_000_000_000 / srtt.max(1);
        if rate == 0 {
            return 0;
        }
        (4 * 65_536 * 1_000_000_000 / rate).min(1_000_000)
    }

    /// What an ACK does to a tail-loss probe in flight (Linux's `tcp_process_tlp_ack`): a probe
    /// that retransmitted, followed by an ACK beyond it, repaired a loss, so the window is cut
    /// as for one; a pure duplicate ACK at it says the original arrived too.
    pub(super) fn tlp_ack(&mut self, ack: u64, not_dup: bool) {
        let Some(high) = self.probe_high else {
            return;
        };
        if ack < high {
            return;
        }
        if !self.probe_retrans {
            self.probe_high = None;
        } else if ack > high {
            self.probe_high = None;
            if matches!(self.ca, Ca::Open | Ca::Cwr) {
                self.start_reduction(false);
                self.cc.end_reduction();
                self.ca = Ca::Open;
            }
        } else if !not_dup {
            self.probe_high = None;
        }
    }

    /// Linux's `tcp_init_cwnd_reduction`: PRR starts, high_seq is snd_nxt, the algorithm
    /// sets its threshold, and CWR is queued for the next new segment.
    pub(super) fn start_reduction(&mut self, loss: bool) {
        self.prior_cwnd = self.cc.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.high_seq = self.nxt;
        self.cc.reduce(loss);
        if self.ecn_ok {
            self.cwr_pending = true;
        }
    }

    /// Proportional Rate Reduction (RFC 6937, Linux's `tcp_cwnd_reduction`); `bonus`: the ACK
    /// advanced and found nothing newly lost (one more segment may go).
    pub(super) fn prr(&mut self, delivered: u32, bonus: bool) {
        if delivered == 0 || self.prior_cwnd == 0 {
            return;
        }
        self.prr_delivered += delivered;
        let in_flight = self.sb.in_flight();
        let ssthresh = self.cc.ssthresh;
        let sndcnt = if in_flight > ssthresh {
            let share = (u64::from(ssthresh) * u64::from(self.prr_delivered))
                .div_ceil(u64::from(self.prior_cwnd));
            (share as u32).saturating_sub(self.prr_out)
        } else {
            let mut n = self
                .prr_delivered
                .saturating_sub(self.prr_out)
                .max(delivered);
            if bonus {
                n += 1;
            }
            n.min(ssthresh - in_flight)
        };
        // A fast retransmit goes at once on entering recovery.
        let sndcnt = sndcnt.max(u32::from(self.prr_out == 0));
        self.cc.cwnd = in_flight + sndcnt;
    }

    /// Linux's `tcp_is_cwnd_limited`.
    pub(super) fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited || (self.cc.in_slow_start() && self.cc.cwnd < 2 * self.max_packets_out)
    }

    /// Linux's `tcp_cwnd_validate` after a send: whether the window held the sender back over
    /// the last window of data.
    pub(super) fn validate_cwnd(&mut self, limited: bool) {
        let out = self.sb.packets_out();
        if self.una >= self.cwnd_usage_end
            || limited
            || (!self.cwnd_limited && out > self.max_packets_out)
        {
            self.cwnd_limited = limited;
            self.max_packets_out = out;
            self.cwnd_usage_end = self.nxt;
        }
    }
}
