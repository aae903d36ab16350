//! `pisa-sim`: a whole fabric in virtual time, deterministic for a seed.
//!
//! Each switch of a [`Topology`] runs its program on the one packet path ([`Driver`]) with its own
//! traffic manager, programmed by the program's fabric plan exactly as `pisa-fabric` programs a
//! real switch (the same traffic-manager settings, the same table writes). Links have their rate,
//! delay and buffer in both directions: a switch's side is its traffic manager (shaping at the link
//! rate, the delay line, the queue limit), a host's side is a one-port traffic manager with the
//! same settings. Hosts run the packet sources of [`super::flow`], answer TCP segments with pure
//! ACKs, obey PAUSE frames, and record every arrival; a source whose host queue is full waits for
//! room (no loss at the source, as with a blocking socket or a RoCE queue pair).
//!
//! Time advances from event to event (a binary heap ordered by time, then by insertion), so two
//! runs with one seed process the same events in the same order and print the same report.
//! Switches' packet generators (the `pktgen_*` lines of a plan) tick in virtual time, each from a
//! seeded offset within its period. When the run's duration ends the sources and the generators
//! stop and the fabric drains (at most one second of virtual time), so `lost` counts only drops.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use super::flow::{self, Addrs, FlowSpec, Proto, Source, TcpFields};
use super::{HEADROOM, VecBuffers};
use ::hosts::json::Json;
use pipeline::agent::{Agent, AgentHost};
use pipeline::commands::{Command, parse_line};
use pipeline::control::Atomicity;
use pipeline::driver::{Buffers, Driver, Env, Pkt, PortTx, Received};
use pipeline::metadata::{InstanceType, PortId, StdMeta};
use pipeline::pktgen;
use pipeline::runtime::{Config, Pipeline, Worker};
use pipeline::tm::{Dequeued, PortConfig, Queued, Setting, TrafficManager, TxState};
use programs::fabric_plan;
use topo::plan::{host_mac, switch_mac};
use topo::{End, LinkProps, Topology};

mod hosts;
mod hpcc;
mod links;
mod pint;
mod queue;
mod report;
mod stall;
mod tcp;

pub use links::LinkEvent;
pub use stall::Stalls;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Sources send until this time, ns.
    pub duration_ns: u64,
    /// Seeds every random choice (sources, switches' random externs).
    pub seed: u64,
    /// The flows, in report order.
    pub flows: Vec<FlowSpec>,
    /// Longest drain after the sources stop, ns.
    pub drain_ns: u64,
    /// Time each switch takes to process a frame, ns (0: none, an ASIC's sub-microsecond
    /// latency rounded down). Set it to a software switch's per-traversal time to compare with
    /// namespaces, where each traversal costs tens of microseconds.
    pub hop_latency_ns: u64,
    /// A frame reaches the far end of a link once all of it has crossed: its serialisation
    /// time at the link's rate after it starts to leave, as on a wire (store and forward). Off,
    /// it arrives as it starts to leave plus the propagation delay, as between namespaces,
    /// whose veth links have no serialisation of their own (the shaper spaces frames either
    /// way).
    pub store_and_forward: bool,
    /// Links that go down or come back up during the run.
    pub link_events: Vec<LinkEvent>,
    /// Times at which every TCP flow's received bytes are sampled (`received_at` in its
    /// report), ns: a measurement window's edges.
    pub samples_ns: Vec<u64>,
    /// Switches stall now and then, as a software switch's process waiting for a CPU does
    /// ([`Stalls`]); none by default.
    pub stalls: Option<Stalls>,
}

impl Options {
    /// A run of `duration_ns` with `seed` and no flows, draining for up to 1 s.
    pub fn new(duration_ns: u64, seed: u64) -> Options {
        Options {
            duration_ns,
            seed,
            flows: Vec::new(),
            drain_ns: 1_000_000_000,
            hop_latency_ns: 0,
            store_and_forward: false,
            link_events: Vec::new(),
            samples_ns: Vec::new(),
            stalls: None,
        }
    }
}

type Buf = Vec<u8>;
type Frame = Pkt<Buf>;

#[derive(Debug)]
enum Event {
    /// A frame reaches switch `sw` on `port`.
    ToSwitch {
        sw: usize,
        port: PortId,
        frame: Frame,
    },
    /// A frame reaches host `host`.
    ToHost { host: usize, frame: Frame },
    /// Switch `sw` has a transmit deadline.
    SwitchTurn { sw: usize },
    /// Host `host` has a transmit deadline.
    HostTurn { host: usize },
    /// Flow `flow` sends its next packet.
    Send { flow: usize },
    /// Switch `sw`'s agent has a tick due.
    AgentTick { sw: usize },
    /// Application `app` of switch `sw`'s packet generator ticks.
    Generate { sw: usize, app: u8 },
    /// End `end` (0 the client, 1 the server) of TCP flow `flow` has a deadline.
    TcpTimer { flow: usize, end: usize },
    /// The link of switch `sw`'s `port` goes down or comes up.
    Link { sw: usize, port: PortId, up: bool },
    /// Every TCP flow's received bytes are sampled.
    Sample,
}

/// Counters of one switch port.
#[derive(Clone, Copy, Debug, Default)]
struct PortStats {
    tx_packets: u64,
    tx_bytes: u64,
    rx_packets: u64,
    max_enq_qdepth: u32,
    pfc_sent: u64,
    pfc_received: u64,
    /// Frames sent onto the link while it was down.
    link_drops: u64,
}

/// Where a link leads.
#[derive(Clone, Copy, Debug)]
enum Peer {
    Switch(usize, PortId),
    Host(usize),
}

#[derive(Debug)]
struct SimSwitch {
    name: String,
    pipeline: Arc<Pipeline>,
    driver: Driver<Buf>,
    tm: TrafficManager<Frame>,
    /// Data ports in order, with their transmit sides.
    ports: Vec<PortTx<Buf>>,
    /// Per port number: index into `ports` and the far end.
    peer: Vec<Option<(usize, Peer)>>,
    /// Per port number: the link's rate, bits/s.
    rate_bps: Vec<u64>,
    /// Per port number: the link is down.
    down: Vec<bool>,
    stats: Vec<PortStats>,
    cpu_tx: TxState<Frame>,
    cpu_packets: u64,
    /// The recirculation (loopback) port's transmit side.
    loop_tx: TxState<Frame>,
    /// The pending turn, if one is scheduled.
    turn_at: Option<u64>,
    /// The switch-local agent, in virtual time.
    agent: Option<AgentHost>,
    /// Its pending tick, if one is scheduled.
    tick_at: Option<u64>,
    /// The packet generator's applications, as the plan set them, and whether each runs.
    pktgen: Vec<Option<(pktgen::AppConfig, bool)>>,
    /// Frames the generator made.
    generated: u64,
    /// Its stalls, with [`Options::stalls`].
    stall: Option<stall::StallClock>,
}

#[derive(Debug)]
struct Host {
    name: String,
    mac: [u8; 6],
    gateway: [u8; 6],
    ipv4: Ipv4Addr,
    ipv6: Ipv6Addr,
    uplink: (usize, PortId),
    delay_ns: u64,
    /// The uplink's rate, bits/s.
    rate_bps: u64,
    tm: TrafficManager<Frame>,
    tx: TxState<Frame>,
    turn_at: Option<u64>,
    rx_packets: u64,
    rx_ce: u64,
    /// PAUSE/PFC frames received (and obeyed).
    pfc_received: u64,
    /// Flows whose sends wait for room in the host's queue.
    blocked: Vec<usize>,
    /// TCP receivers: per flow, the next byte expected and the segments above it.
    tcp_rx: BTreeMap<u32, (u32, BTreeMap<u32, u32>)>,
}

impl Host {
    /// The addresses of a frame this host sends to `dst`, through its gateway.
    fn addrs_to(&self, dst: Ipv4Addr) -> Addrs {
        Addrs {
            dmac: self.gateway,
            smac: self.mac,
            src: self.ipv4,
            dst,
        }
    }
}

/// A reaction point's state after a change: (time ns, Rc, Rt, state).
type RpRow = (u64, u64, u64, ::hosts::qcn::RpState);

#[derive(Debug)]
struct FlowState {
    source: Source,
    src: usize,
    dst: usize,
    sent: u64,
    rx: crate::rx::RxStats,
    tcp_seq: u32,
    /// The reaction point of a `cc=qcn-rp` flow, and its rate changes (t, Rc, Rt, state).
    rp: Option<(::hosts::qcn::Rp, Vec<RpRow>)>,
    /// Feedback packets its receiver sent as the NP (`np=on`).
    np_sent: u64,
    /// When its receiver last answered as the NP (`np_us=` paces the answers).
    last_np_ns: Option<u64>,
    /// The sender of a `cc=hpcc-*` flow.
    hpcc: Option<Box<hpcc::HpccFlow>>,
    /// The two connections of a `cc=reno|cubic|dctcp` flow.
    tcp: Option<Box<tcp::TcpFlow>>,
}

/// The environment of one switch's packet path during an event.
struct SwitchEnv<'a> {
    bufs: &'a mut VecBuffers,
    peer: &'a [Option<(usize, Peer)>],
    stats: &'a mut [PortStats],
    cpu_port: PortId,
    recirc_port: PortId,
}

impl Buffers for SwitchEnv<'_> {
    type Buf = Buf;
    fn bytes<'a>(&'a self, b: &'a Buf) -> &'a [u8] {
        b
    }
    fn bytes_mut<'a>(&'a self, b: &'a mut Buf) -> &'a mut [u8] {
        b
    }
    fn alloc(&mut self) -> Option<Buf> {
        self.bufs.alloc()
    }
    fn free(&mut self, b: Buf) {
        self.bufs.free(b);
    }
    fn headroom(&self) -> usize {
        HEADROOM
    }
}

impl Env for SwitchEnv<'_> {
    fn has_port(&self, port: PortId) -> bool {
        port == self.cpu_port
            || port == self.recirc_port
            || self
                .peer
                .get(usize::from(port))
                .is_some_and(Option::is_some)
    }
    // One owner for every port: its turns run after each event, nothing to wake.
    fn wake(&mut self, _port: PortId) {}
    fn emitted(&mut self, port: PortId, md: &StdMeta) {
        if let Some(s) = self.stats.get_mut(usize::from(port)) {
            s.max_enq_qdepth = s.max_enq_qdepth.max(md.enq_qdepth);
        }
    }
    fn departing(&mut self, port: PortId, frame: &Frame, _now: u64) {
        if let Some(s) = self.stats.get_mut(usize::from(port)) {
            s.tx_packets += 1;
            s.tx_bytes += frame.len as u64;
        }
    }
    fn pfc_sent(&mut self, port: PortId) {
        if let Some(s) = self.stats.get_mut(usize::from(port)) {
            s.pfc_sent += 1;
        }
    }
}

/// A simulated fabric.
#[derive(Debug)]
pub struct Sim {
    switches: Vec<SimSwitch>,
    hosts: Vec<Host>,
    flows: Vec<FlowState>,
    events: queue::EventQueue<Event>,
    now: u64,
    bufs: VecBuffers,
    opts: Options,
    /// The fabric plan's warnings (`switch: # warning: ...`), in the report when there are some.
    plan_warnings: Vec<String>,
    /// Packets that entered a switch (the simulator's unit of work).
    hops: u64,
    scratch: Vec<u8>,
    /// `cc=qcn-rp` flows by (source host, destination address, source port, destination port):
    /// how a feedback packet finds its flow.
    rp_flows: BTreeMap<(usize, Ipv4Addr, u16, u16), usize>,
    /// PINT's collector, when switches run `pint`.
    pint: Option<pint::Collector>,
    /// `cc=hpcc-*` flows by (source host, destination address, source port, destination port):
    /// how an ACK finds its flow.
    hpcc_flows: BTreeMap<(usize, Ipv4Addr, u16, u16), usize>,
    /// The fabric's HPCC port, when a flow uses it.
    hpcc_port: Option<u16>,
    /// TCP flows' ends by (host, peer address, local port, peer port): (flow, end).
    tcp_flows: BTreeMap<(usize, IpAddr, u16, u16), (usize, usize)>,
}

fn host_port_config(p: &LinkProps) -> PortConfig {
    let mut c = PortConfig {
        max_packets: p.buffer,
        max_bytes: u64::MAX,
        // Simulated hosts' MACs obey PAUSE/PFC (see `arrive_at_host`).
        pfc: true,
        ..PortConfig::default()
    };
    Setting::PortRate(p.rate_bps).apply(&mut c);
    c
}

impl Sim {
    /// Builds the fabric of `t`, programs every switch by its program's fabric plan, and
    /// schedules the flows of `opts`.
    pub fn new(t: &Topology, opts: Options) -> Result<Sim, String> {
        t.check()?;
        if let Some(s) = t.switches.iter().find(|s| programs::is_kernel(&s.program)) {
            return Err(format!(
                "switch {}: program={}: a Linux router of pisa-fabric's kernel baseline; the \
                 simulator runs pisa-switch programs and cannot simulate the kernel's forwarding \
                 (run it with `pisa-fabric experiment --schemes {}` in namespaces)",
                s.name,
                s.program,
                programs::KERNEL
            ));
        }
        let plans = fabric_plan(t)?;
        let mut collector = pint::Collector::new(t)?;
        let index = t.switch_indices();
        let host_index = t.host_indices();
        let all_ports = t.ports();
        let nports = 1usize << pipeline::metadata::PORT_BITS;
        let mut switches = Vec::new();
        for (i, s) in t.switches.iter().enumerate() {
            let program = programs::by_name(&s.program)
                .ok_or_else(|| format!("switch {}: no program {}", s.name, s.program))?;
            let pipeline = Pipeline::new(program, 1, Config::default());
            let tm = TrafficManager::new(nports, PortConfig::default(), None);
            let mut peer = vec![None; nports];
            let mut rate_bps = vec![0; nports];
            let mut ports = Vec::new();
            for (&p, (other, props)) in &all_ports[s.name.as_str()] {
                rate_bps[usize::from(p)] = props.rate_bps;
                let far = match other {
                    End::Switch(n, q) => Peer::Switch(index[n.as_str()], *q),
                    End::Host(h) => Peer::Host(host_index[h.as_str()]),
                };
                peer[usize::from(p)] = Some((ports.len(), far));
                ports.push(PortTx::new(&tm, p));
            }
            let plan = plans.get(&s.name).cloned().unwrap_or_default();
            let mut generator = vec![None; pktgen::APPS];
            for line in &plan.tm {
                let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
                if let Some((verb, args)) = words.split_first()
                    && let Some(c) = pktgen::parse(verb, args)
                {
                    let what = |e: String| format!("{}: {line}: {e}", s.name);
                    match c.map_err(what)? {
                        pktgen::Command::Set(app, c) => {
                            c.check(super::BUF_SIZE - HEADROOM).map_err(what)?;
                            generator[usize::from(app)] = Some((c, false));
                        }
                        pktgen::Command::Enable(app, on) => {
                            match &mut generator[usize::from(app)] {
                                Some((_, enabled)) => *enabled = on,
                                None => return Err(what("the application is not set".into())),
                            }
                        }
                    }
                    continue;
                }
                let (setting, port) = words
                    .split_first()
                    .and_then(|(verb, args)| Setting::parse(verb, args))
                    .ok_or_else(|| format!("{}: not a port setting: {line}", s.name))?
                    .map_err(|e| format!("{}: {line}: {e}", s.name))?;
                let targets: Vec<PortId> = match port {
                    Some(p) => vec![p],
                    None => ports.iter().map(PortTx::id).collect(),
                };
                for p in targets {
                    let mut c = tm.config(p).unwrap_or_default();
                    setting.apply(&mut c);
                    tm.configure(p, c);
                }
            }
            let control = &pipeline.control;
            for line in &plan.routes {
                match parse_line(control.schema(), line).map_err(|e| format!("{line}: {e}"))? {
                    Command::Write(updates) => {
                        for r in control.write(&updates, Atomicity::ContinueOnError) {
                            r.map_err(|e| format!("{}: {line}: {e}", s.name))?;
                        }
                    }
                    Command::Nothing => {}
                    Command::Other(verb, _) => {
                        return Err(format!("{}: {verb} is not a table write", s.name));
                    }
                }
            }
            if let Some(c) = &mut collector {
                c.add_switch(i, &s.program, control);
            }
            let seed = opts.seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let cpu_tx = tm.tx_state(pipeline.config.cpu_port);
            let loop_tx = tm.tx_state(pipeline.config.recirc_port);
            switches.push(SimSwitch {
                name: s.name.clone(),
                driver: Driver::new(Worker::new(pipeline.clone(), 0, seed)),
                pipeline,
                tm,
                ports,
                peer,
                rate_bps,
                down: vec![false; nports],
                stats: vec![PortStats::default(); nports],
                cpu_tx,
                cpu_packets: 0,
                loop_tx,
                turn_at: None,
                agent: None,
                tick_at: None,
                pktgen: generator,
                generated: 0,
                stall: opts
                    .stalls
                    .map(|st| stall::StallClock::new(st, seed ^ 0x57a1_157a_1157_a115)),
            });
        }
        let mut hosts = Vec::new();
        for (i, h) in t.hosts.iter().enumerate() {
            let (sw, port) = t
                .host_attachment(&h.name)
                .ok_or_else(|| format!("host {} has no link", h.name))?;
            let props = all_ports[sw][&port].1;
            let tm = TrafficManager::new(1, host_port_config(props), None);
            let tx = tm.tx_state(0);
            hosts.push(Host {
                name: h.name.clone(),
                mac: host_mac(i),
                gateway: switch_mac(index[sw]),
                ipv4: h.ipv4,
                ipv6: h.ipv6,
                uplink: (index[sw], port),
                delay_ns: props.delay_us.saturating_mul(1000),
                rate_bps: props.rate_bps,
                tm,
                tx,
                turn_at: None,
                rx_packets: 0,
                rx_ce: 0,
                pfc_received: 0,
                blocked: Vec::new(),
                tcp_rx: BTreeMap::new(),
            });
        }
        let agents: Vec<(usize, Box<dyn Agent>)> = t
            .switches
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let build = programs::lookup(&s.program)?.agent?;
                Some((i, build(switches[i].pipeline.program.schema())))
            })
            .collect();
        let mut sim = Sim {
            switches,
            hosts,
            flows: Vec::new(),
            events: queue::EventQueue::default(),
            now: 0,
            bufs: VecBuffers::default(),
            opts: opts.clone(),
            plan_warnings: plans
                .iter()
                .flat_map(|(sw, p)| {
                    p.routes
                        .iter()
                        .filter(|l| l.starts_with("# warning:"))
                        .map(move |l| format!("{sw}: {l}"))
                })
                .collect(),
            hops: 0,
            scratch: Vec::new(),
            rp_flows: BTreeMap::new(),
            pint: collector,
            hpcc_flows: BTreeMap::new(),
            hpcc_port: None,
            tcp_flows: BTreeMap::new(),
        };
        for (i, a) in agents {
            sim.attach(i, a);
        }
        // Each running application's first tick comes at a seeded offset within its period, so
        // the switches' generators are not in lockstep (real ones start when their process does).
        let mut rng = pipeline::externs::Rng::new(opts.seed ^ 0x5eed_9e4e_7a70_0001);
        for sw in 0..sim.switches.len() {
            for app in 0..pktgen::APPS {
                if let Some((c, true)) = &sim.switches[sw].pktgen[app] {
                    let at = rng.next_u64() % c.period_ns;
                    sim.schedule(at, Event::Generate { sw, app: app as u8 });
                }
            }
        }
        sim.schedule_link_events(&opts.link_events)?;
        for (k, mut f) in opts.flows.into_iter().enumerate() {
            let src = *host_index
                .get(f.src.as_str())
                .ok_or_else(|| format!("flow {}: no host {}", k + 1, f.src))?;
            let dst = *host_index
                .get(f.dst.as_str())
                .ok_or_else(|| format!("flow {}: no host {}", k + 1, f.dst))?;
            if src == dst {
                return Err(format!(
                    "flow {}: source and destination are one host",
                    k + 1
                ));
            }
            let seed = opts.seed ^ (k as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03);
            let rp = match (f.cc, f.rate) {
                (
                    flow::Cc::QcnRp {
                        r_ai_bps,
                        byte_counter,
                    },
                    flow::Rate::Bps(rate),
                ) => {
                    let link = sim.hosts[src].tm.config(0).map_or(rate, |c| c.link_bps);
                    let mut cfg = ::hosts::qcn::RpConfig::scaled(link, rate);
                    cfg.r_ai_bps = r_ai_bps.unwrap_or(cfg.r_ai_bps);
                    cfg.byte_counter = byte_counter.unwrap_or(cfg.byte_counter);
                    let key = (src, sim.hosts[dst].ipv4, f.sport, f.dport);
                    sim.rp_flows.insert(key, k);
                    let rp = ::hosts::qcn::Rp::new(cfg);
                    let first = (f.start_ns, rp.rate_bps(), rp.target_bps(), rp.state());
                    Some((rp, vec![first]))
                }
                _ => None,
            };
            let hpcc = sim.hpcc_setup(t, k, &mut f, (src, dst))?;
            let tcp = sim.tcp_setup(k, &f, (src, dst));
            let mut source = Source::new(f, opts.duration_ns, seed);
            if hpcc.is_some() || tcp.is_some() {
                sim.schedule(source.spec().start_ns, Event::Send { flow: k });
            } else if let Some(at) = source.next_send() {
                sim.schedule(at, Event::Send { flow: k });
            }
            sim.flows.push(FlowState {
                source,
                src,
                dst,
                sent: 0,
                // Counted over the senders' time as well as in all (`received_in_window`).
                rx: crate::rx::RxStats::with_window(Some(opts.duration_ns)),
                tcp_seq: 1,
                rp,
                np_sent: 0,
                last_np_ns: None,
                hpcc,
                tcp,
            });
        }
        for &at in &opts.samples_ns {
            sim.schedule(at, Event::Sample);
        }
        Ok(sim)
    }

    /// Runs `agent` as the switch-local agent of switch `name` (in place of its program's own),
    /// in virtual time.
    pub fn attach_agent(&mut self, name: &str, agent: Box<dyn Agent>) -> Result<(), String> {
        let i = self
            .switches
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| format!("no switch {name}"))?;
        self.attach(i, agent);
        Ok(())
    }

    fn attach(&mut self, sw: usize, agent: Box<dyn Agent>) {
        let now = self.now;
        let s = &mut self.switches[sw];
        let control = &s.pipeline.control;
        control
            .externs()
            .agent_attached
            .store(true, std::sync::atomic::Ordering::Release);
        s.agent = Some(AgentHost::new(agent, control, now));
        self.schedule_tick(sw);
    }

    fn schedule_tick(&mut self, sw: usize) {
        let s = &mut self.switches[sw];
        let Some(at) = s.agent.as_ref().and_then(AgentHost::next_tick) else {
            return;
        };
        if s.tick_at.is_none_or(|t| at < t) {
            s.tick_at = Some(at);
            self.schedule(at, Event::AgentTick { sw });
        }
    }

    /// The control plane of switch `name` (to add entries before a run, or read after).
    pub fn control(&self, name: &str) -> Option<&pipeline::control::Control> {
        let s = self.switches.iter().find(|s| s.name == name)?;
        Some(&s.pipeline.control)
    }

    /// Updates switch `name`'s agent has written so far.
    pub fn agent_writes(&self, name: &str) -> Option<u64> {
        Some(self.agent(name)?.writes)
    }

    /// Switch `name`'s agent (None: no such switch, or it runs none): its counts.
    pub fn agent(&self, name: &str) -> Option<&AgentHost> {
        let s = self.switches.iter().find(|s| s.name == name)?;
        s.agent.as_ref()
    }

    /// How long a frame of `len` bytes takes to cross a link of `rate_bps` after it starts to
    /// leave: its serialisation time with [`Options::store_and_forward`], else nothing.
    fn wire_ns(&self, rate_bps: u64, len: usize) -> u64 {
        if !self.opts.store_and_forward || rate_bps == 0 {
            return 0;
        }
        u64::try_from((len as u128 * 8 * 1_000_000_000).div_ceil(u128::from(rate_bps)))
            .unwrap_or(u64::MAX / 4)
    }

    fn schedule(&mut self, at: u64, event: Event) {
        // Time never runs backwards: a source that was blocked asks for the send times it
        // missed, which are now.
        self.events.push(at.max(self.now), event);
    }

    /// Runs to the end of the duration and the drain; returns the report.
    pub fn run(&mut self) -> Json {
        let end = self.opts.duration_ns.saturating_add(self.opts.drain_ns);
        while let Some((at, event)) = self.events.pop() {
            if at > end {
                break;
            }
            self.now = at;
            match event {
                Event::ToSwitch { sw, port, frame } => match self.stalled(sw) {
                    // Held, in arrival order, until the switch runs again.
                    Some(end) => self.schedule(end, Event::ToSwitch { sw, port, frame }),
                    None => self.arrive_at_switch(sw, port, frame),
                },
                Event::ToHost { host, frame } => self.arrive_at_host(host, frame),
                Event::SwitchTurn { sw } => {
                    if self.switches[sw].turn_at == Some(self.now) {
                        self.switches[sw].turn_at = None;
                        self.turn_unless_stalled(sw);
                    }
                }
                Event::HostTurn { host } => {
                    if self.hosts[host].turn_at == Some(self.now) {
                        self.hosts[host].turn_at = None;
                        self.host_turn(host);
                    }
                }
                Event::Send { flow } => self.send(flow),
                Event::Generate { sw, app } => self.generate(sw, app),
                Event::TcpTimer { flow, end } => self.tcp_timeout(flow, end),
                Event::Link { sw, port, up } => self.set_link(sw, port, up),
                Event::Sample => self.tcp_sample(),
                Event::AgentTick { sw } => {
                    let s = &mut self.switches[sw];
                    if s.tick_at == Some(self.now) {
                        s.tick_at = None;
                        if let Some(a) = &mut s.agent {
                            a.tick(&s.pipeline.control, self.now);
                        }
                        self.schedule_tick(sw);
                    }
                }
            }
        }
        self.report()
    }

    /// One tick of application `app` of switch `sw`'s generator: its frames enter ingress on the
    /// generator port, and the next tick is scheduled.
    fn generate(&mut self, sw: usize, app: u8) {
        let now = self.now;
        let s = &mut self.switches[sw];
        let Some((c, true)) = s.pktgen[usize::from(app)].clone() else {
            return;
        };
        let port = s.pipeline.config.pktgen_port;
        let packets = u64::from(c.packets.max(1));
        for i in 0..c.frames_per_tick() {
            let mut bytes = Vec::with_capacity(pktgen::HEADER_LEN + c.template.len());
            if c.header {
                // i < batches x packets, so both fit in u16.
                bytes.extend(pktgen::header(
                    app,
                    (i / packets) as u16,
                    (i % packets) as u16,
                ));
            }
            bytes.extend_from_slice(&c.template);
            let frame = self.bufs.frame(&bytes);
            let md = StdMeta {
                instance_type: InstanceType::Generated,
                ..StdMeta::new(port, frame.len, now)
            };
            s.driver.inject(frame, md);
        }
        s.generated += c.frames_per_tick();
        // A stalled switch's frames wait in the driver for its next turn.
        self.turn_unless_stalled(sw);
        // Generators stop with the sources, so that the drain ends once the fabric is empty.
        let next = now + c.period_ns;
        if next < self.opts.duration_ns {
            self.schedule(next, Event::Generate { sw, app });
        }
    }

    /// The virtual time of the last event run, ns (after [`Sim::run`]: how long the run
    /// lasted in simulated time).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Packets that entered a switch so far (packet-hops).
    pub fn hops(&self) -> u64 {
        self.hops
    }

    /// Keeps every PINT record the sinks export from now on (no-op without `pint` switches).
    pub fn keep_pint_records(&mut self) {
        if let Some(c) = &mut self.pint {
            c.keep_records();
        }
    }

    /// The PINT records kept since [`Sim::keep_pint_records`], in arrival order.
    pub fn pint_records(&self) -> &[analysis::pint::collector::SinkRecord] {
        self.pint.as_ref().map_or(&[], |c| c.records())
    }

    /// Runs switch `sw`'s turn now, or, while it is stalled, has one at the stall's end.
    fn turn_unless_stalled(&mut self, sw: usize) {
        match self.stalled(sw) {
            Some(end) => self.schedule_turn(sw, end),
            None => self.switch_turn(sw, None),
        }
    }

    /// Schedules a turn of switch `sw` at `at`, unless an earlier one is pending.
    fn schedule_turn(&mut self, sw: usize, at: u64) {
        let s = &mut self.switches[sw];
        if s.turn_at.is_none_or(|t| at < t) {
            s.turn_at = Some(at);
            self.schedule(at, Event::SwitchTurn { sw });
        }
    }

    /// When switch `sw`'s stall ends, if it is stalled now.
    fn stalled(&mut self, sw: usize) -> Option<u64> {
        let now = self.now;
        self.switches[sw].stall.as_mut()?.until(now)
    }

    fn arrive_at_switch(&mut self, sw: usize, port: PortId, frame: Frame) {
        self.hops += 1;
        if let Some(st) = self.switches[sw].stats.get_mut(usize::from(port)) {
            st.rx_packets += 1;
        }
        self.switch_turn(sw, Some((port, frame)));
    }

    /// Runs switch `sw`'s packet path at the current time, in one batch: the frame arriving on
    /// a port, if any, packets waiting for ingress, then every port's transmit side and the CPU
    /// port; frames leave on their links.
    fn switch_turn(&mut self, sw: usize, arriving: Option<(PortId, Frame)>) {
        let now = self.now;
        let mut next: Option<u64> = None;
        let mut departures = Vec::new();
        let mut punted: Vec<Vec<u8>> = Vec::new();
        {
            let s = &mut self.switches[sw];
            let mut env = SwitchEnv {
                bufs: &mut self.bufs,
                peer: &s.peer,
                stats: &mut s.stats,
                cpu_port: s.pipeline.config.cpu_port,
                recirc_port: s.pipeline.config.recirc_port,
            };
            s.driver.begin_batch();
            if let Some((port, frame)) = arriving
                && s.driver.receive(&mut env, &s.tm, port, frame, now) == Received::Pause
                && let Some(st) = env.stats.get_mut(usize::from(port))
            {
                st.pfc_received += 1;
            }
            // Until nothing moves: a port's egress may clone to the CPU or loopback port, and
            // the loopback feeds ingress, which may queue for any port.
            loop {
                let mut busy = s.driver.run_pending(&mut env, &s.tm, now, usize::MAX);
                for tx in &mut s.ports {
                    // Most ports of a switch have nothing to send at any one turn.
                    if tx.idle(&s.tm) {
                        continue;
                    }
                    let (b, n) = s.driver.transmit(&mut env, &s.tm, tx, now, usize::MAX);
                    busy |= b;
                    next = match (next, n) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    let id = tx.id();
                    departures.extend(tx.out.drain(..).map(|f| (id, f)));
                }
                busy |=
                    s.driver
                        .transmit_loopback(&mut env, &s.tm, &mut s.loop_tx, now, usize::MAX);
                let agent = s.agent.is_some();
                busy |= s.driver.transmit_cpu(
                    &mut env,
                    &s.tm,
                    &mut s.cpu_tx,
                    now,
                    usize::MAX,
                    |f, _| {
                        if agent {
                            punted.push(f.to_vec());
                        } else {
                            punted.push(Vec::new());
                        }
                    },
                );
                if !busy && !s.driver.pending() {
                    break;
                }
            }
            s.driver.end_batch();
            s.cpu_packets += punted.len() as u64;
            // The agent sees packet-ins and digests as they leave the switch, in virtual time;
            // its writes are visible from the next packet on.
            if let Some(a) = &mut s.agent {
                let control = &s.pipeline.control;
                for f in &punted {
                    a.packet_in(control, now, f);
                }
                while let Some(m) = control.externs().agent_digests.pop() {
                    a.digest(control, now, &m);
                }
            }
            if let Some(c) = &mut self.pint {
                c.drain(sw, &s.pipeline.control);
            }
        }
        for (port, frame) in departures {
            let s = &mut self.switches[sw];
            if s.down[usize::from(port)] {
                s.stats[usize::from(port)].link_drops += 1;
                self.bufs.free(frame.buf);
                continue;
            }
            let on_wire = self.wire_ns(self.switches[sw].rate_bps[usize::from(port)], frame.len);
            let now = now + on_wire;
            match self.switches[sw].peer[usize::from(port)] {
                Some((_, Peer::Switch(to, p))) => self.schedule(
                    now + self.opts.hop_latency_ns,
                    Event::ToSwitch {
                        sw: to,
                        port: p,
                        frame,
                    },
                ),
                Some((_, Peer::Host(h))) => self.schedule(now, Event::ToHost { host: h, frame }),
                None => self.bufs.free(frame.buf),
            }
        }
        if let Some(at) = next {
            self.schedule_turn(sw, at);
        }
    }
}
