//! What a receiver measures of one stamped flow: packets received, reordering and one-way
//! latency. `pisa-sim`'s hosts and the real `pisa-host sink` keep the same record and report it
//! with the same JSON fields, so the two can be read side by side.

use ::hosts::json::Json;

/// A receiver's record of one flow.
#[derive(Clone, Debug, Default)]
pub struct RxStats {
    /// Data packets received (duplicates included).
    pub received: u64,
    /// Packets that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// The highest sequence number seen.
    pub max_seq: Option<u64>,
    /// The end of the measurement window, on the clock of [`RxStats::on_packet_at`]'s `at_ns`
    /// (None: no window).
    pub window_end_ns: Option<u64>,
    /// Data packets received up to the window's end: what a rate over a fixed window counts,
    /// however long the run drains after it.
    pub received_in_window: u64,
    /// One-way latency of every packet, ns.
    latencies: Vec<u64>,
}

impl RxStats {
    /// A record whose window ends at `end_ns` (None: no window).
    pub fn with_window(end_ns: Option<u64>) -> RxStats {
        RxStats {
            window_end_ns: end_ns,
            ..RxStats::default()
        }
    }

    /// Packet `seq` arrived `latency_ns` after it was sent.
    pub fn on_packet(&mut self, seq: u64, latency_ns: u64) {
        self.received += 1;
        self.latencies.push(latency_ns);
        match self.max_seq {
            Some(m) if seq < m => self.reordered += 1,
            _ => self.max_seq = Some(seq),
        }
    }

    /// Packet `seq` arrived at `at_ns`, `latency_ns` after it was sent; counted in the window
    /// if it arrived by its end.
    pub fn on_packet_at(&mut self, seq: u64, latency_ns: u64, at_ns: u64) {
        self.on_packet(seq, latency_ns);
        if self.window_end_ns.is_some_and(|end| at_ns <= end) {
            self.received_in_window += 1;
        }
    }

    /// Packets the sender must have sent at least: one more than the highest sequence number.
    pub fn seen_span(&self) -> u64 {
        self.max_seq.map_or(0, |m| m + 1)
    }

    /// The latency quantile `q` (0 < q <= 1; nearest rank), µs; 0 with no packets.
    pub fn latency_us(&self, q: f64) -> f64 {
        self.latencies_us(&[q])[0]
    }

    /// Several latency quantiles at once (one sort), µs.
    pub fn latencies_us<const N: usize>(&self, qs: &[f64; N]) -> [f64; N] {
        let mut l = self.latencies.clone();
        l.sort_unstable();
        qs.map(|q| {
            if l.is_empty() {
                return 0.0;
            }
            let i = ((l.len() as f64 * q).ceil() as usize).clamp(1, l.len()) - 1;
            l[i] as f64 / 1000.0
        })
    }

    /// `received`, `lost` (of `sent`), `reordered`, `latency_us {p50, p99, max}` and, with a
    /// window, `received_in_window`, added to `obj`.
    pub fn report(&self, obj: Json, sent: u64) -> Json {
        let [p50, p99, max] = self.latencies_us(&[0.5, 0.99, 1.0]);
        let obj = match self.window_end_ns {
            Some(_) => obj.with("received_in_window", self.received_in_window),
            None => obj,
        };
        obj.with("sent", sent)
            .with("received", self.received)
            .with("lost", sent.saturating_sub(self.received))
            .with("reordered", self.reordered)
            .with(
                "latency_us",
                Json::object()
                    .with("p50", p50)
                    .with("p99", p99)
                    .with("max", max),
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reordering_loss_and_quantiles() {
        let mut r = RxStats::default();
        for (seq, lat) in [(0, 10_000), (2, 30_000), (1, 20_000), (4, 40_000)] {
            r.on_packet(seq, lat);
        }
        assert_eq!(r.received, 4);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.seen_span(), 5);
        assert_eq!(r.latency_us(0.5), 20.0);
        assert_eq!(r.latency_us(1.0), 40.0);
        let j = r.report(Json::object(), r.seen_span());
        assert_eq!(j.get("lost").and_then(Json::as_u64), Some(1));
        assert_eq!(RxStats::default().latency_us(0.99), 0.0);
        // A window ending at 100 ns: what arrives later counts as received, not in the window.
        let mut w = RxStats {
            window_end_ns: Some(100),
            ..RxStats::default()
        };
        w.on_packet_at(0, 5, 50);
        w.on_packet_at(1, 5, 100);
        w.on_packet_at(2, 5, 101);
        assert_eq!((w.received, w.received_in_window), (3, 2));
        let j = w.report(Json::object(), 3);
        assert_eq!(j.get("received_in_window").and_then(Json::as_u64), Some(2));
        assert!(
            r.report(Json::object(), 5)
                .get("received_in_window")
                .is_none()
        );
    }
}
