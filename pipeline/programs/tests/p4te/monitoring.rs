//! Alg. 1: egress monitoring (queue-depth and colour events, their copies).

use super::*;

/// Runs egress alone on `port` with `enq_qdepth` = each of `depths`; returns the clone
/// session asked for on each packet.
fn egress_sessions(
    pipe: &Arc<Pipeline>,
    port: u16,
    depths: &[u32],
    gap_ns: u64,
) -> Vec<Option<u32>> {
    let mut w = Worker::new(pipe.clone(), 0, 1);
    let frame = tcp_v4(0, 1, 1, 1000, None, &[0; 1000]);
    let mut out = Vec::new();
    for (i, &d) in depths.iter().enumerate() {
        w.begin_batch();
        let mut f = OwnedFrame::from_bytes(&frame);
        let mut md = StdMeta::new(1, frame.len(), 0);
        md.egress_port = port;
        md.enq_qdepth = d;
        let now = 1_000_000 + i as u64 * gap_ns;
        let v = f.with_frame(|f| w.egress(now, f, &mut md));
        let (EgressVerdict::Emit { clone }
        | EgressVerdict::Recirculate { clone }
        | EgressVerdict::Drop { clone, .. }) = v;
        out.push(clone);
        w.end_batch();
    }
    out
}

// ----- Alg. 1: egress monitoring -------------------------------------------------------------

#[test]
fn alg1_one_feedback_per_delta_sized_move_of_depth() {
    let t = fabric("p4te", &[("delta", "2")]);
    let pipe = switch(&t, "leaf1");
    // Up by one packet at a time to 10, then down to 0: a report at every second step.
    let depths: Vec<u32> = (0..=10).chain((0..10).rev()).collect();
    // Packets 1 ms apart at 1,000 bytes: far under CIR, so no colour changes.
    let s = egress_sessions(&pipe, 3, &depths, 1_000_000);
    let reported: Vec<u32> = depths
        .iter()
        .zip(&s)
        .filter(|(_, s)| s.is_some())
        .map(|(d, _)| *d)
        .collect();
    assert_eq!(reported, [2, 4, 6, 8, 10, 8, 6, 4, 2, 0]);
    assert!(
        s.iter().flatten().all(|&s| s == SESSION_BASE + 1),
        "CPU only: {s:?}"
    );
    // Signed comparisons: at depth 0 and 1 nothing wraps into a report.
    let s = egress_sessions(&pipe, 4, &[0, 1, 0, 1, 0, 1], 1_000_000);
    assert!(s.iter().all(Option::is_none), "{s:?}");
}

#[test]
fn alg1_one_feedback_at_the_start_and_one_at_the_end_of_a_microburst() {
    let t = fabric("p4te", &[("delta", "2")]);
    let pipe = switch(&t, "leaf1");
    let burst = [0, 0, 1, 2, 3, 3, 2, 1, 0, 0];
    let s = egress_sessions(&pipe, 3, &burst, 1_000_000);
    let at: Vec<usize> = s
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_some())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        at,
        [3, 8],
        "one as it builds past Δ, one when it is gone: {s:?}"
    );
}

#[test]
fn alg1_one_recirculated_copy_per_colour_change() {
    // CIR 90%, PIR 100% of 100 Mb/s with 3,000-byte bursts; 1,054-byte frames.
    let t = fabric("p4te", &[("delta", "0"), ("meter_burst_us", "0")]);
    let pipe = switch(&t, "leaf1");
    let frame = tcp_v4(0, 1, 1, 1000, None, &[0; 1000]);
    let len = frame.len() as u64;
    let gap_at = |pct: u64| len * 8 * 1_000_000_000 / (RATE * pct / 100);
    // The rate sweeps up through CIR and PIR and back: 50%, 95%, 120%, 95%, 50%.
    let mut sw = SimSwitch::new(pipe.clone());
    let mut now = 1_000_000u64;
    let up = sw.inject(1, &frame, now)[0].port;
    let mut phases = Vec::new();
    let mut changes = 0;
    let mut last = 0;
    for pct in [50, 95, 120, 95, 50] {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..400 {
            now += gap_at(pct);
            sw.inject(1, &frame, now);
            let c = reg(&pipe.control, "ingress.port_utilizations", usize::from(up));
            changes += u64::from(c != last);
            last = c;
            seen.insert(c);
        }
        phases.push(seen.into_iter().collect::<Vec<_>>());
    }
    eprintln!("colours per phase {phases:?}, {changes} changes");
    // Below CIR only GREEN; between CIR and PIR the excess is YELLOW; above PIR RED appears.
    assert_eq!(phases[0], [0]);
    assert!(
        phases[1].contains(&1) && !phases[1].contains(&2),
        "{phases:?}"
    );
    assert!(phases[2].contains(&2), "{phases:?}");
    assert_eq!(phases[4].last(), Some(&0));
    // One recirculated copy per change of the port's colour, each consumed at ingress.
    assert!(changes >= 4);
    assert_eq!(drops(&pipe.control, "p4te_util_feedback"), changes);
    // Counted apart from queue-depth events (none: Δ = 0).
    let events = |name: &str| {
        let s = pipe.control.schema();
        let i = s.counters.iter().position(|c| c.name == name).unwrap();
        pipe.control.externs().counters[i]
            .read(usize::from(up))
            .unwrap()
            .packets
    };
    assert_eq!(events("egress.color_events"), changes);
    assert_eq!(events("egress.qdepth_events"), 0);
    assert_eq!(events("egress.feedback"), changes);
}
