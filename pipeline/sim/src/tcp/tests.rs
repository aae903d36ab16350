//! Two connections over a simulated bottleneck: the RFC behaviours end to end.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::*;

/// One direction of a link: a FIFO served at `rate_bps`, then `delay_ns`; drops at `limit`
/// packets queued; CE-marks ECT packets that find `mark_at` or more queued.
struct Pipe {
    rate_bps: u64,
    delay_ns: u64,
    limit: usize,
    mark_at: Option<usize>,
    departures: std::collections::VecDeque<u64>,
    max_queue: usize,
    drops: u64,
}

impl Pipe {
    fn new(rate_bps: u64, delay_ns: u64, limit: usize) -> Pipe {
        Pipe {
            rate_bps,
            delay_ns,
            limit,
            mark_at: None,
            departures: Default::default(),
            max_queue: 0,
            drops: 0,
        }
    }

    /// The arrival time at the far end and CE, or `None` when dropped.
    fn send(&mut self, s: &Segment, now: u64) -> Option<(u64, bool)> {
        while self.departures.front().is_some_and(|&d| d <= now) {
            self.departures.pop_front();
        }
        let queued = self.departures.len();
        if queued >= self.limit {
            self.drops += 1;
            return None;
        }
        self.max_queue = self.max_queue.max(queued + 1);
        let bytes = (s.header_len() + s.len as usize + 20 + 14) as u64;
        let start = self.departures.back().copied().unwrap_or(now).max(now);
        let done = start + bytes * 8 * 1_000_000_000 / self.rate_bps;
        self.departures.push_back(done);
        let ce = s.ect && self.mark_at.is_some_and(|k| queued >= k);
        Some((done + self.delay_ns, ce))
    }
}

/// Whether to lose a segment: (segment, direction, data segments sent before it that way, now).
type DropFn = Box<dyn FnMut(&Segment, usize, u64, u64) -> bool>;

/// A client and a server over two pipes; `drop` may discard a segment (direction 0: client to
/// server), given the segment and how many data segments that direction sent before it.
struct Net {
    now: u64,
    c: Conn,
    s: Option<Conn>,
    scfg: Config,
    pipes: [Pipe; 2],
    /// (arrival, order) -> (to which end, the segment, CE).
    events: BinaryHeap<Reverse<(u64, u64)>>,
    in_flight: std::collections::HashMap<u64, (usize, Segment, bool)>,
    order: u64,
    data_sent: [u64; 2],
    drop: DropFn,
    /// Client data segments (by index) that arrive this much later, ns (another path).
    hold: Vec<(u64, u64)>,
    /// (time, client cwnd) after every event.
    cwnd_log: Vec<(u64, u32)>,
    /// Client data segments: (time, seq).
    sent_log: Vec<(u64, u32)>,
}

impl Net {
    fn new(cfg: Config, rate_bps: u64, delay_ns: u64, limit: usize) -> Net {
        Net {
            now: 0,
            c: Conn::client(cfg.clone(), 1_000),
            s: None,
            scfg: cfg,
            pipes: [
                Pipe::new(rate_bps, delay_ns, limit),
                Pipe::new(rate_bps, delay_ns, limit),
            ],
            events: BinaryHeap::new(),
            in_flight: Default::default(),
            order: 0,
            data_sent: [0; 2],
            drop: Box::new(|_, _, _, _| false),
            hold: Vec::new(),
            cwnd_log: Vec::new(),
            sent_log: Vec::new(),
        }
    }

    fn transmit(&mut self) {
        loop {
            let mut any = false;
            for dir in 0..2 {
                let conn = if dir == 0 {
                    Some(&mut self.c)
                } else {
                    self.s.as_mut()
                };
                let Some(conn) = conn else { continue };
                while let Some(seg) = conn.poll_transmit(self.now) {
                    any = true;
                    let n = self.data_sent[dir];
                    if seg.len > 0 {
                        self.data_sent[dir] += 1;
                        if dir == 0 {
                            self.sent_log.push((self.now, seg.seq));
                        }
                    }
                    if (self.drop)(&seg, dir, n, self.now) {
                        continue;
                    }
                    if let Some((mut at, ce)) = self.pipes[dir].send(&seg, self.now) {
                        if let Some(&(_, extra)) = self.hold.iter().find(|h| h.0 == n)
                            && dir == 0
                            && seg.len > 0
                        {
                            at += extra;
                        }
                        self.order += 1;
                        self.in_flight.insert(self.order, (1 - dir, seg, ce));
                        self.events.push(Reverse((at, self.order)));
                    }
                }
            }
            if !any {
                break;
            }
        }
    }

    /// Runs until `done` holds or `until` ns.
    fn run(&mut self, until: u64, mut done: impl FnMut(&Net) -> bool) -> bool {
        loop {
            self.transmit();
            if done(self) {
                return true;
            }
            let next = [
                self.events.peek().map(|Reverse(e)| e.0),
                self.c.poll_timeout(),
                self.s.as_ref().and_then(Conn::poll_timeout),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else { return false };
            if next > until {
                return false;
            }
            self.now = next;
            while self.events.peek().is_some_and(|Reverse(e)| e.0 <= self.now) {
                let Reverse((_, order)) = self.events.pop().unwrap();
                let (to, seg, ce) = self.in_flight.remove(&order).unwrap();
                if to == 1 {
                    match &mut self.s {
                        Some(s) => s.on_segment(&seg, ce, self.now),
                        None if seg.has(segment::SYN) => {
                            self.s = Some(Conn::server(self.scfg.clone(), 7_000_000, &seg));
                        }
                        None => {}
                    }
                } else {
                    self.c.on_segment(&seg, ce, self.now);
                }
            }
            if self.c.poll_timeout().is_some_and(|t| t <= self.now) {
                self.c.on_timeout(self.now);
            }
            if let Some(s) = &mut self.s
                && s.poll_timeout().is_some_and(|t| t <= self.now)
            {
                s.on_timeout(self.now);
            }
            self.cwnd_log.push((self.now, self.c.cwnd()));
        }
    }

    /// The client sends `bytes` and closes; runs until the server has them all.
    fn transfer(&mut self, bytes: u64, until: u64) -> Option<u64> {
        self.c.write(bytes);
        self.c.close();
        self.run(until, |n| {
            n.s.as_ref().is_some_and(|s| s.received() == bytes)
        })
        .then_some(self.now)
    }
}

const G: u64 = 1_000_000_000;

fn cfg(cc: Kind) -> Config {
    Config {
        cc,
        ..Config::default()
    }
}

#[test]
fn a_transfer_completes_with_the_handshakes_options_and_no_retransmission() {
    let mut n = Net::new(
        Config {
            ecn: true,
            ..cfg(Kind::Cubic)
        },
        G,
        50_000,
        1000,
    );
    let t = n.transfer(1_000_000, 10 * G).expect("finished");
    let s = n.s.as_ref().unwrap();
    assert_eq!(n.c.mss(), 1448, "1460 less the timestamp option");
    assert!(n.c.ecn() && s.ecn());
    assert_eq!(n.c.stats().retransmits, 0);
    // 1 MB at 1 Gb/s is 8 ms plus a few 100 µs RTTs of slow start.
    assert!(t > 8_000_000 && t < 12_000_000, "{t}");
    // The FIN handshake finishes too.
    n.run(11 * G, |n| n.c.all_acked());
    assert!(n.c.all_acked());
    assert!(n.s.as_ref().unwrap().peer_closed());
}

#[test]
fn slow_start_doubles_the_window_every_round_trip() {
    // 10 Gb/s and 10 ms each way: rounds are bursts 20 ms apart.
    let mut n = Net::new(cfg(Kind::Reno), 10 * G, 10_000_000, 100_000);
    n.c.write(100_000_000);
    n.run(120_000_000, |_| false);
    let at = |t: u64| {
        n.cwnd_log
            .iter()
            .take_while(|(x, _)| *x <= t)
            .last()
            .map_or(0, |(_, c)| *c)
    };
    // The SYN's round ends at 20 ms and the first flight's ACKs return at 40 ms.
    assert_eq!(at(30_000_000), 10);
    assert_eq!(at(50_000_000), 20);
    assert_eq!(at(70_000_000), 40);
    assert_eq!(at(90_000_000), 80);
    assert_eq!(at(110_000_000), 160);
}

#[test]
fn a_lost_segment_is_repaired_by_fast_retransmit_on_sack_evidence() {
    let mut n = Net::new(cfg(Kind::Reno), G, 50_000, 1000);
    let mut dropped = false;
    n.drop = Box::new(move |s, dir, k, _| {
        if dir == 0 && s.len > 0 && k == 40 && !dropped {
            dropped = true;
            return true;
        }
        false
    });
    n.transfer(2_000_000, 10 * G).expect("finished");
    let st = n.c.stats();
    assert_eq!((st.retransmits, st.recoveries, st.timeouts), (1, 1, 0));
    // Every segment after the hole until the retransmission arrives is out of order.
    assert!(n.s.as_ref().unwrap().stats().rcv_ooopack >= 3);
    // Reno halved: the threshold is half the window when the loss was found.
    let at_loss = n.cwnd_log.iter().map(|(_, c)| *c).max().unwrap();
    assert!(
        n.c.ssthresh() <= at_loss / 2 + 1,
        "{} {at_loss}",
        n.c.ssthresh()
    );
}

#[test]
fn a_reduction_that_a_dsack_shows_spurious_is_undone_and_racks_window_widens() {
    // 10 Gb/s, 50 µs each way. Segment 200 takes a path 400 µs longer: RACK deems it lost and
    // it is sent again; the original arrives second and the receiver reports it with a D-SACK.
    let run = |hold: Vec<(u64, u64)>| {
        let mut n = Net::new(cfg(Kind::Reno), 10 * G, 50_000, 1000);
        n.hold = hold;
        n.transfer(2_000_000, 10 * G).expect("finished");
        n
    };
    let plain = run(Vec::new()).c;
    let n = run(vec![(200, 400_000)]);
    let st = n.c.stats();
    assert_eq!((st.retransmits, st.recoveries, st.timeouts), (1, 1, 0));
    assert_eq!((st.dsacks, st.undos), (1, 1), "{st:?}");
    // Undone: the threshold is back where it was (slow start's), not half the window.
    assert_eq!(n.c.ssthresh(), plain.ssthresh());
    // No reordering had been seen, so the D-SACK does not widen RACK's window.
    assert_eq!(n.c.reo_wnd_steps(), 1);
    // Segment 20 late by two segments' time first: reordering seen without a retransmission
    // (fewer than three SACKed, a quarter RTT's window); then the D-SACK widens the window.
    let n = run(vec![(20, 2_500), (200, 400_000)]);
    let st = n.c.stats();
    assert!(st.reord_seen >= 1, "{st:?}");
    assert_eq!((st.retransmits, st.dsacks, st.undos), (1, 1, 1), "{st:?}");
    assert_eq!(
        n.c.reo_wnd_steps(),
        2,
        "RACK's window is two quarters of the minimum RTT"
    );
    // A real loss is not undone: no D-SACK comes back for it.
    let mut lossy = Net::new(cfg(Kind::Reno), 10 * G, 50_000, 1000);
    let mut dropped = false;
    lossy.drop = Box::new(move |s, dir, k, _| {
        let lose = dir == 0 && s.len > 0 && k == 200 && !dropped;
        dropped |= lose;
        lose
    });
    lossy.transfer(2_000_000, 10 * G).expect("finished");
    assert_eq!((lossy.c.stats().dsacks, lossy.c.stats().undos), (0, 0));
    assert!(lossy.c.ssthresh() < plain.ssthresh());
}

/// Segment 40 and its first retransmission are lost: RACK finds the lost retransmission once
/// segments sent after it are SACKed; the threshold alone cannot, so the RTO repairs it.
#[test]
fn a_hole_the_late_original_fills_in_recovery_undoes_at_once_and_raises_the_threshold() {
    // 100 Mb/s, 5 ms each way, 1000-byte segments (80 µs each). Segment 200 takes a path 3 ms
    // longer. RACK deems it lost once later segments are SACKed (about 10 ms after it left)
    // and sends it again, but the original reaches the receiver first (8 ms after it left; the
    // retransmission about 15 ms). The ACK it brings advances, short of the recovery's end,
    // and echoes the original's timestamp: Linux's tcp_try_undo_partial.
    let mut n = Net::new(cfg(Kind::Cubic), 100_000_000, 5_000_000, 1000);
    n.hold = vec![(200, 3_000_000)];
    n.transfer(4_000_000, 10 * G).expect("finished");
    let st = n.c.stats();
    assert_eq!(
        (st.retransmits, st.recoveries, st.timeouts),
        (1, 1, 0),
        "{st:?}"
    );
    assert_eq!(st.undos, 1, "{st:?}");
    // The threshold rose from 3 to the distance the original was overtaken by, as Linux's
    // tcpi_reordering would show: 24 segments here (the 3 ms it was late, less what the
    // bottleneck's queue had already delayed the segments behind it).
    assert!(n.c.reordering() > 10, "{}", n.c.reordering());
}

fn lost_retransmission(rack: bool) -> (u64, Stats) {
    let mut n = Net::new(
        Config {
            rack,
            ..cfg(Kind::Reno)
        },
        G,
        50_000,
        1000,
    );
    let (mut hole, mut losses) = (None, 0);
    n.drop = Box::new(move |s, dir, k, _| {
        if dir != 0 || s.len == 0 {
            return false;
        }
        if k == 40 {
            hole = Some(s.seq);
        }
        let lose = hole == Some(s.seq) && losses < 2;
        losses += u32::from(lose);
        lose
    });
    let t = n.transfer(2_000_000, 10 * G).expect("finished");
    (t, n.c.stats())
}

#[test]
fn rack_finds_a_lost_retransmission_where_the_threshold_waits_for_the_rto() {
    let (t, st) = lost_retransmission(true);
    assert_eq!((st.retransmits, st.recoveries, st.timeouts), (2, 1, 0));
    // 2 MB at 1 Gb/s is 16 ms, plus slow start and a few RTTs of 100 µs: no timeout's 200 ms.
    assert!(t < 40_000_000, "{t}");
    let (t, st) = lost_retransmission(false);
    assert_eq!((st.retransmits, st.timeouts), (2, 1));
    assert!(t > 200_000_000, "{t}");
}

/// The client sends `segments` full segments (quick ACKs as configured); the last is lost once.
fn tail_loss(quickacks: u32, segments: u64) -> (u64, Net) {
    let mut n = Net::new(
        Config {
            quickacks,
            ..cfg(Kind::Cubic)
        },
        G,
        50_000,
        1000,
    );
    let mut first = true;
    n.drop = Box::new(move |s, dir, k, _| {
        let d = dir == 0 && s.len > 0 && k == segments - 1 && first;
        if d {
            first = false;
        }
        d
    });
    let t = n.transfer(segments * 1448, 10 * G).expect("finished");
    (t, n)
}

#[test]
fn a_lost_tail_is_repaired_by_a_probe_not_a_timeout() {
    // Every segment but the last acknowledged at once: one segment out when the probe is
    // scheduled, so Linux waits 2 SRTT + 200 ms, capped at the RTO, and probes then.
    let (t, n) = tail_loss(16, 10);
    let st = n.c.stats();
    assert_eq!((st.timeouts, st.probes, st.retransmits), (0, 1, 1));
    assert!((200_000_000..210_000_000).contains(&t), "{t}");
    assert!(n.c.cwnd() >= 10, "a probe does not collapse the window");
    // With delayed ACKs too (every second segment), the last ACK leaves one segment out here.
    let (t, n) = tail_loss(0, 40);
    let st = n.c.stats();
    assert_eq!((st.timeouts, st.probes, st.retransmits), (0, 1, 1));
    assert!((200_000_000..210_000_000).contains(&t), "{t}");
}

#[test]
fn the_rto_doubles_while_the_path_is_black() {
    let mut n = Net::new(cfg(Kind::Cubic), G, 50_000, 1000);
    // Everything the client sends between 5 and 2,000 ms is lost.
    n.drop = Box::new(|_, dir, _, now| dir == 0 && (5_000_000..2 * G).contains(&now));
    n.transfer(20_000_000, 30 * G).expect("finished");
    assert!(n.c.stats().timeouts >= 3);
    // The retransmissions of the first lost segment: the gaps double.
    let lost = n
        .sent_log
        .iter()
        .find(|(t, _)| *t >= 5_000_000)
        .map(|(_, s)| *s)
        .unwrap();
    let times: Vec<u64> = n
        .sent_log
        .iter()
        .filter(|(_, s)| *s == lost)
        .map(|(t, _)| *t)
        .collect();
    assert!(times.len() >= 4, "{times:?}");
    let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    for w in gaps[1..].windows(2) {
        let r = w[1] as f64 / w[0] as f64;
        assert!((1.9..2.1).contains(&r), "gaps {gaps:?}");
    }
    assert!(
        gaps[1] >= 200_000_000,
        "at least the 200 ms floor: {gaps:?}"
    );
}

#[test]
fn a_lone_segment_is_acknowledged_by_the_delayed_ack_timer() {
    let mut n = Net::new(
        Config {
            quickacks: 0,
            tlp: false,
            ..cfg(Kind::Cubic)
        },
        G,
        50_000,
        1000,
    );
    n.run(G, |n| n.c.state() == State::Established);
    let t0 = n.now;
    n.c.write(100);
    n.run(G, |n| n.c.acked() == 100);
    let took = n.now - t0;
    // One RTT (100 µs and change) plus the 40 ms timer.
    assert!((40_000_000..40_300_000).contains(&took), "{took}");
}

#[test]
fn dctcp_keeps_the_queue_near_k_without_loss_and_fills_the_link() {
    let mut n = Net::new(
        Config {
            ecn: true,
            ..cfg(Kind::Dctcp)
        },
        G,
        50_000,
        400,
    );
    n.pipes[0].mark_at = Some(20);
    let bytes = 50_000_000;
    let t = n.transfer(bytes, 10 * G).expect("finished");
    let st = n.c.stats();
    assert_eq!(st.retransmits, 0);
    assert_eq!(n.pipes[0].drops, 0);
    assert!(st.delivered_ce > 0 && st.cwr > 0);
    assert!(n.pipes[0].max_queue < 80, "queue {}", n.pipes[0].max_queue);
    let goodput = bytes as f64 * 8.0 / t as f64;
    assert!(goodput > 0.9, "{goodput} Gb/s");
    assert!(n.c.alpha() > 0.0 && n.c.alpha() < 1.0);
}

#[test]
fn classic_ecn_reduces_without_loss_and_drop_tail_reduces_with_it() {
    let mut n = Net::new(
        Config {
            ecn: true,
            ..cfg(Kind::Cubic)
        },
        G,
        50_000,
        200,
    );
    n.pipes[0].mark_at = Some(30);
    n.transfer(20_000_000, 10 * G).expect("finished");
    assert_eq!(n.c.stats().retransmits, 0);
    assert!(n.c.stats().cwr > 0);
    let mut n = Net::new(cfg(Kind::Cubic), G, 50_000, 30);
    n.transfer(20_000_000, 10 * G).expect("finished");
    assert!(n.pipes[0].drops > 0 && n.c.stats().recoveries > 0);
    assert_eq!(n.c.stats().timeouts, 0, "SACK recovers without a timeout");
}

#[test]
fn one_seed_one_run() {
    let run = || {
        let mut n = Net::new(cfg(Kind::Cubic), G, 50_000, 30);
        let t = n.transfer(5_000_000, 10 * G);
        (t, n.c.stats(), n.cwnd_log.len())
    };
    assert_eq!(run(), run());
}
