//! What a receiver measures of one stamped flow: packets received, reordering (how many, and how
//! far: RFC 4737's reordering extent) and one-way latency. `pisa-sim`'s hosts and the real
//! `pisa-host sink` keep the same record and report it with the same JSON fields, so the two can
//! be read side by side.

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
    /// Each rise of the highest sequence number: (the new highest, its arrival index). Both
    /// columns increase, so the earliest arrival above a sequence number is a binary search.
    rises: Vec<(u64, u64)>,
    /// The reordering extent of every reordered packet ([`RxStats::on_packet`]).
    extents: Vec<u64>,
}

/// TCP's duplicate-ACK threshold. A reordered packet whose extent is at least this came after
/// as many later packets as a TCP receiver answers with the duplicate ACKs of a fast retransmit.
pub const DUPTHRESH: u64 = 3;

impl RxStats {
    /// A record whose window ends at `end_ns` (None: no window).
    pub fn with_window(end_ns: Option<u64>) -> RxStats {
        RxStats {
            window_end_ns: end_ns,
            ..RxStats::default()
        }
    }

    /// Packet `seq` arrived `latency_ns` after it was sent. A packet with a sequence number below
    /// the highest seen is reordered, and its *reordering extent* (RFC 4737, section 4.2.2) is
    /// how many arrivals ago the first packet with a higher sequence number came.
    pub fn on_packet(&mut self, seq: u64, latency_ns: u64) {
        let index = self.received;
        self.received += 1;
        self.latencies.push(latency_ns);
        match self.max_seq {
            Some(m) if seq < m => {
                self.reordered += 1;
                let first = self.rises.partition_point(|&(s, _)| s <= seq);
                if let Some(&(_, j)) = self.rises.get(first) {
                    self.extents.push(index - j);
                }
            }
            Some(m) if seq == m => {}
            _ => {
                self.max_seq = Some(seq);
                self.rises.push((seq, index));
            }
        }
    }

    /// Reordered packets whose extent is at least [`DUPTHRESH`].
    pub fn reordered_beyond_dupthresh(&self) -> u64 {
        self.extents.iter().filter(|&&e| e >= DUPTHRESH).count() as u64
    }

    /// Quantiles `qs` (nearest rank) of the reordered packets' extents, one sort; 0 with none.
    pub fn extents<const N: usize>(&self, qs: &[f64; N]) -> [u64; N] {
        nearest_ranks(&self.extents, qs)
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
        nearest_ranks(&self.latencies, qs).map(|ns| ns as f64 / 1000.0)
    }

    /// `received`, `lost` (of `sent`), `reordered`, `reorder_extent {p50, p99, max,
    /// beyond_dupthresh}`, `latency_us {p50, p99, max}` and, with a
    /// window, `received_in_window`, added to `obj`.
    pub fn report(&self, obj: Json, sent: u64) -> Json {
        let [p50, p99, max] = self.latencies_us(&[0.5, 0.99, 1.0]);
        let [e50, e99, emax] = self.extents(&[0.5, 0.99, 1.0]);
        let obj = match self.window_end_ns {
            Some(_) => obj.with("received_in_window", self.received_in_window),
            None => obj,
        };
        obj.with("sent", sent)
            .with("received", self.received)
            .with("lost", sent.saturating_sub(self.received))
            .with("reordered", self.reordered)
            .with(
                "reorder_extent",
                Json::object()
                    .with("p50", e50)
                    .with("p99", e99)
                    .with("max", emax)
                    .with("beyond_dupthresh", self.reordered_beyond_dupthresh()),
            )
            .with(
                "latency_us",
                Json::object()
                    .with("p50", p50)
                    .with("p99", p99)
                    .with("max", max),
            )
    }
}

/// The values at quantiles `qs` (0 < q <= 1, nearest rank) of `v`, sorting one copy; 0 for an
/// empty `v`.
fn nearest_ranks<const N: usize>(v: &[u64], qs: &[f64; N]) -> [u64; N] {
    let mut v = v.to_vec();
    v.sort_unstable();
    qs.map(|q| match v.len() {
        0 => 0,
        n => v[((n as f64 * q).ceil() as usize).clamp(1, n) - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4737's examples (section 4.2.2 and its figures), as arrival orders.
    #[test]
    fn reordering_extent_counts_arrivals_since_the_first_later_packet() {
        let extents = |order: &[u64]| {
            let mut r = RxStats::default();
            for &s in order {
                r.on_packet(s, 0);
            }
            (
                r.reordered,
                r.extents.clone(),
                r.reordered_beyond_dupthresh(),
            )
        };
        // In order: nothing.
        assert_eq!(extents(&[1, 2, 3, 4]), (0, vec![], 0));
        // 1 2 4 5 3: 3 arrives two after 4, the first packet above it.
        assert_eq!(extents(&[1, 2, 4, 5, 3]), (1, vec![2], 0));
        // 1 2 5 6 7 8 3 4: 3 arrives four after 5, and 4 five after it; both past DupThresh.
        assert_eq!(extents(&[1, 2, 5, 6, 7, 8, 3, 4]), (2, vec![4, 5], 2));
        // Two flows' worth of interleaving: 2 1 4 3 gives extent 1 each.
        assert_eq!(extents(&[2, 1, 4, 3]), (2, vec![1, 1], 0));
        // A duplicate of the highest is neither reordered nor a new rise.
        assert_eq!(extents(&[1, 3, 3, 2]), (1, vec![2], 0));
    }

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
        // 1 came one arrival after 2, the first packet above it.
        assert_eq!(r.extents(&[0.5, 1.0]), [1, 1]);
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
