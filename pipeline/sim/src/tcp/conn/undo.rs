//! D-SACKs (RFC 2883) at the sender: a reduction they show spurious is undone (RFC 3708; Linux's
//! `undo_marker`, `undo_retrans`, `tcp_try_undo_dsack` and `tcp_try_undo_recovery`, with the
//! timestamp test of Eifel, RFC 3522, `tcp_packet_delayed`), and they widen RACK's reordering
//! window (RFC 8985 §6.2 step 4; Linux's `tcp_rack_update_reo_wnd`).
//!
//! Linux keeps a recovery's undo state from its start: `snd_una` then (the marker) and a count
//! of its retransmissions that no D-SACK has yet shown arrived twice. When the count reaches 0,
//! in recovery or once the connection is open again, every retransmission was spurious, and
//! the window and threshold go back to what they were. At the end of a recovery the same undo
//! follows when the ACK's echoed timestamp predates the first retransmission (the original
//! arrived). After a retransmission timeout there is no undo (F-RTO is not modelled).

use super::*;

/// Recoveries a widened reordering window outlives without another D-SACK
/// (`TCP_RACK_RECOVERY_THRESH`).
const REO_PERSIST: u32 = 16;

/// The undo state and RACK's window steps.
#[derive(Clone, Debug)]
pub(super) struct Undo {
    /// `snd_una` when the recovery began; None: nothing to undo.
    marker: Option<u64>,
    /// Its retransmissions no D-SACK has shown spurious yet; None: none sent yet (Linux's -1).
    retrans: Option<u32>,
    /// The window before the reduction.
    cwnd: u32,
    /// The threshold before it (None when an ECE reduction was already under way).
    ssthresh: Option<u32>,
    /// The timestamp value of the episode's first retransmission.
    stamp: Option<u32>,
    /// RACK's reordering window, in quarters of the minimum RTT (1 to 255).
    pub(super) reo_steps: u32,
    /// Recoveries left before `reo_steps` falls back to 1.
    reo_persist: u32,
    /// A D-SACK arrived after reordering was seen, and has not widened the window yet.
    dsack_seen: bool,
    /// The window widens at most once a round trip: not before this is acknowledged.
    reo_round_end: u64,
}

impl Default for Undo {
    fn default() -> Self {
        Undo {
            marker: None,
            retrans: None,
            cwnd: 0,
            ssthresh: None,
            stamp: None,
            reo_steps: 1,
            reo_persist: 0,
            dsack_seen: false,
            reo_round_end: 0,
        }
    }
}

impl Conn {
    /// A recovery begins (Linux's `tcp_init_undo`), with the window and threshold it may
    /// restore.
    pub(super) fn undo_begin(&mut self, cwnd: u32, ssthresh: Option<u32>) {
        let u = &mut self.undo;
        u.marker = Some(self.una);
        u.retrans = None;
        u.cwnd = cwnd;
        u.ssthresh = ssthresh;
        u.stamp = None;
    }

    /// A retransmission of the episode, sent with timestamp value `tsval`.
    pub(super) fn undo_on_retransmit(&mut self, tsval: u32) {
        let u = &mut self.undo;
        if u.marker.is_some() {
            u.retrans = Some(u.retrans.unwrap_or(0) + 1);
            u.stamp.get_or_insert(tsval);
        }
    }

    /// A timeout: nothing of the episode can be undone.
    pub(super) fn undo_forget(&mut self) {
        self.undo.marker = None;
    }

    /// A D-SACK for `[l, r)` of the send space (`tcp_check_dsack`): a segment arrived twice, so
    /// one of the episode's retransmissions above the marker was spurious.
    pub(super) fn undo_on_dsack(&mut self, l: u64, r: u64) {
        self.stats.dsacks += 1;
        // RACK widens its window only for D-SACKs that reordering may explain: none before any
        // reordering was seen (`tcp_dsack_seen`).
        // Nor for a D-SACK of a tail-loss probe (`FLAG_DSACK_TLP`).
        let reordered = self.sb.reord_seen > 0 && self.probe_high != Some(r);
        let u = &mut self.undo;
        u.dsack_seen |= reordered;
        if let (Some(m), Some(n)) = (u.marker, u.retrans)
            && r > m
        {
            let segs = (r - l).div_ceil(u64::from(self.mss.max(1))).max(1);
            u.retrans = Some(n.saturating_sub(u32::try_from(segs).unwrap_or(u32::MAX)));
        }
    }

    /// After an ACK: RACK's window widens for a D-SACK seen, once a round trip
    /// (`tcp_rack_update_reo_wnd`).
    pub(super) fn undo_update_reo_wnd(&mut self, prior_una: u64) {
        let u = &mut self.undo;
        if !u.dsack_seen {
            if u.reo_persist == 0 {
                u.reo_steps = 1;
            }
            return;
        }
        u.dsack_seen = false;
        if prior_una >= u.reo_round_end {
            u.reo_steps = (u.reo_steps + 1).min(0xff);
            u.reo_round_end = self.nxt;
            u.reo_persist = REO_PERSIST;
        }
    }

    /// A recovery ended without undo: a widened window lasts one recovery less.
    pub(super) fn undo_recovery_ended(&mut self) {
        self.undo.reo_persist = self.undo.reo_persist.saturating_sub(1);
    }

    /// Whether every retransmission of the episode was shown spurious by D-SACKs.
    pub(super) fn undo_all_dsacked(&self) -> bool {
        self.undo.marker.is_some() && self.undo.retrans == Some(0)
    }

    /// Eifel: the ACK echoes a timestamp from before the episode's first retransmission, so
    /// what it acknowledges is the original (`tcp_packet_delayed`).
    pub(super) fn undo_packet_delayed(&self, seg: &Segment) -> bool {
        match (self.undo.marker, self.undo.stamp, seg.ts) {
            (Some(_), Some(stamp), Some((_, ecr))) => self.ts_ok && seq::lt(ecr, stamp),
            _ => false,
        }
    }

    /// Undoes the reduction (`tcp_undo_cwnd_reduction`): the window back to at least what it
    /// was, the threshold to what it was if higher; the connection is open.
    pub(super) fn undo_reduction(&mut self) {
        let u = &mut self.undo;
        u.marker = None;
        u.reo_persist = (u.reo_persist + 1).min(REO_PERSIST);
        self.cc.undo(u.cwnd, u.ssthresh);
        self.ca = Ca::Open;
        self.dupacks = 0;
        self.stats.undos += 1;
    }
}
