//! One endpoint of a TCP connection, sans-IO: [`Conn::on_segment`] takes what arrives,
//! [`Conn::poll_transmit`] gives what to send now, [`Conn::poll_timeout`] and
//! [`Conn::on_timeout`] drive its timers. The application writes byte counts
//! ([`Conn::write`]) and reads what arrived in order ([`Conn::received`]).
//!
//! The send side follows Linux (see [`super`] for what is and is not modelled): the window in
//! segments ([`super::cc`]), SACK loss recovery ([`super::scoreboard`]) with Proportional Rate
//! Reduction (RFC 6937 as `tcp_cwnd_reduction`), one reduction per window for ECE (RFC 3168
//! §6.1.2), the RTO ([`super::rtt`]) and a tail-loss probe. The receive side is
//! [`super::recv`].

use super::cc::{Acked, Cc, Kind};
use super::recv::{AckOut, Echo, Receiver};
use super::rtt::Rtt;
use super::scoreboard::Scoreboard;
use super::segment::{ACK, CWR, ECE, FIN, MAX_SACK_BLOCKS, RST, SYN, Segment};
use super::seq;

/// A connection's settings (Linux's defaults where it has one).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Congestion control.
    pub cc: Kind,
    /// Negotiate ECN (RFC 3168; DCTCP's echo with `cc` dctcp).
    pub ecn: bool,
    /// The MSS this end advertises: the link MTU less 40 bytes of IPv4 and TCP headers (60 for
    /// IPv6).
    pub mss: u16,
    /// Initial window, segments (RFC 6928, Linux's `TCP_INIT_CWND`).
    pub init_cwnd: u32,
    /// Minimum RTO, ns (Linux's `TCP_RTO_MIN`, 200 ms).
    pub rto_min_ns: u64,
    /// Delayed-ACK timeout, ns (Linux's `TCP_ATO_MIN`, 40 ms).
    pub delack_ns: u64,
    /// Data segments acknowledged at once at the start (Linux's `TCP_MAX_QUICKACKS`).
    pub quickacks: u32,
    /// Receive buffer, bytes (the window; Linux's `tcp_rmem` maximum, without autotuning).
    pub rcv_buf: u32,
    /// Initial loss threshold in segments (`net.ipv4.tcp_reordering`).
    pub reordering: u32,
    /// Highest loss threshold reordering may raise it to (`net.ipv4.tcp_max_reordering`).
    pub max_reordering: u32,
    /// Offer SACK.
    pub sack: bool,
    /// Offer timestamps.
    pub timestamps: bool,
    /// Send tail-loss probes (`net.ipv4.tcp_early_retrans` 3: TLP).
    pub tlp: bool,
    /// The probe timeout's slack over two smoothed RTTs, ns (Linux's `TCP_TIMEOUT_MIN_US`, 2
    /// ms; with one segment out Linux adds the minimum RTO instead).
    pub tlp_min_ns: u64,
    /// The kernel's clock tick, ns: the probe timeout is rounded up to it (4 ms at Debian's
    /// HZ = 250).
    pub jiffy_ns: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cc: Kind::Cubic,
            ecn: false,
            mss: 1460,
            init_cwnd: 10,
            rto_min_ns: 200_000_000,
            delack_ns: 40_000_000,
            quickacks: 16,
            rcv_buf: 6 << 20,
            reordering: 3,
            max_reordering: 300,
            sack: true,
            timestamps: true,
            tlp: true,
            tlp_min_ns: 2_000_000,
            jiffy_ns: 4_000_000,
        }
    }
}

/// Where the connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// The client sent its SYN.
    SynSent,
    /// The server answered a SYN.
    SynReceived,
    /// Data flows.
    Established,
    /// Reset.
    Closed,
}

/// The sender's congestion state (Linux's `icsk_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ca {
    Open,
    /// Reducing for an ECE.
    Cwr,
    /// SACK loss recovery.
    Recovery,
    /// After a timeout.
    Loss,
}

/// What a connection did, for reports (named after `TCP_INFO` where it has them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Segments sent (all).
    pub segs_out: u64,
    /// Data segments sent, retransmissions included.
    pub data_segs_out: u64,
    /// Retransmitted segments (`tcpi_total_retrans`).
    pub retransmits: u64,
    /// Fast recoveries entered.
    pub recoveries: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Tail-loss probes sent.
    pub probes: u64,
    /// Reductions for ECE.
    pub cwr: u64,
    /// Segments delivered with ECE on their ACK (`tcpi_delivered_ce`).
    pub delivered_ce: u64,
    /// Original transmissions seen out of order (`tcpi_reord_seen`).
    pub reord_seen: u64,
    /// Out-of-order data segments received (`tcpi_rcv_ooopack`).
    pub rcv_ooopack: u64,
}

/// One endpoint.
#[derive(Clone, Debug)]
pub struct Conn {
    cfg: Config,
    state: State,
    iss: u32,
    irs: u32,
    ts_offset: u32,
    // Send side, in bytes from the first data byte.
    mss: u32,
    una: u64,
    nxt: u64,
    written: u64,
    fin_queued: bool,
    fin_sent: bool,
    fin_acked: bool,
    syn_pending: bool,
    syn_retransmits: u32,
    /// The highest acknowledgment (relative, the FIN counted).
    ack_max: u64,
    syn_sent_at: u64,
    snd_wnd: u64,
    snd_wl1: u32,
    snd_wscale: u8,
    rcv_wscale: u8,
    cc: Cc,
    rtt: Rtt,
    sb: Scoreboard,
    ca: Ca,
    high_seq: u64,
    prior_cwnd: u32,
    prr_delivered: u32,
    prr_out: u32,
    cwr_pending: bool,
    ecn_ok: bool,
    sack_ok: bool,
    ts_ok: bool,
    rto_at: Option<u64>,
    probe_at: Option<u64>,
    probe_due: bool,
    probe_high: Option<u64>,
    probe_retrans: bool,
    consecutive_rtos: u32,
    dupacks: u32,
    cwnd_limited: bool,
    max_packets_out: u32,
    cwnd_usage_end: u64,
    // Receive side.
    rx: Receiver,
    peer_fin: bool,
    peer_fin_at: Option<u64>,
    /// Data may go to the host's queue now (TCP Small Queues, decided by the host).
    data_allowed: bool,
    ts_recent: u32,
    stats: Stats,
}

/// The smallest shift that fits `buf` in the 16-bit window field (RFC 7323 §2.3, at most 14).
fn wscale_for(buf: u32) -> u8 {
    let mut s = 0;
    while s < 14 && (buf >> s) > 0xffff {
        s += 1;
    }
    s
}

impl Conn {
    fn new(cfg: Config, iss: u32, state: State) -> Conn {
        let echo = match (cfg.ecn, cfg.cc) {
            (false, _) => Echo::Off,
            (true, Kind::Dctcp) => Echo::Dctcp,
            (true, _) => Echo::Classic,
        };
        let mss = u32::from(cfg.mss);
        Conn {
            cc: Cc::new(cfg.cc, cfg.init_cwnd),
            rtt: Rtt::new(cfg.rto_min_ns),
            sb: Scoreboard::new(cfg.reordering, cfg.max_reordering, mss),
            rx: Receiver::new(echo, mss, cfg.quickacks, cfg.delack_ns, cfg.rcv_buf),
            rcv_wscale: wscale_for(cfg.rcv_buf),
            state,
            iss,
            irs: 0,
            ts_offset: iss.rotate_left(13),
            mss,
            una: 0,
            nxt: 0,
            written: 0,
            fin_queued: false,
            fin_sent: false,
            fin_acked: false,
            syn_pending: true,
            syn_retransmits: 0,
            ack_max: 0,
            syn_sent_at: 0,
            snd_wnd: 0xffff,
            snd_wl1: 0,
            snd_wscale: 0,
            ca: Ca::Open,
            high_seq: 0,
            prior_cwnd: 0,
            prr_delivered: 0,
            prr_out: 0,
            cwr_pending: false,
            ecn_ok: false,
            sack_ok: false,
            ts_ok: false,
            rto_at: None,
            probe_at: None,
            probe_due: false,
            probe_high: None,
            probe_retrans: false,
            consecutive_rtos: 0,
            dupacks: 0,
            cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_end: 0,
            peer_fin: false,
            peer_fin_at: None,
            data_allowed: true,
            ts_recent: 0,
            stats: Stats::default(),
            cfg,
        }
    }

    /// An active open with initial sequence number `iss`: its SYN is the first segment out.
    pub fn client(cfg: Config, iss: u32) -> Conn {
        Conn::new(cfg, iss, State::SynSent)
    }

    /// A passive open answering `syn`: its SYN-ACK is the first segment out.
    pub fn server(cfg: Config, iss: u32, syn: &Segment) -> Conn {
        let mut c = Conn::new(cfg, iss, State::SynReceived);
        c.irs = syn.seq;
        c.take_syn_options(syn);
        // RFC 3168 §6.1.1: an ECN-setup SYN has ECE and CWR.
        c.ecn_ok = c.cfg.ecn && syn.has(ECE) && syn.has(CWR);
        c.snd_wnd = u64::from(syn.window);
        c.snd_wl1 = syn.seq;
        if let Some((v, _)) = syn.ts {
            c.ts_recent = v;
        }
        c
    }

    fn take_syn_options(&mut self, syn: &Segment) {
        self.sack_ok = self.cfg.sack && syn.sack_permitted;
        self.ts_ok = self.cfg.timestamps && syn.ts.is_some();
        match syn.wscale {
            Some(s) => self.snd_wscale = s.min(14),
            // RFC 7323 §2.2: both offer it or neither scales.
            None => self.rcv_wscale = 0,
        }
        // Linux's floor: TCP_MIN_MSS.
        let peer = syn.mss.map_or(536, u32::from);
        self.mss = (u32::from(self.cfg.mss).min(peer) - if self.ts_ok { 12 } else { 0 }).max(88);
        self.sb = Scoreboard::new(self.cfg.reordering, self.cfg.max_reordering, self.mss);
        self.rx = Receiver::new(
            match (self.cfg.ecn, self.cfg.cc) {
                (false, _) => Echo::Off,
                (true, Kind::Dctcp) => Echo::Dctcp,
                (true, _) => Echo::Classic,
            },
            self.mss,
            self.cfg.quickacks,
            self.cfg.delack_ns,
            self.cfg.rcv_buf,
        );
    }

    /// The state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The sending MSS (the payload of a full segment), bytes.
    pub fn mss(&self) -> u32 {
        self.mss
    }

    /// The congestion window, segments.
    pub fn cwnd(&self) -> u32 {
        self.cc.cwnd
    }

    /// The slow-start threshold, segments.
    pub fn ssthresh(&self) -> u32 {
        self.cc.ssthresh
    }

    /// The smoothed RTT, ns, once sampled.
    pub fn srtt(&self) -> Option<u64> {
        self.rtt.srtt()
    }

    /// The counters (the receiver's out-of-order count and reordering included).
    pub fn stats(&self) -> Stats {
        Stats {
            rcv_ooopack: self.rx.ooo_packets,
            reord_seen: self.sb.reord_seen,
            ..self.stats
        }
    }

    /// The loss threshold in segments, as reordering has raised it.
    pub fn reordering(&self) -> u32 {
        self.sb.reordering
    }

    /// DCTCP's α (0 for the others).
    pub fn alpha(&self) -> f64 {
        self.cc.alpha()
    }

    /// Whether ECN was negotiated.
    pub fn ecn(&self) -> bool {
        self.ecn_ok
    }

    /// The application writes `bytes` more.
    pub fn write(&mut self, bytes: u64) {
        self.written += bytes;
    }

    /// The application closes its side: a FIN after the data written.
    pub fn close(&mut self) {
        self.fin_queued = true;
    }

    /// Bytes the application has read (everything that arrived in order).
    pub fn received(&self) -> u64 {
        self.rx.nxt
    }

    /// Bytes the peer acknowledged.
    pub fn acked(&self) -> u64 {
        self.una
    }

    /// Whether the peer closed its side (its FIN arrived in order).
    pub fn peer_closed(&self) -> bool {
        self.peer_fin
    }

    /// Whether everything written and the FIN (if closed) were acknowledged.
    pub fn all_acked(&self) -> bool {
        self.una == self.written && (!self.fin_queued || self.fin_acked)
    }

    fn wire_snd(&self, rel: u64) -> u32 {
        self.iss.wrapping_add(1).wrapping_add(rel as u32)
    }

    fn wire_rcv(&self, rel: u64) -> u32 {
        self.irs.wrapping_add(1).wrapping_add(rel as u32)
    }

    /// A received sequence number as an offset, by its distance from `near` (relative).
    fn rel_rcv(&self, s: u32, near: u64) -> Option<u64> {
        let d = s.wrapping_sub(self.wire_rcv(near)) as i32;
        u64::try_from(near as i64 + i64::from(d)).ok()
    }

    /// An acknowledgment number as an offset of the send side.
    fn rel_snd(&self, s: u32, near: u64) -> Option<u64> {
        let d = s.wrapping_sub(self.wire_snd(near)) as i32;
        u64::try_from(near as i64 + i64::from(d)).ok()
    }

    fn tsval(&self, now: u64) -> u32 {
        ((now / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }

    fn reducing(&self) -> bool {
        matches!(self.ca, Ca::Cwr | Ca::Recovery)
    }

    // ---- Arrivals ----

    /// A segment arrived at `now`; `ce` says whether its IP header was CE-marked.
    pub fn on_segment(&mut self, seg: &Segment, ce: bool, now: u64) {
        if self.state == State::Closed {
            return;
        }
        if seg.has(RST) {
            self.state = State::Closed;
            return;
        }
        match self.state {
            State::SynSent => {
                if seg.has(SYN) && seg.has(ACK) && seg.ack == self.iss.wrapping_add(1) {
                    self.irs = seg.seq;
                    self.take_syn_options(seg);
                    self.ecn_ok = self.cfg.ecn && seg.has(ECE) && !seg.has(CWR);
                    self.snd_wnd = u64::from(seg.window);
                    self.snd_wl1 = seg.seq;
                    if let Some((v, _)) = seg.ts {
                        self.ts_recent = v;
                    }
                    self.established(now);
                    self.rx.ack_now = true;
                }
                return;
            }
            State::SynReceived => {
                if seg.has(SYN) && !seg.has(ACK) {
                    // Our SYN-ACK was lost: send it again.
                    self.syn_pending = true;
                    return;
                }
                if seg.has(ACK) && seg.ack == self.iss.wrapping_add(1) {
                    self.established(now);
                } else {
                    return;
                }
            }
            State::Established | State::Closed => {}
        }
        if seg.has(SYN) {
            // A SYN-ACK again: our ACK of it was lost.
            self.rx.ack_now = true;
            return;
        }
        // PAWS (RFC 7323 §5.3): an older timestamp than the last in-window one is a stale
        // duplicate; drop it and acknowledge.
        if self.ts_ok
            && let Some((v, _)) = seg.ts
        {
            if seq::lt(v, self.ts_recent) {
                self.rx.ack_now = true;
                return;
            }
            if self
                .rel_rcv(seg.seq, self.rx.nxt)
                .is_some_and(|s| s <= self.rx.nxt)
            {
                self.ts_recent = v;
            }
        }
        if seg.has(ACK) {
            self.on_ack(seg, now);
        }
        if seg.len > 0 || seg.has(FIN) {
            let Some(start) = self.rel_rcv(seg.seq, self.rx.nxt) else {
                self.rx.ack_now = true;
                return;
            };
            if seg.has(CWR) {
                self.rx.on_cwr(seg.len > 0);
            }
            let end = start + u64::from(seg.len);
            if seg.len > 0 {
                let timing = (self.rtt.rto(), self.rtt.srtt());
                self.rx.on_data((start, end), ce, now, timing);
            }
            if seg.has(FIN) {
                // A FIN out of order waits for the data before it.
                self.peer_fin_at = Some(end);
                self.rx.ack_now = true;
            }
            if self.peer_fin_at.is_some_and(|f| self.rx.nxt >= f) {
                self.peer_fin = true;
            }
        }
    }

    fn established(&mut self, now: u64) {
        self.state = State::Established;
        if self.syn_retransmits == 0 {
            self.rtt.sample(now.saturating_sub(self.syn_sent_at));
        } else if self.syn_retransmits > 1 {
            // RFC 6298 §5.7 as Linux applies it (`tcp_init_transfer`): after more than one
            // retransmission of the SYN, a window of one segment.
            self.cc.cwnd = 1;
        }
        self.rto_at = None;
        self.cc.start(self.wire_snd(0));
        self.cwnd_usage_end = 0;
    }

    fn on_ack(&mut self, seg: &Segment, now: u64) {
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
        let mut sacks = [(0u64, 0u64); MAX_SACK_BLOCKS];
        let mut n = 0;
        if self.sack_ok {
            for &(l, r) in seg.sack_blocks() {
                let (Some(l), Some(r)) = (self.rel_snd(l, self.una), self.rel_snd(r, self.una))
                else {
                    continue;
                };
                // D-SACKs (below the cumulative point) and nonsense are ignored.
                if r <= data_ack || l >= r || r > self.nxt {
                    continue;
                }
                sacks[n] = (l.max(data_ack), r);
                n += 1;
            }
        }
        let d = self.sb.on_ack(data_ack, &mut sacks[..n]);
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
            if self.reducing() {
                self.cc.end_reduction();
            }
            self.ca = Ca::Open;
            self.dupacks = 0;
        }
        // ECE: one reduction per window (RFC 3168 §6.1.2).
        if ece && self.ca == Ca::Open {
            self.start_reduction(false);
            self.ca = Ca::Cwr;
            self.stats.cwr += 1;
        }
        let (lost_head, newly_lost) = if self.sack_ok {
            self.sb.mark_lost()
        } else if self.dupacks >= self.sb.reordering {
            self.sb.mark_head_lost();
            (true, 1)
        } else {
            (false, 0)
        };
        if lost_head && matches!(self.ca, Ca::Open | Ca::Cwr) {
            if self.ca == Ca::Open {
                self.start_reduction(true);
            } else {
                // Already reducing for an ECE: that reduction (and its high_seq) goes on.
                self.cc.enter_recovery_reducing();
            }
            self.ca = Ca::Recovery;
            self.stats.recoveries += 1;
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
        } else if advanced {
            self.rto_at = Some(now + self.rtt.rto());
            self.schedule_probe(now);
        }
    }

    /// Linux's `tcp_may_raise_cwnd`: on cumulatively acknowledged data, or on any delivery once
    /// reordering has raised the loss threshold.
    fn may_raise_cwnd(&self, advanced: bool, delivered: u32) -> bool {
        delivered > 0 && (advanced || self.sb.reordering > self.cfg.reordering)
    }

    /// HyStart's cushion (`hystart_ack_delay`): four 64 KB GSO bursts at the pacing rate Linux
    /// computes (twice cwnd × MSS per smoothed RTT in slow start), at most 1 ms.
    fn hystart_ack_delay(&self) -> u64 {
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
    fn tlp_ack(&mut self, ack: u64, not_dup: bool) {
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
    fn start_reduction(&mut self, loss: bool) {
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
    fn prr(&mut self, delivered: u32, bonus: bool) {
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
    fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited || (self.cc.in_slow_start() && self.cc.cwnd < 2 * self.max_packets_out)
    }

    /// Linux's `tcp_cwnd_validate` after a send: whether the window held the sender back over
    /// the last window of data.
    fn validate_cwnd(&mut self, limited: bool) {
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

    /// Linux's `tcp_schedule_loss_probe`: in Open or CWR, with SACK and an RTT, one probe at a
    /// time, two smoothed RTTs plus 2 ms (plus the minimum RTO instead with one segment out),
    /// rounded up to the clock tick, never after the RTO.
    fn schedule_probe(&mut self, now: u64) {
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
        [self.rto_at, self.probe_at, self.rx.deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Runs the timers due at `now`.
    pub fn on_timeout(&mut self, now: u64) {
        self.rx.on_timer(now);
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

    fn retransmission_timeout(&mut self, now: u64) {
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
        self.ca = Ca::Loss;
        self.high_seq = self.nxt;
        self.dupacks = 0;
        self.probe_at = None;
        self.probe_due = false;
        self.probe_high = None;
        self.rto_at = Some(now + self.rtt.rto());
    }

    // ---- Departures ----

    fn segment(&mut self, flags: u8, seq: u32, len: u32, now: u64) -> Segment {
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

    fn syn(&mut self, now: u64) -> Segment {
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

    fn data(&mut self, start: u64, end: u64, retransmission: bool, now: u64) -> Segment {
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

    fn new_data(&mut self, now: u64) -> Segment {
        let start = self.nxt;
        let end = (start + u64::from(self.mss)).min(self.written);
        self.sb.sent(start, end, now);
        self.nxt = end;
        self.data(start, end, false, now)
    }

    /// Retransmits scoreboard segment `i`; the head's retransmission restarts the RTO
    /// (`tcp_xmit_retransmit_queue`).
    fn retransmit(&mut self, i: usize, now: u64) -> Segment {
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

    fn poll_data(&mut self, now: u64) -> Option<Segment> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A client established by hand: ISS 100, the peer's ISS 5000, no window scaling from the
    /// peer, timestamps on; it has sent 10 segments.
    fn established() -> Conn {
        let mut c = Conn::client(Config::default(), 100);
        let syn = c.poll_transmit(0).unwrap();
        assert!(syn.has(SYN) && syn.mss == Some(1460) && syn.wscale == Some(7));
        c.on_segment(
            &Segment {
                seq: 5000,
                ack: 101,
                flags: SYN | ACK,
                window: 60_000,
                mss: Some(1460),
                sack_permitted: true,
                ts: Some((1_000, syn.ts.unwrap().0)),
                ..Segment::default()
            },
            false,
            100_000,
        );
        assert_eq!(c.state(), State::Established);
        assert!(c.poll_transmit(100_000).is_some_and(|a| a.flags == ACK));
        c.write(100_000);
        for _ in 0..10 {
            assert!(c.poll_transmit(100_000).is_some_and(|s| s.len == 1448));
        }
        c
    }

    fn ack(ack: u32, window: u16, ts: u32) -> Segment {
        Segment {
            seq: 5001,
            ack,
            flags: ACK,
            window,
            ts: Some((ts, 0)),
            ..Segment::default()
        }
    }

    #[test]
    fn a_duplicate_ack_that_only_shrinks_the_window_leaves_it() {
        let mut c = established();
        assert_eq!(c.snd_wnd, 60_000);
        // An ACK that advances takes whatever window it carries.
        c.on_segment(&ack(101 + 1448, 50_000, 1_001), false, 200_000);
        assert_eq!((c.una, c.snd_wnd), (1448, 50_000));
        // A duplicate (same ACK, same sequence number) with a smaller window: not taken.
        c.on_segment(&ack(101 + 1448, 2_000, 1_001), false, 200_000);
        assert_eq!(c.snd_wnd, 50_000);
        // With a larger one: taken; with zero: taken.
        c.on_segment(&ack(101 + 1448, 55_000, 1_001), false, 200_000);
        assert_eq!(c.snd_wnd, 55_000);
        c.on_segment(&ack(101 + 1448, 0, 1_001), false, 200_000);
        assert_eq!(c.snd_wnd, 0);
        // The one that changed nothing is a duplicate ACK (Linux's FLAG_NOT_DUP unset); those
        // that moved the window are not. (With SACK, duplicate ACKs alone start no recovery.)
        assert_eq!(c.dupacks, 1);
        // A zero window holds new data back.
        let before = c.nxt;
        assert!(c.poll_transmit(200_000).is_none());
        assert_eq!(c.nxt, before);
    }

    #[test]
    fn paws_drops_a_segment_with_an_older_timestamp() {
        let mut c = established();
        let data = |seq: u32, ts: u32| Segment {
            seq,
            ack: 101,
            flags: ACK,
            window: 60_000,
            len: 100,
            ts: Some((ts, 0)),
            ..Segment::default()
        };
        c.on_segment(&data(5001, 2_000), false, 300_000);
        assert_eq!(c.received(), 100);
        // An older TSval: dropped, and acknowledged at once.
        c.on_segment(&data(5101, 1_999), false, 300_000);
        assert_eq!(c.received(), 100);
        assert!(c.rx.ack_now);
        let a = c.poll_transmit(300_000).unwrap();
        assert_eq!(a.ack, 5101);
        assert_eq!(
            a.ts.unwrap().1,
            2_000,
            "TSecr echoes the last in-window TSval"
        );
        c.on_segment(&data(5101, 2_000), false, 300_000);
        assert_eq!(c.received(), 200);
    }

    #[test]
    fn the_window_scale_is_the_smallest_that_fits_the_buffer() {
        assert_eq!(wscale_for(65_535), 0);
        assert_eq!(wscale_for(65_536), 1);
        assert_eq!(wscale_for(6 << 20), 7, "Linux's 7 for tcp_rmem's 6 MB");
    }

    #[test]
    fn a_probe_goes_two_rtts_and_a_tick_after_the_last_ack() {
        let mut c = established();
        // The handshake's RTT: 100 µs. An ACK of 8 of the 10 segments at 300 µs (RTT 200 µs).
        c.on_segment(&ack(101 + 8 * 1448, 60_000, 1_001), false, 300_000);
        let srtt = c.srtt().unwrap();
        assert_eq!(srtt, (7 * 100_000 + 200_000) / 8);
        // Two segments out: 2 SRTT + 2 ms, rounded up to the 4 ms tick.
        let pto = (2 * srtt + 2_000_000).div_ceil(4_000_000) * 4_000_000;
        assert_eq!(pto, 4_000_000);
        assert_eq!(c.poll_timeout(), Some(300_000 + pto));
        c.on_timeout(300_000 + pto);
        let p = c.poll_transmit(300_000 + pto).unwrap();
        // Data is waiting and the window has room: the probe is new data (with none, it would
        // be the last segment again, as the end-to-end test of a lost tail shows).
        assert_eq!((p.seq, p.len), (101 + 10 * 1448, 1448));
        assert_eq!(c.stats().probes, 1);
        // One probe at a time: the next deadline is the RTO.
        assert_eq!(c.poll_timeout(), c.rto_at);
        // With one segment out the slack is the minimum RTO, so the RTO comes first.
        let mut c = established();
        c.on_segment(&ack(101 + 9 * 1448, 60_000, 1_001), false, 300_000);
        assert_eq!(c.poll_timeout(), c.rto_at);
    }
}
