//! DBB compiler: deterministic bandwidth-based packet-level traffic splitting (issue 13; Wu, Yen,
//! Hsieh and Tseng, "Deterministic Bandwidth-Based Packet-Level Traffic Splitting for Datacenter
//! Networks").
//!
//! Offline and sans-IO. [`compile`] turns one source-sink switch pair and its directed links into
//! the packet dispatching cycle (PDC) of the paper: `N` packets, the path of each, and for every
//! switch the ordered list of next hops that its circular counter walks through. The steps follow
//! the paper [P §III-A…E] with our corrections; docs/dbb.md records each choice, and its "Open
//! questions" the A-DBB ids cited here.
//!
//! 1. **Stage DAG** (A-DBB-1, [I]). A switch's stage is its hop distance from the source plus 1.
//!    Only links on a shortest source-to-sink path (stage `s` to `s + 1`, leading on to the sink)
//!    are used; every other link (back edges of a bidirectional fabric, links within a stage,
//!    dead ends, links from switches the source cannot reach) is ignored and reported.
//! 2. **Model check** [P §II]: every switch of a stage has the same number of egress links on the
//!    stage DAG, else [`CompileError::UnevenOutDegree`].
//! 3. **Exploitable bandwidth** `b_ij` [P §III-A]: a maximum flow over the stage DAG with exact
//!    rationals (Edmonds–Karp, deterministic in input order). Links without flow are reported.
//! 4. **SIR** [P §III-B]: `r_ij = b_ij / Σ_{L(s)} b`, `ρ_ij = r_ij · c_s` with `c_s` the least
//!    integer making every ratio of the stage whole, `ρ^s = Σ_{L(s)} ρ`.
//! 5. **PDC** [P §III-C, Eqs. 1–2]: `N = lcm(ρ^1 … ρ^{l-1})`, `N_ij = ρ_ij · N / ρ^s`.
//! 6. **Quotas** [P §III-D, Eq. 3]: `Q(k) = Σ_{(i,k)} N_ik`, `R(k) = Q(k)`.
//! 7. **Paths** (corrected Algorithm 1, A-DBB-2): for each packet, walk from the source; at each
//!    switch take, among the neighbours reached by egress links with packets left in this cycle,
//!    the one with the highest `R/Q`, ties to the neighbour listed first in the input. Among
//!    parallel links to it ([X]), take the one with the largest share of its `N_ij` left, ties to
//!    the link listed first.
//! 8. **Lists** (A-DBB-3, [I]): `list_k` = the next hops, in sequence order, of the paths through
//!    `k`: `N` entries at the source, `Q(k)` elsewhere.
//!
//! Why step 7 never gets stuck: the max-flow conserves flow at every switch and `N_ij = b_ij ·
//! N / z` with one factor for all links, so the packets into a switch equal the packets out of it.
//! A path arrives at `k` at most `Q(k)` times (its in-links run out), and each arrival uses one
//! unit of out-link quota, so on the `t`-th arrival `Q(k) − t + 1 > 0` units remain. Hence every
//! link carries exactly `N_ij` packets per cycle.

mod maxflow;
pub mod ratio;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

pub use ratio::{ParseRatioError, Ratio};

use maxflow::FlowNetwork;
use ratio::lcm;

/// Largest packet dispatching cycle `N` the compiler accepts ([X]): the source's list has `N`
/// entries, one dispatch-table entry each.
pub const MAX_CYCLE: u64 = 1 << 20;

/// A directed link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Name of the link; required for parallel links, and then used in the lists.
    pub id: Option<String>,
    /// Switch the link leaves.
    pub from: String,
    /// Switch the link enters.
    pub to: String,
    /// Capacity, positive.
    pub bandwidth: Ratio,
}

impl Link {
    /// What a dispatch list names for this link: its id if it has one, else the neighbour.
    pub fn hop_label(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.to)
    }
}

/// One source-sink pair and the links of the network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// Source switch.
    pub source: String,
    /// Sink switch.
    pub sink: String,
    /// Links; their order breaks ties.
    pub links: Vec<Link>,
}

/// A link of the solution and what it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkPackets {
    /// Index into [`Input::links`].
    pub link: usize,
    /// Stage of the switch the link leaves (1 = the source).
    pub stage: usize,
    /// Exploitable bandwidth `b_ij` (the link's flow in the max-flow solution).
    pub exploitable: Ratio,
    /// Simple integer ratio `ρ_ij`.
    pub sir: u64,
    /// Packets per cycle `N_ij`.
    pub packets: u64,
}

/// Next hops of one switch, in the order its counter visits them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchList {
    /// Switch name.
    pub switch: String,
    /// Its stage (1 = the source).
    pub stage: usize,
    /// Neighbour names (or link ids for links that have one).
    pub next_hops: Vec<String>,
}

/// Why a link is not part of the solution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgnoreReason {
    /// The source cannot reach the switch the link leaves.
    Unreachable,
    /// The link goes back to an earlier stage or stays within one.
    NotForward {
        /// Stage of the switch the link leaves.
        from_stage: usize,
        /// Stage of the switch it enters.
        to_stage: usize,
    },
    /// The link goes one stage forward but lies on no shortest path to the sink.
    OffSinkPaths {
        /// Stage of the switch the link leaves.
        from_stage: usize,
    },
    /// The link is on the stage DAG but the max-flow solution sends nothing over it.
    NoFlow,
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            IgnoreReason::Unreachable => write!(f, "the source cannot reach it"),
            IgnoreReason::NotForward {
                from_stage,
                to_stage,
            } if to_stage < from_stage => {
                write!(f, "goes back from stage {from_stage} to stage {to_stage}")
            }
            IgnoreReason::NotForward { from_stage, .. } => {
                write!(f, "stays within stage {from_stage}")
            }
            IgnoreReason::OffSinkPaths { from_stage } => write!(
                f,
                "leaves stage {from_stage} but lies on no shortest path to the sink"
            ),
            IgnoreReason::NoFlow => write!(f, "the max-flow solution sends nothing over it"),
        }
    }
}

/// A link left out of the solution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// Index into [`Input::links`].
    pub link: usize,
    /// Why.
    pub reason: IgnoreReason,
}

/// The compiled packet dispatching cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Value `z` of the maximum flow.
    pub max_flow: Ratio,
    /// Switches of the solution by stage: `stages[0]` is the source, the last one the sink.
    pub stages: Vec<Vec<String>>,
    /// Stage PDC lengths `ρ^s`, for stages 1 to `l - 1`.
    pub stage_pdc: Vec<u64>,
    /// Packets per cycle, `N`.
    pub n: u64,
    /// Links of the solution, in input order.
    pub link_packets: Vec<LinkPackets>,
    /// Switches of the path of each packet of the cycle, in sequence order.
    pub paths: Vec<Vec<String>>,
    /// The same paths as indices into [`Input::links`].
    pub path_links: Vec<Vec<usize>>,
    /// One list per switch of the solution except the sink, by stage, then input order.
    pub lists: Vec<SwitchList>,
    /// Links left out, in input order.
    pub ignored: Vec<Ignored>,
}

/// Why an input cannot be compiled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// Source and sink are one switch.
    #[error(
        "source and sink are the same switch {0:?}: the model needs the sink at least one stage after the source"
    )]
    SourceIsSink(String),
    /// A bandwidth is zero or negative.
    #[error(
        "links[{link}] ({from} -> {to}) has bandwidth {bandwidth}; bandwidths must be positive"
    )]
    NonPositiveBandwidth {
        /// Index into [`Input::links`].
        link: usize,
        /// Its `from`.
        from: String,
        /// Its `to`.
        to: String,
        /// The offending value.
        bandwidth: Ratio,
    },
    /// Parallel links without ids cannot be told apart in a list.
    #[error(
        "there are parallel links {from} -> {to}: give each an \"id\" so that the lists can name it"
    )]
    ParallelLinksWithoutId {
        /// Shared `from`.
        from: String,
        /// Shared `to`.
        to: String,
    },
    /// A link id is used twice or is also a switch name.
    #[error("link id {0:?} is ambiguous: another link or a switch has the same name")]
    AmbiguousLinkId(String),
    /// No directed path from the source to the sink.
    #[error("sink {sink:?} cannot be reached from source {source_switch:?}")]
    SinkUnreachable {
        /// The source.
        source_switch: String,
        /// The sink.
        sink: String,
    },
    /// The stage DAG breaks the paper's identical-out-degree assumption.
    #[error(
        "topology outside the paper's model, which assumes that every switch of a stage has the same out-degree (§II): in stage {stage}, {first} has {first_degree} egress links on the stage DAG but {other} has {other_degree}"
    )]
    UnevenOutDegree {
        /// Stage (1 = the source).
        stage: usize,
        /// First switch of the stage, in input order.
        first: String,
        /// Its out-degree.
        first_degree: usize,
        /// A switch of the same stage with another out-degree.
        other: String,
        /// Its out-degree.
        other_degree: usize,
    },
    /// `N` exceeds [`MAX_CYCLE`].
    #[error(
        "the packet dispatching cycle would be N = {n} packets, above the limit of {max}: round the bandwidths to fewer significant digits"
    )]
    CycleTooLong {
        /// The cycle length.
        n: u128,
        /// [`MAX_CYCLE`].
        max: u64,
    },
    /// Exact arithmetic needs more than 128 bits.
    #[error(
        "exact rational arithmetic overflowed 128 bits: round the bandwidths to fewer significant digits"
    )]
    Overflow,
}

/// Compiles the packet dispatching cycle of `input` by the paper's steps alone (see the module
/// documentation): its max-flow may leave links of the stage DAG idle. The switches, `pisa-dbb`
/// and the experiments use [`compile`], which balances such a flow.
pub fn compile_unbalanced(input: &Input) -> Result<Output, CompileError> {
    validate(input)?;
    let names = switch_names(input);
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let unreachable = || CompileError::SinkUnreachable {
        source_switch: input.source.clone(),
        sink: input.sink.clone(),
    };
    let (Some(&src), Some(&dst)) = (
        index.get(input.source.as_str()),
        index.get(input.sink.as_str()),
    ) else {
        return Err(unreachable());
    };
    let ends: Vec<(usize, usize)> = input
        .links
        .iter()
        .map(|l| (index[l.from.as_str()], index[l.to.as_str()]))
        .collect();

    // Step 1: the stage DAG. dist[k] = stage of k minus 1.
    let dist = hops(names.len(), src, ends.iter().copied());
    let to_sink = hops(names.len(), dst, ends.iter().map(|&(u, v)| (v, u)));
    let depth = dist[dst].ok_or_else(unreachable)?;
    let mut ignored = Vec::new();
    let mut dag = Vec::new();
    for (i, &(u, v)) in ends.iter().enumerate() {
        let Some(du) = dist[u] else {
            ignored.push(Ignored {
                link: i,
                reason: IgnoreReason::Unreachable,
            });
            continue;
        };
        if to_sink[v].is_some_and(|tv| du + 1 + tv == depth) {
            dag.push(i);
            continue;
        }
        let dv = dist[v].unwrap_or(du + 1); // v is reachable through this very link.
        let reason = if dv <= du {
            IgnoreReason::NotForward {
                from_stage: du + 1,
                to_stage: dv + 1,
            }
        } else {
            IgnoreReason::OffSinkPaths { from_stage: du + 1 }
        };
        ignored.push(Ignored { link: i, reason });
    }

    // Step 2: identical out-degree within a stage [P §II]. Every switch on the DAG except the
    // sink has at least one egress link on it.
    let mut degree = vec![0usize; names.len()];
    for &i in &dag {
        degree[ends[i].0] += 1;
    }
    let mut stage_first: BTreeMap<usize, usize> = BTreeMap::new();
    for k in (0..names.len()).filter(|&k| degree[k] > 0) {
        let stage = dist[k].unwrap_or(0);
        let first = *stage_first.entry(stage).or_insert(k);
        if degree[first] != degree[k] {
            return Err(CompileError::UnevenOutDegree {
                stage: stage + 1,
                first: names[first].to_owned(),
                first_degree: degree[first],
                other: names[k].to_owned(),
                other_degree: degree[k],
            });
        }
    }

    // Step 3: exploitable bandwidth.
    let mut net = FlowNetwork::new(names.len());
    let edges: Vec<usize> = dag
        .iter()
        .map(|&i| net.add_edge(ends[i].0, ends[i].1, input.links[i].bandwidth))
        .collect();
    let max_flow = net.max_flow(src, dst).map_err(|_| CompileError::Overflow)?;
    // (link index, b_ij) of the links that carry flow, in input order.
    let mut used: Vec<(usize, Ratio)> = Vec::new();
    for (&i, &e) in dag.iter().zip(&edges) {
        let b = net.flow(e);
        if b.is_positive() {
            used.push((i, b));
        } else {
            ignored.push(Ignored {
                link: i,
                reason: IgnoreReason::NoFlow,
            });
        }
    }
    ignored.sort_by_key(|g| g.link);

    // Step 4: SIR per stage. Every stage's links form a cut that the whole flow crosses once.
    let stage_of = |i: usize| dist[ends[i].0].unwrap_or(0);
    let mut sir = vec![0u128; used.len()];
    let mut stage_pdc = vec![0u128; depth];
    for (s, pdc) in stage_pdc.iter_mut().enumerate() {
        let members: Vec<usize> = (0..used.len())
            .filter(|&j| stage_of(used[j].0) == s)
            .collect();
        let total = members
            .iter()
            .try_fold(Ratio::ZERO, |acc, &j| acc.checked_add(used[j].1))
            .ok_or(CompileError::Overflow)?;
        let ratios = members
            .iter()
            .map(|&j| used[j].1.checked_div(total))
            .collect::<Option<Vec<Ratio>>>()
            .ok_or(CompileError::Overflow)?;
        let scale = ratios
            .iter()
            .try_fold(1u128, |acc, r| lcm(acc, r.denom() as u128))
            .ok_or(CompileError::Overflow)?;
        for (&j, r) in members.iter().zip(&ratios) {
            // r = num/den in lowest terms and den divides scale, so this is exact.
            sir[j] = (r.numer() as u128)
                .checked_mul(scale / r.denom() as u128)
                .ok_or(CompileError::Overflow)?;
            *pdc = pdc.checked_add(sir[j]).ok_or(CompileError::Overflow)?;
        }
    }

    // Step 5: network PDC (Eq. 1) and packets per link (Eq. 2).
    let n = stage_pdc
        .iter()
        .try_fold(1u128, |acc, &p| lcm(acc, p))
        .ok_or(CompileError::Overflow)?;
    if n > u128::from(MAX_CYCLE) {
        return Err(CompileError::CycleTooLong { n, max: MAX_CYCLE });
    }
    // From here every count is at most N <= MAX_CYCLE, so u64 products cannot overflow.
    let n = n as u64;
    let packets: Vec<u64> = (0..used.len())
        .map(|j| (sir[j] * (u128::from(n) / stage_pdc[stage_of(used[j].0)])) as u64)
        .collect();

    // Step 6: quotas (Eq. 3).
    let mut quota = vec![0u64; names.len()];
    let mut out_links: Vec<Vec<usize>> = vec![Vec::new(); names.len()];
    for (j, &(i, _)) in used.iter().enumerate() {
        quota[ends[i].1] += packets[j];
        out_links[ends[i].0].push(j);
    }
    quota[src] = n;

    // Step 7: corrected Algorithm 1.
    let mut left_on_link = packets.clone();
    let mut left_at = quota.clone();
    let mut path_links = Vec::with_capacity(n as usize);
    for _seq in 0..n {
        let mut cur = src;
        let mut path = Vec::with_capacity(depth);
        for _stage in 0..depth {
            // The next switch: highest R(k)/Q(k), ties to the neighbour listed first.
            let mut best: Option<(usize, usize)> = None; // (neighbour, position of its first link)
            for (pos, &j) in out_links[cur].iter().enumerate() {
                let k = ends[used[j].0].1;
                if left_on_link[j] == 0 || best.is_some_and(|(b, _)| b == k) {
                    continue;
                }
                let first = out_links[cur]
                    .iter()
                    .position(|&x| ends[used[x].0].1 == k)
                    .unwrap_or(pos);
                let better = best.is_none_or(|(b, b_first)| {
                    let (lhs, rhs) = (left_at[k] * quota[b], left_at[b] * quota[k]);
                    lhs > rhs || (lhs == rhs && first < b_first)
                });
                if better {
                    best = Some((k, first));
                }
            }
            let (k, _) =
                best.expect("flow conservation leaves an egress link with quota (module doc)");
            // The link to it ([X], parallel links only): the one with the largest share of its
            // packets left, ties to the link listed first.
            let mut link: Option<usize> = None;
            for &j in &out_links[cur] {
                if ends[used[j].0].1 != k || left_on_link[j] == 0 {
                    continue;
                }
                if link.is_none_or(|b| left_on_link[j] * packets[b] > left_on_link[b] * packets[j])
                {
                    link = Some(j);
                }
            }
            let j = link.expect("the chosen neighbour has a link with quota");
            left_on_link[j] -= 1;
            left_at[k] -= 1;
            path.push(used[j].0);
            cur = k;
        }
        path_links.push(path);
    }

    // Step 8: per-switch lists, in sequence order.
    let mut hops_of: Vec<Vec<String>> = vec![Vec::new(); names.len()];
    for path in &path_links {
        for &i in path {
            hops_of[ends[i].0].push(input.links[i].hop_label().to_owned());
        }
    }
    let mut in_solution = vec![false; names.len()];
    for &(i, _) in &used {
        in_solution[ends[i].0] = true;
        in_solution[ends[i].1] = true;
    }
    let mut stages: Vec<Vec<String>> = vec![Vec::new(); depth + 1];
    let mut lists = Vec::new();
    for (s, stage) in stages.iter_mut().enumerate() {
        for k in (0..names.len()).filter(|&k| in_solution[k] && dist[k] == Some(s)) {
            stage.push(names[k].to_owned());
            if k != dst {
                lists.push(SwitchList {
                    switch: names[k].to_owned(),
                    stage: s + 1,
                    next_hops: std::mem::take(&mut hops_of[k]),
                });
            }
        }
    }

    let paths = path_links
        .iter()
        .map(|p| {
            std::iter::once(input.source.clone())
                .chain(p.iter().map(|&i| input.links[i].to.clone()))
                .collect()
        })
        .collect();
    let link_packets = used
        .iter()
        .zip(&sir)
        .zip(&packets)
        .map(|((&(i, b), &rho), &p)| LinkPackets {
            link: i,
            stage: stage_of(i) + 1,
            exploitable: b,
            sir: rho as u64,
            packets: p,
        })
        .collect();
    Ok(Output {
        max_flow,
        stages,
        stage_pdc: stage_pdc.iter().map(|&p| p as u64).collect(),
        n,
        link_packets,
        paths,
        path_links,
        lists,
        ignored,
    })
}

/// Input checks that need no graph search.
fn validate(input: &Input) -> Result<(), CompileError> {
    if input.source == input.sink {
        return Err(CompileError::SourceIsSink(input.source.clone()));
    }
    for (i, l) in input.links.iter().enumerate() {
        if !l.bandwidth.is_positive() {
            return Err(CompileError::NonPositiveBandwidth {
                link: i,
                from: l.from.clone(),
                to: l.to.clone(),
                bandwidth: l.bandwidth,
            });
        }
    }
    let switches: BTreeSet<&str> = switch_names(input).into_iter().collect();
    let mut ids = BTreeSet::new();
    for id in input.links.iter().filter_map(|l| l.id.as_deref()) {
        if switches.contains(id) || !ids.insert(id) {
            return Err(CompileError::AmbiguousLinkId(id.to_owned()));
        }
    }
    let mut parallel: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for l in &input.links {
        *parallel.entry((&l.from, &l.to)).or_default() += 1;
    }
    for l in input.links.iter().filter(|l| l.id.is_none()) {
        if parallel[&(l.from.as_str(), l.to.as_str())] > 1 {
            return Err(CompileError::ParallelLinksWithoutId {
                from: l.from.clone(),
                to: l.to.clone(),
            });
        }
    }
    Ok(())
}

/// Switch names in order of first appearance: source, sink, then the links' ends.
fn switch_names(input: &Input) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    let all = [input.source.as_str(), input.sink.as_str()]
        .into_iter()
        .chain(
            input
                .links
                .iter()
                .flat_map(|l| [l.from.as_str(), l.to.as_str()]),
        );
    all.filter(|n| seen.insert(*n)).collect()
}

/// Hop distances from `start` over the directed `edges` (breadth-first, `None` = unreachable).
fn hops(
    nodes: usize,
    start: usize,
    edges: impl Iterator<Item = (usize, usize)>,
) -> Vec<Option<usize>> {
    let mut adj = vec![Vec::new(); nodes];
    for (u, v) in edges {
        adj[u].push(v);
    }
    let mut dist = vec![None; nodes];
    dist[start] = Some(0);
    let mut queue = VecDeque::from([start]);
    while let Some(u) = queue.pop_front() {
        let next = dist[u].map(|d| d + 1);
        for &v in &adj[u] {
            if dist[v].is_none() {
                dist[v] = next;
                queue.push_back(v);
            }
        }
    }
    dist
}

/// The pair's cycle as [`compile_unbalanced`] gives it, or, where its max-flow leaves links of the stage
/// DAG idle, the cycle of a balanced max-flow ([X]; docs/dbb.md). Max-flows are not unique: with
/// equal rates a k-ary fat-tree's Edmonds–Karp flow fills one core per aggregation switch and
/// leaves the others idle. The balanced flow splits the max-flow value at the source, and each
/// switch's inflow, over its DAG links in proportion to their rates, stage by stage; if that fits
/// every link it is a max-flow too, and compiling again with it as the capacities makes it the
/// only one (every stage's links are then a saturated cut). If it does not fit, the compiler's
/// own flow stays. The one entry point: the switches' plan, `pisa-dbb` and the experiments
/// all call it, so the tool prints the cycle the switches run.
pub fn compile(input: &Input) -> Result<Output, CompileError> {
    let out = compile_unbalanced(input)?;
    let Some(links) = balanced_capacities(input, &out) else {
        return Ok(out);
    };
    let again = Input {
        source: input.source.clone(),
        sink: input.sink.clone(),
        links,
    };
    Ok(compile_unbalanced(&again).unwrap_or(out))
}

/// The links of `input` with the balanced flow as the capacities of the stage DAG's links, if
/// `out` left some of them idle and the balanced flow fits.
fn balanced_capacities(input: &Input, out: &Output) -> Option<Vec<Link>> {
    let idle = out
        .ignored
        .iter()
        .filter(|g| g.reason == IgnoreReason::NoFlow)
        .map(|g| g.link);
    let dag: Vec<usize> = out
        .link_packets
        .iter()
        .map(|l| l.link)
        .chain(idle)
        .collect();
    if dag.len() == out.link_packets.len() {
        return None;
    }
    let mut outs: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &l in &dag {
        outs.entry(input.links[l].from.as_str())
            .or_default()
            .push(l);
    }
    // The DAG's links go from one stage to the next, so switches in breadth-first order from
    // the source have all their inflow when their turn comes.
    let mut order = vec![input.source.as_str()];
    let mut i = 0;
    while let Some(&k) = order.get(i) {
        for &l in outs.get(k).map(Vec::as_slice).unwrap_or_default() {
            let to = input.links[l].to.as_str();
            if !order.contains(&to) {
                order.push(to);
            }
        }
        i += 1;
    }
    let mut inflow: BTreeMap<&str, Ratio> = BTreeMap::from([(input.source.as_str(), out.max_flow)]);
    let mut links = input.links.clone();
    for k in order {
        let Some(ls) = outs.get(k) else {
            continue; // the sink
        };
        let f = inflow.get(k).copied().unwrap_or(Ratio::ZERO);
        let total = ls
            .iter()
            .try_fold(Ratio::ZERO, |a, &l| a.checked_add(input.links[l].bandwidth))?;
        for &l in ls {
            let cap = input.links[l].bandwidth;
            let x = f.checked_mul(cap)?.checked_div(total)?;
            if x > cap || !x.is_positive() {
                return None;
            }
            links[l].bandwidth = x;
            let to = inflow
                .entry(input.links[l].to.as_str())
                .or_insert(Ratio::ZERO);
            *to = to.checked_add(x)?;
        }
    }
    Some(links)
}
