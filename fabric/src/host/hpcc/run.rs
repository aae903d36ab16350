//! HPCC's hosts on sockets: a schedule of flows, each on its own socket and thread
//! ([`send`]), and the receiver ([`recv`]).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use hosts::json::Json;

use super::{HpccRx, HpccTx, Step, TxConfig};
use crate::host::{TosSocket, now_ns};

/// How long a window-limited flow waits for an ACK before it looks at its timers again.
const ACK_POLL: Duration = Duration::from_millis(5);

/// One flow of a sender's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Start, ns after the sender starts.
    pub start_ns: u64,
    /// The receiver.
    pub to: SocketAddrV4,
    /// Application bytes.
    pub bytes: u64,
    /// The flow id.
    pub id: u32,
}

/// A schedule: one flow a line, `START_US DST_IP:PORT BYTES [ID]` (`#` starts a comment); the id
/// defaults to the line's flow number, from 1.
pub fn parse_schedule(text: &str) -> Result<Vec<Planned>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = || format!("schedule line {}: {line:?}", n + 1);
        let w: Vec<&str> = line.split_whitespace().collect();
        if !(3..=4).contains(&w.len()) {
            return Err(bad());
        }
        let start_us: u64 = w[0].parse().map_err(|_| bad())?;
        let id = match w.get(3) {
            Some(x) => x.parse().map_err(|_| bad())?,
            None => u32::try_from(out.len() + 1).map_err(|_| bad())?,
        };
        out.push(Planned {
            start_ns: start_us.checked_mul(1000).ok_or_else(bad)?,
            to: w[1].parse().map_err(|_| bad())?,
            bytes: w[2].parse().map_err(|_| bad())?,
            id,
        });
    }
    out.sort_by_key(|p| p.start_ns);
    Ok(out)
}

/// How a sender runs its flows.
#[derive(Clone, Debug)]
pub struct SendOpts {
    /// The flows.
    pub flows: Vec<Planned>,
    /// Every flow's shim, size and controller (`id` and `bytes` are each flow's).
    pub template: TxConfig,
    /// The local address each flow's socket binds (port 0: one ephemeral port per flow).
    pub bind: Ipv4Addr,
    /// Flows not done this long after the sender starts are stopped and reported incomplete.
    pub max_seconds: f64,
}

/// Runs every flow of `o` (each on its own socket and thread, from its start time) and reports
/// them.
pub fn send(o: &SendOpts) -> io::Result<Json> {
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(o.max_seconds);
    let reports: Vec<io::Result<Json>> = std::thread::scope(|sc| {
        let mut jobs = Vec::new();
        for p in &o.flows {
            let start = t0 + Duration::from_nanos(p.start_ns);
            if start >= deadline {
                break;
            }
            if let Some(wait) = start.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let cfg = TxConfig {
                id: p.id,
                bytes: p.bytes,
                ..o.template
            };
            let (to, bind) = (p.to, o.bind);
            jobs.push(sc.spawn(move || one_flow(cfg, to, bind, deadline)));
        }
        jobs.into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a flow thread panicked")))
            })
            .collect()
    });
    let flows = reports.into_iter().collect::<io::Result<Vec<Json>>>()?;
    let c = &o.template;
    Ok(Json::object()
        .with("cc", if c.int { "hpcc-int" } else { "hpcc-pint" })
        .with("ip_len", c.ip_len as u64)
        .with("slots", u64::from(c.slots))
        .with("line_bps", c.hpcc.line_bps)
        .with("base_rtt_ns", c.hpcc.base_rtt_ns)
        .with("flows", flows))
}

/// One flow on its own socket until it is done or `deadline`.
fn one_flow(
    cfg: TxConfig,
    to: SocketAddrV4,
    bind: Ipv4Addr,
    deadline: Instant,
) -> io::Result<Json> {
    let mut sock = TosSocket::bind(SocketAddrV4::new(bind, 0))?;
    let mut tx = HpccTx::new(cfg, now_ns()).map_err(io::Error::other)?;
    let mut buf = Vec::with_capacity(cfg.ip_len);
    let mut rbuf = vec![0u8; 65536];
    let mut other = 0u64;
    let mut take = |tx: &mut HpccTx, n: usize, from: SocketAddrV4, rbuf: &[u8]| {
        if from == to {
            // A bad ACK is counted in the sender's stats and otherwise ignored.
            let _ = tx.on_ack(now_ns(), &rbuf[..n]);
        } else {
            other += 1;
        }
    };
    while Instant::now() < deadline {
        while let Some((n, from, _)) = sock.recv(&mut rbuf, None)? {
            take(&mut tx, n, from, &rbuf);
        }
        let now = now_ns();
        match tx.poll(now, &mut buf) {
            Step::Send => {
                if !sock.send_to(&buf, to)? {
                    tx.refused();
                }
            }
            Step::Pace(until) => {
                // A sleep (an hrtimer): ACKs wait in the socket for at most one gap.
                let left = deadline.saturating_duration_since(Instant::now());
                std::thread::sleep(Duration::from_nanos(until.saturating_sub(now)).min(left));
            }
            Step::Ack(until) => {
                let wait = Duration::from_nanos(until.saturating_sub(now).max(1000))
                    .min(ACK_POLL)
                    .min(deadline.saturating_duration_since(Instant::now()));
                if let Some((n, from, _)) = sock.recv(&mut rbuf, Some(wait))? {
                    take(&mut tx, n, from, &rbuf);
                }
            }
            Step::Done => break,
        }
    }
    Ok(tx
        .report()
        .with("to", to.to_string())
        .with("other_received", other))
}

/// Answers every HPCC datagram to `listen` for `seconds`, then reports.
pub fn recv(listen: SocketAddrV4, seconds: f64) -> io::Result<Json> {
    let mut sock = TosSocket::bind(listen)?;
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let mut rx = HpccRx::default();
    let mut buf = vec![0u8; 65536];
    let mut refused = 0u64;
    while Instant::now() < until {
        let Some((n, from, _)) = sock.recv(&mut buf, Some(Duration::from_millis(100)))? else {
            continue;
        };
        if let Some(len) = rx.on_datagram(from, &buf[..n], now_ns())
            && !sock.send_to(&buf[..len], from)?
        {
            refused += 1;
        }
    }
    Ok(rx
        .report()
        .with("listen", listen.to_string())
        .with("acks_refused", refused))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hosts::hpcc::HpccConfig;

    fn cfg() -> TxConfig {
        TxConfig {
            id: 9,
            bytes: 0,
            ip_len: 1000,
            int: false,
            slots: 0,
            hpcc: HpccConfig::scaled(100_000_000, 1_000_000),
        }
    }

    #[test]
    fn schedules_parse_and_bad_lines_are_errors() {
        let s = parse_schedule("# t dst bytes\n2000 10.0.0.2:4791 5000\n0 10.0.0.3:4791 7 42\n")
            .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].start_ns, s[0].bytes, s[0].id), (0, 7, 42));
        assert_eq!((s[1].start_ns, s[1].id), (2_000_000, 1));
        for bad in [
            "1 2",
            "x 10.0.0.2:1 5",
            "1 10.0.0.2 5",
            "1 10.0.0.2:1 5 6 7",
        ] {
            assert!(parse_schedule(bad).is_err(), "{bad}");
        }
    }

    /// Loopback: a real receiver thread and one flow.
    #[test]
    fn a_flow_completes_over_loopback() {
        let listen = {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            match s.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                a => panic!("{a}"),
            }
        };
        let r = std::thread::spawn(move || recv(listen, 1.5).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        let o = SendOpts {
            flows: vec![Planned {
                start_ns: 0,
                to: listen,
                bytes: 200_000,
                id: 3,
            }],
            template: cfg(),
            bind: Ipv4Addr::LOCALHOST,
            max_seconds: 1.0,
        };
        let v: serde_json::Value = serde_json::from_str(&send(&o).unwrap().pretty()).unwrap();
        let rx: serde_json::Value = serde_json::from_str(&r.join().unwrap().pretty()).unwrap();
        let f = &v["flows"][0];
        assert_eq!(f["completed"], 1, "{v}");
        assert_eq!(f["acked_bytes"], 200_000, "{v}");
        // 200 KB at 100 Mb/s: 16 ms at least.
        assert!(f["fct_ns"].as_u64().unwrap() >= 16_000_000, "{v}");
        assert_eq!(rx["malformed"], 0, "{rx}");
        assert_eq!(rx["flows"][0]["received"], f["sent"], "{rx}");
    }
}
