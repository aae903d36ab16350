//! Packet sources of simulated hosts: the `--flow` specification of `pisa-sim`, the send times it
//! gives, and the frames it sends.
//!
//! ```text
//! SRC>DST rate=RATE [size=BYTES] [start_ms=X] [stop_ms=Y] [proto=udp|tcp] [sport=P] [dport=P]
//!         [tos=T] [pattern=constant|poisson|onoff] [cc=none|qcn-rp] [r_ai=RATE] [bc=BYTES]
//!         [np=on|off] [np_us=N] [bytes=N]
//! RATE = bits/s with K/M/G suffixes (frame bits), or Npps
//! ```
//!
//! `size` is the IPv4 packet length (default 1000), so each frame is 14 bytes more. Every packet
//! carries, after its UDP or TCP header, a 24-byte stamp: `PSIM`, the flow number, the packet's
//! sequence number and its send time (ns), from which the receiver counts loss, reordering and
//! latency. `onoff` sends at the rate for 10 ms, then pauses 10 ms.
//!
//! `cc` names the sender's congestion control. `cc=qcn-rp` (UDP, a rate in bits/s, constant
//! pattern) paces the flow by P4QCN's reaction point ([`::hosts::qcn::Rp`]), with the paper's
//! parameters scaled to the sender's link ([`::hosts::qcn::RpConfig::scaled`]) unless `r_ai=` or
//! `bc=` (byte counter) say otherwise; the rate is its maximum. A feedback packet is a UDP packet
//! with ECN = 11 from the flow's destination address and port to its source's. `np=on` makes the
//! receiver the notification point of QCN's three-point baseline: it answers every CE-marked
//! packet of the flow with such a feedback packet, or with `np_us=N` at most one every N µs (as
//! a congestion point paces its feedback; `pisa-host sink --np-interval-us` alike).
//!
//! `cc=reno`, `cc=cubic` and `cc=dctcp` make the flow a TCP connection of the simulator's
//! Linux-like endpoints ([`crate::tcp`]): `bytes=` application bytes from SRC to DST, exchanged
//! as `pisa-traffic` exchanges a sized flow (an 18-byte header and the bytes, then a 16-byte
//! answer); its FCT runs from the client's SYN to the answer's arrival. `size=` is the link MTU
//! (default 1500: an MSS of 1460, 1448 with timestamps), `ecn=on|off` negotiates ECN (on by
//! default for dctcp only), `rto_min_ms=` sets the minimum RTO (200 ms), `ip=6` runs it over the
//! hosts' IPv6 addresses (the MSS 20 bytes smaller). `rate=` in bits/s caps the connection's
//! sending rate as `SO_MAX_PACING_RATE` does (Linux paces a socket that sets it, [I]: at the
//! cap alone, not at the kernel's `cwnd / srtt` multiple). Without `bytes=`, `rate=` and
//! `stop_ms=` make it `pisa-traffic`'s paced flow: the application keeps the socket's buffer
//! full until `stop_ms` (a blocking writer), then writes no more; the server answers once it
//! has every byte written, and `received_at` samples ([`crate::fabric::Options::samples_ns`])
//! count what it received by then.
//!
//! `cc=hpcc-pint` and `cc=hpcc-int` (UDP; `rate=` optional, the NIC's line rate is the cap) make
//! the flow a window-based HPCC sender ([`::hosts::hpcc::Hpcc`]) of a finite flow of `bytes=`
//! application bytes to the fabric's designated HPCC port, carrying the `pint` program's shim
//! (PINT's 8-bit digest, or an INT stack) before its stamp; the receiver acknowledges every
//! packet, echoing the shim (`sim/fabric/hpcc.rs`, docs/pint.md). `cc=hpcc-pint-pad` is PINT
//! with a shim padded to INT's length, to compare the two at equal overhead.

use std::net::Ipv4Addr;

use pipeline::externs::Rng;
use pipeline::wire::checksum;
use topo::parse_rate;

pub use ::hosts::stamp::{MAGIC, STAMP_LEN, read_stamp, stamp};

/// Length of the on and off periods of `pattern=onoff`, ns.
pub const ONOFF_PERIOD_NS: u64 = 10_000_000;

/// Transport of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// UDP datagrams.
    Udp,
    /// TCP-shaped segments, each answered by a cumulative pure ACK from the receiver.
    Tcp,
}

/// When packets leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Evenly spaced.
    Constant,
    /// Exponential gaps with the rate's mean.
    Poisson,
    /// The rate for 10 ms, then nothing for 10 ms.
    OnOff,
}

/// A sending rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// Frame bits per second.
    Bps(u64),
    /// Packets per second.
    Pps(u64),
}

/// One `--flow`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// Rate (a cap under a congestion control algorithm).
    pub rate: Rate,
    /// IPv4 packet length, bytes.
    pub size: u16,
    /// First packet, ns.
    pub start_ns: u64,
    /// No packet at or after this time, ns (None: the end of the run).
    pub stop_ns: Option<u64>,
    /// Transport.
    pub proto: Proto,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IPv4 ToS byte (DSCP and ECN: 1 or 2 in the low bits makes the flow ECN-capable).
    pub tos: u8,
    /// Send times.
    pub pattern: Pattern,
    /// The sender's congestion control.
    pub cc: Cc,
    /// The receiver answers CE marks with feedback packets (QCN's NP).
    pub np: bool,
    /// At most one NP answer per this many ns (0: every CE-marked packet).
    pub np_interval_ns: u64,
    /// Application bytes of a finite flow (`bytes=`; HPCC flows).
    pub bytes: Option<u64>,
}

/// A sender's congestion control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cc {
    /// None: the rate and pattern alone.
    None,
    /// P4QCN's reaction point, with optional overrides of R_AI (bits/s) and the byte counter.
    QcnRp {
        /// R_AI, bits/s.
        r_ai_bps: Option<u64>,
        /// Byte counter, bytes.
        byte_counter: Option<u64>,
    },
    /// A TCP connection with this congestion control.
    Tcp {
        /// The algorithm.
        kind: crate::tcp::Kind,
        /// ECN negotiated.
        ecn: bool,
        /// Minimum RTO, ns.
        rto_min_ns: u64,
        /// Over IPv6 (the hosts' `ipv6=` addresses) rather than IPv4.
        ipv6: bool,
    },
    /// HPCC's window controller, fed by PINT's digest (`int: false`) or by INT (`int: true`).
    Hpcc {
        /// The INT baseline.
        int: bool,
        /// PINT with a shim as long as INT's (`cc=hpcc-pint-pad`): equal overhead.
        pad: bool,
    },
}

fn ms(v: &str) -> Result<u64, String> {
    let x: f64 = v.parse().map_err(|_| format!("bad time {v} (ms)"))?;
    if !(x.is_finite() && x >= 0.0) {
        return Err(format!("bad time {v} (ms)"));
    }
    Ok((x * 1e6) as u64)
}

fn num<T: std::str::FromStr>(k: &str, v: &str) -> Result<T, String> {
    let v = v.strip_prefix("0x").map_or_else(
        || v.parse().ok(),
        |hex| {
            u64::from_str_radix(hex, 16)
                .ok()
                .and_then(|n| n.to_string().parse().ok())
        },
    );
    v.ok_or_else(|| format!("bad {k}"))
}

impl FlowSpec {
    /// Parses one specification; `index` (from 0) picks the default source port.
    pub fn parse(spec: &str, index: usize) -> Result<FlowSpec, String> {
        let mut words = spec.split_whitespace();
        let ends = words.next().ok_or("empty flow")?;
        let (src, dst) = ends
            .split_once('>')
            .ok_or_else(|| format!("{ends}: expected SRC>DST"))?;
        let mut f = FlowSpec {
            src: src.to_string(),
            dst: dst.to_string(),
            rate: Rate::Bps(0),
            size: 1000,
            start_ns: 0,
            stop_ns: None,
            proto: Proto::Udp,
            sport: 10_000u16.wrapping_add(index as u16),
            dport: 5001,
            tos: 0,
            pattern: Pattern::Constant,
            cc: Cc::None,
            np: false,
            np_interval_ns: 0,
            bytes: None,
        };
        let mut rate = None;
        let (mut r_ai_bps, mut byte_counter) = (None, None);
        let (mut ecn, mut rto_min_ns, mut size_given, mut udp_given) = (None, None, false, false);
        let mut ip6 = None;
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| format!("expected key=value, got {w}"))?;
            match k {
                "rate" => {
                    rate = Some(match v.strip_suffix("pps") {
                        Some(n) => Rate::Pps(num("rate", n)?),
                        None => Rate::Bps(parse_rate(v)?),
                    });
                }
                "size" => {
                    f.size = num("size", v)?;
                    size_given = true;
                }
                "ecn" => {
                    ecn = Some(match v {
                        "on" => true,
                        "off" => false,
                        _ => return Err(format!("ecn={v}: on or off")),
                    })
                }
                "rto_min_ms" => rto_min_ns = Some(ms(v)?.max(1)),
                "ip" => {
                    ip6 = Some(match v {
                        "4" => false,
                        "6" => true,
                        _ => return Err(format!("ip={v}: 4 or 6")),
                    })
                }
                "start_ms" => f.start_ns = ms(v)?,
                "stop_ms" => f.stop_ns = Some(ms(v)?),
                "proto" => {
                    udp_given = v == "udp";
                    f.proto = match v {
                        "udp" => Proto::Udp,
                        "tcp" => Proto::Tcp,
                        _ => return Err(format!("proto {v}: udp or tcp")),
                    }
                }
                "sport" => f.sport = num("sport", v)?,
                "dport" => f.dport = num("dport", v)?,
                "tos" => f.tos = num("tos", v)?,
                "pattern" => {
                    f.pattern = match v {
                        "constant" => Pattern::Constant,
                        "poisson" => Pattern::Poisson,
                        "onoff" => Pattern::OnOff,
                        _ => return Err(format!("pattern {v}: constant, poisson or onoff")),
                    }
                }
                "cc" => {
                    f.cc = match v {
                        "none" => Cc::None,
                        "qcn-rp" => Cc::QcnRp {
                            r_ai_bps: None,
                            byte_counter: None,
                        },
                        "hpcc-pint" => Cc::Hpcc {
                            int: false,
                            pad: false,
                        },
                        "hpcc-pint-pad" => Cc::Hpcc {
                            int: false,
                            pad: true,
                        },
                        "hpcc-int" => Cc::Hpcc {
                            int: true,
                            pad: false,
                        },
                        "reno" | "cubic" | "dctcp" => Cc::Tcp {
                            kind: v.parse()?,
                            ecn: false,
                            rto_min_ns: 0,
                            ipv6: false,
                        },
                        _ => {
                            return Err(format!(
                                "cc={v}: none, qcn-rp, hpcc-pint, hpcc-pint-pad, hpcc-int, reno, \
                                 cubic or dctcp"
                            ));
                        }
                    }
                }
                "bytes" => f.bytes = Some(num::<u64>("bytes", v)?.max(1)),
                "r_ai" => r_ai_bps = Some(parse_rate(v)?),
                "bc" => byte_counter = Some(num::<u64>("bc", v)?.max(1)),
                "np_us" => f.np_interval_ns = num::<u64>("np_us", v)?.saturating_mul(1000),
                "np" => {
                    f.np = match v {
                        "on" => true,
                        "off" => false,
                        _ => return Err(format!("np={v}: on or off")),
                    }
                }
                _ => return Err(format!("unknown flow option {k}")),
            }
        }
        if let Cc::Tcp {
            kind,
            ecn: e,
            rto_min_ns: r,
            ipv6,
        } = &mut f.cc
        {
            *ipv6 = ip6.unwrap_or(false);
            let paced = matches!(rate, Some(Rate::Bps(b)) if b > 0);
            if udp_given
                || matches!(rate, Some(Rate::Pps(_)))
                || (f.bytes.is_none() && !(paced && f.stop_ns.is_some()))
            {
                return Err(
                    "cc=reno|cubic|dctcp: a TCP flow of bytes=, or of rate= (bits/s) and \
                     stop_ms= (no proto=udp)"
                        .into(),
                );
            }
            f.proto = Proto::Tcp;
            *e = ecn.unwrap_or(*kind == crate::tcp::Kind::Dctcp);
            *r = rto_min_ns.unwrap_or(200_000_000);
            if !size_given {
                f.size = 1500;
            }
            // The connection paces itself; a rate only caps it.
            rate = rate.or(Some(Rate::Bps(u64::MAX)));
        } else if ecn.is_some() || rto_min_ns.is_some() || ip6.is_some() {
            return Err("ecn=, rto_min_ms= and ip= belong to cc=reno, cubic and dctcp".into());
        } else if let Cc::Hpcc { .. } = f.cc {
            if f.bytes.is_none() || f.proto != Proto::Udp {
                return Err("cc=hpcc-*: a UDP flow with bytes=".into());
            }
            // The window paces the flow; the line rate caps it.
            rate = rate.or(Some(Rate::Bps(u64::MAX)));
        } else if f.bytes.is_some() {
            return Err("bytes= belongs to cc=hpcc-*, reno, cubic and dctcp".into());
        }
        f.rate = rate.ok_or("a flow needs rate=")?;
        match &mut f.cc {
            Cc::QcnRp {
                r_ai_bps: r,
                byte_counter: b,
            } => {
                if !matches!(f.rate, Rate::Bps(_))
                    || f.pattern != Pattern::Constant
                    || f.proto != Proto::Udp
                {
                    return Err(
                        "cc=qcn-rp: a UDP flow at a rate in bits/s, pattern=constant".into(),
                    );
                }
                (*r, *b) = (r_ai_bps, byte_counter);
            }
            Cc::None | Cc::Hpcc { .. } | Cc::Tcp { .. }
                if r_ai_bps.is_some() || byte_counter.is_some() =>
            {
                return Err("r_ai= and bc= belong to cc=qcn-rp".into());
            }
            Cc::None | Cc::Hpcc { .. } | Cc::Tcp { .. } => {}
        }
        if matches!(f.rate, Rate::Bps(0) | Rate::Pps(0)) {
            return Err("rate must be > 0".into());
        }
        let min = 20 + header_len(f.proto) + STAMP_LEN;
        if usize::from(f.size) < min || f.size > 9000 {
            return Err(format!(
                "size {}: between {min} and 9000 bytes for {:?}",
                f.size, f.proto
            ));
        }
        Ok(f)
    }

    /// Bits of one frame on the wire (Ethernet header included, no preamble or gap).
    pub fn frame_bits(&self) -> u64 {
        (u64::from(self.size) + 14) * 8
    }

    /// The mean gap between packets, as a fraction (numerator ns, denominator).
    fn gap(&self) -> (u128, u128) {
        match self.rate {
            Rate::Bps(bps) => (
                u128::from(self.frame_bits()) * 1_000_000_000,
                u128::from(bps),
            ),
            Rate::Pps(pps) => (1_000_000_000, u128::from(pps)),
        }
    }
}

/// The send times of one flow.
#[derive(Debug)]
pub struct Source {
    spec: FlowSpec,
    stop_ns: u64,
    /// Packets scheduled so far.
    n: u64,
    /// Poisson: time of the last packet.
    last_ns: u64,
    rng: Rng,
}

impl Source {
    /// The source of `spec`, sending until `stop_ns` at the latest.
    pub fn new(spec: FlowSpec, stop_ns: u64, seed: u64) -> Source {
        let stop_ns = spec.stop_ns.map_or(stop_ns, |s| s.min(stop_ns));
        Source {
            last_ns: spec.start_ns,
            spec,
            stop_ns,
            n: 0,
            rng: Rng::new(seed),
        }
    }

    /// The flow.
    pub fn spec(&self) -> &FlowSpec {
        &self.spec
    }

    /// For a sender that paces itself (its congestion control's rate): `at`, if the flow still
    /// runs then; advances the source.
    pub fn paced(&mut self, at: u64) -> Option<u64> {
        (at < self.stop_ns).then(|| {
            self.n += 1;
            at
        })
    }

    /// When the next packet leaves (None: the flow is over); advances the source.
    pub fn next_send(&mut self) -> Option<u64> {
        let (num, den) = self.spec.gap();
        let t = match self.spec.pattern {
            Pattern::Constant => {
                self.spec.start_ns + u64::try_from(u128::from(self.n) * num / den).ok()?
            }
            Pattern::OnOff => {
                let on = u64::try_from(u128::from(self.n) * num / den).ok()?;
                let periods = on / ONOFF_PERIOD_NS;
                self.spec.start_ns + periods * 2 * ONOFF_PERIOD_NS + on % ONOFF_PERIOD_NS
            }
            Pattern::Poisson => {
                if self.n > 0 {
                    // Inverse transform: -ln(U) x mean, U in (0, 1].
                    let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    let gap = -(1.0 - u).ln() * (num as f64 / den as f64);
                    self.last_ns = self.last_ns.saturating_add(gap as u64);
                }
                self.last_ns
            }
        };
        if t >= self.stop_ns {
            return None;
        }
        self.n += 1;
        Some(t)
    }
}

fn header_len(p: Proto) -> usize {
    match p {
        Proto::Udp => 8,
        Proto::Tcp => 20,
    }
}

/// Addresses of a frame.
#[derive(Clone, Copy, Debug)]
pub struct Addrs {
    /// Destination MAC.
    pub dmac: [u8; 6],
    /// Source MAC.
    pub smac: [u8; 6],
    /// Source IPv4.
    pub src: Ipv4Addr,
    /// Destination IPv4.
    pub dst: Ipv4Addr,
}

/// TCP fields of a frame.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpFields {
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags (0x10 ACK, 0x18 PSH+ACK...).
    pub flags: u8,
    /// Window.
    pub window: u16,
}

/// Writes an Ethernet/IPv4/UDP-or-TCP frame of IPv4 length `ip_len` into `out` (cleared first),
/// with `payload` after the transport header and zeros after that. Checksums are valid.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site per frame kind; a struct would only rename them"
)]
pub fn write_frame(
    out: &mut Vec<u8>,
    a: Addrs,
    proto: Proto,
    tos: u8,
    ports: (u16, u16),
    tcp: TcpFields,
    ip_len: u16,
    payload: &[u8],
) {
    let l4 = header_len(proto);
    let ip_len = usize::from(ip_len).max(20 + l4 + payload.len());
    out.clear();
    out.resize(14 + ip_len, 0);
    out[0..6].copy_from_slice(&a.dmac);
    out[6..12].copy_from_slice(&a.smac);
    out[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut out[14..34];
    ip[0] = 0x45;
    ip[1] = tos;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = match proto {
        Proto::Udp => 17,
        Proto::Tcp => 6,
    };
    ip[12..16].copy_from_slice(&a.src.octets());
    ip[16..20].copy_from_slice(&a.dst.octets());
    let sum = checksum::checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let seg_len = ip_len - 20;
    {
        let seg = &mut out[34..];
        seg[0..2].copy_from_slice(&ports.0.to_be_bytes());
        seg[2..4].copy_from_slice(&ports.1.to_be_bytes());
        match proto {
            Proto::Udp => seg[4..6].copy_from_slice(&(seg_len as u16).to_be_bytes()),
            Proto::Tcp => {
                seg[4..8].copy_from_slice(&tcp.seq.to_be_bytes());
                seg[8..12].copy_from_slice(&tcp.ack.to_be_bytes());
                seg[12] = 5 << 4;
                seg[13] = tcp.flags;
                seg[14..16].copy_from_slice(&tcp.window.to_be_bytes());
            }
        }
        seg[l4..l4 + payload.len()].copy_from_slice(payload);
    }
    let pseudo = checksum::pseudo_header_v4(
        a.src,
        a.dst,
        pipeline::wire::IpProtocol(out[23]),
        seg_len as u32,
    );
    let sum = !checksum::combine(&[pseudo, checksum::sum(&out[34..])]);
    let at = match proto {
        Proto::Udp => 34 + 6,
        Proto::Tcp => 34 + 16,
    };
    // UDP sends 0 as 0xffff (0 means "no checksum").
    let sum = if sum == 0 && proto == Proto::Udp {
        0xffff
    } else {
        sum
    };
    out[at..at + 2].copy_from_slice(&sum.to_be_bytes());
}

/// What a host sees in a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// ECN CE was set.
    pub ce: bool,
    /// The stamp (flow, seq, sent at), if the frame is a data packet of a flow.
    pub stamp: Option<(u32, u64, u64)>,
    /// A TCP data segment.
    pub tcp: Option<TcpSeg>,
    /// A UDP datagram: (source address, source port, destination port).
    pub udp: Option<(Ipv4Addr, u16, u16)>,
}

/// A TCP data segment a host received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSeg {
    /// Its source address.
    pub src: Ipv4Addr,
    /// Its destination address.
    pub dst: Ipv4Addr,
    /// (source, destination) ports.
    pub ports: (u16, u16),
    /// Its sequence number.
    pub seq: u32,
    /// Payload bytes.
    pub len: u32,
}

/// Reads what a host needs from a received frame (Ethernet/IPv4 only; anything else is just
/// counted).
pub fn inspect(frame: &[u8]) -> Seen {
    let mut seen = Seen {
        ce: false,
        stamp: None,
        tcp: None,
        udp: None,
    };
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] {
        return seen;
    }
    let ip = &frame[14..];
    seen.ce = ip[1] & 3 == 3;
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
    if ihl < 20 || total < ihl {
        return seen;
    }
    let seg = &ip[ihl..total];
    let l4 = match ip[9] {
        17 => 8,
        6 if seg.len() >= 20 => usize::from(seg[12] >> 4) * 4,
        _ => return seen,
    };
    let Some(payload) = seg.get(l4..) else {
        return seen;
    };
    if ip[9] == 17 {
        seen.udp = Some((
            Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
            u16::from_be_bytes([seg[0], seg[1]]),
            u16::from_be_bytes([seg[2], seg[3]]),
        ));
    }
    if ip[9] == 6 && !payload.is_empty() {
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        let ports = (
            u16::from_be_bytes([seg[0], seg[1]]),
            u16::from_be_bytes([seg[2], seg[3]]),
        );
        let seq = u32::from_be_bytes([seg[4], seg[5], seg[6], seg[7]]);
        seen.tcp = Some(TcpSeg {
            src,
            dst,
            ports,
            seq,
            len: payload.len() as u32,
        });
    }
    seen.stamp = read_stamp(payload);
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_spec() {
        let f = FlowSpec::parse(
            "h1>h2 rate=10M size=500 start_ms=5 stop_ms=50.5 proto=tcp sport=7 dport=8 tos=0x10 \
             pattern=poisson",
            0,
        )
        .unwrap();
        assert_eq!(f.rate, Rate::Bps(10_000_000));
        assert_eq!(
            (f.size, f.start_ns, f.stop_ns),
            (500, 5_000_000, Some(50_500_000))
        );
        assert_eq!((f.proto, f.sport, f.dport, f.tos), (Proto::Tcp, 7, 8, 0x10));
        assert_eq!(f.pattern, Pattern::Poisson);
        assert_eq!(
            FlowSpec::parse("a>b rate=100pps", 3).unwrap().rate,
            Rate::Pps(100)
        );
        for bad in [
            "a>b",
            "ab rate=1M",
            "a>b rate=1M size=10",
            "a>b rate=1M cc=dctcp",
            "a>b rate=100pps cc=qcn-rp",
            "a>b rate=1M cc=qcn-rp proto=tcp",
            "a>b rate=1M cc=qcn-rp pattern=poisson",
            "a>b rate=1M r_ai=1M",
            "a>b rate=1M np=yes",
            "a>b rate=0",
            "a>b rate=1M colour=red",
            "a>b cc=hpcc-pint",
            "a>b bytes=1000 cc=hpcc-int proto=tcp",
            "a>b rate=1M bytes=1000",
            "a>b cc=cubic rate=10M",
            "a>b cc=cubic rate=100pps stop_ms=10",
            "a>b cc=cubic stop_ms=10",
        ] {
            assert!(FlowSpec::parse(bad, 0).is_err(), "{bad}");
        }
        // TCP: sized, sized with a pacing cap, and paced until a stop.
        let tcp = |s: &str| FlowSpec::parse(s, 0).map(|f| (f.rate, f.bytes, f.stop_ns));
        assert_eq!(
            tcp("a>b cc=cubic bytes=10"),
            Ok((Rate::Bps(u64::MAX), Some(10), None))
        );
        assert_eq!(
            tcp("a>b cc=cubic bytes=10 rate=5M"),
            Ok((Rate::Bps(5_000_000), Some(10), None))
        );
        assert_eq!(
            tcp("a>b cc=reno rate=5M stop_ms=100"),
            Ok((Rate::Bps(5_000_000), None, Some(100_000_000)))
        );
    }

    #[test]
    fn constant_rate_spaces_packets_exactly() {
        // 1000-byte packets = 8112 frame bits; 8.112 Mb/s = 1000 packets/s.
        let f = FlowSpec::parse("a>b rate=8.112M", 0).unwrap();
        let mut s = Source::new(f, 1_000_000_000, 1);
        let times: Vec<u64> = std::iter::from_fn(|| s.next_send()).collect();
        assert_eq!(times.len(), 1000);
        assert_eq!(times[1] - times[0], 1_000_000);
        assert_eq!(*times.last().unwrap(), 999_000_000);
    }

    #[test]
    fn poisson_and_onoff_keep_the_mean_rate() {
        let f = FlowSpec::parse("a>b rate=10000pps pattern=poisson", 0).unwrap();
        let mut s = Source::new(f, 1_000_000_000, 7);
        let n = std::iter::from_fn(|| s.next_send()).count();
        assert!((9_700..10_300).contains(&n), "{n}");
        let f = FlowSpec::parse("a>b rate=10000pps pattern=onoff", 0).unwrap();
        let mut s = Source::new(f, 1_000_000_000, 7);
        let times: Vec<u64> = std::iter::from_fn(|| s.next_send()).collect();
        // Half the time on.
        assert_eq!(times.len(), 5000);
        assert!(
            times
                .iter()
                .all(|t| (t / ONOFF_PERIOD_NS).is_multiple_of(2))
        );
    }

    #[test]
    fn frames_carry_valid_checksums_and_their_stamp() {
        let a = Addrs {
            dmac: [2, 0, 0, 0, 0, 1],
            smac: [2, 0, 0, 0, 0, 2],
            src: Ipv4Addr::new(10, 0, 1, 1),
            dst: Ipv4Addr::new(10, 0, 2, 1),
        };
        for proto in [Proto::Udp, Proto::Tcp] {
            let mut out = Vec::new();
            let tcp = TcpFields {
                seq: 1000,
                flags: 0x18,
                ..TcpFields::default()
            };
            write_frame(&mut out, a, proto, 2, (1, 2), tcp, 200, &stamp(3, 9, 77));
            let p = etherparse::SlicedPacket::from_ethernet(&out).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
                panic!()
            };
            assert_eq!(ip.header().total_len(), 200);
            let h = ip.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum());
            let l4 = &out[34..];
            let pseudo =
                checksum::pseudo_header_v4(a.src, a.dst, pipeline::wire::IpProtocol(out[23]), 180);
            assert_eq!(
                checksum::combine(&[pseudo, checksum::sum(l4)]),
                0xffff,
                "{proto:?}"
            );
            let seen = inspect(&out);
            assert_eq!(seen.stamp, Some((3, 9, 77)));
            assert!(!seen.ce);
            assert_eq!(seen.tcp.is_some(), proto == Proto::Tcp);
        }
    }
}
