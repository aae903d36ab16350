//! TCP flows of `pisa-sim` (`cc=reno|cubic|dctcp`, [`crate::tcp`]): each flow is a client
//! connection on its source host and a server connection on its destination, exchanging what
//! `pisa-traffic` exchanges for a sized flow: the client writes an 18-byte header and the flow's
//! bytes, the server answers with 16 bytes once it has them all, and the client's FCT runs from
//! its start (the SYN) to the answer's arrival. The client then closes, and the server closes
//! when the client's FIN arrives.
//!
//! A connection sends whenever it has a segment and its host's NIC queue has room (a full queue
//! blocks it, as a socket's send path blocks on a full qdisc); its timers are events of the run.
//! Senders that found the queue full go first, in turn, when it has room again. As Linux's TCP
//! Small Queues do, a connection keeps at most about 1 ms of its pacing rate in
//! its host's queue ([`Conn::queue_limit`]): data waits in the socket until its frames leave,
//! so a new flow's SYN does not queue behind a whole window of another flow's segments.
//!
//! A flow with a rate is paced at it (`SO_MAX_PACING_RATE`): its client sends a segment no
//! sooner than the previous one's payload at that rate after it, as Linux times it. A paced flow without a size writes until
//! its stop time, keeping [`SNDBUF`] bytes unacknowledged in its socket as a blocking writer
//! does, and is then sized by what it wrote.

use super::*;
use crate::tcp::wire::{self, Ends};
use crate::tcp::{Config, Conn};

/// The client's header before a sized flow's bytes (`pisa-traffic`'s exchange).
const HEADER: u64 = 18;
/// The server's answer.
const ANSWER: u64 = 16;
/// What a paced flow's writer keeps unacknowledged in its socket until its stop time, bytes
/// (Linux's `tcp_wmem` default, 16 KiB, autotunes up to 4 MiB; [I] a middle value: the
/// backlog behind the pacing cap, sent after the stop).
pub(super) const SNDBUF: u64 = 1 << 20;
/// A paced flow's size until its writer stops.
const UNSIZED: u64 = u64::MAX / 4;

/// The two ends of a TCP flow.
#[derive(Debug)]
pub(super) struct TcpFlow {
    cfg: Config,
    size: u64,
    start_ns: u64,
    /// [client, server].
    conns: [Option<Conn>; 2],
    /// [client host, server host].
    hosts: [usize; 2],
    ends: [Ends; 2],
    tos: u8,
    /// When each end's pending timer event is due (no later than its earliest deadline).
    timer_at: [Option<u64>; 2],
    iss: [u32; 2],
    answered: bool,
    closed: [bool; 2],
    done_ns: Option<u64>,
    /// Bytes of each end's frames in its host's queue (not yet departed).
    queued: [u64; 2],
    /// Whether each end held data back for TCP Small Queues at its last turn.
    throttled: [bool; 2],
    /// The client's pacing cap, bits/s.
    pace_bps: Option<u64>,
    /// The client's next frame leaves no sooner than this, ns.
    pace_next: u64,
    /// When the pending pacing event is due.
    pace_event: Option<u64>,
    /// A paced flow's writer stops at this time (then `size` is what it wrote).
    write_until: Option<u64>,
    /// Application bytes the client has written, its header included.
    written: u64,
    /// When the server received its first and its last new byte, ns.
    rx_span: Option<(u64, u64)>,
    /// The server's received bytes at each of [`Options::samples_ns`] passed so far.
    samples: Vec<u64>,
}

impl Sim {
    /// The TCP state of flow `k` from host `src` to `dst`, if it is a TCP flow.
    pub(super) fn tcp_setup(
        &mut self,
        k: usize,
        spec: &FlowSpec,
        (src, dst): (usize, usize),
    ) -> Option<Box<TcpFlow>> {
        let flow::Cc::Tcp {
            kind,
            ecn,
            rto_min_ns,
            ipv6,
        } = spec.cc
        else {
            return None;
        };
        // `size` is the MTU: the MSS leaves room for the IP and TCP headers.
        let headers = if ipv6 { 60 } else { 40 };
        let cfg = Config {
            cc: kind,
            ecn,
            mss: spec.size.saturating_sub(headers).max(64),
            rto_min_ns,
            ..Config::default()
        };
        let (a, b) = (&self.hosts[src], &self.hosts[dst]);
        let addr = |h: &Host| -> IpAddr { if ipv6 { h.ipv6.into() } else { h.ipv4.into() } };
        let (a_ip, b_ip) = (addr(a), addr(b));
        let ends = [
            Ends {
                dmac: a.gateway,
                smac: a.mac,
                src: a_ip,
                dst: b_ip,
                sport: spec.sport,
                dport: spec.dport,
            },
            Ends {
                dmac: b.gateway,
                smac: b.mac,
                src: b_ip,
                dst: a_ip,
                sport: spec.dport,
                dport: spec.sport,
            },
        ];
        self.tcp_flows
            .insert((src, b_ip, spec.sport, spec.dport), (k, 0));
        self.tcp_flows
            .insert((dst, a_ip, spec.dport, spec.sport), (k, 1));
        // Initial sequence numbers from the run's seed and the flow, as a host's are random.
        let x = self.opts.seed ^ (k as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let pace_bps = match spec.rate {
            flow::Rate::Bps(b) if b > 0 && b < u64::MAX => Some(b),
            _ => None,
        };
        let write_until = if spec.bytes.is_none() {
            spec.stop_ns
        } else {
            None
        };
        Some(Box::new(TcpFlow {
            cfg,
            size: spec.bytes.unwrap_or(UNSIZED),
            start_ns: spec.start_ns,
            conns: [None, None],
            hosts: [src, dst],
            ends,
            tos: spec.tos,
            timer_at: [None, None],
            iss: [x as u32, (x >> 32) as u32],
            answered: false,
            closed: [false, false],
            done_ns: None,
            queued: [0, 0],
            throttled: [false, false],
            pace_bps,
            pace_next: 0,
            pace_event: None,
            write_until,
            written: 0,
            rx_span: None,
            samples: Vec::new(),
        }))
    }

    /// Flow `k` (a TCP flow) may send: it opens at its start, then each end sends what it can.
    pub(super) fn tcp_send(&mut self, k: usize) {
        let now = self.now;
        let Some(t) = self.flows[k].tcp.as_deref_mut() else {
            return;
        };
        if t.conns[0].is_none() {
            if now < t.start_ns {
                return;
            }
            let mut c = Conn::client(t.cfg.clone(), t.iss[0]);
            if t.write_until.is_none() {
                c.write(HEADER + t.size);
                t.written = HEADER + t.size;
            }
            t.conns[0] = Some(c);
            if let Some(stop) = t.write_until {
                // The writer sizes the flow at its stop time.
                self.schedule(stop.max(now), Event::Send { flow: k });
            }
        }
        let Some(t) = self.flows[k].tcp.as_deref_mut() else {
            return;
        };
        if t.pace_event == Some(now) {
            t.pace_event = None;
        }
        t.write(now);
        self.tcp_pump(k, 0);
        self.tcp_pump(k, 1);
    }

    /// Every TCP flow's received bytes now (an [`Options::samples_ns`] time).
    pub(super) fn tcp_sample(&mut self) {
        for f in &mut self.flows {
            if let Some(t) = f.tcp.as_deref_mut() {
                let got = t.conns[1].as_ref().map_or(0, Conn::received);
                t.samples.push(got);
            }
        }
    }

    /// End `end` of flow `k` sends while its host's queue has room, then sets its timer.
    fn tcp_pump(&mut self, k: usize, end: usize) {
        let now = self.now;
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(t) = self.flows[k].tcp.as_deref_mut() {
            let host = t.hosts[end];
            let Some(c) = t.conns[end].as_mut() else {
                break;
            };
            // TCP Small Queues: data waits while the host holds this socket's share.
            let allowed = c.at_most_one_out() || t.queued[end] < c.queue_limit();
            c.allow_data(allowed);
            t.throttled[end] = !allowed;
            let h = &mut self.hosts[host];
            // A full queue blocks the sender, and senders already waiting go first (in the
            // order they came): otherwise a connection whose ACKs arrive just as a slot frees
            // takes every slot, and a new flow's SYN waits for seconds.
            let full = h.tm.depth(0, 0).0 >= h.tm.config(0).map_or(u32::MAX, |c| c.max_packets);
            if full || h.blocked.first().is_some_and(|&b| b != k) {
                if !h.blocked.contains(&k) {
                    h.blocked.push(k);
                }
                break;
            }
            if h.blocked.first() == Some(&k) {
                h.blocked.remove(0);
            }
            // The pacing cap: the client's next frame waits for its time.
            if end == 0 && t.pace_bps.is_some() && now < t.pace_next {
                if t.pace_event.is_none_or(|at| at > t.pace_next) {
                    t.pace_event = Some(t.pace_next);
                    let at = t.pace_next;
                    self.schedule(at, Event::Send { flow: k });
                }
                break;
            }
            let Some(seg) = c.poll_transmit(now) else {
                break;
            };
            wire::encode(&mut scratch, &t.ends[end], t.tos, &seg);
            if let (0, Some(bps)) = (end, t.pace_bps) {
                // Linux times the next send by the segment's payload (`skb->len` of the write
                // queue's buffer, `tcp_update_skb_after_send`), so a cap of R carries R of data.
                let ns = (u128::from(seg.len) * 8 * 1_000_000_000).div_ceil(u128::from(bps));
                t.pace_next = t.pace_next.max(now) + u64::try_from(ns).unwrap_or(u64::MAX / 4);
            }
            t.queued[end] += scratch.len() as u64;
            if end == 0 {
                self.flows[k].sent += 1;
            }
            self.host_send(host, &scratch);
        }
        self.scratch = scratch;
        self.tcp_timer(k, end);
    }

    /// Makes sure an event is pending no later than end `end`'s next deadline. A deadline that
    /// moved later (every ACK restarts the RTO) keeps the event already pending, which finds
    /// the deadline not yet due and schedules again: one event per restart would fill the
    /// queue with stale timers (millions at 10 Gb/s) and make every other event slower.
    fn tcp_timer(&mut self, k: usize, end: usize) {
        let now = self.now;
        let Some(t) = self.flows[k].tcp.as_deref_mut() else {
            return;
        };
        let Some(at) = t.conns[end].as_ref().and_then(Conn::poll_timeout) else {
            return;
        };
        let at = at.max(now);
        if t.timer_at[end].is_none_or(|pending| at < pending) {
            t.timer_at[end] = Some(at);
            self.schedule(at, Event::TcpTimer { flow: k, end });
        }
    }

    /// End `end` of flow `k`'s pending timer event is due: its timers run if their deadline has
    /// come, else the event moves to the deadline. An event an earlier one superseded does
    /// nothing.
    pub(super) fn tcp_timeout(&mut self, k: usize, end: usize) {
        let now = self.now;
        let Some(t) = self.flows[k].tcp.as_deref_mut() else {
            return;
        };
        if t.timer_at[end] != Some(now) {
            return;
        }
        t.timer_at[end] = None;
        let Some(c) = t.conns[end].as_mut() else {
            return;
        };
        if c.poll_timeout().is_some_and(|d| d <= now) {
            c.on_timeout(now);
            self.tcp_pump(k, end);
        } else {
            self.tcp_timer(k, end);
        }
    }

    /// The TCP flow end that sent `frame` from `host`, if any.
    pub(super) fn tcp_owner(&self, host: usize, frame: &[u8]) -> Option<(usize, usize)> {
        if self.tcp_flows.is_empty() {
            return None;
        }
        let e = wire::ends(frame)?;
        self.tcp_flows
            .get(&(host, e.dst, e.sport, e.dport))
            .copied()
    }

    /// A frame of `len` bytes of end `end` of flow `k` left its host's queue: the end has room
    /// again, and if TCP Small Queues held its data back it may send (as Linux's TSQ handler
    /// runs when the driver frees the buffer), in an event of its own so that the host's turn
    /// finishes first.
    pub(super) fn tcp_departed(&mut self, k: usize, end: usize, len: u64) {
        let now = self.now;
        if let Some(t) = self.flows[k].tcp.as_deref_mut() {
            t.queued[end] = t.queued[end].saturating_sub(len);
            if t.throttled[end] {
                t.throttled[end] = false;
                self.schedule(now, Event::Send { flow: k });
            }
        }
    }

    /// A TCP segment of a TCP flow reaching `host`; false if `bytes` is none.
    pub(super) fn tcp_arrive(&mut self, host: usize, bytes: &[u8]) -> bool {
        if self.tcp_flows.is_empty() {
            return false;
        }
        let Some((seg, ce, e)) = wire::decode(bytes) else {
            return false;
        };
        let Some(&(k, end)) = self.tcp_flows.get(&(host, e.src, e.dport, e.sport)) else {
            return false;
        };
        let now = self.now;
        let Some(t) = self.flows[k].tcp.as_deref_mut() else {
            return false;
        };
        let conn = match &mut t.conns[end] {
            Some(c) => c,
            slot @ None => {
                // The server's socket exists once the client's SYN arrives.
                if end == 0 || !seg.has(crate::tcp::segment::SYN) {
                    return true;
                }
                slot.insert(Conn::server(t.cfg.clone(), t.iss[1], &seg))
            }
        };
        let before = conn.received();
        conn.on_segment(&seg, ce, now);
        if end == 1 && conn.received() > before {
            let first = t.rx_span.map_or(now, |(f, _)| f);
            t.rx_span = Some((first, now));
        }
        // The applications: the server answers once it has every byte and closes after the
        // client; the client's flow is done when the answer arrives, and it closes.
        if end == 1 {
            if !t.answered && conn.received() >= HEADER + t.size {
                t.answered = true;
                conn.write(ANSWER);
            }
            if conn.peer_closed() && !t.closed[1] {
                t.closed[1] = true;
                conn.close();
            }
        } else if t.done_ns.is_none() && conn.received() >= ANSWER {
            t.done_ns = Some(now);
            t.closed[0] = true;
            conn.close();
        }
        if end == 0 {
            // An ACK made room in the writer's socket.
            t.write(now);
        }
        self.tcp_pump(k, end);
        true
    }
}

impl TcpFlow {
    /// A paced flow's writer: before its stop time it tops the socket up to [`SNDBUF`] bytes
    /// unacknowledged; at or after it, the flow's size is what it wrote.
    fn write(&mut self, now: u64) {
        let (Some(until), Some(c)) = (self.write_until, self.conns[0].as_mut()) else {
            return;
        };
        if self.size != UNSIZED {
            return;
        }
        if now >= until {
            // The server answers once it has all of it; the client closes on the answer.
            self.size = self.written.saturating_sub(HEADER);
            return;
        }
        let want = c.acked() + SNDBUF;
        if want > self.written {
            c.write(want - self.written);
            self.written = want;
        }
    }

    /// The flow's part of the report.
    pub(super) fn report(&self) -> Json {
        let mut j = Json::object()
            .with("cc", format!("{:?}", self.cfg.cc).to_lowercase().as_str())
            .with("ecn", u64::from(self.cfg.ecn))
            .with(
                "bytes",
                if self.size == UNSIZED {
                    self.written.saturating_sub(HEADER)
                } else {
                    self.size
                },
            )
            .with("completed", u64::from(self.done_ns.is_some()));
        if let Some(done) = self.done_ns {
            j = j.with("fct_ns", done.saturating_sub(self.start_ns));
        }
        if let Some(c) = &self.conns[0] {
            let s = c.stats();
            j = j
                .with("ecn_negotiated", u64::from(c.ecn()))
                .with("segs_out", s.segs_out)
                .with("data_segs_out", s.data_segs_out)
                .with("retransmits", s.retransmits)
                .with("recoveries", s.recoveries)
                .with("timeouts", s.timeouts)
                .with("probes", s.probes)
                .with("cwr", s.cwr)
                .with("delivered_ce", s.delivered_ce)
                .with("reord_seen", s.reord_seen)
                .with("dsacks", s.dsacks)
                .with("undos", s.undos)
                .with("reordering", u64::from(c.reordering()))
                .with("srtt_ns", c.srtt().unwrap_or(0))
                .with("cwnd", u64::from(c.cwnd()));
        }
        if let Some(c) = &self.conns[1] {
            j = j
                .with("rcv_ooopack", c.stats().rcv_ooopack)
                .with("received", c.received());
        }
        if let Some(bps) = self.pace_bps {
            j = j.with("pace_bps", bps);
        }
        if let Some((first, last)) = self.rx_span {
            j = j.with("first_rx_ns", first).with("last_rx_ns", last);
        }
        if !self.samples.is_empty() {
            let v: Vec<Json> = self.samples.iter().map(|&b| Json::from(b)).collect();
            j = j.with("received_at", v);
        }
        j
    }
}
