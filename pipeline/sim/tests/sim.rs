//! `pisa-sim` on `basic`: queues, tail drops and loss on an overloaded downlink, and
//! determinism.

use hosts::json::Json;
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use topo::{LinkProps, leaf_spine};

const BUFFER: u32 = 64;

fn fabric() -> topo::Topology {
    fabric_with(BUFFER)
}

fn fabric_with(buffer: u32) -> topo::Topology {
    let host = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer,
    };
    // 2 leaves x 2 spines, 2 hosts per leaf, no oversubscription: uplinks at 100 Mb/s.
    leaf_spine(2, 2, 2, 1.0, host)
}

fn run(duration_ms: u64, seed: u64, flows: &[&str]) -> Json {
    run_on(&fabric(), duration_ms, seed, flows)
}

fn run_on(t: &topo::Topology, duration_ms: u64, seed: u64, flows: &[&str]) -> Json {
    let mut opts = Options::new(duration_ms * 1_000_000, seed);
    for (i, f) in flows.iter().enumerate() {
        opts.flows.push(FlowSpec::parse(f, i).unwrap());
    }
    Sim::new(t, opts).unwrap().run()
}

fn at<'a>(j: &'a Json, path: &[&str]) -> &'a Json {
    path.iter().fold(j, |j, k| {
        j.get(k).unwrap_or_else(|| panic!("no {k} in {path:?}"))
    })
}

fn num(j: &Json, path: &[&str]) -> u64 {
    at(j, path).as_u64().unwrap()
}

#[test]
fn overloaded_downlink_fills_its_queue_tail_drops_and_loses_the_excess() {
    // h3's downlink (leaf2 port 1) at 100 Mb/s gets 125 Mb/s: h4 (same leaf) and h1 (across a
    // spine) at 62.5 Mb/s each.
    let flows = ["h4>h3 rate=62.5M", "h1>h3 rate=62.5M"];
    let r = run(500, 1, &flows);
    let port = ["switches", "leaf2", "ports", "1"];
    assert_eq!(
        num(&r, &[&port[..], &["max_enq_qdepth"]].concat()),
        u64::from(BUFFER) - 1,
        "the queue reaches its limit"
    );
    let drops = num(&r, &[&port[..], &["drops"]].concat());
    assert!(drops > 0);
    assert_eq!(
        num(&r, &["switches", "leaf2", "drops_by_reason", "tail_drop"]),
        drops,
        "every drop is a counted tail drop"
    );
    let Json::A(fl) = at(&r, &["flows"]) else {
        panic!()
    };
    let (sent, lost): (u64, u64) = fl.iter().fold((0, 0), |(s, l), f| {
        (s + num(f, &["sent"]), l + num(f, &["lost"]))
    });
    assert_eq!(lost, drops, "lost counts only drops (the fabric drained)");
    // The link carries 1/1.25 of what is offered; the queue holds BUFFER packets of the rest
    // for a while, and serialisation of the last packets spills past the end.
    let expected = sent as f64 * (1.0 - 1.0 / 1.25) - f64::from(BUFFER);
    assert!(
        (lost as f64 - expected).abs() <= 0.01 * sent as f64,
        "lost {lost} of {sent}, expected about {expected:.0}"
    );
    // Nothing else in the fabric dropped anything.
    assert_eq!(num(&r, &["switches", "leaf1", "ports", "3", "drops"]), 0);
}

#[test]
fn a_buffer_deeper_than_the_default_byte_limit_holds_its_packets() {
    // 5,000 full frames are 7.5 MB, above a queue's default 4 MiB (2,796 such frames): the
    // plan raises the byte limit with the depth, so the queue fills to its packet limit.
    assert_eq!(
        topo::plan::TM_DEFAULT_QUEUE_BYTES,
        pipeline::tm::PortConfig::default().max_bytes
    );
    let deep = 5_000;
    let flows = ["h4>h3 rate=75M size=1500", "h1>h3 rate=75M size=1500"];
    let r = run_on(&fabric_with(deep), 2_000, 1, &flows);
    let port = ["switches", "leaf2", "ports", "1"];
    assert_eq!(
        num(&r, &[&port[..], &["max_enq_qdepth"]].concat()),
        u64::from(deep) - 1,
        "the queue reaches its packet limit, not 4 MiB"
    );
    assert!(num(&r, &[&port[..], &["drops"]].concat()) > 0);
}

#[test]
fn a_paced_tcp_flow_keeps_to_its_rate_until_it_stops_and_is_sampled() {
    // 20 Mb/s on 100 Mb/s links for 1 s (pisa-traffic's paced flow), received bytes sampled at
    // 0.5 and 0.9 s; a second, unpaced flow on the same pair of leaves takes the rest.
    let mut opts = Options::new(1_000_000_000, 1);
    opts.samples_ns = vec![500_000_000, 900_000_000];
    for (i, f) in [
        "h1>h3 cc=cubic rate=20M stop_ms=1000",
        "h2>h4 cc=cubic bytes=5000000",
    ]
    .iter()
    .enumerate()
    {
        opts.flows.push(FlowSpec::parse(f, i).unwrap());
    }
    let r = Sim::new(&fabric(), opts).unwrap().run();
    let t = tcp(&r, 0);
    let at: Vec<u64> = match at(t, &["received_at"]) {
        Json::A(v) => v.iter().map(|x| x.as_u64().unwrap()).collect(),
        _ => panic!(),
    };
    // 0.4 s between the samples at 20 Mb/s of payload (Linux paces payload bytes): 1 MB.
    let rate = (at[1] - at[0]) as f64 * 8.0 / 0.4;
    let payload = 20e6;
    assert!(
        (rate - payload).abs() < 0.02 * payload,
        "{rate:.0} b/s between the samples"
    );
    // It stopped writing at 1 s: sized by what it wrote, and answered.
    let bytes = num(t, &["bytes"]);
    assert!(bytes as f64 * 8.0 > 0.95 * payload, "{bytes} bytes");
    assert_eq!(num(t, &["completed"]), 1);
    assert_eq!(num(t, &["received"]), bytes + 18);
    assert_eq!(num(t, &["pace_bps"]), 20_000_000);
    // The unpaced flow went faster than the cap.
    let fct = num(tcp(&r, 1), &["fct_ns"]) as f64 / 1e9;
    assert!(5e6 * 8.0 / fct > 40e6, "the unpaced flow took {fct} s");
}

#[test]
fn one_seed_gives_identical_output_and_another_seed_differs() {
    let flows = [
        "h1>h3 rate=60M pattern=poisson",
        "h2>h3 rate=60M pattern=poisson proto=tcp",
        "h4>h1 rate=20M pattern=onoff size=200",
    ];
    let a = run(100, 42, &flows).pretty();
    let b = run(100, 42, &flows).pretty();
    assert_eq!(a, b);
    let c = run(100, 43, &flows).pretty();
    assert_ne!(a, c, "the seed drives the Poisson sources");
}

#[test]
fn tcp_segments_are_answered_with_acks_that_cross_the_fabric() {
    let r = run(50, 1, &["h1>h3 rate=10M proto=tcp"]);
    let Json::A(fl) = at(&r, &["flows"]) else {
        panic!()
    };
    let received = num(&fl[0], &["received"]);
    assert!(received > 0);
    // h1 receives one pure ACK per segment h3 received.
    assert_eq!(num(&r, &["hosts", "h1", "rx_packets"]), received);
}

#[test]
fn a_kernel_router_is_refused_by_name_and_gets_no_fabric_plan() {
    let mut t = fabric();
    t.switches[0].program = programs::KERNEL.into();
    let err = Sim::new(&t, Options::new(1_000_000, 1)).unwrap_err();
    assert!(
        err.contains("spine1") && err.contains("cannot simulate") && err.contains("kernel"),
        "{err}"
    );
    // The other switches keep their plans; the Linux router has none (pisa-fabric routes it).
    let plans = programs::fabric_plan(&t).unwrap();
    assert!(!plans.contains_key("spine1"));
    assert_eq!(plans.len(), t.switches.len() - 1);
}

/// Flow `i`'s `tcp` object.
fn tcp(r: &Json, i: usize) -> &Json {
    let Some(Json::A(flows)) = r.get("flows") else {
        panic!("no flows")
    };
    flows[i]
        .get("tcp")
        .unwrap_or_else(|| panic!("no tcp object for flow {i}"))
}

#[test]
fn tcp_flows_share_a_downlink_finish_and_repeat_byte_for_byte() {
    // Two TCP senders into one 100 Mb/s downlink with a 64-packet buffer: losses, recovered.
    let flows = [
        "h1>h3 cc=cubic bytes=2000000",
        "h2>h3 cc=reno bytes=2000000 start_ms=1",
        "h4>h1 cc=dctcp bytes=20000 start_ms=2",
    ];
    let a = run(200, 7, &flows);
    for i in 0..3 {
        assert_eq!(
            num(tcp(&a, i), &["completed"]),
            1,
            "flow {i}: {}",
            a.pretty()
        );
    }
    // 4 MB through one 100 Mb/s link takes at least 320 ms... of which 200 ms are the run and
    // the rest its drain; the two share it within a factor of two.
    let f0 = num(tcp(&a, 0), &["fct_ns"]);
    let f1 = num(tcp(&a, 1), &["fct_ns"]);
    assert!(f0.max(f1) >= 320_000_000, "{f0} {f1}");
    assert!(f0.max(f1) < 2 * f0.min(f1) + 100_000_000, "{f0} {f1}");
    // Wherever the two meet (a spine's port to leaf2 when ECMP hashes them together, else
    // leaf2's port to h3), drops there are what TCP retransmits.
    let Some(Json::O(switches)) = a.get("switches") else {
        panic!("no switches")
    };
    let mut drops = 0;
    for (_, s) in switches {
        let Some(Json::O(ports)) = s.get("ports") else {
            continue;
        };
        drops += ports.iter().map(|(_, p)| num(p, &["drops"])).sum::<u64>();
    }
    let retx = num(tcp(&a, 0), &["retransmits"]) + num(tcp(&a, 1), &["retransmits"]);
    assert!(
        drops > 0 && retx >= drops / 2,
        "drops {drops} retransmits {retx}"
    );
    // The same seed: the same bytes; another seed: other initial sequence numbers, same flows.
    assert_eq!(a.pretty(), run(200, 7, &flows).pretty());
    assert_eq!(num(tcp(&run(200, 8, &flows), 2), &["completed"]), 1);
}

#[test]
fn store_and_forward_adds_each_links_serialisation_time_to_a_packets_latency() {
    // A light flow across a spine (4 links of 100 Mb/s, 10 µs each): no queue anywhere.
    let latency = |store_and_forward: bool| {
        let mut opts = Options::new(50_000_000, 1);
        opts.store_and_forward = store_and_forward;
        opts.flows
            .push(FlowSpec::parse("h1>h3 rate=1M size=1000", 0).unwrap());
        let r = Sim::new(&fabric(), opts).unwrap().run();
        let Json::A(fl) = at(&r, &["flows"]) else {
            panic!()
        };
        match at(&fl[0], &["latency_us", "p50"]) {
            Json::F(x) => *x,
            Json::U(x) => *x as f64,
            other => panic!("{other:?}"),
        }
    };
    let (cut, whole) = (latency(false), latency(true));
    // Without it a frame arrives as it starts to leave: the four delays alone.
    assert!((cut - 40.0).abs() < 0.01, "{cut}");
    // With it, each link adds a 1,014-byte frame's 81.12 µs at 100 Mb/s.
    assert!((whole - cut - 4.0 * 81.12).abs() < 0.01, "{cut} {whole}");
}

#[test]
fn a_tcp_flow_over_ipv6_crosses_the_fabric_with_a_smaller_mss() {
    // One flow each way of addressing, one after the other, across a spine.
    let flows = [
        "h1>h3 cc=cubic bytes=1000000",
        "h1>h3 cc=cubic bytes=1000000 ip=6 start_ms=200",
    ];
    let r = run(200, 1, &flows);
    for i in 0..2 {
        assert_eq!(num(tcp(&r, i), &["completed"]), 1, "{}", r.pretty());
        assert_eq!(num(tcp(&r, i), &["retransmits"]), 0, "{}", r.pretty());
    }
    // 18 + 1,000,000 bytes in segments of 1,448 (IPv4) and 1,428 bytes (IPv6: 20 bytes more
    // of IP header), the timestamp option in each.
    assert_eq!(num(tcp(&r, 0), &["data_segs_out"]), 691);
    assert_eq!(num(tcp(&r, 1), &["data_segs_out"]), 701);
    // The destination's leaf routed it by its IPv6 route: the frames reached h3.
    assert!(num(tcp(&r, 1), &["fct_ns"]) > num(tcp(&r, 0), &["fct_ns"]));
}

#[test]
fn stalled_switches_hold_frames_in_order_and_add_their_wait_to_the_latency() {
    // One light flow across a spine (its one ECMP path) for 2 s, without and with stalls of
    // 1 ms on average, 50 a second at each switch (the three on its path are stalled about
    // 15% of the time together).
    let run = |stalls: Option<&str>| {
        let mut opts = Options::new(2_000_000_000, 1);
        opts.stalls = stalls.map(|s| s.parse().unwrap());
        opts.flows
            .push(FlowSpec::parse("h1>h3 rate=8M size=1000", 0).unwrap());
        Sim::new(&fabric(), opts).unwrap().run()
    };
    let first = |r: &Json| -> Json {
        let Json::A(fl) = at(r, &["flows"]) else {
            panic!("no flows")
        };
        fl[0].clone()
    };
    let us = |r: &Json, q: &str| match at(&first(r), &["latency_us", q]) {
        Json::F(x) => *x,
        Json::U(x) => *x as f64,
        other => panic!("{other:?}"),
    };
    let (calm, stalled) = (run(None), run(Some("50:1000")));
    let flow = |r: &Json, k: &str| num(&first(r), &[k]);
    // Nothing is lost and nothing is reordered: a stalled switch holds what arrives in order.
    for r in [&calm, &stalled] {
        assert_eq!(flow(r, "lost"), 0);
        assert_eq!(flow(r, "reordered"), 0);
        assert_eq!(flow(r, "received"), flow(r, "sent"));
    }
    assert!(at(&calm, &["switches", "leaf1"]).get("stalls").is_none());
    let stalls = num(&stalled, &["switches", "leaf1", "stalls", "count"]);
    // About 100 stalls in 2 s; those that held nothing are not counted.
    assert!((20..=130).contains(&stalls), "{stalls}");
    // Most frames meet no stall; the unlucky ones wait for one to end.
    assert!((us(&stalled, "p50") - us(&calm, "p50")).abs() < 1.0);
    assert!(us(&calm, "max") < 200.0, "{}", us(&calm, "max"));
    assert!(us(&stalled, "max") > 1_000.0, "{}", us(&stalled, "max"));
    // One seed, the same stalls.
    assert_eq!(
        run(Some("50:1000")).pretty(),
        stalled.pretty(),
        "stalls are seeded"
    );
}
