//! HPCC's hosts in namespaces (`pisa-host hpcc-send`, `pisa-host hpcc-recv`; issue 15,
//! docs/pint.md "HPCC hosts in namespaces").
//!
//! A flow is a stream of UDP datagrams to the fabric's HPCC port (4791 unless the fabric says
//! otherwise). Each datagram is the `pint` program's shim ([`Shim`]: PINT's digest, or INT slots
//! the sender reserves for every hop), `pisa-sim`'s stamp (flow id, the packet's sequence number,
//! the send time of this transmission) and data, as `pisa-sim`'s HPCC hosts send. The receiver
//! answers every datagram with an ACK that echoes the shim as it arrived and the stamp. The
//! sender feeds every ACK to `hosts::hpcc::Hpcc`, the controller `pisa-sim` runs, keeps at most
//! its window in flight (one packet may always go when nothing is), paces at W/T, and finishes
//! when every packet is acknowledged.
//!
//! **Retransmission [X]: selective repeat.** ACKs are per packet, so the sender knows exactly
//! what arrived. A packet is lost when a packet at least [`DUP_THRESH`] sequence numbers later,
//! sent after it, is acknowledged (the stamp echoes the send time of the transmission an ACK is
//! for, so retransmissions are judged by time, as RACK does), or when it has been unacknowledged
//! for the retransmission timeout (max(3 × smoothed RTT, 2 T, [`MIN_RTO_NS`]), doubled by each
//! consecutive timeout). Lost packets go again before new ones, paced like them; after a timeout
//! only one packet is in flight until an ACK of new data arrives. HPCC assumes a lossless fabric, so this is a safety
//! net; the number of retransmissions is reported.
//!
//! The sender ([`HpccTx`]) and the receiver's bookkeeping ([`HpccRx`]) are sans-IO (time is
//! given in ns); `run.rs` ([`send`], [`recv`]) puts them on sockets, one socket and thread per flow.

mod run;

pub use run::{Planned, SendOpts, parse_schedule, recv, send};

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddrV4;

use analysis::pint::HpccUtil;
use hosts::hpcc::{Feedback, Hpcc, HpccConfig};
use hosts::json::Json;
use hosts::stamp::{STAMP_LEN, read_stamp, stamp};
use programs::pint_hpcc::{FLAG_SAMPLED, KIND_INT, KIND_PINT, Shim};
use sim::rx::RxStats;

use super::FRAME_OVERHEAD;

/// A packet is lost when one this many sequence numbers later, sent after it, is acknowledged.
pub const DUP_THRESH: u32 = 3;
/// The smallest retransmission timeout, ns: above a full port buffer at 100 Mb/s on a few hops
/// (200 packets are 16 ms a hop), and above the stalls of userspace switches on a shared machine.
/// A first version used 20 ms: queues longer than that made every flow retransmit its whole
/// window, at line rate since no ACK came back to cut it, and the fabric collapsed.
pub const MIN_RTO_NS: u64 = 100_000_000;
/// Consecutive timeouts double the timeout up to this many times.
const MAX_BACKOFF: u32 = 6;
/// IPv4 and UDP headers: a datagram's IPv4 length is its payload plus this.
const IP_UDP: usize = 28;
/// A sender that fell behind its pacing catches up by at most this much, ns.
const MAX_LAG_NS: u64 = 1_000_000;

/// What one flow sends.
#[derive(Clone, Copy, Debug)]
pub struct TxConfig {
    /// The flow id in the stamps.
    pub id: u32,
    /// Application bytes (the stamp and the data after the shim; as `pisa-sim` counts them).
    pub bytes: u64,
    /// IPv4 length of a full datagram.
    pub ip_len: usize,
    /// INT (true) or PINT (false).
    pub int: bool,
    /// INT slots reserved (the fabric's longest path in switches); with PINT, padding.
    pub slots: u8,
    /// The controller's parameters.
    pub hpcc: HpccConfig,
}

impl TxConfig {
    /// Application bytes per full datagram, if the IPv4 length leaves room for the stamp.
    pub fn per_packet(&self) -> Option<u64> {
        let shim = Shim::len_of(self.kind(), self.slots);
        self.ip_len
            .checked_sub(IP_UDP + shim)
            .filter(|&p| p >= STAMP_LEN)
            .map(|p| p as u64)
    }

    fn kind(&self) -> u8 {
        if self.int { KIND_INT } else { KIND_PINT }
    }
}

/// What the sender does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A datagram is in the buffer: send it.
    Send,
    /// Pacing: nothing may go before this time (ns).
    Pace(u64),
    /// The window is full (or everything is sent): wait for an ACK, at most until this time.
    Ack(u64),
    /// Every packet is acknowledged.
    Done,
}

/// Why an ACK was ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadAck {
    /// No shim, no stamp, or the wrong kind of shim.
    Malformed,
    /// Another flow's, or a packet this flow never sent.
    Foreign,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pkt {
    Unsent,
    InFlight,
    Lost,
    Acked,
}

/// What a sender counted.
#[derive(Clone, Debug, Default)]
pub struct TxStats {
    /// Datagrams sent (retransmissions included).
    pub sent: u64,
    /// Retransmitted datagrams.
    pub retransmissions: u64,
    /// Sends the kernel refused (sent again later, not counted as retransmissions).
    pub refused: u64,
    /// Retransmission timeouts that found packets lost.
    pub timeouts: u64,
    /// ACKs taken.
    pub acks: u64,
    /// ACKs of a packet already acknowledged.
    pub dup_acks: u64,
    /// ACKs ignored ([`BadAck`]).
    pub bad_acks: u64,
    /// ACKs that recomputed the window.
    pub feedback_acks: u64,
    /// ACKs with telemetry from the switches: PINT a nonzero digest, INT at least one record.
    pub telemetry_acks: u64,
    /// The largest utilisation the controller saw (its U).
    pub max_util: f64,
    /// The smallest window, bytes.
    pub min_window: f64,
    /// Frame bytes sent (Ethernet included).
    pub wire_bytes: u64,
}

/// One HPCC flow's sender, sans-IO.
#[derive(Debug)]
pub struct HpccTx {
    cfg: TxConfig,
    ctl: Hpcc,
    util: HpccUtil,
    shim_len: usize,
    per_packet: u64,
    packets: u32,
    state: Vec<Pkt>,
    sent_ns: Vec<u64>,
    tx_count: Vec<u16>,
    lost: VecDeque<u32>,
    next_new: u32,
    cum: u32,
    inflight: u64,
    acked: u32,
    nonce: u32,
    next_at: u64,
    srtt_ns: Option<u64>,
    backoff: u32,
    recovering: bool,
    last_sent: Option<u32>,
    start_ns: u64,
    done_ns: Option<u64>,
    /// Its counters.
    pub stats: TxStats,
}

impl HpccTx {
    /// A flow starting at `now` (ns). Errors when the datagram has no room for shim and stamp
    /// or the flow is too long to number.
    pub fn new(cfg: TxConfig, now: u64) -> Result<HpccTx, String> {
        let per_packet = cfg.per_packet().ok_or_else(|| {
            format!(
                "an IPv4 length of {} leaves no room for the {}-byte shim and the stamp",
                cfg.ip_len,
                Shim::len_of(cfg.kind(), cfg.slots)
            )
        })?;
        let packets = u32::try_from(cfg.bytes.max(1).div_ceil(per_packet))
            .map_err(|_| format!("{} bytes: too many packets", cfg.bytes))?;
        let ctl = Hpcc::new(cfg.hpcc);
        let n = packets as usize;
        Ok(HpccTx {
            stats: TxStats {
                min_window: ctl.window(),
                ..TxStats::default()
            },
            ctl,
            util: HpccUtil::paper(),
            shim_len: Shim::len_of(cfg.kind(), cfg.slots),
            per_packet,
            packets,
            state: vec![Pkt::Unsent; n],
            sent_ns: vec![0; n],
            tx_count: vec![0; n],
            lost: VecDeque::new(),
            next_new: 0,
            cum: 0,
            inflight: 0,
            acked: 0,
            nonce: 0,
            next_at: now,
            srtt_ns: None,
            backoff: 0,
            recovering: false,
            last_sent: None,
            start_ns: now,
            done_ns: None,
            cfg,
        })
    }

    /// The controller.
    pub fn controller(&self) -> &Hpcc {
        &self.ctl
    }

    /// Packets in the flow.
    pub fn packets(&self) -> u32 {
        self.packets
    }

    /// Application bytes acknowledged.
    pub fn acked_bytes(&self) -> u64 {
        (0..self.packets)
            .filter(|&s| self.state[s as usize] == Pkt::Acked)
            .map(|s| self.len(s))
            .sum()
    }

    /// When the last packet was acknowledged, ns.
    pub fn done_ns(&self) -> Option<u64> {
        self.done_ns
    }

    /// Application bytes of packet `seq`.
    fn len(&self, seq: u32) -> u64 {
        let start = u64::from(seq) * self.per_packet;
        (start + self.per_packet).min(self.cfg.bytes.max(1)) - start
    }

    fn rto_ns(&self) -> u64 {
        let t = self.cfg.hpcc.base_rtt_ns;
        (3 * self.srtt_ns.unwrap_or(0)).max(2 * t).max(MIN_RTO_NS) << self.backoff
    }

    /// The earliest time an unacknowledged packet in flight times out.
    fn rto_deadline(&self, now: u64) -> u64 {
        let oldest = (self.cum..self.next_new)
            .filter(|&s| self.state[s as usize] == Pkt::InFlight)
            .map(|s| self.sent_ns[s as usize])
            .min()
            .unwrap_or(now);
        oldest + self.rto_ns()
    }

    fn mark_lost(&mut self, seq: u32) {
        self.state[seq as usize] = Pkt::Lost;
        self.inflight -= self.len(seq);
        self.lost.push_back(seq);
    }

    fn check_rto(&mut self, now: u64) {
        let rto = self.rto_ns();
        let mut any = false;
        for s in self.cum..self.next_new {
            if self.state[s as usize] == Pkt::InFlight && self.sent_ns[s as usize] + rto <= now {
                self.mark_lost(s);
                any = true;
            }
        }
        if any {
            // As TCP after a timeout: back off, and one packet in flight until an ACK of
            // something not yet acknowledged arrives (HPCC's window cannot shrink without ACKs).
            self.stats.timeouts += 1;
            self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
            self.recovering = true;
        }
    }

    /// What to do at `now`; on [`Step::Send`] the datagram (UDP payload) is in `buf`.
    pub fn poll(&mut self, now: u64, buf: &mut Vec<u8>) -> Step {
        if self.done_ns.is_some() {
            return Step::Done;
        }
        self.check_rto(now);
        while self
            .lost
            .front()
            .is_some_and(|&s| self.state[s as usize] != Pkt::Lost)
        {
            self.lost.pop_front();
        }
        let (seq, again) = match self.lost.front() {
            Some(&s) => (s, true),
            None if self.next_new < self.packets => (self.next_new, false),
            None => return Step::Ack(self.rto_deadline(now)),
        };
        let len = self.len(seq);
        let limit = if self.recovering {
            0.0
        } else {
            self.ctl.window()
        };
        if self.inflight > 0 && (self.inflight + len) as f64 > limit {
            return Step::Ack(self.rto_deadline(now));
        }
        if now < self.next_at {
            return Step::Pace(self.next_at);
        }
        if again {
            self.lost.pop_front();
        } else {
            self.next_new += 1;
        }
        let i = seq as usize;
        if self.tx_count[i] > 0 {
            self.stats.retransmissions += 1;
        }
        self.tx_count[i] = self.tx_count[i].saturating_add(1);
        self.state[i] = Pkt::InFlight;
        self.sent_ns[i] = now;
        self.inflight += len;
        self.last_sent = Some(seq);
        buf.clear();
        buf.extend_from_slice(&Shim::bytes(self.cfg.kind(), self.cfg.slots, self.nonce));
        buf.extend_from_slice(&stamp(self.cfg.id, u64::from(seq), now));
        buf.resize(self.shim_len + (len as usize).max(STAMP_LEN), 0);
        self.nonce = self.nonce.wrapping_add(1);
        let frame = (buf.len() + FRAME_OVERHEAD) as u64;
        self.stats.sent += 1;
        self.stats.wire_bytes += frame;
        self.next_at = self.next_at.max(now.saturating_sub(MAX_LAG_NS)) + self.ctl.gap_ns(frame);
        Step::Send
    }

    /// The datagram [`HpccTx::poll`] last gave was not sent (the kernel refused it): it goes
    /// again, and does not count as a retransmission.
    pub fn refused(&mut self) {
        if let Some(s) = self.last_sent.take()
            && self.state[s as usize] == Pkt::InFlight
        {
            let i = s as usize;
            self.tx_count[i] = self.tx_count[i].saturating_sub(1);
            self.stats.sent -= 1;
            self.stats.refused += 1;
            self.state[i] = Pkt::Lost;
            self.inflight -= self.len(s);
            self.lost.push_front(s);
        }
    }

    /// An ACK (a UDP payload from the receiver) arrived at `now`.
    pub fn on_ack(&mut self, now: u64, ack: &[u8]) -> Result<(), BadAck> {
        let r = self.take_ack(now, ack);
        if r.is_err() {
            self.stats.bad_acks += 1;
        }
        r
    }

    fn take_ack(&mut self, now: u64, ack: &[u8]) -> Result<(), BadAck> {
        let shim = Shim::parse(ack).ok_or(BadAck::Malformed)?;
        if shim.kind != self.cfg.kind() {
            return Err(BadAck::Malformed);
        }
        let (id, seq, sent) = ack
            .get(shim.len()..)
            .and_then(read_stamp)
            .ok_or(BadAck::Malformed)?;
        let seq = u32::try_from(seq).map_err(|_| BadAck::Foreign)?;
        if id != self.cfg.id || seq >= self.packets || self.state[seq as usize] == Pkt::Unsent {
            return Err(BadAck::Foreign);
        }
        self.stats.acks += 1;
        let sample = now.saturating_sub(sent);
        self.srtt_ns = Some(self.srtt_ns.map_or(sample, |s| (7 * s + sample) / 8));
        match self.state[seq as usize] {
            Pkt::Acked => self.stats.dup_acks += 1,
            st => {
                if st == Pkt::InFlight {
                    self.inflight -= self.len(seq);
                }
                self.state[seq as usize] = Pkt::Acked;
                self.acked += 1;
                self.backoff = 0;
                self.recovering = false;
            }
        }
        // Packets sent before this one and DUP_THRESH or more sequence numbers below it are lost.
        for q in self.cum..seq.saturating_sub(DUP_THRESH - 1) {
            let i = q as usize;
            if self.state[i] == Pkt::InFlight && self.sent_ns[i] < sent {
                self.mark_lost(q);
            }
        }
        while self.cum < self.packets && self.state[self.cum as usize] == Pkt::Acked {
            self.cum += 1;
        }
        let hops;
        let fb = if self.cfg.int {
            hops = shim.hops(ack);
            self.stats.telemetry_acks += u64::from(!hops.is_empty());
            Feedback::Int(&hops)
        } else if shim.flags & FLAG_SAMPLED != 0 {
            self.stats.telemetry_acks += u64::from(shim.value > 0);
            Feedback::Util(self.util.decode(shim.value))
        } else {
            Feedback::None
        };
        let size = self.cfg.bytes.max(1);
        let end = ((u64::from(seq) + 1) * self.per_packet).min(size);
        let snd_nxt = (u64::from(self.next_new) * self.per_packet).min(size);
        if self.ctl.on_ack(end, snd_nxt, fb) {
            self.stats.feedback_acks += 1;
            self.stats.min_window = self.stats.min_window.min(self.ctl.window());
            self.stats.max_util = self.stats.max_util.max(self.ctl.util());
        }
        if self.acked == self.packets && self.done_ns.is_none() {
            self.done_ns = Some(now);
        }
        Ok(())
    }

    /// The flow's report.
    pub fn report(&self) -> Json {
        let c = self.ctl.config();
        let s = &self.stats;
        let mut j = Json::object()
            .with("flow", u64::from(self.cfg.id))
            .with(
                "cc",
                if self.cfg.int {
                    "hpcc-int"
                } else {
                    "hpcc-pint"
                },
            )
            .with("bytes", self.cfg.bytes)
            .with("acked_bytes", self.acked_bytes())
            .with("completed", u64::from(self.done_ns.is_some()))
            .with("packets", u64::from(self.packets))
            .with("sent", s.sent)
            .with("retransmissions", s.retransmissions)
            .with("refused", s.refused)
            .with("timeouts", s.timeouts)
            .with("acks", s.acks)
            .with("dup_acks", s.dup_acks)
            .with("bad_acks", s.bad_acks)
            .with("feedback_acks", s.feedback_acks)
            .with("telemetry_acks", s.telemetry_acks)
            .with("max_util", (s.max_util * 1e4).round() / 1e4)
            .with("window_updates", self.ctl.updates)
            .with("final_window", self.ctl.window().round() as u64)
            .with("min_window", s.min_window.round() as u64)
            .with("w_init", c.w_init().round() as u64)
            .with("w_ai", (c.w_ai * 1000.0).round() / 1000.0)
            .with("base_rtt_ns", c.base_rtt_ns)
            .with("srtt_ns", self.srtt_ns.unwrap_or(0))
            .with("wire_bytes", s.wire_bytes);
        if let Some(done) = self.done_ns {
            let fct = done.saturating_sub(self.start_ns).max(1);
            j = j
                .with("fct_ns", fct)
                .with("goodput_bps", self.cfg.bytes * 8 * 1_000_000_000 / fct);
        }
        j
    }
}

/// The receiver's bookkeeping, sans-IO: which datagrams are HPCC data, what to echo, per-flow
/// counts.
#[derive(Debug, Default)]
pub struct HpccRx {
    flows: BTreeMap<(SocketAddrV4, u32), RxFlow>,
    /// Datagrams without a shim and a stamp (ignored, not answered).
    pub malformed: u64,
}

#[derive(Debug, Default)]
struct RxFlow {
    rx: RxStats,
    sampled: u64,
    digest_max: u8,
    int_records: u64,
}

impl HpccRx {
    /// A datagram from `from` arrived at `now`: the length of the ACK to send back (the shim as
    /// it arrived and the stamp, the first bytes of `data`), or `None` if it is not HPCC data.
    pub fn on_datagram(&mut self, from: SocketAddrV4, data: &[u8], now: u64) -> Option<usize> {
        let Some(shim) = Shim::parse(data) else {
            self.malformed += 1;
            return None;
        };
        let Some((id, seq, sent)) = data.get(shim.len()..).and_then(read_stamp) else {
            self.malformed += 1;
            return None;
        };
        let f = self.flows.entry((from, id)).or_default();
        f.rx.on_packet(seq, now.saturating_sub(sent));
        if shim.flags & FLAG_SAMPLED != 0 {
            f.sampled += 1;
            if shim.kind == KIND_PINT {
                f.digest_max = f.digest_max.max(shim.value);
            } else {
                f.int_records += u64::from(shim.value);
            }
        }
        Some(shim.len() + STAMP_LEN)
    }

    /// Per flow: received, reordered, one-way latency, the datagrams that carried telemetry.
    pub fn report(&self) -> Json {
        let flows: Vec<Json> = self
            .flows
            .iter()
            .map(|((src, id), f)| {
                f.rx.report(
                    Json::object()
                        .with("src", src.to_string())
                        .with("flow", u64::from(*id)),
                    f.rx.seen_span(),
                )
                .with("with_telemetry", f.sampled)
                .with("digest_max", u64::from(f.digest_max))
                .with("int_records", f.int_records)
            })
            .collect();
        Json::object()
            .with("malformed", self.malformed)
            .with("flows", flows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn cfg(int: bool, bytes: u64) -> TxConfig {
        TxConfig {
            id: 9,
            bytes,
            ip_len: 1000,
            int,
            slots: if int { 2 } else { 0 },
            // 100 Mb/s, T = 1 ms: W_init = 12_500 B.
            hpcc: HpccConfig::scaled(100_000_000, 1_000_000),
        }
    }

    /// The receiver's ACK for a datagram, with a switch's digest or records written into the
    /// shim as the fabric would.
    fn ack_of(d: &[u8], digest: Option<u8>) -> Vec<u8> {
        let mut d = d.to_vec();
        if let Some(v) = digest {
            d[2] |= FLAG_SAMPLED;
            d[3] = v;
        }
        let mut rx = HpccRx::default();
        let from = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1);
        let n = rx.on_datagram(from, &d, 0).expect("HPCC data");
        d.truncate(n);
        d
    }

    fn seq_of(d: &[u8]) -> u64 {
        read_stamp(&d[Shim::parse(d).unwrap().len()..]).unwrap().1
    }

    #[test]
    fn a_flow_sends_its_bytes_within_the_window_paced_and_completes_on_the_last_ack() {
        let c = cfg(false, 30_000);
        let mut tx = HpccTx::new(c, 0).unwrap();
        // 1000 − 28 − 12 = 960 application bytes a packet: 32 packets, the last 240 bytes.
        assert_eq!((c.per_packet(), tx.packets()), (Some(960), 32));
        let mut buf = Vec::new();
        let (mut now, mut sent) = (0u64, Vec::new());
        loop {
            match tx.poll(now, &mut buf) {
                Step::Send => sent.push(buf.clone()),
                Step::Pace(t) => {
                    assert!(t > now);
                    now = t;
                }
                Step::Ack(_) => break,
                Step::Done => unreachable!(),
            }
        }
        // W_init = 12_500 B: 13 packets of 960 go, the 14th would exceed the window.
        assert_eq!(sent.len(), 13);
        assert_eq!(sent[0].len(), 972);
        // Paced at line rate: 12 gaps of 1014 frame bytes at 100 Mb/s = 81.12 µs each.
        assert!((now as i64 - 12 * 81_120).abs() < 20, "{now}");
        for d in &sent {
            assert_eq!(tx.on_ack(now, &ack_of(d, Some(0))), Ok(()));
        }
        loop {
            match tx.poll(now, &mut buf) {
                Step::Send => {
                    let a = ack_of(&buf, Some(0));
                    tx.on_ack(now, &a).unwrap();
                }
                Step::Pace(t) => now = t,
                Step::Done => break,
                s => panic!("{s:?}"),
            }
        }
        assert_eq!(tx.acked_bytes(), 30_000);
        assert!(buf.len() == 12 + STAMP_LEN.max(240));
        let r = tx.report();
        assert_eq!(r.get("completed").and_then(Json::as_u64), Some(1));
        assert_eq!(tx.stats.retransmissions, 0);
        // Digest 0 everywhere: U ≈ 0, the window stays at line rate.
        assert_eq!(tx.controller().window(), c.hpcc.w_init());
        assert_eq!(tx.stats.telemetry_acks, 0);
        assert_eq!(tx.stats.feedback_acks, 32);
    }

    #[test]
    fn a_high_digest_cuts_the_window_and_unsampled_acks_do_not() {
        let util = HpccUtil::paper();
        let mut tx = HpccTx::new(cfg(false, 100_000), 0).unwrap();
        let mut buf = Vec::new();
        assert_eq!(tx.poll(0, &mut buf), Step::Send);
        let first = buf.clone();
        assert_eq!(tx.poll(1_000_000, &mut buf), Step::Send);
        // Unsampled: no feedback.
        tx.on_ack(1_000_000, &ack_of(&first, None)).unwrap();
        assert_eq!(tx.stats.feedback_acks, 0);
        // A digest of U = 1.9 (2η): the window about halves.
        let code = (0..=255u8)
            .min_by(|&a, &b| {
                (util.decode(a) - 1.9)
                    .abs()
                    .total_cmp(&(util.decode(b) - 1.9).abs())
            })
            .unwrap();
        tx.on_ack(1_000_000, &ack_of(&buf, Some(code))).unwrap();
        let w = tx.controller().window();
        let want = 12_500.0 * 0.95 / util.decode(code) + tx.controller().config().w_ai;
        assert!((w - want).abs() < 1e-6, "{w} {want}");
        assert_eq!(tx.stats.telemetry_acks, 1);
    }

    #[test]
    fn int_acks_feed_the_records_and_malformed_or_foreign_acks_are_counted_and_ignored() {
        let mut tx = HpccTx::new(cfg(true, 10_000), 0).unwrap();
        let mut buf = Vec::new();
        assert_eq!(tx.poll(0, &mut buf), Step::Send);
        assert_eq!(buf.len(), 1000 - 28);
        let mut a = ack_of(&buf, None);
        // The fabric wrote one record: switch 7, ts 1000, tx 500, queue 0, 100 Mb/s.
        a[2] |= FLAG_SAMPLED;
        a[3] = 1;
        a[12..16].copy_from_slice(&7u32.to_be_bytes());
        a[16..20].copy_from_slice(&1000u32.to_be_bytes());
        a[20..24].copy_from_slice(&500u32.to_be_bytes());
        a[26..28].copy_from_slice(&100u16.to_be_bytes());
        let before = tx.stats.clone();
        for bad in [
            &a[..5],
            &a[..a.len() - 1],
            b"not an ack at all, not even close".as_slice(),
        ] {
            assert_eq!(tx.on_ack(5, bad), Err(BadAck::Malformed));
        }
        // Another flow's id; a sequence number never sent.
        let mut other = a.clone();
        other[12 + 32 + 4..12 + 32 + 8].copy_from_slice(&10u32.to_be_bytes());
        assert_eq!(tx.on_ack(5, &other), Err(BadAck::Foreign));
        let mut unsent = a.clone();
        unsent[12 + 32 + 15] = 5;
        assert_eq!(tx.on_ack(5, &unsent), Err(BadAck::Foreign));
        assert_eq!(tx.stats.bad_acks, before.bad_acks + 5);
        assert_eq!(tx.stats.acks, 0);
        assert_eq!(tx.on_ack(5, &a), Ok(()));
        // The first INT stack only records (no previous one to compare with).
        assert_eq!((tx.stats.acks, tx.stats.telemetry_acks), (1, 1));
        assert_eq!(tx.stats.feedback_acks, 0);
        // The receiver counts, and does not answer, what is not HPCC data.
        let mut rx = HpccRx::default();
        let from = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1);
        assert_eq!(rx.on_datagram(from, b"PSIM", 0), None);
        assert_eq!(rx.on_datagram(from, &a[..20], 0), None);
        assert_eq!(rx.malformed, 2);
    }

    #[test]
    fn lost_packets_go_again_after_three_later_acks_or_the_timeout() {
        let mut tx = HpccTx::new(cfg(false, 9_600), 0).unwrap();
        let mut buf = Vec::new();
        let mut now = 0;
        let mut sent = Vec::new();
        while sent.len() < 10 {
            match tx.poll(now, &mut buf) {
                Step::Send => sent.push(buf.clone()),
                Step::Pace(t) => now = t,
                s => panic!("{s:?}"),
            }
        }
        // Packets 2 and 9 are lost; the rest are acknowledged.
        for (i, d) in sent.iter().enumerate() {
            if i != 2 && i != 9 {
                tx.on_ack(now, &ack_of(d, Some(0))).unwrap();
            }
        }
        // 2 was detected by the later ACKs (5 and on): it goes again as soon as pacing lets it.
        let sent9_at = now;
        now += 100_000;
        assert_eq!(tx.poll(now, &mut buf), Step::Send);
        assert_eq!(seq_of(&buf), 2);
        let re2 = buf.clone();
        // 9 has no later packet: it waits for the timeout.
        let Step::Ack(t) = tx.poll(now, &mut buf) else {
            panic!("waits for an ACK")
        };
        assert_eq!(t, sent9_at + MIN_RTO_NS);
        now = t;
        // Timed out: 9 is lost, and while recovering one packet may be in flight: 2's is.
        assert!(matches!(tx.poll(now, &mut buf), Step::Ack(_)));
        assert_eq!((tx.stats.timeouts, tx.stats.retransmissions), (1, 1));
        // An ACK of new data ends the recovery: 9 goes.
        tx.on_ack(now, &ack_of(&re2, Some(0))).unwrap();
        assert_eq!(tx.poll(now, &mut buf), Step::Send);
        assert_eq!((seq_of(&buf), tx.stats.retransmissions), (9, 2));
        // The first transmission of 2, acknowledged late: a duplicate.
        tx.on_ack(now, &ack_of(&sent[2], Some(0))).unwrap();
        assert_eq!(tx.stats.dup_acks, 1);
        // A dead path: 9 times out again and again, one packet at a time, each timeout twice
        // the last.
        let mut gaps = Vec::new();
        let mut last = now;
        while gaps.len() < 3 {
            match tx.poll(now, &mut buf) {
                Step::Send => {
                    assert_eq!(seq_of(&buf), 9);
                    gaps.push(now - last);
                    last = now;
                }
                Step::Ack(t) | Step::Pace(t) => now = t,
                Step::Done => panic!("done without an ACK"),
            }
        }
        assert!(
            gaps[1] >= 2 * MIN_RTO_NS && gaps[2] >= 2 * gaps[1] - 1,
            "{gaps:?}"
        );
        assert_eq!(tx.stats.sent, 10 + 2 + 3);
        tx.on_ack(now, &ack_of(&buf, Some(0))).unwrap();
        assert_eq!(tx.poll(now, &mut buf), Step::Done);
        assert_eq!(tx.acked_bytes(), 9_600);
    }

    #[test]
    fn refused_sends_go_again_without_counting_as_retransmissions() {
        let mut tx = HpccTx::new(cfg(false, 2_000), 0).unwrap();
        let mut buf = Vec::new();
        assert_eq!(tx.poll(0, &mut buf), Step::Send);
        tx.refused();
        assert_eq!(tx.poll(1_000_000, &mut buf), Step::Send);
        assert_eq!(seq_of(&buf), 0);
        assert_eq!(
            (tx.stats.sent, tx.stats.refused, tx.stats.retransmissions),
            (1, 1, 0)
        );
    }
}
