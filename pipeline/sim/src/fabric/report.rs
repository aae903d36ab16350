//! The report of a run: per switch port, per switch, per host and per flow.

use super::*;

impl Sim {
    /// The report (see the module documentation of `pisa-sim` for its fields).
    pub fn report(&self) -> Json {
        let mut switches = Json::object();
        for s in &self.switches {
            let mut ports = Json::object();
            for tx in &s.ports {
                let p = tx.id();
                let st = s.stats[usize::from(p)];
                let drops: u64 = s.tm.stats(p).iter().map(|&(_, d, _)| d).sum();
                let paused = |tm: &TrafficManager<_>, port| -> u64 {
                    (0..pipeline::tm::QUEUES)
                        .map(|q| tm.paused_ns(port, q, self.now))
                        .sum::<u64>()
                        / 1000
                };
                // Queueing delay of what left the port: p50, p99 and max, µs.
                let qdelay = |tm: &TrafficManager<_>, port| -> Json {
                    let d = tm.queue_delay(port).unwrap_or_default();
                    let us = |ns: u64| ns as f64 / 1000.0;
                    Json::object()
                        .with("p50", us(d.quantile(0.5)))
                        .with("p99", us(d.quantile(0.99)))
                        .with("max", us(d.max))
                };
                ports = ports.with(
                    &p.to_string(),
                    Json::object()
                        .with("tx_packets", st.tx_packets)
                        .with("tx_bytes", st.tx_bytes)
                        .with("rx_packets", st.rx_packets)
                        .with("drops", drops)
                        .with("max_enq_qdepth", st.max_enq_qdepth)
                        .with("pfc_pauses_sent", st.pfc_sent)
                        .with("pfc_pauses_received", st.pfc_received)
                        .with("pfc_paused_us", paused(&s.tm, p))
                        .with("link_drops", st.link_drops)
                        .with("qdelay_us", qdelay(&s.tm, p)),
                );
            }
            let mut reasons = Json::object();
            for (name, c) in s.pipeline.control.drop_counts() {
                if c.packets > 0 {
                    reasons = reasons.with(name, c.packets);
                }
            }
            let mut sw = Json::object()
                .with("ports", ports)
                .with("drops_by_reason", reasons)
                .with("cpu_packets", s.cpu_packets)
                .with("generated", s.generated);
            // With --stalls only: how many stalls held something, and their total length.
            if let Some(c) = &s.stall {
                sw = sw.with(
                    "stalls",
                    Json::object()
                        .with("count", c.count)
                        .with("total_us", c.total_ns as f64 / 1000.0),
                );
            }
            switches = switches.with(&s.name, sw);
        }
        let mut hosts = Json::object();
        for h in &self.hosts {
            hosts = hosts.with(
                &h.name,
                Json::object()
                    .with("rx_packets", h.rx_packets)
                    .with("rx_ecn_ce", h.rx_ce)
                    .with("pfc_pauses_received", h.pfc_received)
                    .with(
                        "pfc_paused_us",
                        (0..pipeline::tm::QUEUES)
                            .map(|q| h.tm.paused_ns(0, q, self.now))
                            .sum::<u64>()
                            / 1000,
                    ),
            );
        }
        let flows: Vec<Json> = self
            .flows
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let who = Json::object()
                    .with("id", k as u64 + 1)
                    .with("src", self.hosts[f.src].name.as_str())
                    .with("dst", self.hosts[f.dst].name.as_str());
                // A TCP flow's segments carry no stamps, so the receiver's stamped-flow counts
                // (received, lost, reordering, latency) would say it lost everything: its
                // report is the connection's own.
                let mut flow = if f.tcp.is_some() {
                    who
                } else {
                    f.rx.report(who, f.sent)
                };
                if let Some(h) = &f.hpcc {
                    flow = flow.with("hpcc", h.report());
                }
                if let Some(t) = &f.tcp {
                    flow = flow.with("tcp", t.report());
                }
                if f.source.spec().np {
                    flow = flow.with("np_feedbacks_sent", f.np_sent);
                }
                if let Some((rp, trace)) = &f.rp {
                    let rows: Vec<Json> = trace
                        .iter()
                        .map(|&(t, rc, rt, st)| {
                            Json::from(vec![
                                Json::from(t / 1000),
                                Json::from(rc),
                                Json::from(rt),
                                Json::from(st.name()),
                            ])
                        })
                        .collect();
                    flow = flow.with("qcn_rp", rp.report().with("trace_t_us_rc_rt_state", rows));
                }
                flow
            })
            .collect();
        let report = Json::object()
            .with("now_us", self.now / 1000)
            .with("switches", switches)
            .with("hosts", hosts)
            .with("flows", flows);
        let report = if self.plan_warnings.is_empty() {
            report
        } else {
            let w: Vec<Json> = self
                .plan_warnings
                .iter()
                .map(|l| Json::from(l.as_str()))
                .collect();
            report.with("plan_warnings", w)
        };
        match &self.pint {
            Some(c) => report.with("pint", c.report()),
            None => report,
        }
    }
}
