//! P4TE (docs/p4te.md), deterministically: the program on the in-memory switch and on bare egress
//! runs, and whole fabrics in `pisa-sim`. Tests are named after the paper's sections, one module
//! per concern: monitoring (Alg. 1), routing (Fig. 6, Alg. 2), the agent (Alg. 3), rate
//! adaptation (§4.3) and the plan; this file holds what they share.

use std::sync::Arc;

use etherparse::{
    EtherType, Ethernet2Header, IpNumber, Ipv4Dscp, Ipv4Header, Ipv6FlowLabel, Ipv6Header,
    PacketBuilder, TcpHeader, TcpOptionElement,
};
use hosts::json::Json;
use pipeline::agent::{Agent, AgentCx};
use pipeline::commands::{Command, bmv2_priority, parse_line};
use pipeline::control::{Atomicity, Control};
use pipeline::externs::Color;
use pipeline::frame::OwnedFrame;
use pipeline::metadata::{InstanceType, StdMeta};
use pipeline::runtime::{Config, EgressVerdict, Pipeline, Worker};
use programs::p4te::agent::{priority, queue_level};
use programs::p4te::fack::{self, Action};
use programs::p4te::{self, Feedback, SESSION_BASE, rate_decision};
use sim::SimSwitch;
use sim::fabric::{Options, Sim};
use sim::flow::FlowSpec;
use topo::{LinkProps, Topology, leaf_spine};

#[path = "../common/mod.rs"]
mod common;
use common::{drops, num, reg};

mod agent;
mod failure;
mod monitoring;
mod plan;
mod rate;
mod routing;

const RATE: u64 = 100_000_000;

/// A 2x2 leaf-spine at 100 Mb/s everywhere: leaf1 has h1 (port 1), h2 (port 2) and uplinks 3
/// (spine1) and 4 (spine2).
fn fabric(program: &str, params: &[(&str, &str)]) -> Topology {
    let host = LinkProps {
        rate_bps: RATE,
        delay_us: 10,
        buffer: 64,
    };
    leaf_spine(2, 2, 2, 1.0, host).with_program(program, params)
}

fn apply(c: &Control, line: &str) {
    match parse_line(c.schema(), line).unwrap_or_else(|e| panic!("{line}: {e}")) {
        Command::Write(u) => {
            for r in c.write(&u, Atomicity::ContinueOnError) {
                r.unwrap_or_else(|e| panic!("{line}: {e}"));
            }
        }
        Command::Nothing => {}
        Command::Other(..) => panic!("{line}"),
    }
}

/// A switch running `p4te`, programmed as the plan programs `name` of `t`.
fn switch(t: &Topology, name: &str) -> Arc<Pipeline> {
    let pipe = Pipeline::new(p4te::build(), 1, Config::default());
    let plans = programs::fabric_plan(t).unwrap();
    for line in &plans[name].routes {
        apply(&pipe.control, line);
    }
    pipe
}

/// An IPv4 TCP segment from h1 (10.0.1.1:40000) to h3 (10.0.2.1:5001) with ToS `tos`.
fn tcp_v4(
    tos: u8,
    seq: u32,
    ack: u32,
    window: u16,
    ts: Option<(u32, u32)>,
    payload: &[u8],
) -> Vec<u8> {
    tcp_v4_to([10, 0, 2, 1], tos, seq, ack, window, ts, payload)
}

/// The same, to `dst`.
fn tcp_v4_to(
    dst: [u8; 4],
    tos: u8,
    seq: u32,
    ack: u32,
    window: u16,
    ts: Option<(u32, u32)>,
    payload: &[u8],
) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 0], [2, 0x5e, 0, 0, 0, 2])
        .ipv4([10, 0, 1, 1], dst, 64)
        .tcp(40000, 5001, seq, window)
        .ack(ack);
    let b = match ts {
        Some((v, e)) => b
            .options(&[
                TcpOptionElement::Noop,
                TcpOptionElement::Noop,
                TcpOptionElement::Timestamp(v, e),
            ])
            .unwrap(),
        None => b,
    };
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    set_tos(&mut out, tos);
    out
}

fn set_tos(f: &mut [u8], tos: u8) {
    f[15] = tos;
    f[24] = 0;
    f[25] = 0;
    let h = etherparse::Ipv4HeaderSlice::from_slice(&f[14..])
        .unwrap()
        .to_header();
    f[24..26].copy_from_slice(&h.calc_header_checksum().to_be_bytes());
}

/// An ACK from h3 back to h1 (the reverse of [`tcp_v4`]).
fn ack_v4(ack: u32, window: u16, ts: (u32, u32)) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ethernet2([2, 0xee, 0, 0, 0, 2], [2, 0x5e, 0, 0, 0, 2])
        .ipv4([10, 0, 2, 1], [10, 0, 1, 1], 64)
        .tcp(5001, 40000, 7000, window)
        .ack(ack)
        .options(&[
            TcpOptionElement::Noop,
            TcpOptionElement::Noop,
            TcpOptionElement::Timestamp(ts.0, ts.1),
        ])
        .unwrap()
        .write(&mut out, &[])
        .unwrap();
    out
}

fn fix_tcp(f: &mut [u8]) {
    let s = etherparse::SlicedPacket::from_ethernet(f).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = &s.net else {
        panic!()
    };
    let ip = ip.header().to_header();
    let Some(etherparse::TransportSlice::Tcp(tcp)) = &s.transport else {
        panic!()
    };
    let payload = tcp.payload().to_vec();
    let sum = tcp.to_header().calc_checksum_ipv4(&ip, &payload).unwrap();
    f[50..52].copy_from_slice(&sum.to_be_bytes());
}

fn run(t: &Topology, ms: u64, flows: &[&str], quiet_agents: bool) -> (Json, Sim) {
    let mut opts = Options::new(ms * 1_000_000, 3);
    for (i, f) in flows.iter().enumerate() {
        opts.flows.push(FlowSpec::parse(f, i).unwrap());
    }
    let mut sim = Sim::new(t, opts).unwrap();
    if quiet_agents {
        for s in &t.switches {
            sim.attach_agent(&s.name, Box::new(Silent)).unwrap();
        }
    }
    (sim.run(), sim)
}

/// An agent that does nothing: the switch without its local control plane.
#[derive(Debug)]
struct Silent;
impl Agent for Silent {
    fn packet_in(&mut self, _: u64, _: &[u8], _: &mut AgentCx<'_>) {}
}

fn flow(r: &Json, i: usize) -> &Json {
    match r.get("flows") {
        Some(Json::A(f)) => &f[i],
        _ => panic!("no flows"),
    }
}

/// The 2x2 leaf-spine of `pisa-fabric gen leaf-spine --leaves 2 --spines 2 --hosts-per-leaf 2`
/// (1 Gb/s hosts, 500 Mb/s uplinks) running `p4te` with `params`.
fn oversubscribed(params: &[(&str, &str)]) -> Topology {
    let host = LinkProps {
        rate_bps: 1_000_000_000,
        delay_us: 0,
        buffer: 256,
    };
    leaf_spine(2, 2, 2, 2.0, host).with_program("p4te", params)
}
