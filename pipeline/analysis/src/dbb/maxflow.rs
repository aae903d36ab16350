//! Maximum flow over exact rational capacities (Edmonds–Karp).
//!
//! Edmonds–Karp augments along a shortest residual path each time, so it terminates after
//! O(V·E) augmentations whatever the capacities are, irrational or not; with rationals every
//! intermediate value stays a sum of capacities, so the arithmetic stays exact. The search visits
//! edges in the order they were added, which makes the result a deterministic function of the
//! input order (A-DBB-1: a max-flow is not unique; this picks one).

use std::collections::VecDeque;

use super::ratio::Ratio;

/// A flow network with edges kept in pairs: edge `2e` is the `e`-th edge added, `2e + 1` its
/// residual reverse (capacity 0).
#[derive(Debug)]
pub(super) struct FlowNetwork {
    to: Vec<usize>,
    cap: Vec<Ratio>,
    flow: Vec<Ratio>,
    adj: Vec<Vec<usize>>,
}

/// Exact arithmetic ran out of 128 bits.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Overflow;

impl FlowNetwork {
    /// A network of `nodes` nodes and no edges.
    pub(super) fn new(nodes: usize) -> Self {
        FlowNetwork {
            to: Vec::new(),
            cap: Vec::new(),
            flow: Vec::new(),
            adj: vec![Vec::new(); nodes],
        }
    }

    /// Adds edge `from -> to` with capacity `cap` (positive) and returns its index.
    pub(super) fn add_edge(&mut self, from: usize, to: usize, cap: Ratio) -> usize {
        let e = self.to.len();
        self.to.extend([to, from]);
        self.cap.extend([cap, Ratio::ZERO]);
        self.flow.extend([Ratio::ZERO, Ratio::ZERO]);
        self.adj[from].push(e);
        self.adj[to].push(e + 1);
        e / 2
    }

    /// The flow on edge `edge` (an index returned by `add_edge`).
    pub(super) fn flow(&self, edge: usize) -> Ratio {
        self.flow[2 * edge]
    }

    fn residual(&self, e: usize) -> Result<Ratio, Overflow> {
        self.cap[e].checked_sub(self.flow[e]).ok_or(Overflow)
    }

    /// Pushes a maximum flow from `source` to `sink` and returns its value.
    pub(super) fn max_flow(&mut self, source: usize, sink: usize) -> Result<Ratio, Overflow> {
        let mut total = Ratio::ZERO;
        loop {
            // Breadth-first search for a shortest augmenting path; parent[v] = edge into v.
            let mut parent: Vec<Option<usize>> = vec![None; self.adj.len()];
            let mut seen = vec![false; self.adj.len()];
            seen[source] = true;
            let mut queue = VecDeque::from([source]);
            while let Some(u) = queue.pop_front() {
                if u == sink {
                    break;
                }
                for &e in &self.adj[u] {
                    let v = self.to[e];
                    if !seen[v] && self.residual(e)?.is_positive() {
                        seen[v] = true;
                        parent[v] = Some(e);
                        queue.push_back(v);
                    }
                }
            }
            if !seen[sink] {
                return Ok(total);
            }
            let mut path = Vec::new();
            let mut v = sink;
            while let Some(e) = parent[v] {
                path.push(e);
                v = self.to[e ^ 1];
            }
            let mut bottleneck = self.residual(path[0])?;
            for &e in &path[1..] {
                bottleneck = bottleneck.min(self.residual(e)?);
            }
            for &e in &path {
                self.flow[e] = self.flow[e].checked_add(bottleneck).ok_or(Overflow)?;
                self.flow[e ^ 1] = self.flow[e ^ 1].checked_sub(bottleneck).ok_or(Overflow)?;
            }
            total = total.checked_add(bottleneck).ok_or(Overflow)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(n: i128) -> Ratio {
        Ratio::from_integer(n)
    }

    #[test]
    fn cancels_flow_through_the_reverse_residual_edge() {
        // s=0, a=1, b=2, c=3, d=4, t=5. The first shortest path is s-a-c-t; the second unit only
        // gets through as s-b-c-a-d-t, which cancels the flow on a->c.
        let mut g = FlowNetwork::new(6);
        let sa = g.add_edge(0, 1, int(1));
        let sb = g.add_edge(0, 2, int(1));
        let ac = g.add_edge(1, 3, int(1));
        let ad = g.add_edge(1, 4, int(1));
        let bc = g.add_edge(2, 3, int(1));
        let ct = g.add_edge(3, 5, int(1));
        let dt = g.add_edge(4, 5, int(1));
        assert_eq!(g.max_flow(0, 5), Ok(int(2)));
        for e in [sa, sb, ad, bc, ct, dt] {
            assert_eq!(g.flow(e), int(1), "edge {e}");
        }
        assert_eq!(g.flow(ac), int(0));
    }

    #[test]
    fn rational_capacities_stay_exact() {
        // 1/3 + 1/7 through a 1-capacity link, plus 5/2 direct: 125/42 in all.
        let mut g = FlowNetwork::new(3);
        g.add_edge(0, 1, Ratio::new(1, 3).unwrap());
        g.add_edge(0, 1, Ratio::new(1, 7).unwrap());
        g.add_edge(1, 2, int(1));
        g.add_edge(0, 2, Ratio::new(5, 2).unwrap());
        assert_eq!(g.max_flow(0, 2), Ok(Ratio::new(125, 42).unwrap()));
    }

    #[test]
    fn unreachable_sink_gets_zero() {
        let mut g = FlowNetwork::new(3);
        g.add_edge(0, 1, int(4));
        assert_eq!(g.max_flow(0, 2), Ok(Ratio::ZERO));
    }
}
