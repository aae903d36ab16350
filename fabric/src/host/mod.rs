//! P4QCN's hosts in namespaces (`pisa-host`, issue 14): a UDP sender paced by the reaction point,
//! a receiver that measures loss, reordering and one-way latency and can act as the three-point
//! baseline's notification point, and the paper's random background traffic.
//!
//! The reaction point is `hosts::qcn::Rp`, the same sans-IO state machine `pisa-sim`'s
//! `cc=qcn-rp` flows run. The payload starts with `pisa-sim`'s stamp (magic, flow id, sequence
//! number, send time in CLOCK_REALTIME ns; namespaces share the clock, so one-way latency is the
//! receive time minus the stamp), and the receiver keeps the same record as `pisa-sim`'s hosts
//! (`sim::rx::RxStats`), so the JSON of both reads alike.
//!
//! A feedback packet is any datagram from the flow's destination address and port with ECN = 11:
//! the switch's FBP (its ports swapped back) or the NP's answer. The TOS byte of each datagram
//! comes from `IP_RECVTOS`. Data leaves with ECT(0) so that a three-point CP may mark it. IPv4
//! only, as the paper.
//!
//! HPCC's sender and receiver (issue 15) are in [`hpcc`].

pub mod hpcc;

use std::io::{self, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hosts::json::Json;
use hosts::qcn::{Rp, RpConfig, RpState};
use hosts::stamp::{STAMP_LEN, read_stamp, stamp};
use nix::errno::Errno;
use nix::sys::socket::{ControlMessageOwned, MsgFlags, SockaddrIn, recvmsg, setsockopt, sockopt};
use sim::rx::RxStats;

/// Ethernet, IPv4 and UDP headers: what a frame adds to a UDP payload.
pub const FRAME_OVERHEAD: usize = 14 + 20 + 8;
/// ECN field values.
pub const ECT0: u8 = 2;
/// Congestion experienced; also what marks a feedback packet.
pub const CE: u8 = 3;
/// A sender that fell behind its schedule sends at most this much backlog at once.
const MAX_LAG: Duration = Duration::from_millis(1);
/// Sends due within this are sent now rather than waited for (the timer's resolution).
const SLACK: Duration = Duration::from_micros(20);
/// How long the sink waits for a datagram before it looks at the clock.
const SINK_POLL: Duration = Duration::from_millis(100);
/// Rows of a rate trace kept at most.
const TRACE_MAX: usize = 1 << 20;

/// Wall-clock time, ns since the Unix epoch (the stamps' clock).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A UDP socket that reports each datagram's TOS byte.
#[derive(Debug)]
pub struct TosSocket {
    sock: UdpSocket,
    cmsg: Vec<u8>,
    /// The receive timeout last set (set again only when a caller asks for another).
    timeout: Option<Duration>,
}

impl TosSocket {
    /// Binds `addr` and asks for every datagram's TOS byte.
    pub fn bind(addr: SocketAddrV4) -> io::Result<TosSocket> {
        let sock = UdpSocket::bind(addr)?;
        setsockopt(&sock, sockopt::IpRecvTos, &true)?;
        Ok(TosSocket {
            sock,
            cmsg: nix::cmsg_space!(u8),
            timeout: None,
        })
    }

    /// The TOS byte (DSCP and ECN) of what this socket sends.
    pub fn set_tos(&self, tos: u8) -> io::Result<()> {
        socket2::SockRef::from(&self.sock).set_tos_v4(u32::from(tos))
    }

    /// Sends `buf` to `to`. `Ok(false)`: the kernel refused it for now (a full queue, or an ICMP
    /// error from an absent receiver), counted by the caller rather than fatal.
    pub fn send_to(&self, buf: &[u8], to: SocketAddrV4) -> io::Result<bool> {
        match self.sock.send_to(buf, to) {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
                ) || e.raw_os_error() == Some(Errno::ENOBUFS as i32) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// One datagram: (length, sender, TOS byte). Waits at most `wait` (`None`: not at all).
    pub fn recv(
        &mut self,
        buf: &mut [u8],
        wait: Option<Duration>,
    ) -> io::Result<Option<(usize, SocketAddrV4, u8)>> {
        let flags = match wait {
            None => MsgFlags::MSG_DONTWAIT,
            Some(d) => {
                let d = d.max(Duration::from_micros(1));
                if self.timeout != Some(d) {
                    self.sock.set_read_timeout(Some(d))?;
                    self.timeout = Some(d);
                }
                MsgFlags::empty()
            }
        };
        let mut iov = [IoSliceMut::new(buf)];
        let got =
            recvmsg::<SockaddrIn>(self.sock.as_raw_fd(), &mut iov, Some(&mut self.cmsg), flags);
        match got {
            Ok(m) => {
                let tos = m
                    .cmsgs()
                    .ok()
                    .and_then(|mut c| {
                        c.find_map(|c| match c {
                            ControlMessageOwned::Ipv4Tos(t) => Some(t),
                            _ => None,
                        })
                    })
                    .unwrap_or(0);
                let from = m
                    .address
                    .map_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), |a| {
                        SocketAddrV4::new(a.ip(), a.port())
                    });
                Ok(Some((m.bytes, from, tos)))
            }
            Err(Errno::EAGAIN | Errno::EINTR | Errno::ECONNREFUSED) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// A rate change of a reaction point: (µs since the sender started, Rc, Rt, state).
pub type TraceRow = (u64, u64, u64, RpState);

/// What one paced flow did.
#[derive(Clone, Debug, Default)]
pub struct Sent {
    /// Datagrams sent.
    pub sent: u64,
    /// Sends the kernel refused (full queue, ICMP error).
    pub refused: u64,
    /// Feedback packets taken (ECN = 11 from the destination).
    pub feedbacks: u64,
    /// Other datagrams received.
    pub other_rx: u64,
}

/// One paced UDP flow.
#[derive(Debug)]
pub struct Flow {
    /// Destination.
    pub to: SocketAddrV4,
    /// Flow id in the stamp.
    pub id: u32,
    /// UDP payload bytes (at least the stamp).
    pub size: usize,
    /// Frame bits per second (without a reaction point; with one, its Rc).
    pub rate_bps: u64,
    /// When it stops.
    pub until: Instant,
}

/// Sends `flow`, paced at its rate or, with `rp`, at the reaction point's; every feedback packet
/// goes to the RP and every rate change to `trace` (times from `t0`).
pub fn paced(
    sock: &mut TosSocket,
    flow: &Flow,
    mut rp: Option<&mut Rp>,
    trace: &mut Vec<TraceRow>,
    t0: Instant,
) -> io::Result<Sent> {
    let size = flow.size.max(STAMP_LEN);
    let frame = (size + FRAME_OVERHEAD) as u64;
    let mut buf = vec![0u8; size];
    let mut rbuf = [0u8; 2048];
    let mut out = Sent::default();
    let mut next = Instant::now();
    loop {
        let now = Instant::now();
        if now >= flow.until {
            break;
        }
        if next > now + SLACK {
            // A sleep (an hrtimer), not a receive timeout (jiffies): feedback waits in the
            // socket until the next send, at most one gap.
            std::thread::sleep(next.min(flow.until) - now);
            continue;
        }
        while let Some((_, from, tos)) = sock.recv(&mut rbuf, None)? {
            on_rx(flow, from, tos, rp.as_deref_mut(), &mut out, trace, t0);
        }
        buf[..STAMP_LEN].copy_from_slice(&stamp(flow.id, out.sent, now_ns()));
        if sock.send_to(&buf, flow.to)? {
            out.sent += 1;
        } else {
            out.refused += 1;
        }
        let rate = match rp.as_deref_mut() {
            Some(rp) => {
                if rp.on_sent(frame) {
                    push_row(rp, trace, t0);
                }
                rp.rate_bps()
            }
            None => flow.rate_bps,
        };
        let gap = u64::try_from(u128::from(frame * 8) * 1_000_000_000 / u128::from(rate.max(1)))
            .unwrap_or(u64::MAX);
        next += Duration::from_nanos(gap);
        if next + MAX_LAG < now {
            next = now - MAX_LAG;
        }
    }
    Ok(out)
}

/// A datagram arrived while sending `flow`: a feedback packet if it is ECN = 11 from the flow's
/// destination.
fn on_rx(
    flow: &Flow,
    from: SocketAddrV4,
    tos: u8,
    rp: Option<&mut Rp>,
    out: &mut Sent,
    trace: &mut Vec<TraceRow>,
    t0: Instant,
) {
    if from == flow.to && tos & 3 == CE {
        out.feedbacks += 1;
        if let Some(rp) = rp {
            rp.on_feedback();
            push_row(rp, trace, t0);
        }
    } else {
        out.other_rx += 1;
    }
}

fn push_row(rp: &Rp, trace: &mut Vec<TraceRow>, t0: Instant) {
    if trace.len() < TRACE_MAX {
        let t = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
        trace.push((t, rp.rate_bps(), rp.target_bps(), rp.state()));
    }
}

/// The reaction point's parameters for a sender at `rate_bps` on a `link_bps` link, with the
/// user's R_AI and byte counter where given (`RpConfig::scaled` otherwise).
pub fn rp_config(
    link_bps: u64,
    rate_bps: u64,
    r_ai_bps: Option<u64>,
    byte_counter: Option<u64>,
) -> RpConfig {
    let mut c = RpConfig::scaled(link_bps, rate_bps);
    if let Some(r) = r_ai_bps {
        c.r_ai_bps = r.max(1);
    }
    if let Some(b) = byte_counter {
        c.byte_counter = b.max(1);
    }
    c
}

/// The JSON of one sent flow.
pub fn sent_json(obj: Json, s: &Sent) -> Json {
    obj.with("sent", s.sent)
        .with("refused", s.refused)
        .with("feedbacks_received", s.feedbacks)
        .with("other_received", s.other_rx)
}

/// A trace as CSV: `t_us,rc_bps,rt_bps,state`.
pub fn trace_csv(trace: &[TraceRow]) -> String {
    let mut s = String::from("t_us,rc_bps,rt_bps,state\n");
    for (t, rc, rt, st) in trace {
        s.push_str(&format!("{t},{rc},{rt},{}\n", st.name()));
    }
    s
}

/// The receiver: how long, and whether it is the three-point baseline's NP.
#[derive(Debug)]
pub struct SinkOpts {
    /// Where it listens.
    pub listen: SocketAddrV4,
    /// How long it runs.
    pub seconds: f64,
    /// Answer CE-marked packets with a feedback packet (ECN = 11, from the flow's destination
    /// address and port to its source's), as QCN's notification point.
    pub np: bool,
    /// At most one NP answer per flow per this many µs (0: every CE packet, as `pisa-sim`).
    pub np_interval_us: u64,
    /// The end of the measurement window, ns since the Unix epoch: each flow also reports
    /// `received_in_window`, its packets that arrived by then (None: no window).
    pub window_end_ns: Option<u64>,
}

#[derive(Debug, Default)]
struct RxFlow {
    rx: RxStats,
    ce: u64,
    np_sent: u64,
    last_np: Option<Instant>,
}

/// Receives for `o.seconds` and reports every flow (by source address and flow id): received,
/// lost (of the sequence numbers seen), reordered, one-way latency p50/p99/max, CE marks, and
/// the NP's answers.
pub fn sink(o: &SinkOpts) -> io::Result<Json> {
    let mut sock = TosSocket::bind(o.listen)?;
    if o.np {
        sock.set_tos(CE)?;
    }
    let until = Instant::now() + Duration::from_secs_f64(o.seconds);
    let mut flows: std::collections::BTreeMap<(SocketAddrV4, u32), RxFlow> = Default::default();
    let (mut unstamped, mut ce_total) = (0u64, 0u64);
    let mut buf = vec![0u8; 65536];
    loop {
        let now = Instant::now();
        if now >= until {
            break;
        }
        // One fixed timeout (a socket option set once, not per datagram): the sink may
        // overstay its time by up to this.
        let Some((n, from, tos)) = sock.recv(&mut buf, Some(SINK_POLL))? else {
            continue;
        };
        let at = now_ns();
        let ce = tos & 3 == CE;
        ce_total += u64::from(ce);
        let Some((id, seq, sent_ns)) = read_stamp(&buf[..n]) else {
            unstamped += 1;
            continue;
        };
        let f = flows.entry((from, id)).or_insert_with(|| RxFlow {
            rx: RxStats::with_window(o.window_end_ns),
            ..RxFlow::default()
        });
        f.rx.on_packet_at(seq, at.saturating_sub(sent_ns), at);
        if !ce {
            continue;
        }
        f.ce += 1;
        let due = f.last_np.is_none_or(|t| {
            Instant::now().duration_since(t) >= Duration::from_micros(o.np_interval_us)
        });
        if o.np && due && sock.send_to(&buf[..STAMP_LEN], from)? {
            f.np_sent += 1;
            f.last_np = Some(Instant::now());
        }
    }
    let list: Vec<Json> = flows
        .iter()
        .map(|((src, id), f)| {
            let mut j = f.rx.report(
                Json::object()
                    .with("src", src.to_string())
                    .with("flow", u64::from(*id)),
                f.rx.seen_span(),
            );
            j = j.with("rx_ecn_ce", f.ce);
            if o.np {
                j = j.with("np_feedbacks_sent", f.np_sent);
            }
            j
        })
        .collect();
    Ok(Json::object()
        .with("listen", o.listen.to_string())
        .with("rx_ecn_ce", ce_total)
        .with("unstamped", unstamped)
        .with("flows", list))
}

/// Flow ids of background flows start here (a main flow is usually 1).
pub const BACKGROUND_ID: u32 = 1000;

/// The paper's random background traffic, as sent by one host.
#[derive(Debug)]
pub struct BackgroundOpts {
    /// Every host of the run, in the same order on every host.
    pub hosts: Vec<Ipv4Addr>,
    /// This host's index in `hosts`.
    pub me: usize,
    /// Rates a flow's rate is drawn from, frame bits per second.
    pub rates: Vec<u64>,
    /// How long.
    pub seconds: f64,
    /// Mean of the exponential flow size, frame bytes.
    pub mean_bytes: u64,
    /// Seed of the schedule (the same on every host).
    pub seed: u64,
    /// The receivers' port.
    pub port: u16,
    /// UDP payload bytes.
    pub size: usize,
    /// Pace each flow by a reaction point on a link of this rate (`None`: plain UDP).
    pub rp_link_bps: Option<u64>,
}

/// Sends this host's part of `sim::traffic::background` and reports every flow.
pub fn background(o: &BackgroundOpts) -> io::Result<Json> {
    let until_ns = (o.seconds * 1e9) as u64;
    let schedule =
        sim::traffic::background(o.hosts.len(), &o.rates, o.mean_bytes, until_ns, o.seed);
    let mut sock = TosSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    sock.set_tos(ECT0)?;
    let t0 = Instant::now();
    let mut flows = Vec::new();
    let mut trace = Vec::new();
    for (k, f) in schedule.iter().filter(|f| f.src == o.me).enumerate() {
        let start = t0 + Duration::from_nanos(f.start_ns);
        if let Some(wait) = start.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let flow = Flow {
            to: SocketAddrV4::new(o.hosts[f.dst], o.port),
            id: BACKGROUND_ID + u32::try_from(k).unwrap_or(u32::MAX - BACKGROUND_ID),
            size: o.size,
            rate_bps: f.rate_bps,
            until: t0 + Duration::from_nanos(f.stop_ns),
        };
        let mut rp = o
            .rp_link_bps
            .map(|l| Rp::new(rp_config(l, f.rate_bps, None, None)));
        trace.clear();
        let s = paced(&mut sock, &flow, rp.as_mut(), &mut trace, t0)?;
        let mut j = sent_json(
            Json::object()
                .with("flow", u64::from(flow.id))
                .with("dst", flow.to.to_string())
                .with("rate_bps", f.rate_bps)
                .with("bytes", f.bytes)
                .with("start_us", f.start_ns / 1000)
                .with("stop_us", f.stop_ns / 1000),
            &s,
        );
        if let Some(rp) = &rp {
            j = j.with("qcn_rp", rp.report());
        }
        flows.push(j);
    }
    Ok(Json::object()
        .with("host", o.hosts[o.me].to_string())
        .with("flows", flows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
    }

    #[test]
    fn the_tos_byte_of_a_datagram_is_read_back() {
        let mut rx = TosSocket::bind(loopback()).unwrap();
        let tx = TosSocket::bind(loopback()).unwrap();
        let to = match rx.sock.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            a => panic!("{a}"),
        };
        let mut buf = [0u8; 64];
        for tos in [ECT0, CE, 0x10 | CE] {
            tx.set_tos(tos).unwrap();
            assert!(tx.send_to(b"x", to).unwrap());
            let (n, _, got) = rx
                .recv(&mut buf, Some(Duration::from_secs(2)))
                .unwrap()
                .expect("a datagram");
            assert_eq!((n, got), (1, tos));
        }
        assert!(rx.recv(&mut buf, None).unwrap().is_none());
    }

    #[test]
    fn a_paced_flow_keeps_its_rate_and_an_rp_halves_on_feedback() {
        // A receiver that answers the first datagram with ECN = 11: one cut.
        let mut rx = TosSocket::bind(loopback()).unwrap();
        rx.set_tos(CE).unwrap();
        let to = match rx.sock.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            a => panic!("{a}"),
        };
        let mut tx = TosSocket::bind(loopback()).unwrap();
        let answer = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let mut n = 0u64;
            let mut from = None;
            while let Some((_, f, _)) = rx.recv(&mut buf, Some(Duration::from_millis(300))).unwrap()
            {
                if from.is_none() {
                    rx.send_to(b"fbp", f).unwrap();
                }
                from = Some(f);
                n += 1;
            }
            n
        });
        // 200 frames of 1042 B at 8.336 Mb/s take 200 ms.
        let rate = 8_336_000;
        let mut rp = Rp::new(rp_config(rate, rate, None, Some(u64::MAX)));
        let mut trace = Vec::new();
        let t0 = Instant::now();
        let flow = Flow {
            to,
            id: 7,
            size: 1000,
            rate_bps: rate,
            until: t0 + Duration::from_millis(200),
        };
        let s = paced(&mut tx, &flow, Some(&mut rp), &mut trace, t0).unwrap();
        assert_eq!(s.feedbacks, 1);
        assert_eq!(rp.rate_bps(), rate / 2);
        assert_eq!(trace.len(), 1);
        assert_eq!(trace[0].3, RpState::RateReduction);
        // Cut to half early on: about 100 frames rather than 200.
        assert!((90..=130).contains(&s.sent), "{}", s.sent);
        assert_eq!(answer.join().unwrap(), s.sent);
    }
}
