//! HPCC senders and receivers of `pisa-sim` (`cc=hpcc-pint`, `cc=hpcc-int`; docs/pint.md).
//!
//! A flow sends `bytes=` application bytes to the fabric's designated HPCC port: each datagram is
//! the `pint` program's shim ([`Shim`]: PINT's digest, or INT slots for every hop of the
//! fabric's longest path), the stamp, and data. The sender keeps at most its window W in flight
//! (one packet always may go) and paces at W/T; the receiver acknowledges every packet with a
//! datagram from the HPCC port back to the sender's port, echoing the shim and the stamp. Each
//! ACK feeds the flow's [`Hpcc`] controller: the INT stack, or the digest's utilisation when the
//! packet was sampled. The flow completes when every byte is acknowledged; its FCT is the time
//! from its start to that last ACK. There are no retransmissions: HPCC assumes a lossless
//! fabric (PFC), and a flow that loses a packet never completes (reported as such).

use super::*;
use ::hosts::hpcc::{Feedback, Hpcc, HpccConfig};
use programs::pint_hpcc::{self, FLAG_SAMPLED, KIND_INT, KIND_PINT, Shim};
use topo::LinkProps;

/// The host queue of ACKs (the highest of the traffic manager's strict priorities).
const ACK_QUEUE: u8 = 7;

/// The state of one HPCC flow.
#[derive(Debug)]
pub(super) struct HpccFlow {
    ctl: Hpcc,
    int: bool,
    capacity: u8,
    size: u64,
    per_packet: u64,
    snd_nxt: u64,
    acked: u64,
    nonce: u32,
    next_at: u64,
    pending: bool,
    start_ns: u64,
    done_ns: Option<u64>,
    ideal_ns: u64,
    acks: u64,
    feedback_acks: u64,
    wire_bytes: u64,
    min_window: f64,
}

/// The links from host `a` to host `b` on a shortest path, in order (breadth-first search).
fn path_links(t: &Topology, a: &str, b: &str) -> Option<Vec<LinkProps>> {
    let (sa, pa) = t.host_attachment(a)?;
    let (sb, pb) = t.host_attachment(b)?;
    let ports = t.ports();
    let props = |s: &str, p: u16| ports.get(s).and_then(|m| m.get(&p)).map(|x| *x.1);
    let mut parent: BTreeMap<&str, Option<(&str, LinkProps)>> = BTreeMap::from([(sa, None)]);
    let mut queue = std::collections::VecDeque::from([sa]);
    while let Some(s) = queue.pop_front() {
        if s == sb {
            let mut links = vec![props(sb, pb)?];
            let mut at = s;
            while let Some(Some((prev, l))) = parent.get(at) {
                links.push(*l);
                at = prev;
            }
            links.push(props(sa, pa)?);
            links.reverse();
            return Some(links);
        }
        for (far, l) in ports.get(s).into_iter().flat_map(|m| m.values()) {
            if let End::Switch(n, _) = far
                && !parent.contains_key(n.as_str())
            {
                parent.insert(n.as_str(), Some((s, **l)));
                queue.push_back(n.as_str());
            }
        }
    }
    None
}

impl Sim {
    /// The HPCC state of flow `spec` from host `src` to `dst`, if it is an HPCC flow: its
    /// destination port becomes the fabric's HPCC port.
    pub(super) fn hpcc_setup(
        &mut self,
        t: &Topology,
        k: usize,
        spec: &mut FlowSpec,
        (src, dst): (usize, usize),
    ) -> Result<Option<Box<HpccFlow>>, String> {
        let flow::Cc::Hpcc { int, pad } = spec.cc else {
            return Ok(None);
        };
        let f = pint_hpcc::fabric_of(t)?.ok_or_else(|| {
            format!(
                "flow {}: cc=hpcc-* needs switches running pint (the HPCC query)",
                k + 1
            )
        })?;
        self.hpcc_port = Some(f.udp_port);
        spec.dport = f.udp_port;
        let path = (topo::plan::host_path_switches(t) as u64).clamp(1, 255) as u8;
        let capacity = if int || pad { path } else { 0 };
        let kind = if int { KIND_INT } else { KIND_PINT };
        let shim = Shim::len_of(kind, capacity) as u64;
        let per_packet = u64::from(spec.size)
            .checked_sub(28 + shim)
            .filter(|&p| p >= flow::STAMP_LEN as u64)
            .ok_or_else(|| {
                format!(
                    "flow {}: size={} leaves no room for the {shim}-byte shim and the stamp",
                    k + 1,
                    spec.size
                )
            })?;
        let line = self.hosts[src]
            .tm
            .config(0)
            .map_or(1, |c| c.link_bps)
            .max(1);
        let ctl = Hpcc::new(HpccConfig::scaled(line, f.base_rtt_ns));
        let size = spec.bytes.unwrap_or(1);
        // FCT alone: every frame serialised at the path's slowest rate, the last one stored and
        // forwarded over each further link at that link's rate, propagation both ways, and the
        // last ACK's serialisation on every link.
        let links = path_links(t, &self.hosts[src].name, &self.hosts[dst].name)
            .ok_or_else(|| format!("flow {}: no path", k + 1))?;
        let ns = |bytes: u64, rate: u64| bytes * 8 * 1_000_000_000 / rate.max(1);
        let slowest = links.iter().map(|l| l.rate_bps).min().unwrap_or(line);
        let packets = size.div_ceil(per_packet);
        let last = size - (packets - 1) * per_packet;
        let frame = |app: u64| 14 + 28 + shim + app.max(flow::STAMP_LEN as u64);
        let wire = (packets - 1) * frame(per_packet) + frame(last);
        let ack = 14 + 28 + shim + flow::STAMP_LEN as u64;
        let ideal_ns = ns(wire, slowest)
            + links[1..]
                .iter()
                .map(|l| ns(frame(last), l.rate_bps))
                .sum::<u64>()
            + links
                .iter()
                .map(|l| 2 * l.delay_us * 1000 + ns(ack, l.rate_bps))
                .sum::<u64>();
        let key = (src, self.hosts[dst].ipv4, spec.sport, spec.dport);
        self.hpcc_flows.insert(key, k);
        let min_window = ctl.window();
        Ok(Some(Box::new(HpccFlow {
            ctl,
            int,
            capacity,
            size,
            per_packet,
            snd_nxt: 0,
            acked: 0,
            nonce: 0,
            next_at: spec.start_ns,
            pending: true,
            start_ns: spec.start_ns,
            done_ns: None,
            ideal_ns,
            acks: 0,
            feedback_acks: 0,
            wire_bytes: 0,
            min_window,
        })))
    }

    /// Flow `k` (an HPCC flow) may send.
    pub(super) fn hpcc_send(&mut self, k: usize) {
        let now = self.now;
        let f = &mut self.flows[k];
        let Some(h) = f.hpcc.as_deref_mut() else {
            return;
        };
        h.pending = false;
        if h.snd_nxt >= h.size {
            return;
        }
        if now < h.next_at {
            h.pending = true;
            let at = h.next_at;
            self.schedule(at, Event::Send { flow: k });
            return;
        }
        let len = h.per_packet.min(h.size - h.snd_nxt);
        let inflight = h.snd_nxt - h.acked;
        if inflight > 0 && (inflight + len) as f64 > h.ctl.window() {
            return; // an ACK reopens the window
        }
        let host = &mut self.hosts[f.src];
        if host.tm.depth(0, 0).0 >= host.tm.config(0).map_or(u32::MAX, |c| c.max_packets) {
            h.pending = true;
            host.blocked.push(k);
            return;
        }
        let kind = if h.int { KIND_INT } else { KIND_PINT };
        let mut payload = Shim::bytes(kind, h.capacity, h.nonce);
        payload.extend_from_slice(&::hosts::stamp::stamp(k as u32, u64::from(h.nonce), now));
        let ip_len = 28 + payload.len() + len.saturating_sub(flow::STAMP_LEN as u64) as usize;
        let frame_bytes = 14 + ip_len as u64;
        h.snd_nxt += len;
        h.nonce = h.nonce.wrapping_add(1);
        h.wire_bytes += frame_bytes;
        h.next_at = now + h.ctl.gap_ns(frame_bytes);
        let more = h.snd_nxt < h.size;
        if more {
            h.pending = true;
        }
        let next = h.next_at;
        f.sent += 1;
        let spec = f.source.spec();
        let a = self.hosts[f.src].addrs_to(self.hosts[f.dst].ipv4);
        let (ports, tos, from) = ((spec.sport, spec.dport), spec.tos, f.src);
        let mut scratch = std::mem::take(&mut self.scratch);
        let empty = TcpFields::default();
        flow::write_frame(
            &mut scratch,
            a,
            Proto::Udp,
            tos,
            ports,
            empty,
            ip_len as u16,
            &payload,
        );
        self.host_send(from, &scratch);
        self.scratch = scratch;
        if more {
            self.schedule(next, Event::Send { flow: k });
        }
    }

    /// An HPCC datagram or ACK reaching `host`; false if `bytes` is neither.
    pub(super) fn hpcc_arrive(&mut self, host: usize, bytes: &[u8]) -> bool {
        let Some(port) = self.hpcc_port else {
            return false;
        };
        let seen = flow::inspect(bytes);
        let Some((peer, sport, dport)) = seen.udp else {
            return false;
        };
        let ihl = usize::from(bytes[14] & 0x0f) * 4;
        let Some(payload) = bytes.get(14 + ihl + 8..) else {
            return false;
        };
        let Some(shim) = Shim::parse(payload) else {
            return false;
        };
        let Some((id, nonce, sent_at)) = ::hosts::stamp::read_stamp(&payload[shim.len()..]) else {
            return false;
        };
        let now = self.now;
        if dport == port {
            let Some(f) = self.flows.get_mut(id as usize) else {
                return false;
            };
            if f.dst != host || f.hpcc.is_none() {
                return false;
            }
            f.rx.on_packet_at(nonce, now.saturating_sub(sent_at), now);
            let echo = payload[..shim.len() + flow::STAMP_LEN].to_vec();
            let a = self.hosts[host].addrs_to(peer);
            let mut scratch = std::mem::take(&mut self.scratch);
            let empty = TcpFields::default();
            let len = (28 + echo.len()) as u16;
            flow::write_frame(
                &mut scratch,
                a,
                Proto::Udp,
                0,
                (dport, sport),
                empty,
                len,
                &echo,
            );
            // The NIC sends ACKs ahead of data (HPCC's NICs: ACKs in the highest priority), so
            // a host that sends at line rate still acknowledges what it receives.
            self.host_send_queue(host, &scratch, ACK_QUEUE);
            self.scratch = scratch;
            return true;
        }
        let Some(&k) = self.hpcc_flows.get(&(host, peer, dport, sport)) else {
            return false;
        };
        if k != id as usize {
            return false;
        }
        let hops = shim.hops(payload);
        let f = &mut self.flows[k];
        let Some(h) = f.hpcc.as_deref_mut() else {
            return false;
        };
        let end = ((nonce + 1) * h.per_packet).min(h.size);
        let len = end - (nonce * h.per_packet).min(end);
        h.acked = (h.acked + len).min(h.size);
        h.acks += 1;
        let fb = if h.int {
            Feedback::Int(&hops)
        } else if shim.flags & FLAG_SAMPLED != 0 {
            Feedback::Util(analysis::pint::HpccUtil::paper().decode(shim.value))
        } else {
            Feedback::None
        };
        if h.ctl.on_ack(end, h.snd_nxt, fb) {
            h.feedback_acks += 1;
            h.min_window = h.min_window.min(h.ctl.window());
        }
        if h.acked >= h.size && h.done_ns.is_none() {
            h.done_ns = Some(now);
        }
        if !h.pending && h.snd_nxt < h.size {
            h.pending = true;
            self.schedule(now, Event::Send { flow: k });
        }
        true
    }
}

impl HpccFlow {
    /// The flow's part of the report.
    pub(super) fn report(&self) -> Json {
        let c = self.ctl.config();
        let mut j = Json::object()
            .with("cc", if self.int { "hpcc-int" } else { "hpcc-pint" })
            .with("bytes", self.size)
            .with("acked_bytes", self.acked)
            .with("completed", u64::from(self.done_ns.is_some()))
            .with("ideal_fct_ns", self.ideal_ns)
            .with("wire_bytes", self.wire_bytes)
            .with("acks", self.acks)
            .with("feedback_acks", self.feedback_acks)
            .with("window_updates", self.ctl.updates)
            .with("final_window", self.ctl.window().round() as u64)
            .with("min_window", self.min_window.round() as u64)
            .with("w_init", c.w_init().round() as u64)
            .with("w_ai", (c.w_ai * 1000.0).round() / 1000.0)
            .with("base_rtt_ns", c.base_rtt_ns);
        if let Some(done) = self.done_ns {
            let fct = done.saturating_sub(self.start_ns).max(1);
            j = j
                .with("fct_ns", fct)
                .with("slowdown", fct as f64 / self.ideal_ns.max(1) as f64)
                .with("goodput_bps", self.size * 8 * 1_000_000_000 / fct);
        }
        j
    }
}
