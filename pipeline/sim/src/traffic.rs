//! Traffic patterns and flow schedules for the experiment toolkit (issue 11): who sends how much to
//! whom, and when. Pure and deterministic: the same inputs and seed give the same schedule, so
//! every scheme of an experiment sees exactly the same flows.
//!
//! Hosts are numbered `0..groups * per_group`, group-major: host `i` of group (leaf, ToR) `j` is
//! `j * per_group + i` ([`Layout`]).
//!
//! - **Poisson patterns** ([`poisson`]): each host is an independent Poisson source of rate
//!   λ = load · C / (8 · mean size) over an arrival window (HPCC's generator; C is the capacity
//!   named by the caller, by default the host link), with sizes drawn from a workload CDF. The
//!   pattern picks each flow's destination: [`Pattern::Stride`] (P4TE's: host i of leaf j sends to
//!   host (i+1) mod H of leaf (j+1) mod L), [`Pattern::Random`] (uniform over the other hosts),
//!   [`Pattern::Permutation`] (a seeded random derangement, fixed for the run),
//!   [`Pattern::AllToAll`] (each source cycles through every other host in turn).
//! - **Synchronised patterns**: [`incast`] (N senders to one receiver with given sizes and
//!   classes, all at one start time) and [`all_to_all`] (every host to every other, at once).
//! - **Classes** ([`Tagging`]): a flow of at most the workload's p90 is short (ToS/traffic class
//!   0x08 by default), a larger one is large (0x10); patterns that give sizes give classes too.

use std::str::FromStr;

use crate::workload::Cdf;
use pipeline::externs::Rng;

/// Hosts in equal groups (leaves, ToRs), numbered group-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Number of groups (leaves).
    pub groups: usize,
    /// Hosts per group.
    pub per_group: usize,
}

impl Layout {
    /// All hosts.
    pub fn hosts(&self) -> usize {
        self.groups * self.per_group
    }

    /// (host in group, group) of host `h`.
    pub fn position(&self, h: usize) -> (usize, usize) {
        (h % self.per_group, h / self.per_group)
    }

    /// P4TE's stride destination of host `h`: host (i+1) mod H of group (j+1) mod L.
    pub fn stride(&self, h: usize) -> usize {
        let (i, j) = self.position(h);
        ((j + 1) % self.groups) * self.per_group + (i + 1) % self.per_group
    }
}

/// A flow's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// At most the workload's p90 (or named short by the pattern).
    Short,
    /// Larger.
    Large,
}

impl Class {
    /// `short` or `large`.
    pub fn name(self) -> &'static str {
        match self {
            Class::Short => "short",
            Class::Large => "large",
        }
    }
}

impl FromStr for Class {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "short" => Ok(Class::Short),
            "large" => Ok(Class::Large),
            _ => Err(format!("class {s}: short or large")),
        }
    }
}

/// How flows are classed and tagged (IPv4 ToS / IPv6 traffic class byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tagging {
    /// Flows of at most this many bytes are short.
    pub threshold: u64,
    /// The tag of short flows (default 0x08).
    pub short_tos: u8,
    /// The tag of large flows (default 0x10).
    pub large_tos: u8,
}

impl Tagging {
    /// The default split of a workload: its p90, with tags 0x08 and 0x10.
    pub fn for_workload(cdf: &Cdf) -> Tagging {
        Tagging {
            threshold: cdf.quantile(0.9).round() as u64,
            short_tos: 0x08,
            large_tos: 0x10,
        }
    }

    /// The class of a flow of `size` bytes.
    pub fn class_of(&self, size: u64) -> Class {
        if size <= self.threshold {
            Class::Short
        } else {
            Class::Large
        }
    }

    /// The tag of `class`.
    pub fn tos(&self, class: Class) -> u8 {
        match class {
            Class::Short => self.short_tos,
            Class::Large => self.large_tos,
        }
    }
}

/// One flow of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// Unique in the schedule, in start order.
    pub id: u64,
    /// Sending host.
    pub src: usize,
    /// Receiving host.
    pub dst: usize,
    /// Start, ns from the schedule's epoch.
    pub start_ns: u64,
    /// Bytes to send.
    pub size: u64,
    /// Its class.
    pub class: Class,
    /// Its ToS / traffic class byte.
    pub tos: u8,
}

/// How Poisson flows pick their destinations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// P4TE's stride ([`Layout::stride`]).
    Stride,
    /// Uniform over the other hosts, per flow.
    Random,
    /// A seeded random derangement: each host always sends to the same other host.
    Permutation,
    /// Each source cycles through every other host in turn.
    AllToAll,
}

impl FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "stride" => Pattern::Stride,
            "random" => Pattern::Random,
            "permutation" => Pattern::Permutation,
            "all-to-all" => Pattern::AllToAll,
            _ => {
                return Err(format!(
                    "pattern {s}: stride, random, permutation or all-to-all (incast has its own form)"
                ));
            }
        })
    }
}

/// A uniform float in [0, 1).
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A seeded random permutation of `0..n` with no fixed point (n >= 2).
pub fn derangement(n: usize, rng: &mut Rng) -> Vec<usize> {
    assert!(n >= 2, "a derangement needs at least two hosts");
    loop {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = rng.range(0, i as u64) as usize;
            p.swap(i, j);
        }
        if p.iter().enumerate().all(|(i, &d)| i != d) {
            return p;
        }
    }
}

/// A Poisson workload.
#[derive(Clone, Debug)]
pub struct PoissonSpec<'a> {
    /// Flow sizes.
    pub cdf: &'a Cdf,
    /// Offered load per source, a fraction of `capacity_bps`.
    pub load: f64,
    /// The capacity the load refers to, bits/s per source (HPCC: the host link).
    pub capacity_bps: f64,
    /// Flows start in `[0, window_ns)`.
    pub window_ns: u64,
    /// Destinations.
    pub pattern: Pattern,
    /// Classes and tags.
    pub tagging: Tagging,
    /// Seed.
    pub seed: u64,
}

/// Every host's Poisson flows over the window, sorted by start (ties by source), ids in that order.
pub fn poisson(layout: &Layout, spec: &PoissonSpec<'_>) -> Result<Vec<Flow>, String> {
    let n = layout.hosts();
    if n < 2 || layout.per_group == 0 {
        return Err("a workload needs at least two hosts".into());
    }
    if !(spec.load > 0.0 && spec.load.is_finite() && spec.capacity_bps > 0.0) {
        return Err(format!(
            "load {} of {} b/s: both must be positive",
            spec.load, spec.capacity_bps
        ));
    }
    if spec.pattern == Pattern::Stride && layout.groups < 2 {
        return Err("stride needs at least two groups (leaves)".into());
    }
    let lambda = spec.cdf.arrival_rate(spec.load, spec.capacity_bps);
    let perm = derangement(n, &mut Rng::new(spec.seed ^ 0x5045_524d));
    let mut flows = Vec::new();
    for (src, &partner) in perm.iter().enumerate() {
        // One generator per source, so a host's flows do not depend on how many hosts exist.
        let mut rng = Rng::new(spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ src as u64);
        let mut t = 0.0f64;
        let mut next = 0usize;
        loop {
            t += -(1.0 - unit(&mut rng)).ln() / lambda * 1e9;
            if t >= spec.window_ns as f64 {
                break;
            }
            let size = spec.cdf.sample(&mut rng);
            let dst = match spec.pattern {
                Pattern::Stride => layout.stride(src),
                Pattern::Permutation => partner,
                Pattern::Random => {
                    let d = rng.range(0, n as u64 - 2) as usize;
                    if d >= src { d + 1 } else { d }
                }
                Pattern::AllToAll => {
                    let d = (src + 1 + next % (n - 1)) % n;
                    next += 1;
                    d
                }
            };
            let class = spec.tagging.class_of(size);
            flows.push(Flow {
                id: 0,
                src,
                dst,
                start_ns: t as u64,
                size,
                class,
                tos: spec.tagging.tos(class),
            });
        }
    }
    Ok(numbered(flows))
}

/// Sorts by (start, source) and numbers the flows in that order.
fn numbered(mut flows: Vec<Flow>) -> Vec<Flow> {
    flows.sort_by_key(|f| (f.start_ns, f.src, f.dst));
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = i as u64;
    }
    flows
}

/// A group of equal incast flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IncastGroup {
    /// How many flows.
    pub count: usize,
    /// Bytes each.
    pub size: u64,
    /// Their class.
    pub class: Class,
}

/// Incast: the groups' flows from `senders` (round-robin over them, in group order) to
/// `receiver`, all starting at `start_ns`. P4TE's: 24 × 512 KB short and 8 × 1024 KB large.
pub fn incast(
    receiver: usize,
    senders: &[usize],
    groups: &[IncastGroup],
    start_ns: u64,
    tagging: &Tagging,
) -> Result<Vec<Flow>, String> {
    if senders.is_empty() || senders.contains(&receiver) {
        return Err("incast needs senders other than the receiver".into());
    }
    let mut flows = Vec::new();
    for g in groups {
        for _ in 0..g.count {
            let src = senders[flows.len() % senders.len()];
            flows.push(Flow {
                id: flows.len() as u64,
                src,
                dst: receiver,
                start_ns,
                size: g.size,
                class: g.class,
                tos: tagging.tos(g.class),
            });
        }
    }
    Ok(flows)
}

/// All-to-all: one flow of `size` bytes from every host to every other, all at `start_ns`.
pub fn all_to_all(hosts: usize, size: u64, start_ns: u64, tagging: &Tagging) -> Vec<Flow> {
    let class = tagging.class_of(size);
    let mut flows = Vec::new();
    for src in 0..hosts {
        for dst in (0..hosts).filter(|&d| d != src) {
            flows.push(Flow {
                id: flows.len() as u64,
                src,
                dst,
                start_ns,
                size,
                class,
                tos: tagging.tos(class),
            });
        }
    }
    flows
}

/// Parses an incast spec `COUNTxSIZE[:CLASS],...` (sizes with K/M suffixes, powers of 1000 or,
/// with `Ki`/`Mi`, of 1024; the class defaults to the tagging's split), e.g.
/// `24x512Ki:short,8x1024Ki:large`.
pub fn parse_incast(spec: &str, tagging: &Tagging) -> Result<Vec<IncastGroup>, String> {
    spec.split(',')
        .map(|g| {
            let (body, class) = match g.split_once(':') {
                Some((b, c)) => (b, Some(c.parse::<Class>()?)),
                None => (g, None),
            };
            let (count, size) = body
                .split_once('x')
                .ok_or_else(|| format!("incast group {g}: COUNTxSIZE[:CLASS]"))?;
            let count: usize = count
                .parse()
                .map_err(|_| format!("incast group {g}: bad count"))?;
            let size = parse_size(size)?;
            Ok(IncastGroup {
                count,
                size,
                class: class.unwrap_or_else(|| tagging.class_of(size)),
            })
        })
        .collect()
}

/// A byte count with an optional K, M, G (10^3...) or Ki, Mi, Gi (2^10...) suffix.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("K", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ]
    .iter()
    .find_map(|(suf, m)| s.strip_suffix(suf).map(|n| (n, *m)))
    .unwrap_or((s, 1));
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("size {s}: a positive byte count (K, M, G, Ki, Mi, Gi)"))
}

/// Summary statistics of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Sample size.
    pub n: usize,
    /// Mean (0 when empty).
    pub mean: f64,
    /// 99th percentile, nearest rank (0 when empty).
    pub p99: f64,
    /// Population standard deviation (0 when empty).
    pub std_dev: f64,
}

impl Stats {
    /// The statistics of `xs`.
    pub fn of(xs: &[f64]) -> Stats {
        if xs.is_empty() {
            return Stats::default();
        }
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        Stats {
            n,
            mean,
            p99: quantile_nearest_rank(xs, 0.99),
            std_dev: var.sqrt(),
        }
    }
}

/// The median of the finite values of `xs` (the mean of the middle two for an even count);
/// `None` when there is none. The one median of the Rust side (the analysis package's
/// `stats.median` is the same definition).
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The nearest-rank `q`-quantile of `xs` (q in (0, 1]); 0 when empty.
pub fn quantile_nearest_rank(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// One flow of P4QCN's random background (P4QCN §4): UDP from host `src` to host `dst` at
/// `rate_bps` (frame bits) from `start_ns` to `stop_ns`, `bytes` (frame bytes) in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackgroundFlow {
    /// Sending host.
    pub src: usize,
    /// Receiving host.
    pub dst: usize,
    /// Rate, frame bits per second.
    pub rate_bps: u64,
    /// Frame bytes the flow carries (its size, drawn from the exponential distribution).
    pub bytes: u64,
    /// Start, ns from the run's start.
    pub start_ns: u64,
    /// End, ns (the size at the rate, cut at the run's end).
    pub stop_ns: u64,
}

/// P4QCN's random traffic model ("any host randomly initiates a UDP data stream to another host
/// with a random flow size"; A-QCN-8 in docs/p4qcn.md: the sizes are open): every host sends, back
/// to back until `until_ns`, flows to a uniformly random other host, each with an exponential size
/// of mean `mean_bytes` and a rate drawn uniformly from `rates`. Deterministic for a seed, and each
/// host's flows depend only on its own index, so the hosts of a namespace run need not talk.
pub fn background(
    hosts: usize,
    rates: &[u64],
    mean_bytes: u64,
    until_ns: u64,
    seed: u64,
) -> Vec<BackgroundFlow> {
    let mut out = Vec::new();
    if hosts < 2 || rates.is_empty() {
        return out;
    }
    for src in 0..hosts {
        let mut rng =
            Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xB6 ^ ((src as u64) << 8));
        let mut t = 0u64;
        while t < until_ns {
            let dst = (src + 1 + (rng.next_u64() % (hosts as u64 - 1)) as usize) % hosts;
            let rate_bps = rates[(rng.next_u64() % rates.len() as u64) as usize].max(1);
            let bytes = ((-(1.0 - unit(&mut rng)).ln() * mean_bytes as f64) as u64).max(1);
            let dur = u64::try_from(u128::from(bytes) * 8_000_000_000 / u128::from(rate_bps))
                .unwrap_or(u64::MAX)
                .max(1);
            let stop_ns = t.saturating_add(dur).min(until_ns);
            out.push(BackgroundFlow {
                src,
                dst,
                rate_bps,
                bytes,
                start_ns: t,
                stop_ns,
            });
            t = stop_ns;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_value_or_the_mean_of_the_middle_two_and_none_for_nothing() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[5.0, f64::INFINITY, 1.0]), Some(3.0));
    }

    fn spec(cdf: &Cdf, pattern: Pattern, seed: u64) -> PoissonSpec<'_> {
        PoissonSpec {
            cdf,
            load: 0.5,
            capacity_bps: 1e9,
            window_ns: 2_000_000_000,
            pattern,
            tagging: Tagging::for_workload(cdf),
            seed,
        }
    }

    const LS: Layout = Layout {
        groups: 4,
        per_group: 4,
    };

    #[test]
    fn stride_is_p4tes_formula() {
        // Host i of leaf j -> host (i+1)%4 of leaf (j+1)%4.
        assert_eq!(LS.stride(0), 5); // h0 of leaf0 -> h1 of leaf1
        assert_eq!(LS.stride(3), 4); // h3 of leaf0 -> h0 of leaf1
        assert_eq!(LS.stride(15), 0); // h3 of leaf3 -> h0 of leaf0
        let l = Layout {
            groups: 3,
            per_group: 2,
        };
        assert_eq!(l.stride(5), 0); // h1 of leaf2 -> h0 of leaf0
        // Every destination is on another leaf, and each host receives exactly one stream.
        let mut seen = [false; 16];
        for h in 0..16 {
            let d = LS.stride(h);
            assert_ne!(LS.position(h).1, LS.position(d).1);
            assert!(!seen[d]);
            seen[d] = true;
        }
    }

    #[test]
    fn poisson_schedules_offer_the_load_per_host_and_are_deterministic() {
        let cdf = Cdf::named("hadoop").unwrap();
        let a = poisson(&LS, &spec(&cdf, Pattern::Random, 3)).unwrap();
        let b = poisson(&LS, &spec(&cdf, Pattern::Random, 3)).unwrap();
        let c = poisson(&LS, &spec(&cdf, Pattern::Random, 4)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // 0.5 of 1 Gb/s per host for 2 s with a 120 KB mean: about 1038 flows per host.
        // Per host, the count is Poisson (sd ~32); one host's bytes are too noisy to check, as
        // Hadoop's tail (flows to 10 MB) dominates 2 s of them; the total over 16 hosts is tight.
        let expected = cdf.arrival_rate(0.5, 1e9) * 2.0;
        for h in 0..16 {
            let n = a.iter().filter(|f| f.src == h).count() as f64;
            assert!((n / expected - 1.0).abs() < 0.15, "host {h}: {n} flows");
        }
        let total: u64 = a.iter().map(|f| f.size).sum();
        let load = total as f64 * 8.0 / 2.0 / 1e9 / 16.0;
        assert!((load / 0.5 - 1.0).abs() < 0.05, "offered {load}");
        // Sorted, numbered, inside the window, never to oneself.
        for (i, w) in a.windows(2).enumerate() {
            assert!(w[0].start_ns <= w[1].start_ns);
            assert_eq!(w[0].id, i as u64);
        }
        assert!(
            a.iter()
                .all(|f| f.src != f.dst && f.start_ns < 2_000_000_000)
        );
        // Random destinations cover every other host.
        let dsts: std::collections::BTreeSet<usize> =
            a.iter().filter(|f| f.src == 0).map(|f| f.dst).collect();
        assert_eq!(dsts.len(), 15);
    }

    #[test]
    fn patterns_pick_destinations_as_named() {
        let cdf = Cdf::named("hadoop").unwrap();
        let stride = poisson(&LS, &spec(&cdf, Pattern::Stride, 1)).unwrap();
        assert!(stride.iter().all(|f| f.dst == LS.stride(f.src)));
        let perm = poisson(&LS, &spec(&cdf, Pattern::Permutation, 1)).unwrap();
        let mut partner = [usize::MAX; 16];
        for f in &perm {
            assert_ne!(f.src, f.dst);
            if partner[f.src] == usize::MAX {
                partner[f.src] = f.dst;
            }
            assert_eq!(partner[f.src], f.dst, "a permutation keeps its partner");
        }
        let mut dsts = partner.to_vec();
        dsts.sort_unstable();
        assert_eq!(dsts, (0..16).collect::<Vec<_>>(), "each host receives once");
        let a2a = poisson(&LS, &spec(&cdf, Pattern::AllToAll, 1)).unwrap();
        let from0: Vec<usize> = a2a.iter().filter(|f| f.src == 0).map(|f| f.dst).collect();
        assert_eq!(
            &from0[..16],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 1]
        );
        assert!(
            poisson(
                &Layout {
                    groups: 1,
                    per_group: 4
                },
                &spec(&cdf, Pattern::Stride, 1)
            )
            .is_err()
        );
    }

    #[test]
    fn classes_split_at_the_workload_p90_with_configurable_tags() {
        let cdf = Cdf::named("websearch").unwrap();
        let mut t = Tagging::for_workload(&cdf);
        assert_eq!(t.threshold, 5_000_000);
        assert_eq!(t.class_of(5_000_000), Class::Short);
        assert_eq!(t.class_of(5_000_001), Class::Large);
        let flows = poisson(&LS, &spec(&cdf, Pattern::Random, 9)).unwrap();
        assert!(
            flows
                .iter()
                .all(|f| (f.class == Class::Short) == (f.size <= 5_000_000))
        );
        assert!(flows.iter().all(|f| f.tos
            == match f.class {
                Class::Short => 0x08,
                Class::Large => 0x10,
            }));
        let large = flows.iter().filter(|f| f.class == Class::Large).count() as f64;
        let share = large / flows.len() as f64;
        assert!((0.07..0.13).contains(&share), "{share}");
        t.short_tos = 0x20;
        t.large_tos = 0x28;
        assert_eq!(t.tos(Class::Short), 0x20);
        assert_eq!(t.tos(Class::Large), 0x28);
    }

    #[test]
    fn incast_is_synchronised_with_given_sizes_and_classes() {
        let cdf = Cdf::named("websearch").unwrap();
        let t = Tagging::for_workload(&cdf);
        let groups = parse_incast("24x512Ki:short,8x1024Ki:large", &t).unwrap();
        assert_eq!(
            groups,
            vec![
                IncastGroup {
                    count: 24,
                    size: 524_288,
                    class: Class::Short
                },
                IncastGroup {
                    count: 8,
                    size: 1_048_576,
                    class: Class::Large
                },
            ]
        );
        let senders: Vec<usize> = (1..9).collect();
        let flows = incast(0, &senders, &groups, 1_000, &t).unwrap();
        assert_eq!(flows.len(), 32);
        assert!(flows.iter().all(|f| f.dst == 0 && f.start_ns == 1_000));
        assert_eq!(flows.iter().filter(|f| f.tos == 0x10).count(), 8);
        // Round-robin: each of the 8 senders has 3 short and 1 large flow.
        for s in 1..9 {
            assert_eq!(flows.iter().filter(|f| f.src == s).count(), 4);
        }
        assert!(incast(0, &[0, 1], &groups, 0, &t).is_err());
        // Without a class, the tagging's split decides.
        assert_eq!(parse_incast("2x6M", &t).unwrap()[0].class, Class::Large);
        assert!(parse_incast("2y6M", &t).is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(parse_size("3K").unwrap(), 3000);
    }

    #[test]
    fn all_to_all_sends_every_ordered_pair_once() {
        let t = Tagging {
            threshold: 100,
            short_tos: 8,
            large_tos: 16,
        };
        let f = all_to_all(4, 1000, 5, &t);
        assert_eq!(f.len(), 12);
        let pairs: std::collections::BTreeSet<(usize, usize)> =
            f.iter().map(|f| (f.src, f.dst)).collect();
        assert_eq!(pairs.len(), 12);
        assert!(f.iter().all(|f| f.class == Class::Large && f.tos == 16));
    }

    #[test]
    fn stats_use_nearest_rank_and_population_deviation() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Stats::of(&xs);
        assert_eq!(s.n, 100);
        assert_eq!(s.mean, 50.5);
        assert_eq!(s.p99, 99.0);
        assert!((s.std_dev - 28.866).abs() < 1e-3);
        assert_eq!(Stats::of(&[]), Stats::default());
        assert_eq!(quantile_nearest_rank(&[3.0, 1.0, 2.0], 0.5), 2.0);
        let d = derangement(5, &mut Rng::new(1));
        assert!(d.iter().enumerate().all(|(i, &x)| i != x));
    }

    #[test]
    fn the_background_keeps_every_host_busy_with_random_peers() {
        let b = background(8, &[2_000_000, 5_000_000], 50_000, 10_000_000_000, 3);
        assert_eq!(
            b,
            background(8, &[2_000_000, 5_000_000], 50_000, 10_000_000_000, 3)
        );
        for src in 0..8 {
            let mine: Vec<_> = b.iter().filter(|f| f.src == src).collect();
            assert!(mine.len() > 10, "{}", mine.len());
            assert_eq!(mine[0].start_ns, 0);
            assert_eq!(mine.last().unwrap().stop_ns, 10_000_000_000);
            for w in mine.windows(2) {
                assert_eq!(w[0].stop_ns, w[1].start_ns, "back to back");
            }
            assert!(mine.iter().all(|f| f.dst != src && f.dst < 8));
        }
        let mean = b.iter().map(|f| f.bytes).sum::<u64>() as f64 / b.len() as f64;
        assert!((35_000.0..65_000.0).contains(&mean), "{mean}");
        assert!(b.iter().any(|f| f.rate_bps == 2_000_000));
        assert!(b.iter().any(|f| f.rate_bps == 5_000_000));
    }
}
