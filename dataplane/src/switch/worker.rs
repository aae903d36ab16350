//! A worker thread: receives on its ports, runs the packet path of [`pipeline::driver`] (through
//! [`DpEnv`], the data plane's side of it), transmits on its ports, and sleeps in ppoll() when
//! there is nothing to do.

use super::idle::{Idle, PollWindow};
use super::*;

/// A port as a worker holds it: its I/O and its transmit side on the packet path.
#[derive(Debug)]
struct OwnedPort {
    io: PortIo,
    tx: PortTx<Buf>,
}

/// The data plane's side of the packet path for one worker: the shared pool through this
/// worker's cache, port ownership, wake-ups, capture, counters and trace output.
pub(super) struct DpEnv<'a> {
    pub(super) sh: &'a Shared,
    pub(super) cache: &'a mut LocalCache,
    pub(super) me: usize,
}

impl Buffers for DpEnv<'_> {
    type Buf = Buf;
    #[inline]
    fn bytes<'a>(&'a self, b: &'a Buf) -> &'a [u8] {
        self.sh.pool.bytes(b)
    }
    #[inline]
    fn bytes_mut<'a>(&'a self, b: &'a mut Buf) -> &'a mut [u8] {
        self.sh.pool.bytes_mut(b)
    }
    #[inline]
    fn alloc(&mut self) -> Option<Buf> {
        self.cache.alloc(&self.sh.pool)
    }
    #[inline]
    fn free(&mut self, b: Buf) {
        self.cache.free(&self.sh.pool, b);
    }
    #[inline]
    fn headroom(&self) -> usize {
        HEADROOM
    }
}

impl Env for DpEnv<'_> {
    #[inline]
    fn has_port(&self, port: PortId) -> bool {
        self.sh
            .owner
            .get(usize::from(port))
            .is_some_and(|&o| o != usize::MAX)
    }

    #[inline]
    fn wake(&mut self, port: PortId) {
        let owner = self
            .sh
            .owner
            .get(usize::from(port))
            .copied()
            .unwrap_or(usize::MAX);
        if owner != self.me && owner != usize::MAX {
            self.sh.wake(owner);
        }
    }

    #[inline]
    fn departing(&mut self, port: PortId, frame: &Frame, now: u64) {
        if let Some(Some((_, c))) = self.sh.pcap.get(usize::from(port)) {
            capture(c, now, frame_bytes(self, frame));
        }
    }

    fn pfc_sent(&mut self, port: PortId) {
        if let Some(c) = self.sh.counters.get(usize::from(port)) {
            c.pfc_tx.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn trace(&mut self, port: PortId, lines: Vec<String>) {
        let Some(t) = &self.sh.trace else { return };
        let n = self.sh.traced.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut out) = t.lock() {
            for l in lines {
                let _ = writeln!(out, "trace pkt={n} worker={} port={port} {l}", self.me);
            }
        }
    }
}

pub(super) struct WorkerLoop {
    sh: Arc<Shared>,
    pub(super) id: usize,
    ports: Vec<OwnedPort>,
    pub(super) driver: Driver<Buf>,
    pub(super) cache: LocalCache,
    rx: Vec<Frame>,
    /// Worker 0: the CPU port's transmit state.
    pub(super) cpu_tx: Option<TxState<Frame>>,
    /// Worker 0: the recirculation (loopback) port's transmit state.
    pub(super) loop_tx: Option<TxState<Frame>>,
    /// Worker 0: the packet-in classes' token buckets.
    pub(super) cpu_buckets: super::cpu::CpuBuckets,
    /// Worker 0: the packet generator's schedule.
    schedule: Schedule,
}

/// Worker `id`'s random seed.
fn seed(id: usize) -> u64 {
    0x9e37_79b9_7f4a_7c15 ^ id as u64
}

impl WorkerLoop {
    pub(super) fn new(sh: Arc<Shared>, id: usize, ports: Vec<PortSpec>) -> Self {
        let ports = ports
            .into_iter()
            .map(|p| OwnedPort {
                tx: PortTx::new(&sh.tm, p.id),
                io: p.io,
            })
            .collect();
        let generation = sh.generation.load(Ordering::Acquire);
        let mut worker = Worker::new(sh.pipeline.load_full(), id, seed(id));
        worker.set_tracing(sh.trace.is_some());
        sh.running[id].store(generation, Ordering::Release);
        WorkerLoop {
            sh,
            id,
            ports,
            driver: Driver::new(worker),
            cache: LocalCache::default(),
            rx: Vec::with_capacity(BATCH),
            cpu_tx: None,
            loop_tx: None,
            cpu_buckets: super::cpu::CpuBuckets::default(),
            schedule: Schedule::default(),
        }
    }

    pub(super) fn run(mut self) {
        let cpu_port = self.sh.config.cpu_port;
        // One reference for the whole loop: the per-packet paths take `&Shared` instead of
        // cloning the Arc (an atomic on a line every worker shares) per packet.
        let shared = self.sh.clone();
        let sh = &*shared;
        let mut window = PollWindow::new(if sh.busy_poll { 0 } else { sh.poll_window_ns });
        // When the last iteration began, if it did work: this one's start is when it ended
        // (nothing sleeps or yields after a busy iteration), so one clock read serves both.
        let mut busy_since: Option<u64> = None;
        let loop_ns = &sh.loop_ns[self.id];
        let mut generation = sh.running[self.id].load(Ordering::Acquire);
        while !sh.stop.load(Ordering::Acquire) {
            // A new pipeline (a program loaded over P4Runtime): run it from here on.
            let latest = sh.generation.load(Ordering::Acquire);
            if latest != generation {
                let mut worker = Worker::new(sh.pipeline.load_full(), self.id, seed(self.id));
                worker.set_tracing(sh.trace.is_some());
                *self.driver.worker() = worker;
                generation = latest;
                sh.running[self.id].store(latest, Ordering::Release);
            }
            let now = sh.now();
            if let Some(t) = busy_since.take() {
                loop_ns.record(now.saturating_sub(t));
            }
            self.driver.begin_batch();
            let mut busy = false;
            for i in 0..self.ports.len() {
                busy |= self.receive(sh, i, now);
            }
            if self.id == 0 {
                for _ in 0..BATCH {
                    let Ok(bytes) = sh.packet_out.try_recv() else {
                        break;
                    };
                    busy = true;
                    // `CpuPort::send` refuses what a buffer cannot carry; a frame that got
                    // here anyway is dropped and counted, never cut.
                    match copy_in(&sh.pool, &mut self.cache, &bytes) {
                        Ok(f) => {
                            let md = StdMeta::new(cpu_port, f.len, now);
                            self.driver.inject(f, md);
                        }
                        Err(CopyIn::TooLong) => {
                            sh.packet_out_too_long.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(CopyIn::NoBuffer) => {}
                    }
                }
            }
            let mut next: Option<u64> = None;
            if self.id == 0 {
                next = self.generate(sh, now);
            }
            let mut env = DpEnv {
                sh,
                cache: &mut self.cache,
                me: self.id,
            };
            busy |= self.driver.run_pending(&mut env, &sh.tm, now, BATCH);
            for i in 0..self.ports.len() {
                let (b, n) = self.transmit(sh, i, now);
                busy |= b;
                next = match (next, n) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            if self.id == 0 {
                busy |= self.transmit_cpu(sh, now);
                busy |= self.transmit_loopback(sh, now);
            }
            if busy && sh.agent_attached.load(Ordering::Relaxed) {
                sh.ring_agent_doorbell();
            }
            self.driver.end_batch();
            busy_since = busy.then_some(now);
            if busy || self.driver.pending() {
                window.active(now);
            } else if !sh.busy_poll {
                match window.idle(now) {
                    // Poll, letting whatever else is runnable on this CPU go first.
                    Idle::Poll if sh.yield_in_window => std::thread::yield_now(),
                    Idle::Poll => {}
                    Idle::Sleep => self.sleep(now, next),
                }
            }
        }
        // Give every buffer back (queued frames die with the switch).
        for p in &mut self.ports {
            for f in p.tx.drain() {
                self.cache.free(&self.sh.pool, f.buf);
            }
        }
        for f in self.driver.drain() {
            self.cache.free(&self.sh.pool, f.buf);
        }
        self.cache.flush(&self.sh.pool);
    }

    fn generate(&mut self, sh: &Shared, now: u64) -> Option<u64> {
        let port = sh.config.pktgen_port;
        let mut schedule = std::mem::take(&mut self.schedule);
        let (cache, driver) = (&mut self.cache, &mut self.driver);
        // At most BATCH frames per loop, as many as `run_pending` takes into ingress per loop: a huge
        // tick is spread over loops instead of stalling the worker (and every table write).
        let next = schedule.run(&sh.pktgen, now, BATCH as u64, |app, c, batch, packet| {
            let Some(stats) = sh.pktgen.stats(app) else {
                return;
            };
            let Some(mut b) = cache.alloc(&sh.pool) else {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let bytes = sh.pool.bytes_mut(&mut b);
            let mut len = 0;
            if c.header {
                bytes[HEADROOM..HEADROOM + pktgen::HEADER_LEN]
                    .copy_from_slice(&pktgen::header(app, batch, packet));
                len = pktgen::HEADER_LEN;
            }
            // The template fits: its length was checked against the buffer size.
            bytes[HEADROOM + len..HEADROOM + len + c.template.len()].copy_from_slice(&c.template);
            len += c.template.len();
            let md = StdMeta {
                instance_type: InstanceType::Generated,
                ..StdMeta::new(port, len, now)
            };
            let frame = Frame {
                buf: b,
                start: HEADROOM,
                len,
            };
            driver.inject(frame, md);
            stats.generated.fetch_add(1, Ordering::Relaxed);
        });
        self.schedule = schedule;
        next
    }

    fn sleep(&mut self, now: u64, next: Option<u64>) {
        // Shared-memory links: ask each peer for a doorbell; frames that came meanwhile cancel
        // the sleep.
        let mut armed = true;
        for p in &self.ports {
            if let PortIo::Shm(m) = &p.io {
                armed &= m.arm();
            }
        }
        let mut fds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .map(|p| libc::pollfd {
                fd: p.io.fd(),
                // A doorbell FIFO is always writable: a full ring is retried on a timer.
                events: libc::POLLIN
                    | if p.tx.out.is_empty() || matches!(p.io, PortIo::Shm(_)) {
                        0
                    } else {
                        libc::POLLOUT
                    },
                revents: 0,
            })
            .collect();
        fds.push(libc::pollfd {
            fd: self.sh.wake[self.id].as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // Sleep until the next traffic-manager deadline (ns precision: worker threads run with
        // a 1 ns timer slack), at most 100 ms so that a stop is noticed.
        let wait = next.map_or(100_000_000, |at| at.saturating_sub(now).min(100_000_000));
        if armed {
            sys::ppoll(&mut fds, wait);
        }
        for (p, f) in self.ports.iter_mut().zip(&fds) {
            if let PortIo::Shm(m) = &mut p.io {
                m.disarm(f.revents & libc::POLLIN != 0);
            }
        }
        if fds.last().is_some_and(|f| f.revents & libc::POLLIN != 0) {
            sys::drain(&self.sh.wake[self.id]);
        }
    }

    /// Receives a batch on port `i` and runs ingress on it; returns whether anything arrived.
    /// Receives a batch on port `i` and runs ingress on it; returns whether anything arrived.
    fn receive(&mut self, sh: &Shared, i: usize, now: u64) -> bool {
        let p = &mut self.ports[i];
        let mut rx = std::mem::take(&mut self.rx);
        let (got, oversize) = match &mut p.io {
            PortIo::Xdp(x) => (x.recv(&sh.pool, &mut self.cache, &mut rx), 0),
            PortIo::XdpSpec(_) => (0, 0),
            PortIo::Packet(s) => s.recv(&sh.pool, &mut self.cache, &mut rx).unwrap_or((0, 0)),
            PortIo::Mem(m) => m.recv(&sh.pool, &mut self.cache, &mut rx, BATCH),
            PortIo::Shm(m) => m.recv(&sh.pool, &mut self.cache, &mut rx, BATCH),
        };
        let id = p.tx.id();
        let c = &sh.counters[usize::from(id)];
        c.rx.fetch_add(got as u64, Ordering::Relaxed);
        c.errors.fetch_add(oversize as u64, Ordering::Relaxed);
        let mut env = DpEnv {
            sh,
            cache: &mut self.cache,
            me: self.id,
        };
        for f in rx.drain(..) {
            if let Some((c, _)) = &sh.pcap[usize::from(id)] {
                capture(c, now, &sh.pool.bytes(&f.buf)[f.start..f.start + f.len]);
            }
            if self.driver.receive(&mut env, &sh.tm, id, f, now) == Received::Pause {
                c.pfc_rx.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.rx = rx;
        got > 0
    }

    /// Port `i`'s turn on the packet path (PFC, dequeue, egress, delay), then sends what is
    /// ready; returns (did work, next deadline).
    fn transmit(&mut self, sh: &Shared, i: usize, now: u64) -> (bool, Option<u64>) {
        // Frames that left the traffic manager but not the port stay few: the backlog stays in
        // the queues, where limits, ECN and PFC act on it.
        let room = (4 * BATCH)
            .saturating_sub(self.ports[i].tx.out.len())
            .min(BATCH);
        let mut env = DpEnv {
            sh,
            cache: &mut self.cache,
            me: self.id,
        };
        let (mut busy, mut next) =
            self.driver
                .transmit(&mut env, &sh.tm, &mut self.ports[i].tx, now, room);
        let p = &self.ports[i];
        let reclaim = matches!(&p.io, PortIo::Xdp(x) if x.in_flight() > 0);
        if !p.tx.out.is_empty() || reclaim {
            busy |= self.flush(sh, i);
        }
        // Frames still in an AF_XDP TX ring need another kick soon (copy mode sends only when
        // kicked); frames the port refused are retried when it polls writable.
        // Frames a full shared-memory ring left behind are retried the same way.
        let retry = match &self.ports[i].io {
            PortIo::Xdp(x) => x.in_flight() > 0,
            PortIo::Shm(_) => !self.ports[i].tx.out.is_empty(),
            _ => false,
        };
        if retry {
            next = Some(next.map_or(now + 50_000, |n: u64| n.min(now + 50_000)));
        }
        (busy, next)
    }

    fn flush(&mut self, sh: &Shared, i: usize) -> bool {
        let p = &mut self.ports[i];
        let id = p.tx.id();
        let c = &sh.counters[usize::from(id)];
        let mut sent = 0usize;
        match &mut p.io {
            PortIo::Xdp(x) => loop {
                // At least once: reclaims completions and kicks the TX ring.
                let n = x.send(&sh.pool, &mut self.cache, &mut p.tx.out);
                sent += n;
                if n == 0 || p.tx.out.is_empty() {
                    break;
                }
            },
            PortIo::XdpSpec(_) => {}
            PortIo::Packet(s) => {
                while !p.tx.out.is_empty() {
                    match s.send(&sh.pool, &mut self.cache, &mut p.tx.out) {
                        Ok(0) => break,
                        Ok(n) => sent += n,
                        Err(_) => {
                            c.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            PortIo::Mem(m) => {
                for f in p.tx.out.drain(..) {
                    m.send(&sh.pool, &mut self.cache, f);
                    sent += 1;
                }
            }
            PortIo::Shm(m) => {
                let (n, oversize) = m.send(&sh.pool, &mut self.cache, &mut p.tx.out);
                sent += n;
                c.errors.fetch_add(oversize as u64, Ordering::Relaxed);
            }
        }
        c.tx.fetch_add(sent as u64, Ordering::Relaxed);
        sent > 0
    }
}
