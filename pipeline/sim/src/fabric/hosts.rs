//! The hosts of a simulated fabric: what arrives at them (PAUSE frames, stamped packets they
//! count, TCP segments they acknowledge), the sources' sends, and their transmit side.

use super::*;

/// Rate changes kept per `cc=qcn-rp` flow for the report's trace.
const RP_TRACE_MAX: usize = 20_000;

impl Sim {
    pub(super) fn arrive_at_host(&mut self, host: usize, frame: Frame) {
        let now = self.now;
        let h = &mut self.hosts[host];
        h.rx_packets += 1;
        let bytes = &frame.buf[frame.start..frame.start + frame.len];
        // PAUSE/PFC: the host's MAC obeys (simulated hosts do; Linux hosts do not).
        if let Some(pause) = pipeline::driver::mac_control(Some(bytes)) {
            let resumed = if let Ok((vector, quanta)) = pause {
                h.pfc_received += 1;
                h.tm.pause_received(0, vector, quanta, now)
            } else {
                false
            };
            self.bufs.free(frame.buf);
            // An XON (or a shorter pause) resumes the NIC now, not at the turn the old pause
            // scheduled: its waiting packets go at once.
            if resumed {
                self.host_turn(host);
            }
            return;
        }
        if self.hpcc_arrive(host, bytes) || self.tcp_arrive(host, bytes) {
            self.bufs.free(frame.buf);
            return;
        }
        let h = &mut self.hosts[host];
        let seen = flow::inspect(bytes);
        if seen.ce {
            h.rx_ce += 1;
        }
        // A feedback packet: CE on a datagram from a flow's destination address and port to the
        // flow's source port on this host.
        if seen.ce
            && let Some((peer, sport, dport)) = seen.udp
            && let Some(&k) = self.rp_flows.get(&(host, peer, dport, sport))
            && let Some((rp, trace)) = &mut self.flows[k].rp
        {
            rp.on_feedback();
            if trace.len() < RP_TRACE_MAX {
                trace.push((now, rp.rate_bps(), rp.target_bps(), rp.state()));
            }
            self.bufs.free(frame.buf);
            return;
        }
        let mut ack = None;
        let mut np = None;
        if let Some((id, seq, sent_at)) = seen.stamp
            && let Some(f) = self.flows.get_mut(id as usize)
            && f.dst == host
        {
            f.rx.on_packet_at(seq, now.saturating_sub(sent_at), now);
            let spec = f.source.spec();
            let np_due = f
                .last_np_ns
                .is_none_or(|t| now.saturating_sub(t) >= spec.np_interval_ns);
            if seen.ce && spec.np && np_due {
                f.np_sent += 1;
                f.last_np_ns = Some(now);
                let spec = f.source.spec();
                np = Some((f.src, (spec.dport, spec.sport)));
            }
            if let Some(flow::TcpSeg {
                src,
                dst,
                ports,
                seq: tcp_seq,
                len,
            }) = seen.tcp
            {
                let (next, ooo) = h.tcp_rx.entry(id).or_insert((1, BTreeMap::new()));
                if tcp_seq == *next {
                    *next = next.wrapping_add(len);
                    while let Some(l) = ooo.remove(next) {
                        *next = next.wrapping_add(l);
                    }
                } else if tcp_seq.wrapping_sub(*next) < 1 << 31 {
                    ooo.insert(tcp_seq, len);
                }
                ack = Some((src, dst, ports, *next));
            }
        }
        self.bufs.free(frame.buf);
        if let Some((src, ports)) = np {
            // The NP's feedback packet: to the source's address and port, ECN = 11.
            let a = self.hosts[host].addrs_to(self.hosts[src].ipv4);
            let mut scratch = std::mem::take(&mut self.scratch);
            let empty = TcpFields::default();
            flow::write_frame(&mut scratch, a, Proto::Udp, 3, ports, empty, 28, &[]);
            self.host_send(host, &scratch);
            self.scratch = scratch;
        }
        if let Some((src, dst, ports, next)) = ack {
            let h = &self.hosts[host];
            let a = Addrs {
                dmac: h.gateway,
                smac: h.mac,
                src: dst,
                dst: src,
            };
            let tcp = TcpFields {
                seq: 1,
                ack: next,
                flags: 0x10,
                window: 0xffff,
            };
            let mut scratch = std::mem::take(&mut self.scratch);
            flow::write_frame(
                &mut scratch,
                a,
                Proto::Tcp,
                0,
                (ports.1, ports.0),
                tcp,
                40,
                &[],
            );
            self.host_send(host, &scratch);
            self.scratch = scratch;
        }
    }

    pub(super) fn send(&mut self, k: usize) {
        if self.flows[k].hpcc.is_some() {
            return self.hpcc_send(k);
        }
        if self.flows[k].tcp.is_some() {
            return self.tcp_send(k);
        }
        let now = self.now;
        let f = &mut self.flows[k];
        // A full NIC queue (a paused link, or a source above its link's rate) blocks the
        // application, as a blocking socket or a RoCE queue pair does: it sends when there is
        // room again, nothing is dropped at the source.
        let h = &mut self.hosts[f.src];
        if h.tm.depth(0, 0).0 >= h.tm.config(0).map_or(u32::MAX, |c| c.max_packets) {
            h.blocked.push(k);
            return;
        }
        let spec = f.source.spec().clone();
        let a = self.hosts[f.src].addrs_to(self.hosts[f.dst].ipv4);
        let payload_len = u32::from(spec.size)
            - 20
            - match spec.proto {
                Proto::Udp => 8,
                Proto::Tcp => 20,
            };
        let tcp = TcpFields {
            seq: f.tcp_seq,
            ack: 1,
            flags: 0x18,
            window: 0xffff,
        };
        f.tcp_seq = f.tcp_seq.wrapping_add(payload_len);
        let stamp = ::hosts::stamp::stamp(k as u32, f.sent, now);
        f.sent += 1;
        let next = match &mut f.rp {
            Some((rp, trace)) => {
                if rp.on_sent(u64::from(spec.size) + 14) && trace.len() < RP_TRACE_MAX {
                    let row = (now, rp.rate_bps(), rp.target_bps(), rp.state());
                    // Cycles at the maximum change nothing: one row for them.
                    if trace
                        .last()
                        .is_none_or(|l| (l.1, l.2, l.3) != (row.1, row.2, row.3))
                    {
                        trace.push(row);
                    }
                }
                f.source
                    .paced(now.saturating_add(rp.gap_ns(spec.frame_bits())))
            }
            None => f.source.next_send(),
        };
        let host = f.src;
        let mut scratch = std::mem::take(&mut self.scratch);
        flow::write_frame(
            &mut scratch,
            a,
            spec.proto,
            spec.tos,
            (spec.sport, spec.dport),
            tcp,
            spec.size,
            &stamp,
        );
        self.host_send(host, &scratch);
        self.scratch = scratch;
        if let Some(at) = next {
            self.schedule(at, Event::Send { flow: k });
        }
    }

    /// Queues `bytes` on host `host`'s link (tail drop at its buffer) and serves the link.
    pub(super) fn host_send(&mut self, host: usize, bytes: &[u8]) {
        self.host_send_queue(host, bytes, 0);
    }

    /// The same into queue `qid` of the host's port (strict priority: the highest first).
    pub(super) fn host_send_queue(&mut self, host: usize, bytes: &[u8], qid: u8) {
        let now = self.now;
        let frame = self.bufs.frame(bytes);
        let h = &mut self.hosts[host];
        let len = frame.len as u32;
        let q = Queued {
            buf: frame,
            len,
            meta: StdMeta {
                qid,
                ..StdMeta::new(0, len as usize, now)
            },
        };
        if let Err((q, _)) = h.tm.enqueue(0, q, now) {
            self.bufs.free(q.buf.buf);
        }
        self.host_turn(host);
    }

    pub(super) fn host_turn(&mut self, host: usize) {
        let now = self.now;
        loop {
            let h = &mut self.hosts[host];
            match h.tm.dequeue(&mut h.tx, now) {
                Dequeued::Packet(q) => {
                    // It leaves the host's TM for the link (the TM counts what a port holds).
                    h.tm.release(0, 1);
                    let frame = &q.buf.buf[q.buf.start..q.buf.start + q.buf.len];
                    if let Some((k, end)) = self.tcp_owner(host, frame) {
                        self.tcp_departed(k, end, frame.len() as u64);
                    }
                    let h = &mut self.hosts[host];
                    for k in std::mem::take(&mut h.blocked) {
                        self.schedule(now, Event::Send { flow: k });
                    }
                    let on_wire = self.wire_ns(self.hosts[host].rate_bps, q.buf.len);
                    let h = &mut self.hosts[host];
                    let (sw, port) = h.uplink;
                    let at = now.saturating_add(h.delay_ns + self.opts.hop_latency_ns + on_wire);
                    self.schedule(
                        at,
                        Event::ToSwitch {
                            sw,
                            port,
                            frame: q.buf,
                        },
                    );
                }
                Dequeued::Wait { at } => {
                    if h.turn_at.is_none_or(|t| at < t) {
                        h.turn_at = Some(at);
                        self.schedule(at, Event::HostTurn { host });
                    }
                    break;
                }
                Dequeued::Empty => break,
            }
        }
    }
}
