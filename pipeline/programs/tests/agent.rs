//! Switch-local agents in `pisa-sim`: packet-ins reach the agent in virtual time, its writes go
//! through the validated path and act on the next packets, ticks come at their interval, and a
//! pipeline reset resets the agent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hosts::json::Json;
use pipeline::agent::{Agent, AgentCx, AgentHost};
use pipeline::commands::{Command, parse_line};
use pipeline::control::Control;
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use topo::{LinkProps, leaf_spine};

/// Drops a flow once it has seen one of its packets: the ACL entry it writes (priority 20)
/// beats the punt entry (priority 10).
#[derive(Debug, Default)]
struct Blocker {
    packet_ins: Arc<AtomicU64>,
    ticks: Arc<AtomicU64>,
    resets: Arc<AtomicU64>,
    tick_ns: Option<u64>,
}

fn lines(c: &Control, text: &str) -> Vec<pipeline::control::Update> {
    match parse_line(c.schema(), text).unwrap() {
        Command::Write(u) => u,
        other => panic!("{other:?}"),
    }
}

const ACL_ANY: &str = "0&&&0 0&&&0 0&&&0 0&&&0 0&&&0 17&&&0xff 0&&&0 7777&&&0xffff";

impl Agent for Blocker {
    fn tick_interval_ns(&self) -> Option<u64> {
        self.tick_ns
    }
    fn packet_in(&mut self, _now: u64, _frame: &[u8], cx: &mut AgentCx<'_>) {
        if self.packet_ins.fetch_add(1, Ordering::Relaxed) == 0 {
            let u = lines(cx.control(), &format!("table_add acl drop {ACL_ANY} => 5"));
            assert!(cx.write(&u).iter().all(Result::is_ok));
        }
    }
    fn tick(&mut self, _now: u64, _cx: &mut AgentCx<'_>) {
        self.ticks.fetch_add(1, Ordering::Relaxed);
    }
    fn reset(&mut self) {
        self.resets.fetch_add(1, Ordering::Relaxed);
    }
}

fn fabric_sim(duration_ms: u64, flows: &[&str]) -> Sim {
    let host = LinkProps {
        rate_bps: 100_000_000,
        delay_us: 10,
        buffer: 64,
    };
    let mut opts = Options::new(duration_ms * 1_000_000, 1);
    for (i, f) in flows.iter().enumerate() {
        opts.flows.push(FlowSpec::parse(f, i).unwrap());
    }
    Sim::new(&leaf_spine(2, 2, 2, 1.0, host), opts).unwrap()
}

fn num(j: &Json, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(j, |j, k| j.get(k))
        .and_then(Json::as_u64)
        .unwrap_or_else(|| panic!("no {path:?}"))
}

#[test]
fn an_agent_reacts_to_a_packet_in_and_its_write_drops_the_next_packets() {
    let mut sim = fabric_sim(100, &["h1>h3 rate=1000pps size=100 dport=7777"]);
    let c = sim.control("leaf1").unwrap();
    let punt = lines(c, &format!("table_add acl punt_to_cpu {ACL_ANY} => 10"));
    assert!(c.write(&punt, pipeline::control::Atomicity::ContinueOnError)[0].is_ok());
    let agent = Blocker::default();
    let seen = agent.packet_ins.clone();
    sim.attach_agent("leaf1", Box::new(agent)).unwrap();
    let r = sim.run();
    // The first packet is punted; the agent's write drops every later one at once (virtual
    // time: the agent reacts within the same instant).
    assert_eq!(seen.load(Ordering::Relaxed), 1);
    assert_eq!(num(&r, &["switches", "leaf1", "cpu_packets"]), 1);
    assert_eq!(sim.agent_writes("leaf1"), Some(1));
    let Some(Json::A(flows)) = r.get("flows") else {
        panic!()
    };
    assert_eq!(num(&flows[0], &["sent"]), 100);
    assert_eq!(num(&flows[0], &["received"]), 0);
    assert_eq!(
        num(&r, &["switches", "leaf1", "drops_by_reason", "program"]),
        99
    );
    // The agent's entry is there for P4Runtime reads too.
    let acl = sim.control("leaf1").unwrap();
    let index = acl.schema().table_by_name("acl").unwrap();
    let id = acl.schema().tables[index].id;
    assert_eq!(acl.read_entries(Some(id), false, false).unwrap().len(), 2);
}

#[test]
fn ticks_come_at_their_interval_in_virtual_time() {
    let mut sim = fabric_sim(100, &["h1>h3 rate=1000pps size=100"]);
    let agent = Blocker {
        tick_ns: Some(10_000_000),
        ..Blocker::default()
    };
    let ticks = agent.ticks.clone();
    sim.attach_agent("spine1", Box::new(agent)).unwrap();
    let r = sim.run();
    // 100 ms of traffic and 1 s of drain, a tick every 10 ms.
    assert_eq!(ticks.load(Ordering::Relaxed), 110);
    assert_eq!(num(&r, &["now_us"]), 1_100_000);
}

#[test]
fn a_pipeline_reset_resets_the_agent() {
    let sim = fabric_sim(1, &[]);
    let c = sim.control("leaf1").unwrap();
    let agent = Blocker::default();
    let resets = agent.resets.clone();
    let mut host = AgentHost::new(Box::new(agent), c, 0);
    host.packet_in(c, 1, &[0; 64]);
    assert_eq!(resets.load(Ordering::Relaxed), 0);
    c.clear();
    host.tick(c, 2);
    assert_eq!(resets.load(Ordering::Relaxed), 1);
    // Once per reset.
    host.packet_in(c, 3, &[0; 64]);
    assert_eq!(resets.load(Ordering::Relaxed), 1);
}
