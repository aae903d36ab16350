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
//!
//! Here: the settings, the state, the handshake and what arrives; `ack.rs`: what an ACK does to
//! the sender (recovery, reductions, window growth, the probe's outcome); `output.rs`: the
//! timers and what leaves (segments, the probe, TCP Small Queues' share).

use super::cc::{Acked, Cc, Kind};
use super::recv::{AckOut, Echo, Receiver};
use super::rtt::Rtt;
use super::scoreboard::Scoreboard;
use super::segment::{ACK, CWR, ECE, FIN, MAX_SACK_BLOCKS, RST, SYN, Segment};
use super::seq;

mod ack;
mod output;
mod undo;

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
    /// Detect loss with RACK (`net.ipv4.tcp_recovery` 1, Linux's default); else by the SACK
    /// threshold alone (`tcp_recovery` 0). Without SACK, duplicate ACKs either way.
    pub rack: bool,
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
            rack: true,
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
    /// D-SACKs received (`TcpExt.TCPDSACKRecv`).
    pub dsacks: u64,
    /// Reductions undone as spurious (`TCPDSACKUndo` and the recovery undos).
    pub undos: u64,
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
    /// RACK's reordering timer (Linux's `ICSK_TIME_REO_TIMEOUT`).
    reo_at: Option<u64>,
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
    /// D-SACKs: undoing spurious reductions, RACK's window steps.
    undo: undo::Undo,
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
            reo_at: None,
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
            undo: undo::Undo::default(),
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

    /// RACK's reordering window in quarters of the minimum RTT (1 until D-SACKs widen it).
    pub fn reo_wnd_steps(&self) -> u32 {
        self.undo.reo_steps
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
