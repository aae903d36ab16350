//! The switch-local agent's thread: runs a [`pipeline::agent::Agent`] next to the workers, in
//! wall-clock time.
//!
//! The thread sleeps on the agent's own bounded queue of packet-ins (a copy of each, see
//! [`Switch::attach_agent`]) until a packet-in, a digest doorbell, its next tick or a stop. Every
//! write it makes goes through [`pipeline::control::Control::write`], serialised with P4Runtime's
//! writes, and is visible to the workers when the call returns. A pipeline reset resets the agent
//! ([`pipeline::agent::AgentHost`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::RecvTimeoutError;
use pipeline::agent::{Agent, AgentHost};
use pipeline::hist::Histogram;

use crate::switch::Switch;

/// Longest sleep without an event (a stop is noticed within it).
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// What the agent thread has done.
#[derive(Debug, Default)]
pub struct AgentStats {
    /// Packet-ins handed to the agent.
    pub packet_ins: AtomicU64,
    /// Digests handed to the agent.
    pub digests: AtomicU64,
    /// Updates the agent wrote.
    pub writes: AtomicU64,
    /// For the last packet-in that led to a write: ns from when the agent thread took it until
    /// the write returned, i.e. was visible to the workers.
    pub last_reaction_ns: AtomicU64,
    /// The same for every packet-in that led to a write, ns.
    pub reaction_ns: Histogram,
    /// Frames waiting on the agent's queue each time the thread takes the first of a turn
    /// (that one included): its lag, in reports.
    pub backlog: Histogram,
    /// The agent's own counts ([`Agent::counters`]) as of its last turn.
    pub agent: parking_lot::Mutex<Vec<(&'static str, u64)>>,
}

impl AgentStats {
    /// The thread's counts and quantiles as text: packet-ins, digests, writes, backlog
    /// p50/p99/max (frames) and reaction p50/p99/max (µs).
    fn figures(&self) -> [String; 9] {
        let (r, b) = (self.reaction_ns.snapshot(), self.backlog.snapshot());
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
        [
            self.packet_ins.load(Ordering::Relaxed).to_string(),
            self.digests.load(Ordering::Relaxed).to_string(),
            self.writes.load(Ordering::Relaxed).to_string(),
            b.quantile(0.5).to_string(),
            b.quantile(0.99).to_string(),
            b.max.to_string(),
            us(r.quantile(0.5)),
            us(r.quantile(0.99)),
            us(r.max),
        ]
    }

    /// One line for the switch's stats at exit; `dropped` is what the full queue refused
    /// ([`Switch::agent_packet_ins_dropped`]).
    pub fn line(&self, dropped: u64) -> String {
        let [p, d, w, b50, b99, bmax, r50, r99, rmax] = self.figures();
        format!(
            "agent: {p} packet-ins ({dropped} dropped: queue full), {d} digests, {w} writes; \
             backlog p50/p99/max {b50}/{b99}/{bmax} frames; reaction p50/p99/max \
             {r50}/{r99}/{rmax} us\n"
        )
    }

    /// `NAME VALUE` lines (the admin socket's `show_agent`): the thread's counts, its backlog
    /// (frames) and reaction time (µs) quantiles, `dropped` (the full queue's refusals) and
    /// then the agent's own counts as `agent.NAME`.
    pub fn show(&self, dropped: u64) -> String {
        let [p, d, w, b50, b99, bmax, r50, r99, rmax] = self.figures();
        let mut out = format!(
            "packet_ins {p}\ndropped {dropped}\ndigests {d}\nwrites {w}\nbacklog_p50 {b50}\n\
             backlog_p99 {b99}\nbacklog_max {bmax}\nreaction_p50_us {r50}\n\
             reaction_p99_us {r99}\nreaction_max_us {rmax}\n"
        );
        for (name, v) in self.agent.lock().iter() {
            out += &format!("agent.{name} {v}\n");
        }
        out
    }
}

/// A running agent thread; stops when dropped.
#[derive(Debug)]
pub struct AgentThread {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<AgentStats>,
}

impl AgentThread {
    /// Attaches `agent` to `sw` and starts its thread.
    pub fn spawn(sw: &Switch, agent: Box<dyn Agent>) -> std::io::Result<AgentThread> {
        let rx = sw.attach_agent();
        let pipeline = sw.pipeline().clone();
        let clock = sw.clock();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(AgentStats::default());
        sw.set_agent_stats(stats.clone());
        let doorbell = sw.agent_doorbell();
        let (stop2, stats2) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("pisa-agent".into())
            .spawn(move || {
                let control = &pipeline.control;
                let mut host = AgentHost::new(agent, control, clock());
                while !stop2.load(Ordering::Acquire) {
                    let now = clock();
                    host.tick(control, now);
                    let wait = host
                        .next_tick()
                        .map_or(IDLE_WAIT, |t| Duration::from_nanos(t.saturating_sub(now)))
                        .min(IDLE_WAIT);
                    let first = match rx.recv_timeout(wait) {
                        Ok(frame) => frame,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => break,
                    };
                    stats2.backlog.record(rx.len() as u64 + 1);
                    // Take what else is waiting, a bounded amount per turn.
                    let more = std::iter::from_fn(|| rx.try_recv().ok()).take(255);
                    for frame in std::iter::once(first).chain(more) {
                        if frame.is_empty() {
                            doorbell();
                            let externs = control.externs();
                            while let Some(m) = externs.agent_digests.pop() {
                                host.digest(control, clock(), &m);
                                stats2.digests.fetch_add(1, Ordering::Relaxed);
                            }
                            continue;
                        }
                        let arrived = clock();
                        let before = host.writes;
                        host.packet_in(control, arrived, &frame);
                        stats2.packet_ins.fetch_add(1, Ordering::Relaxed);
                        if host.writes != before {
                            let took = clock().saturating_sub(arrived);
                            stats2.last_reaction_ns.store(took, Ordering::Relaxed);
                            stats2.reaction_ns.record(took);
                        }
                    }
                    stats2.writes.store(host.writes, Ordering::Relaxed);
                    *stats2.agent.lock() = host.counters();
                }
                stats2.writes.store(host.writes, Ordering::Relaxed);
                *stats2.agent.lock() = host.counters();
            })?;
        Ok(AgentThread {
            stop,
            thread: Some(thread),
            stats,
        })
    }

    /// What the agent has done so far.
    pub fn stats(&self) -> &AgentStats {
        &self.stats
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AgentThread {
    fn drop(&mut self) {
        self.halt();
    }
}
