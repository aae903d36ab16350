//! Switch-local control agents: the "local CPU" some programs need (P4TE's routing-group
//! reconfiguration, for one), next to the switch and faster than a remote controller.
//!
//! An agent is sans-IO. It is handed packet-ins (frames the program sent to the CPU port),
//! digests and timer ticks, each with the time, and it acts through [`AgentCx::write`]: the same
//! validated, transactional write path P4Runtime uses ([`Control::write`]), so its writes are
//! serialised with P4Runtime's, visible to P4Runtime reads, and published to the workers
//! atomically. The same agent code runs on its own thread in `pisa-switch` (wall-clock time) and
//! inside `pisa-sim` (virtual time).
//!
//! A pipeline reset (a new forwarding pipeline config that clears the tables) resets the agent:
//! whoever runs it watches [`Control::generation`] and calls [`Agent::reset`] when it changes.

use crate::control::{Atomicity, Control, Update, WriteError};
use crate::digest::DigestMsg;

/// A switch-local control agent.
pub trait Agent: Send + std::fmt::Debug {
    /// How often the agent wants [`Agent::tick`], ns (None: never).
    fn tick_interval_ns(&self) -> Option<u64> {
        None
    }

    /// A frame the program sent to the CPU port (its packet-in header included).
    fn packet_in(&mut self, _now_ns: u64, _frame: &[u8], _cx: &mut AgentCx<'_>) {}

    /// A digest the program sent.
    fn digest(&mut self, _now_ns: u64, _msg: &DigestMsg, _cx: &mut AgentCx<'_>) {}

    /// A timer tick.
    fn tick(&mut self, _now_ns: u64, _cx: &mut AgentCx<'_>) {}

    /// The link of data port `port` went down (`up` false) or came back: what the link
    /// monitoring beside the switch (or an operator) tells it.
    fn port_status(&mut self, _now_ns: u64, _port: u32, _up: bool, _cx: &mut AgentCx<'_>) {}

    /// The pipeline was reset: forget every table state the agent believed in.
    fn reset(&mut self) {}

    /// The agent's own counts, by name (e.g. P4TE's `moves`), for the switch's statistics and
    /// an experiment's per-point record; none by default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// What an agent can do: write through the validated path, and read the control plane.
#[derive(Debug)]
pub struct AgentCx<'a> {
    control: &'a Control,
    writes: u64,
}

impl<'a> AgentCx<'a> {
    /// The context of one agent call on `control`.
    pub fn new(control: &'a Control) -> Self {
        AgentCx { control, writes: 0 }
    }

    /// The control plane (schema lookups, reads).
    pub fn control(&self) -> &'a Control {
        self.control
    }

    /// Applies `updates` as one batch (each validated; failures do not stop the others), and
    /// publishes them to the workers.
    pub fn write(&mut self, updates: &[Update]) -> Vec<Result<(), WriteError>> {
        self.writes += updates.len() as u64;
        self.control.write(updates, Atomicity::ContinueOnError)
    }

    /// Updates written through this context.
    pub fn writes(&self) -> u64 {
        self.writes
    }
}

/// Runs an agent against a control plane: resets it when the pipeline was reset, and tracks
/// its tick schedule. The caller feeds events and the time; nothing here blocks.
#[derive(Debug)]
pub struct AgentHost {
    agent: Box<dyn Agent>,
    generation: u64,
    next_tick: Option<u64>,
    /// Updates the agent has written.
    pub writes: u64,
    /// Packet-ins handed to the agent.
    pub packet_ins: u64,
}

impl AgentHost {
    /// Hosts `agent` for `control`, starting at `now_ns`.
    pub fn new(agent: Box<dyn Agent>, control: &Control, now_ns: u64) -> Self {
        let next_tick = agent.tick_interval_ns().map(|t| now_ns.saturating_add(t));
        AgentHost {
            agent,
            generation: control.generation(),
            next_tick,
            writes: 0,
            packet_ins: 0,
        }
    }

    fn cx<'a>(&mut self, control: &'a Control) -> AgentCx<'a> {
        let g = control.generation();
        if g != self.generation {
            self.generation = g;
            self.agent.reset();
        }
        AgentCx::new(control)
    }

    /// A packet-in.
    pub fn packet_in(&mut self, control: &Control, now_ns: u64, frame: &[u8]) {
        let mut cx = self.cx(control);
        self.agent.packet_in(now_ns, frame, &mut cx);
        self.writes += cx.writes();
        self.packet_ins += 1;
    }

    /// The agent's own counts ([`Agent::counters`]).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        self.agent.counters()
    }

    /// A digest.
    pub fn digest(&mut self, control: &Control, now_ns: u64, msg: &DigestMsg) {
        let mut cx = self.cx(control);
        self.agent.digest(now_ns, msg, &mut cx);
        self.writes += cx.writes();
    }

    /// A port's link went down or came back up.
    pub fn port_status(&mut self, control: &Control, now_ns: u64, port: u32, up: bool) {
        let mut cx = self.cx(control);
        self.agent.port_status(now_ns, port, up, &mut cx);
        self.writes += cx.writes();
    }

    /// When the next tick is due (None: the agent takes no ticks).
    pub fn next_tick(&self) -> Option<u64> {
        self.next_tick
    }

    /// Runs the ticks due at `now_ns` (one call, however late: ticks do not pile up).
    /// Also notices a pipeline reset, so callers that have nothing else to do call it
    /// regularly.
    pub fn tick(&mut self, control: &Control, now_ns: u64) {
        let mut cx = self.cx(control);
        let Some(due) = self.next_tick.filter(|&due| now_ns >= due) else {
            return;
        };
        self.agent.tick(now_ns, &mut cx);
        self.writes += cx.writes();
        let every = self.agent.tick_interval_ns().unwrap_or(u64::MAX).max(1);
        self.next_tick = Some(due.saturating_add(every).max(now_ns.saturating_add(1)));
    }
}
