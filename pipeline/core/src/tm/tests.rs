//! The traffic manager's tests: limits, priority, shaping, ECN, pauses, the shared buffer and PFC.

use super::*;

fn pkt(len: u32, qid: u8, ingress: PortId) -> Queued<u32> {
    let mut meta = StdMeta::new(ingress, len as usize, 0);
    meta.qid = qid;
    Queued { buf: 0, len, meta }
}

fn drain(tm: &TrafficManager<u32>, tx: &mut TxState<u32>, now: u64) -> Vec<Queued<u32>> {
    let mut out = Vec::new();
    while let Dequeued::Packet(p) = tm.dequeue(tx, now) {
        out.push(p);
    }
    out
}

#[test]
fn tail_drop_at_the_packet_limit_and_depth_metadata() {
    let cfg = PortConfig {
        max_packets: 3,
        ..PortConfig::default()
    };
    let tm = TrafficManager::new(2, cfg, None);
    let mut depths = Vec::new();
    for _ in 0..5 {
        match tm.enqueue(1, pkt(100, 0, 0), 10) {
            Ok(a) => depths.push(a.depth),
            Err((_, r)) => assert_eq!(r, Refused::QueueFull),
        }
    }
    assert_eq!(depths, vec![0, 1, 2]);
    assert_eq!(tm.depth(1, 0), (3, 300));
    assert_eq!(tm.stats(1)[0], (3, 2, 0));
    let mut tx = tm.tx_state(1);
    let out = drain(&tm, &mut tx, 25);
    let md: Vec<(u32, u32, u64)> = out
        .iter()
        .map(|p| (p.meta.enq_qdepth, p.meta.deq_qdepth, p.meta.deq_timedelta))
        .collect();
    assert_eq!(md, vec![(0, 2, 15), (1, 1, 15), (2, 0, 15)]);
    assert_eq!(tm.depth(1, 0), (0, 0));
}

#[test]
fn byte_limit_drops_too() {
    let cfg = PortConfig {
        max_bytes: 250,
        ..PortConfig::default()
    };
    let tm = TrafficManager::new(1, cfg, None);
    assert!(tm.enqueue(0, pkt(100, 0, 0), 0).is_ok());
    assert!(tm.enqueue(0, pkt(100, 0, 0), 0).is_ok());
    assert!(tm.enqueue(0, pkt(100, 0, 0), 0).is_err());
    assert!(tm.enqueue(0, pkt(50, 0, 0), 0).is_ok());
}

#[test]
fn strict_priority_serves_the_highest_queue_first() {
    let tm = TrafficManager::new(1, PortConfig::default(), None);
    for (i, q) in [0u8, 3, 7, 3, 0].into_iter().enumerate() {
        let mut p = pkt(64, q, 0);
        p.buf = i as u32;
        tm.enqueue(0, p, 0).unwrap();
    }
    let mut tx = tm.tx_state(0);
    let order: Vec<u32> = drain(&tm, &mut tx, 1).iter().map(|p| p.buf).collect();
    assert_eq!(order, vec![2, 1, 3, 0, 4]);
}

#[test]
fn packet_rate_shaping_spaces_departures() {
    let cfg = PortConfig {
        shaping: Shaping::PacketsPerSec(1000),
        burst: 1,
        ..PortConfig::default()
    };
    let tm = TrafficManager::new(1, cfg, None);
    for _ in 0..10 {
        tm.enqueue(0, pkt(64, 0, 0), 0).unwrap();
    }
    let mut tx = tm.tx_state(0);
    let mut now = 1;
    let mut sent_at = Vec::new();
    while sent_at.len() < 10 {
        match tm.dequeue(&mut tx, now) {
            Dequeued::Packet(_) => sent_at.push(now),
            Dequeued::Wait { at } => now = at,
            Dequeued::Empty => panic!("lost packets"),
        }
    }
    // One packet per ms after the first.
    assert_eq!(sent_at.last().unwrap() - sent_at[0], 9_000_000);
}

#[test]
fn bit_rate_shaping_matches_the_configured_rate() {
    let rate = 100_000_000u64; // 100 Mb/s
    let cfg = PortConfig {
        shaping: Shaping::BitsPerSec(rate),
        burst: 1500,
        max_packets: 10_000,
        max_bytes: u64::MAX,
        ..PortConfig::default()
    };
    let tm = TrafficManager::new(1, cfg, None);
    for _ in 0..5000 {
        tm.enqueue(0, pkt(1500, 0, 0), 0).unwrap();
    }
    let mut tx = tm.tx_state(0);
    let (mut now, mut bytes, first) = (1u64, 0u64, 1u64);
    loop {
        match tm.dequeue(&mut tx, now) {
            Dequeued::Packet(p) => bytes += u64::from(p.len),
            Dequeued::Wait { at } => now = at,
            Dequeued::Empty => break,
        }
    }
    let measured = bytes as f64 * 8.0 / ((now - first) as f64 / 1e9);
    assert!(
        (measured / rate as f64 - 1.0).abs() < 0.01,
        "{measured} b/s"
    );
}

#[test]
fn ecn_marking_above_threshold() {
    let cfg = PortConfig {
        ecn_threshold: Some(2),
        ..PortConfig::default()
    };
    let tm = TrafficManager::new(1, cfg, None);
    let marks: Vec<bool> = (0..4)
        .map(|_| tm.enqueue(0, pkt(64, 0, 0), 0).unwrap().mark_ecn)
        .collect();
    assert_eq!(marks, vec![false, false, true, true]);
    assert_eq!(tm.stats(0)[0].2, 2);
}

#[test]
fn received_pause_is_honoured_only_where_pfc_is_enabled() {
    let tm = TrafficManager::new(2, PortConfig::default(), None);
    tm.configure(
        1,
        PortConfig {
            pfc: true,
            ..PortConfig::default()
        },
    );
    assert!(!tm.pfc_enabled(0) && tm.pfc_enabled(1));
    for port in 0..2 {
        tm.enqueue(port, pkt(64, 0, 0), 0).unwrap();
        let honoured = tm.pause_received(port, 0xff, [0xffff; 8], 1_000);
        let mut tx = tm.tx_state(port);
        let sent = matches!(tm.dequeue(&mut tx, 2_000), Dequeued::Packet(_));
        assert_eq!((honoured, sent), (port == 1, port == 0), "port {port}");
    }
    // A shared buffer with PFC thresholds turns it on everywhere, whatever the port says.
    let sb = SharedBuffer {
        total_bytes: 1 << 20,
        xoff_bytes: Some(1000),
        xon_bytes: 500,
        pause_quanta: 0xffff,
    };
    let tm = TrafficManager::<u32>::new(1, PortConfig::default(), Some(sb));
    assert!(tm.pfc_enabled(0));
    let sb = SharedBuffer {
        xoff_bytes: None,
        ..sb
    };
    let tm = TrafficManager::<u32>::new(1, PortConfig::default(), Some(sb));
    assert!(!tm.pfc_enabled(0), "a shared buffer without PFC thresholds");
}

#[test]
fn received_pause_stops_a_class_for_its_time() {
    let cfg = PortConfig {
        link_bps: 1_000_000_000,
        pfc: true,
        ..PortConfig::default()
    };
    let tm = TrafficManager::new(1, cfg, None);
    tm.enqueue(0, pkt(64, 3, 0), 0).unwrap();
    tm.enqueue(0, pkt(64, 1, 0), 0).unwrap();
    // 1000 quanta x 512 bits at 1 Gb/s = 512 us.
    tm.pause_received(0, 1 << 3, [0, 0, 0, 1000, 0, 0, 0, 0], 1_000);
    let mut tx = tm.tx_state(0);
    match tm.dequeue(&mut tx, 2_000) {
        Dequeued::Packet(p) => assert_eq!(p.meta.qid, 1, "class 1 is not paused"),
        other => panic!("{other:?}"),
    }
    match tm.dequeue(&mut tx, 2_000) {
        Dequeued::Wait { at } => assert_eq!(at, 1_000 + 512_000),
        other => panic!("{other:?}"),
    }
    assert!(matches!(tm.dequeue(&mut tx, 513_000), Dequeued::Packet(_)));
    // XON (quanta 0) resumes at once.
    tm.enqueue(0, pkt(64, 3, 0), 0).unwrap();
    tm.pause_received(0, 1 << 3, [0, 0, 0, 5000, 0, 0, 0, 0], 600_000);
    tm.pause_received(0, 1 << 3, [0; 8], 600_001);
    assert!(matches!(tm.dequeue(&mut tx, 600_002), Dequeued::Packet(_)));
}

#[test]
fn shared_buffer_generates_pfc_xoff_and_xon() {
    let sb = SharedBuffer {
        total_bytes: 10_000,
        xoff_bytes: Some(3_000),
        xon_bytes: 1_000,
        pause_quanta: 0xffff,
    };
    let tm = TrafficManager::new(3, PortConfig::default(), Some(sb));
    // Ingress port 1, class 2, towards egress port 2.
    for _ in 0..2 {
        tm.enqueue(2, pkt(1000, 2, 1), 0).unwrap();
    }
    assert_eq!(tm.pfc_to_send(1), None);
    tm.enqueue(2, pkt(1000, 2, 1), 0).unwrap();
    let (vector, quanta) = tm.pfc_to_send(1).expect("xoff");
    assert_eq!(vector, 0xff);
    assert_eq!(quanta[2], 0xffff);
    assert_eq!(tm.pfc_paused_classes(1), 1 << 2);
    assert_eq!(tm.pfc_to_send(1), None, "sent once");
    // Draining below XON resumes.
    let mut tx = tm.tx_state(2);
    drain(&tm, &mut tx, 1);
    let (_, quanta) = tm.pfc_to_send(1).expect("xon");
    assert_eq!(quanta, [0; 8]);
    // The pool is bounded.
    for _ in 0..10 {
        tm.enqueue(2, pkt(1000, 0, 0), 0).unwrap();
    }
    assert!(matches!(
        tm.enqueue(2, pkt(1000, 0, 0), 0),
        Err((_, Refused::BufferFull))
    ));
}

#[test]
fn depth_counts_packets_from_every_thread() {
    let cfg = PortConfig {
        max_packets: 100_000,
        max_bytes: u64::MAX,
        ..PortConfig::default()
    };
    let tm = std::sync::Arc::new(TrafficManager::<u32>::new(1, cfg, None));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let tm = tm.clone();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    tm.enqueue(0, pkt(64, 0, 0), 0).unwrap();
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(tm.depth(0, 0), (40_000, 40_000 * 64));
    let mut tx = tm.tx_state(0);
    assert_eq!(drain(&tm, &mut tx, 1).len(), 40_000);
}

/// Issue 10, defect 4: a port holds at most its share of buffers across all its queues, until
/// the driver releases what left it (its delay line included).
#[test]
fn a_port_holds_at_most_its_buffer_share_across_queues() {
    let tm = TrafficManager::<u32>::new(2, PortConfig::default(), None);
    tm.set_port_buffers(10);
    let mut admitted = 0;
    for i in 0..40u8 {
        if tm.enqueue(1, pkt(100, i % 8, 0), 0).is_ok() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10, "8 queues, each far below its own limit");
    assert_eq!(tm.held(1), 10);
    // Dequeued but not released (in the delay line): still held.
    let mut tx = tm.tx_state(1);
    let out = drain(&tm, &mut tx, 0);
    assert_eq!(out.len(), 10);
    assert!(tm.enqueue(1, pkt(100, 0, 0), 0).is_err());
    tm.release(1, 4);
    let more = (0..10)
        .filter(|_| tm.enqueue(1, pkt(100, 0, 0), 0).is_ok())
        .count();
    assert_eq!(more, 4);
    // The other port is not affected.
    assert!(tm.enqueue(0, pkt(100, 0, 0), 0).is_ok());
}

#[test]
fn a_packet_pfc_threshold_pauses_its_ingress_port_and_resumes_under_it() {
    let tm = TrafficManager::new(3, PortConfig::default(), None);
    assert!(!tm.pfc_enabled(1));
    // Ingress port 1 gets Q_PFC = 3 (the setting, as a plan or the admin socket writes it).
    let mut c = tm.config(1).unwrap();
    Setting::PfcXoff(3).apply(&mut c);
    tm.configure(1, c);
    assert_eq!(tm.config(1).unwrap().pfc_xoff, Some(3));
    assert!(tm.pfc_enabled(1), "a port that sends PFC obeys it");
    // Two egress ports share the count: 2 packets to port 0, 1 to port 2.
    tm.enqueue(0, pkt(100, 0, 1), 0).unwrap();
    tm.enqueue(2, pkt(100, 0, 1), 0).unwrap();
    assert!(!tm.pfc_pending(1));
    assert_eq!(tm.pfc_to_send(1), None);
    // Another ingress port's packets do not count.
    tm.enqueue(0, pkt(100, 0, 2), 0).unwrap();
    assert_eq!(tm.pfc_to_send(1), None);
    tm.enqueue(0, pkt(100, 0, 1), 0).unwrap();
    assert_eq!(tm.ingress_packets(1, 0), 3);
    assert!(tm.pfc_pending(1));
    let (_, quanta) = tm.pfc_to_send(1).expect("xoff at 3");
    assert_eq!(quanta[0], 0xffff);
    assert_eq!(tm.pfc_paused_classes(1), 1);
    // One packet from port 1 leaves: 2 < 3, XON.
    let mut tx = tm.tx_state(2);
    assert!(matches!(tm.dequeue(&mut tx, 1), Dequeued::Packet(_)));
    let (_, quanta) = tm.pfc_to_send(1).expect("xon under the threshold");
    assert_eq!(quanta, [0; 8]);
    assert_eq!(tm.ingress_packets(1, 0), 2);
    // Turning the threshold off stops the frames; the count drains to 0.
    let mut c = tm.config(1).unwrap();
    Setting::PfcXoff(0).apply(&mut c);
    tm.configure(1, c);
    tm.enqueue(0, pkt(100, 0, 1), 0).unwrap();
    assert_eq!(tm.pfc_to_send(1), None);
    let mut tx = tm.tx_state(0);
    assert_eq!(drain(&tm, &mut tx, 2).len(), 4);
    assert_eq!(tm.ingress_packets(1, 0), 0);
}

/// A count hovering at the XOFF threshold (one packet out, one in) pauses the upstream once:
/// the default resume threshold (3/4 of XOFF) is below it. Resuming as soon as the count was
/// back under XOFF sent an XON and an XOFF for every packet (issue 33: 2.8 M PFC frames in one
/// 700 Mb/s run).
#[test]
fn a_count_hovering_at_xoff_pauses_once_and_resumes_under_the_xon_threshold() {
    let tm = TrafficManager::new(3, PortConfig::default(), None);
    let mut c = tm.config(1).unwrap();
    Setting::PfcXoff(4).apply(&mut c);
    tm.configure(1, c);
    assert_eq!(tm.config(1).unwrap().pfc_xon, None);
    let mut tx = tm.tx_state(0);
    let mut frames = Vec::new();
    let note = |tm: &TrafficManager<u32>, frames: &mut Vec<u16>| {
        frames.extend(tm.pfc_to_send(1).map(|f| f.1[0]));
    };
    for _ in 0..4 {
        tm.enqueue(0, pkt(100, 0, 1), 0).unwrap();
    }
    note(&tm, &mut frames);
    for t in 1..=20 {
        assert!(matches!(tm.dequeue(&mut tx, t), Dequeued::Packet(_)));
        note(&tm, &mut frames);
        tm.enqueue(0, pkt(100, 0, 1), t).unwrap();
        note(&tm, &mut frames);
    }
    assert_eq!(frames, [0xffff], "one XOFF, no XON");
    // Default XON at 3: the count must fall to 2 before the upstream resumes.
    assert!(matches!(tm.dequeue(&mut tx, 30), Dequeued::Packet(_)));
    note(&tm, &mut frames);
    assert_eq!(frames.len(), 1, "3 left: still paused");
    assert!(matches!(tm.dequeue(&mut tx, 31), Dequeued::Packet(_)));
    note(&tm, &mut frames);
    assert_eq!(frames, [0xffff, 0], "2 left: XON");
    // An explicit resume threshold equal to XOFF: the old behaviour, a frame per crossing.
    let mut c = tm.config(1).unwrap();
    let (setting, port) = Setting::parse("set_pfc_xon", &["4".into(), "1".into()])
        .unwrap()
        .unwrap();
    assert_eq!((setting, port), (Setting::PfcXon(4), Some(1)));
    setting.apply(&mut c);
    tm.configure(1, c);
    assert_eq!(tm.config(1).unwrap().pfc_xon, Some(4));
    tm.enqueue(0, pkt(100, 0, 1), 40).unwrap();
    tm.enqueue(0, pkt(100, 0, 1), 40).unwrap();
    note(&tm, &mut frames);
    assert!(matches!(tm.dequeue(&mut tx, 41), Dequeued::Packet(_)));
    note(&tm, &mut frames);
    assert_eq!(frames, [0xffff, 0, 0xffff, 0]);
    assert_eq!(
        (default_pfc_xon(1), default_pfc_xon(2), default_pfc_xon(500)),
        (1, 2, 375)
    );
}

/// Received PFC time: granted pauses count as they elapse, an XON ends one early.
#[test]
fn the_time_a_class_was_paused_is_counted() {
    let tm: TrafficManager<u32> = TrafficManager::new(2, PortConfig::default(), None);
    let mut c = tm.config(0).unwrap();
    Setting::Pfc(true).apply(&mut c);
    Setting::PortRate(1_000_000_000).apply(&mut c);
    tm.configure(0, c);
    let mut quanta = [0u16; 8];
    // 1,000 quanta at 1 Gb/s: 512 µs.
    quanta[0] = 1000;
    assert!(tm.pause_received(0, 1, quanta, 1_000));
    assert_eq!(tm.paused_ns(0, 0, 1_000), 0);
    assert_eq!(tm.paused_ns(0, 0, 101_000), 100_000);
    assert_eq!(tm.paused_ns(0, 0, 10_000_000), 512_000);
    // Paused again, and resumed by an XON after 200 µs.
    assert!(tm.pause_received(0, 1, quanta, 20_000_000));
    assert!(tm.pause_received(0, 1, [0; 8], 20_200_000));
    assert_eq!(tm.paused_ns(0, 0, 30_000_000), 712_000);
    // A refresh before the end extends the pause without counting its overlap twice.
    assert!(tm.pause_received(0, 1, quanta, 40_000_000));
    assert!(tm.pause_received(0, 1, quanta, 40_100_000));
    assert_eq!(tm.paused_ns(0, 0, 50_000_000), 712_000 + 100_000 + 512_000);
    assert_eq!(tm.paused_ns(0, 1, 50_000_000), 0);
}

/// A port shaped to 8 Mb/s with a one-frame burst, so a 1000-byte frame takes 1 ms.
fn shaped_8mbps() -> TrafficManager<u32> {
    let cfg = PortConfig {
        shaping: Shaping::BitsPerSec(8_000_000),
        burst: 1000,
        pfc: true,
        ..PortConfig::default()
    };
    TrafficManager::new(1, cfg, None)
}

const SER: u64 = 1_000_000;

fn sent(tm: &TrafficManager<u32>, tx: &mut TxState<u32>, now: u64) {
    match tm.dequeue(tx, now) {
        Dequeued::Packet(_) => {}
        other => panic!("nothing sent at {now}: {other:?}"),
    }
}

#[test]
fn every_departure_records_its_queueing_delay() {
    let tm = TrafficManager::new(2, PortConfig::default(), None);
    assert_eq!(tm.queue_delay(1).unwrap().count, 0);
    for at in [10, 20, 30] {
        tm.enqueue(1, pkt(100, 0, 0), at).unwrap();
    }
    let mut tx = tm.tx_state(1);
    assert_eq!(drain(&tm, &mut tx, 40).len(), 3);
    // Waited 30, 20 and 10 ns.
    let d = tm.queue_delay(1).unwrap();
    assert_eq!((d.count, d.sum, d.max), (3, 60, 30));
    assert_eq!(tm.queue_delay(0).unwrap().count, 0);
    assert!(tm.queue_delay(9).is_none());
}

#[test]
fn link_lateness_counts_backlogged_departures_against_the_previous_one_plus_their_frame() {
    let tm = shaped_8mbps();
    for _ in 0..5 {
        tm.enqueue(0, pkt(1000, 0, 0), 0).unwrap();
    }
    let mut tx = tm.tx_state(0);
    // The first departure has no previous one; the next two leave exactly at their ideal time.
    let t0 = 1_000;
    sent(&tm, &mut tx, t0);
    assert!(matches!(
        tm.dequeue(&mut tx, t0 + SER - 1),
        Dequeued::Wait { .. }
    ));
    sent(&tm, &mut tx, t0 + SER);
    sent(&tm, &mut tx, t0 + 2 * SER);
    let l = tm.lateness(0).unwrap();
    assert_eq!((l.departures, l.late, l.ns.max, l.ser.max), (2, 0, 0, 0));
    // The fourth leaves 3 serialisation times after its ideal time (the worker was away).
    let t3 = t0 + 2 * SER + SER + 3 * SER;
    sent(&tm, &mut tx, t3);
    // The fifth is on time again.
    sent(&tm, &mut tx, t3 + SER);
    let l = tm.lateness(0).unwrap();
    assert_eq!((l.departures, l.late), (4, 1));
    assert_eq!(l.ns.max, 3 * SER);
    assert_eq!(l.ser.max, 3 * fidelity::SER_SCALE);
    assert_eq!(Lateness::in_ser(l.ser.quantile(1.0)), 3.0);
    assert_eq!((l.ns.quantile(0.5), l.ser.quantile(0.5)), (0, 0));
    assert_eq!(l.ns.quantile(0.99), 3 * SER);
    assert_eq!(l.late_share(), 0.25);

    // The queue is empty now: a frame that arrives 10 ms later left after an idle link and is
    // not counted, however long after the last departure it goes.
    let t5 = t3 + SER + 10 * SER;
    tm.enqueue(0, pkt(1000, 0, 0), t5).unwrap();
    sent(&tm, &mut tx, t5);
    assert_eq!(tm.lateness(0).unwrap().departures, 4);
    // Two more: the first again follows an idle link, the second was waiting behind it.
    let t6 = t5 + 5 * SER;
    tm.enqueue(0, pkt(1000, 0, 0), t6).unwrap();
    tm.enqueue(0, pkt(1000, 0, 0), t6).unwrap();
    sent(&tm, &mut tx, t6);
    sent(&tm, &mut tx, t6 + SER + 500);
    let l = tm.lateness(0).unwrap();
    assert_eq!((l.departures, l.late, l.ns.max), (5, 1, 3 * SER));
    assert_eq!(l.ns.sum, 3 * SER + 500, "the last one 500 ns late");
    // 500 x 256 / 1e6 = 0.128 of a serialisation time, in 1/256: 0.
    assert_eq!(l.ser.sum, 3 * fidelity::SER_SCALE);
}

#[test]
fn a_full_frame_after_a_small_one_is_due_its_own_serialisation_time_after_it() {
    // 1000, 100, 1000 and 100 bytes, backlogged, the bucket empty after the first: the shaper
    // lets each go once its own tokens have come in, so the second big frame leaves 1 ms after
    // the small one before it. That is on time; against the small frame's 0.1 ms it would look
    // 0.9 ms late.
    let tm = shaped_8mbps();
    for len in [1000, 100, 1000, 100] {
        tm.enqueue(0, pkt(len, 0, 0), 0).unwrap();
    }
    let mut tx = tm.tx_state(0);
    let t0 = 1_000;
    sent(&tm, &mut tx, t0);
    let t1 = t0 + SER / 10;
    assert!(matches!(tm.dequeue(&mut tx, t1 - 1), Dequeued::Wait { .. }));
    sent(&tm, &mut tx, t1);
    assert!(matches!(
        tm.dequeue(&mut tx, t1 + SER - 1),
        Dequeued::Wait { .. }
    ));
    sent(&tm, &mut tx, t1 + SER);
    let l = tm.lateness(0).unwrap();
    assert_eq!((l.departures, l.late, l.ns.max), (2, 0, 0));
    // The last small one is due 0.1 ms later and leaves 0.2 ms late: 2 of its own times.
    sent(&tm, &mut tx, t1 + SER + SER / 10 + SER / 5);
    let l = tm.lateness(0).unwrap();
    assert_eq!((l.departures, l.late), (3, 1));
    assert_eq!(l.ns.max, SER / 5);
    assert_eq!(l.ser.max, 2 * fidelity::SER_SCALE);
}

#[test]
fn link_lateness_skips_a_gap_a_received_pause_made_and_unshaped_ports() {
    let tm = shaped_8mbps();
    for _ in 0..3 {
        tm.enqueue(0, pkt(1000, 0, 0), 0).unwrap();
    }
    let mut tx = tm.tx_state(0);
    sent(&tm, &mut tx, 1_000);
    // Class 0 is paused for 5 ms: the link stops, as a real one would, so the next departure
    // has no ideal time.
    // A quantum is 512 bit times: 1 us at 512 Mb/s.
    tm.configure(
        0,
        PortConfig {
            link_bps: 512_000_000,
            ..tm.config(0).unwrap()
        },
    );
    tm.pause_received(0, 1, [5000, 0, 0, 0, 0, 0, 0, 0], 2_000);
    assert!(matches!(
        tm.dequeue(&mut tx, 1_000 + SER),
        Dequeued::Wait { .. }
    ));
    sent(&tm, &mut tx, 2_000 + 5 * SER);
    assert_eq!(tm.lateness(0).unwrap().departures, 0);
    // The one after it was waiting, and leaves on time.
    sent(&tm, &mut tx, 2_000 + 6 * SER);
    let l = tm.lateness(0).unwrap();
    assert_eq!((l.departures, l.ns.max), (1, 0));

    // A port that never had a rate is not measured.
    let tm = TrafficManager::<u32>::new(1, PortConfig::default(), None);
    assert_eq!(tm.lateness(0), None);
    tm.enqueue(0, pkt(1000, 0, 0), 0).unwrap();
    tm.enqueue(0, pkt(1000, 0, 0), 0).unwrap();
    let mut tx = tm.tx_state(0);
    assert_eq!(drain(&tm, &mut tx, 1).len(), 2);
    assert_eq!(tm.lateness(0), None);
    // Given one, it is, from then on; packets per second: 1 ms per frame at 1000/s.
    tm.configure(
        0,
        PortConfig {
            shaping: Shaping::PacketsPerSec(1000),
            burst: 1,
            ..PortConfig::default()
        },
    );
    tm.enqueue(0, pkt(64, 0, 0), 0).unwrap();
    tm.enqueue(0, pkt(64, 0, 0), 0).unwrap();
    sent(&tm, &mut tx, 10);
    sent(&tm, &mut tx, 10 + 2 * SER);
    let l = tm.lateness(0).unwrap();
    assert_eq!((l.departures, l.late, l.ns.max), (1, 0, SER));
    assert_eq!(l.ser.max, fidelity::SER_SCALE);
}

#[test]
fn a_clock_that_starts_at_zero_is_shaped_like_any_other() {
    // pisa-sim's virtual clock starts at 0: frames that all ask at 0 ns get one bucket's worth
    // (the first frame), not a refill at every call.
    let tm = shaped_8mbps();
    for _ in 0..3 {
        tm.enqueue(0, pkt(1000, 0, 0), 0).unwrap();
    }
    let mut tx = tm.tx_state(0);
    assert_eq!(drain(&tm, &mut tx, 0).len(), 1);
    assert!(matches!(tm.dequeue(&mut tx, 0), Dequeued::Wait { at } if at == SER));
    assert_eq!(drain(&tm, &mut tx, SER).len(), 1);
}

#[test]
fn a_port_is_idle_only_with_nothing_queued_held_or_to_pause() {
    let cfg = PortConfig {
        shaping: Shaping::BitsPerSec(1_000_000),
        ..PortConfig::default()
    };
    let tm = TrafficManager::new(2, cfg, None);
    let mut tx = tm.tx_state(1);
    assert!(tm.idle(&tx));
    tm.enqueue(1, pkt(1000, 0, 0), 0).unwrap();
    tm.enqueue(1, pkt(1000, 0, 0), 0).unwrap();
    assert!(!tm.idle(&tx));
    // One goes; the shaper holds the second as the head: still work to do.
    assert!(matches!(tm.dequeue(&mut tx, 0), Dequeued::Packet(_)));
    assert!(matches!(tm.dequeue(&mut tx, 0), Dequeued::Wait { .. }));
    assert!(!tm.idle(&tx));
    assert_eq!(drain(&tm, &mut tx, 1_000_000_000).len(), 1);
    assert!(tm.idle(&tx));
    // A PFC frame to send is work too.
    tm.pfc_retry(1);
    assert!(!tm.idle(&tx));
}
