//! The switch-local agent's thread on a running switch (in-memory ports): packet-ins and digests
//! reach both the agent and the controller side, its writes reach the workers, and the time from
//! a feedback frame's arrival to the agent's write being visible to the workers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dataplane::agent::AgentThread;
use dataplane::switch::{PortSpec, Switch, SwitchConfig};
use etherparse::PacketBuilder;
use pipeline::agent::{Agent, AgentCx};
use pipeline::commands::{Command, parse_line};
use pipeline::control::{Atomicity, Control, Update};
use pipeline::digest::DigestMsg;
use pipeline::runtime::{Config, Pipeline};

fn updates(c: &Control, line: &str) -> Vec<Update> {
    match parse_line(c.schema(), line).unwrap() {
        Command::Write(u) => u,
        other => panic!("{other:?}"),
    }
}

/// For the n-th packet-in: installs an L2 entry for 02:00:00:00:ff:n towards port 2 and records
/// (switch clock) when the write returned.
struct Installer {
    clock: Box<dyn Fn() -> u64 + Send>,
    packet_ins: Arc<AtomicU64>,
    digests: Arc<AtomicU64>,
    written_at: Arc<AtomicU64>,
}

impl std::fmt::Debug for Installer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installer")
            .field("packet_ins", &self.packet_ins)
            .finish_non_exhaustive()
    }
}

impl Agent for Installer {
    fn packet_in(&mut self, _now: u64, _frame: &[u8], cx: &mut AgentCx<'_>) {
        let n = self.packet_ins.fetch_add(1, Ordering::AcqRel);
        let line = format!(
            "table_add l2_exact l2_forward 02:00:00:00:ff:{:02x} => 2",
            n % 256
        );
        let ok = cx.write(&updates(cx.control(), &line));
        assert!(ok.iter().all(Result::is_ok), "{ok:?}");
        self.written_at.store((self.clock)(), Ordering::Release);
    }
    fn digest(&mut self, _now: u64, _msg: &DigestMsg, _cx: &mut AgentCx<'_>) {
        self.digests.fetch_add(1, Ordering::Relaxed);
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("installed", self.packet_ins.load(Ordering::Relaxed))]
    }
}

fn frame(dst: [u8; 6], dport: u16) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 9], dst)
        .ipv4([10, 0, 9, 1], [10, 0, 2, 7], 64)
        .udp(1000, dport);
    let mut f = Vec::new();
    b.write(&mut f, &[0u8; 32]).unwrap();
    f
}

#[test]
fn the_agent_gets_packet_ins_and_digests_and_its_writes_reach_the_workers() {
    let pipe = Pipeline::new(programs::by_name("basic").unwrap(), 1, Config::default());
    // Frames to 02:00:00:00:00:fe are switched to port 2; feedback frames among them (UDP to
    // port 7777) go to the CPU instead.
    for line in [
        "table_add l2_exact l2_forward 02:00:00:00:00:fe => 2",
        "table_add acl punt_to_cpu 0&&&0 0&&&0 0&&&0 0&&&0 0&&&0 17&&&0xff 0&&&0 \
         7777&&&0xffff => 10",
    ] {
        assert!(
            pipe.control
                .write(&updates(&pipe.control, line), Atomicity::ContinueOnError)
                .iter()
                .all(Result::is_ok)
        );
    }
    let (ports, links) = PortSpec::mem_pairs(1..=2).unwrap();
    let sw = Switch::start(
        pipe,
        ports,
        SwitchConfig {
            workers: 1,
            ..SwitchConfig::default()
        },
    )
    .unwrap();
    let (packet_ins, digests, written_at) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let agent = Installer {
        clock: Box::new(sw.clock()),
        packet_ins: packet_ins.clone(),
        digests: digests.clone(),
        written_at: written_at.clone(),
    };
    let thread = AgentThread::spawn(&sw, Box::new(agent)).unwrap();
    let clock = sw.clock();
    let mut reaction_us = Vec::new();
    const TRIALS: u64 = 50;
    for n in 0..TRIALS {
        let sent = clock();
        links[0].send(&frame([2, 0, 0, 0, 0, 0xfe], 7777));
        let deadline = Instant::now() + Duration::from_secs(5);
        while packet_ins.load(Ordering::Acquire) <= n {
            assert!(Instant::now() < deadline, "no packet-in reached the agent");
            std::thread::sleep(Duration::from_micros(50));
        }
        while written_at.load(Ordering::Acquire) < sent {
            std::thread::sleep(Duration::from_micros(50));
        }
        reaction_us.push(written_at.load(Ordering::Acquire).saturating_sub(sent) as f64 / 1e3);
        // The write reached the workers: a frame to the new entry's MAC leaves on port 2.
        links[0].send(&frame([2, 0, 0, 0, 0xff, n as u8], 9));
        let out = links[1].recv(Duration::from_secs(5));
        assert!(
            out.is_some_and(|f| f[0..6] == [2, 0, 0, 0, 0xff, n as u8]),
            "trial {n}: the agent's entry did not forward"
        );
        // Quiet between trials, so each feedback frame finds an idle (sleeping) switch.
        std::thread::sleep(Duration::from_millis(5));
    }
    reaction_us.sort_by(f64::total_cmp);
    let (p50, p99) = (
        reaction_us[reaction_us.len() / 2],
        reaction_us[reaction_us.len() * 99 / 100],
    );
    eprintln!(
        "agent reaction (feedback frame in -> write visible), {TRIALS} trials: p50 {p50:.0} us, \
         p99 {p99:.0} us, max {:.0} us",
        reaction_us[reaction_us.len() - 1]
    );
    // Digests: basic sends one for each unknown source MAC; both the agent and the controller
    // side's queue get it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while digests.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "no digest reached the agent");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!sw.pipeline().control.externs().digests.is_empty());
    // And the controller side got every packet-in too.
    assert_eq!(sw.cpu_port().packet_in.len(), TRIALS as usize);
    assert_eq!(sw.agent_packet_ins_dropped(), 0);
    assert_eq!(thread.stats().packet_ins.load(Ordering::Relaxed), TRIALS);
    // The admin socket's `show_agent`: the thread's counts, then the agent's own.
    let shown = dataplane::admin::run(&sw, "show_agent").unwrap();
    let value = |name: &str| {
        shown
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {name} in show_agent: {shown}"))
            .to_string()
    };
    assert_eq!(value("packet_ins"), TRIALS.to_string());
    assert_eq!(value("dropped"), "0");
    assert_eq!(value("writes"), TRIALS.to_string());
    assert_eq!(value("agent.installed"), TRIALS.to_string());
    assert!(value("backlog_p99").parse::<u64>().unwrap() >= 1);
    thread.stop();
    sw.stop();
}
