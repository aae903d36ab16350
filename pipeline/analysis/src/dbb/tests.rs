//! Tests named after the paper's sections: the worked examples (Figs. 2–5, Tables I–IV) and
//! property tests over random layered networks.

use proptest::prelude::*;

use super::ratio::gcd;
use super::*;
// The paper's steps as such: these tests check the raw max-flow (idle links reported as
// `NoFlow`), not the balanced one the switches use.
use super::compile_unbalanced as compile;

fn bw(text: &str) -> Ratio {
    Ratio::parse_decimal(text).unwrap()
}

fn link(from: &str, to: &str, bandwidth: &str) -> Link {
    Link {
        id: None,
        from: from.into(),
        to: to.into(),
        bandwidth: bw(bandwidth),
    }
}

fn input(links: Vec<Link>) -> Input {
    Input {
        source: "S1".into(),
        sink: "S6".into(),
        links,
    }
}

/// Fig. 2a with the exploitable bandwidths of Fig. 2b as capacities (the figure's own
/// capacities are not in the text).
fn fig2a() -> Input {
    input(vec![
        link("S1", "S2", "6"),
        link("S1", "S3", "6"),
        link("S2", "S4", "3"),
        link("S2", "S5", "3"),
        link("S3", "S4", "3"),
        link("S3", "S5", "3"),
        link("S4", "S6", "6"),
        link("S5", "S6", "6"),
    ])
}

/// Fig. 5: only its SIRs survive in the text; these capacities (in Gbps, with halves) have
/// the SIRs 1:4, 1:1:3:5 and 2:3 recovered from Table IV.
fn fig5() -> Input {
    input(vec![
        link("S1", "S2", "5"),
        link("S1", "S3", "20"),
        link("S2", "S4", "2.5"),
        link("S2", "S5", "2.5"),
        link("S3", "S4", "7.5"),
        link("S3", "S5", "12.5"),
        link("S4", "S6", "10"),
        link("S5", "S6", "15"),
    ])
}

fn paths(out: &Output) -> Vec<Vec<&str>> {
    out.paths
        .iter()
        .map(|p| p.iter().map(String::as_str).collect())
        .collect()
}

fn lists(out: &Output) -> Vec<(&str, Vec<&str>)> {
    out.lists
        .iter()
        .map(|l| {
            let hops = l.next_hops.iter().map(String::as_str).collect();
            (l.switch.as_str(), hops)
        })
        .collect()
}

/// (from, to, b_ij, ρ_ij, N_ij) of every link of the solution.
fn link_table<'a>(inp: &'a Input, out: &Output) -> Vec<(&'a str, &'a str, Ratio, u64, u64)> {
    out.link_packets
        .iter()
        .map(|lp| {
            let l = &inp.links[lp.link];
            (
                l.from.as_str(),
                l.to.as_str(),
                lp.exploitable,
                lp.sir,
                lp.packets,
            )
        })
        .collect()
}

#[test]
fn sec_iii_a_fig2b_exploitable_bandwidth() {
    let inp = fig2a();
    let out = compile(&inp).unwrap();
    // The paper prints z = 6 next to b12 = b13 = 6; the flow out of S1 is 12.
    assert_eq!(out.max_flow, bw("12"));
    let b: Vec<_> = link_table(&inp, &out).iter().map(|t| t.2).collect();
    assert_eq!(b, ["6", "6", "3", "3", "3", "3", "6", "6"].map(bw));
    assert!(out.ignored.is_empty());
}

#[test]
fn sec_iii_b_fig3_stages_and_fig4_sir() {
    let out = compile(&fig2a()).unwrap();
    assert_eq!(
        out.stages,
        [vec!["S1"], vec!["S2", "S3"], vec!["S4", "S5"], vec!["S6"]]
    );
    assert!(
        out.link_packets.iter().all(|lp| lp.sir == 1),
        "Fig. 4: every ρ is 1"
    );
    assert_eq!(out.stage_pdc, [2, 4, 2]);
}

#[test]
fn sec_iii_c_eq1_eq2_fig2a_pdc() {
    let inp = fig2a();
    let out = compile(&inp).unwrap();
    assert_eq!(out.n, 4, "N = lcm(2, 4, 2)");
    let packets: Vec<_> = link_table(&inp, &out).iter().map(|t| t.4).collect();
    // N12 = 1 * 4 / 2 = 2, N24 = 1 * 4 / 4 = 1.
    assert_eq!(packets, [2, 2, 1, 1, 1, 1, 2, 2]);
}

#[test]
fn sec_iii_d_table_iii_fig2a() {
    let out = compile(&fig2a()).unwrap();
    assert_eq!(
        paths(&out),
        [
            ["S1", "S2", "S4", "S6"],
            ["S1", "S3", "S5", "S6"],
            ["S1", "S2", "S5", "S6"],
            ["S1", "S3", "S4", "S6"],
        ]
    );
}

#[test]
fn sec_iii_d_tables_i_ii_fig2a_lists() {
    let out = compile(&fig2a()).unwrap();
    // Table I: S1 picks S2, S3, S2, S3. Table II: S2 picks S4 then S5, S3 picks S5 then S4.
    assert_eq!(
        lists(&out),
        [
            ("S1", vec!["S2", "S3", "S2", "S3"]),
            ("S2", vec!["S4", "S5"]),
            ("S3", vec!["S5", "S4"]),
            ("S4", vec!["S6", "S6"]),
            ("S5", vec!["S6", "S6"]),
        ]
    );
}

#[test]
fn sec_iii_d_table_iv_fig5() {
    let inp = fig5();
    let out = compile(&inp).unwrap();
    assert_eq!(out.stage_pdc, [5, 10, 5]);
    assert_eq!(out.n, 10, "N = lcm(5, 10, 5)");
    let sir_and_packets: Vec<_> = link_table(&inp, &out).iter().map(|t| (t.3, t.4)).collect();
    assert_eq!(
        sir_and_packets,
        [
            (1, 2),
            (4, 8),
            (1, 1),
            (1, 1),
            (3, 3),
            (5, 5),
            (2, 4),
            (3, 6)
        ]
    );
    assert_eq!(
        paths(&out),
        [
            ["S1", "S2", "S4", "S6"],
            ["S1", "S3", "S5", "S6"],
            ["S1", "S3", "S5", "S6"],
            ["S1", "S3", "S4", "S6"],
            ["S1", "S3", "S5", "S6"],
            ["S1", "S2", "S5", "S6"],
            ["S1", "S3", "S4", "S6"],
            ["S1", "S3", "S5", "S6"],
            ["S1", "S3", "S4", "S6"],
            ["S1", "S3", "S5", "S6"],
        ]
    );
}

#[test]
fn sec_iii_e_fig5_rule_lists() {
    let out = compile(&fig5()).unwrap();
    let l = lists(&out);
    assert_eq!(
        l[..3],
        [
            (
                "S1",
                vec!["S2", "S3", "S3", "S3", "S3", "S2", "S3", "S3", "S3", "S3"]
            ),
            ("S2", vec!["S4", "S5"]),
            ("S3", vec!["S5", "S5", "S4", "S5", "S4", "S5", "S4", "S5"]),
        ]
    );
    assert_eq!(l[3], ("S4", vec!["S6"; 4]));
    assert_eq!(l[4], ("S5", vec!["S6"; 6]));
}

#[test]
fn sec_iii_d_ties_go_to_the_link_listed_first() {
    // Fig. 2a with S1's two links swapped: the first packet now goes to S3.
    let mut inp = fig2a();
    inp.links.swap(0, 1);
    let out = compile(&inp).unwrap();
    assert_eq!(out.lists[0].next_hops, ["S3", "S2", "S3", "S2"]);
    assert_eq!(out.paths[0], ["S1", "S3", "S4", "S6"]);
}

#[test]
fn a_dbb_1_back_edges_of_a_bidirectional_fabric_are_ignored() {
    let plain = compile(&fig2a()).unwrap();
    let mut inp = fig2a();
    let reverse: Vec<Link> = inp
        .links
        .iter()
        .map(|l| link(&l.to, &l.from, "1"))
        .collect();
    inp.links.extend(reverse);
    let out = compile(&inp).unwrap();
    assert_eq!(out.paths, plain.paths);
    assert_eq!(out.lists, plain.lists);
    assert_eq!(out.link_packets, plain.link_packets);
    let ignored: Vec<usize> = out.ignored.iter().map(|g| g.link).collect();
    assert_eq!(ignored, (8..16).collect::<Vec<_>>());
    assert_eq!(
        out.ignored[0].reason,
        IgnoreReason::NotForward {
            from_stage: 2,
            to_stage: 1
        }
    );
    assert_eq!(
        out.ignored[0].reason.to_string(),
        "goes back from stage 2 to stage 1"
    );
}

#[test]
fn a_dbb_1_leaf_spine_other_leaves_are_off_the_stage_dag() {
    // Two spines, three leaves, every link both ways; from leaf A to leaf B.
    let mut links = Vec::new();
    for spine in ["P1", "P2"] {
        for leaf in ["A", "B", "C"] {
            links.push(link(leaf, spine, "10"));
            links.push(link(spine, leaf, "10"));
        }
    }
    links.push(link("X", "A", "10")); // from a switch the source cannot reach
    links.push(link("C", "C2", "10")); // beyond another leaf
    let inp = Input {
        source: "A".into(),
        sink: "B".into(),
        links,
    };
    let out = compile(&inp).unwrap();
    assert_eq!(out.n, 2);
    assert_eq!(
        lists(&out),
        [
            ("A", vec!["P1", "P2"]),
            ("P1", vec!["B"]),
            ("P2", vec!["B"])
        ]
    );
    let reason = |from: &str, to: &str| {
        let i = inp
            .links
            .iter()
            .position(|l| l.from == from && l.to == to)
            .unwrap();
        out.ignored.iter().find(|g| g.link == i).map(|g| g.reason)
    };
    assert_eq!(
        reason("P1", "C"),
        Some(IgnoreReason::OffSinkPaths { from_stage: 2 })
    );
    assert_eq!(
        reason("C", "P2"),
        Some(IgnoreReason::NotForward {
            from_stage: 3,
            to_stage: 2
        })
    );
    assert_eq!(
        reason("B", "P1"),
        Some(IgnoreReason::NotForward {
            from_stage: 3,
            to_stage: 2
        })
    );
    assert_eq!(reason("X", "A"), Some(IgnoreReason::Unreachable));
    assert_eq!(
        reason("C", "C2"),
        Some(IgnoreReason::OffSinkPaths { from_stage: 3 })
    );
    assert_eq!(reason("A", "P1"), None);
}

#[test]
fn a_dbb_1_links_without_flow_are_reported() {
    // S2 can only pass 1 on, so the max flow leaves part of S1->S2 idle but still uses it;
    // S3->S5 is on the stage DAG but S5->S6 is the bottleneck that S2's traffic already fills.
    let inp = input(vec![
        link("S1", "S2", "4"),
        link("S1", "S3", "4"),
        link("S2", "S5", "4"),
        link("S3", "S5", "4"),
        link("S5", "S6", "2"),
    ]);
    let out = compile(&inp).unwrap();
    assert_eq!(out.max_flow, bw("2"));
    // Edmonds–Karp in input order fills S1-S2-S5-S6 first.
    assert_eq!(
        out.ignored,
        [
            Ignored {
                link: 1,
                reason: IgnoreReason::NoFlow
            },
            Ignored {
                link: 3,
                reason: IgnoreReason::NoFlow
            }
        ]
    );
    assert_eq!(out.stages, [vec!["S1"], vec!["S2"], vec!["S5"], vec!["S6"]]);
    assert_eq!(out.n, 1);
}

fn parallel(bandwidths: &[&str]) -> Input {
    let links = bandwidths
        .iter()
        .zip(["a", "b", "c"])
        .map(|(b, id)| Link {
            id: Some(id.into()),
            ..link("S1", "S6", b)
        })
        .collect();
    input(links)
}

#[test]
fn parallel_links_are_named_by_their_ids() {
    let out = compile(&parallel(&["1.5", "3"])).unwrap();
    assert_eq!(out.n, 3);
    assert_eq!(lists(&out), [("S1", vec!["a", "b", "b"])]);
    assert_eq!(out.path_links, [vec![0], vec![1], vec![1]]);
    assert_eq!(out.paths, [["S1", "S6"]; 3]);
}

#[test]
fn parallel_links_interleave_by_share_left() {
    // 2 : 2 : 1. Taking the first listed link with quota would give a, a, b, b, c.
    let out = compile(&parallel(&["2", "2", "1"])).unwrap();
    assert_eq!(lists(&out), [("S1", vec!["a", "b", "c", "a", "b"])]);
}

#[test]
fn errors_name_the_problem() {
    let mut zero = fig2a();
    zero.links[3].bandwidth = Ratio::ZERO;
    assert_eq!(
        compile(&zero).unwrap_err().to_string(),
        "links[3] (S2 -> S5) has bandwidth 0; bandwidths must be positive"
    );
    let mut negative = fig5();
    negative.links[2].bandwidth = bw("-2.5");
    assert!(matches!(
        compile(&negative),
        Err(CompileError::NonPositiveBandwidth { link: 2, .. })
    ));

    let mut cut = fig2a();
    cut.links.retain(|l| l.to != "S6");
    assert_eq!(
        compile(&cut).unwrap_err().to_string(),
        "sink \"S6\" cannot be reached from source \"S1\""
    );
    let mut nowhere = fig2a();
    nowhere.sink = "S9".into();
    assert!(matches!(
        compile(&nowhere),
        Err(CompileError::SinkUnreachable { .. })
    ));

    let mut uneven = fig2a();
    uneven.links.remove(3); // S2 -> S5
    assert_eq!(
        compile(&uneven),
        Err(CompileError::UnevenOutDegree {
            stage: 2,
            first: "S2".into(),
            first_degree: 1,
            other: "S3".into(),
            other_degree: 2
        })
    );
    assert!(
        compile(&uneven)
            .unwrap_err()
            .to_string()
            .contains("same out-degree (§II)")
    );

    let mut same = fig2a();
    same.sink = "S1".into();
    assert_eq!(compile(&same), Err(CompileError::SourceIsSink("S1".into())));

    let mut parallel = fig2a();
    parallel.links.push(link("S1", "S2", "1"));
    assert_eq!(
        compile(&parallel),
        Err(CompileError::ParallelLinksWithoutId {
            from: "S1".into(),
            to: "S2".into()
        })
    );
    let mut clash = fig2a();
    clash.links[0].id = Some("S3".into());
    assert_eq!(
        compile(&clash),
        Err(CompileError::AmbiguousLinkId("S3".into()))
    );

    // 1 : 1.000001 needs a cycle of 2000001 packets.
    let mut long = input(vec![link("S1", "S6", "1"), link("S1", "S6", "1.000001")]);
    long.links[0].id = Some("a".into());
    long.links[1].id = Some("b".into());
    assert_eq!(
        compile(&long),
        Err(CompileError::CycleTooLong {
            n: 2_000_001,
            max: MAX_CYCLE
        })
    );
}

// ---- Property tests over random layered networks ----

/// SplitMix64: a tiny deterministic generator driven by the proptest seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What the generator knows about each link it made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Stage s to s + 1, from a switch the source reaches.
    Forward,
    /// Stage s to s + 1 from a switch the source does not reach.
    FromUnreached,
    Back,
    Sideways,
    DeadEnd,
}

/// A random multi-stage network: layer widths 1, w2.., 1; every switch of a layer has the same
/// number of distinct next-layer neighbours and the same number of parallel links to each; plus
/// back edges, links within a layer and dead ends, all of which the compiler must ignore.
fn random_network(seed: u64) -> (Input, Vec<Kind>) {
    let mut rng = Rng(seed);
    let inner = 1 + rng.below(3);
    let mut widths = vec![1];
    widths.extend((0..inner).map(|_| 1 + rng.below(4)));
    widths.push(1);
    let name = |layer: usize, j: usize| format!("L{layer}n{j}");
    let mut links = Vec::new();
    let mut kinds = Vec::new();
    let mut reached = vec![vec![false; 4]; widths.len()];
    reached[0][0] = true;
    for s in 0..widths.len() - 1 {
        let degree = 1 + rng.below(widths[s + 1]);
        let copies = 1 + rng.below(2);
        for u in 0..widths[s] {
            let mut targets: Vec<usize> = (0..widths[s + 1]).collect();
            for t in (1..targets.len()).rev() {
                targets.swap(t, rng.below(t + 1));
            }
            for &v in &targets[..degree] {
                for c in 0..copies {
                    let bandwidth =
                        Ratio::new(1 + rng.below(40) as i128, [1, 2, 10, 4][rng.below(4)]).unwrap();
                    links.push(Link {
                        id: (copies > 1).then(|| format!("{}-{}#{c}", name(s, u), name(s + 1, v))),
                        from: name(s, u),
                        to: name(s + 1, v),
                        bandwidth,
                    });
                    kinds.push(if reached[s][u] {
                        Kind::Forward
                    } else {
                        Kind::FromUnreached
                    });
                }
                if reached[s][u] {
                    reached[s + 1][v] = true;
                }
                if reached[s][u] && rng.below(3) == 0 {
                    links.push(link(&name(s + 1, v), &name(s, u), "1"));
                    kinds.push(Kind::Back);
                }
            }
        }
        if widths[s] > 1 && reached[s][0] && reached[s][1] && rng.below(2) == 0 {
            links.push(link(&name(s, 0), &name(s, 1), "7"));
            kinds.push(Kind::Sideways);
        }
        if s > 0 && reached[s][0] && rng.below(2) == 0 {
            links.push(link(&name(s, 0), &format!("dead{s}"), "5"));
            kinds.push(Kind::DeadEnd);
        }
    }
    // Shuffle the links so that input order (and with it tie-breaking) varies too.
    let mut order: Vec<usize> = (0..links.len()).collect();
    for t in (1..order.len()).rev() {
        order.swap(t, rng.below(t + 1));
    }
    let input = Input {
        source: name(0, 0),
        sink: name(widths.len() - 1, 0),
        links: order.iter().map(|&i| links[i].clone()).collect(),
    };
    (input, order.iter().map(|&i| kinds[i]).collect())
}

/// The smallest capacity of a source-sink cut of the stage DAG, by trying every cut.
fn min_cut(inp: &Input, dag: &[usize]) -> Ratio {
    let mut nodes: Vec<&str> = Vec::new();
    for &i in dag {
        for n in [&inp.links[i].from, &inp.links[i].to] {
            if n != &inp.source && n != &inp.sink && !nodes.contains(&n.as_str()) {
                nodes.push(n);
            }
        }
    }
    assert!(nodes.len() < 16);
    (0u32..1 << nodes.len())
        .map(|mask| {
            let source_side = |n: &str| {
                n == inp.source
                    || nodes
                        .iter()
                        .position(|&m| m == n)
                        .is_some_and(|p| mask & (1 << p) != 0)
            };
            dag.iter()
                .map(|&i| &inp.links[i])
                .filter(|l| source_side(&l.from) && l.to != inp.source && !source_side(&l.to))
                .fold(Ratio::ZERO, |acc, l| acc.checked_add(l.bandwidth).unwrap())
        })
        .min()
        .unwrap()
}

/// Checks everything issue 13 promises about a compiled cycle.
fn check_cycle(inp: &Input, kinds: &[Kind], out: &Output) -> Result<(), TestCaseError> {
    let nl = inp.links.len();
    // Every input link is in the solution or reported, once; the generator's noise is ignored
    // for the right reason and every forward link is on the stage DAG.
    let mut seen = vec![0; nl];
    for lp in &out.link_packets {
        seen[lp.link] += 1;
        prop_assert_eq!(kinds[lp.link], Kind::Forward);
    }
    for g in &out.ignored {
        seen[g.link] += 1;
        let ok = match (kinds[g.link], g.reason) {
            (Kind::Forward, IgnoreReason::NoFlow) => true,
            (Kind::FromUnreached, IgnoreReason::Unreachable) => true,
            (
                Kind::Back,
                IgnoreReason::NotForward {
                    from_stage,
                    to_stage,
                },
            ) => to_stage + 1 == from_stage,
            (
                Kind::Sideways,
                IgnoreReason::NotForward {
                    from_stage,
                    to_stage,
                },
            ) => to_stage == from_stage,
            (Kind::DeadEnd, IgnoreReason::OffSinkPaths { .. }) => true,
            _ => false,
        };
        prop_assert!(
            ok,
            "link {} {:?} ignored as {:?}",
            g.link,
            kinds[g.link],
            g.reason
        );
    }
    prop_assert!(seen.iter().all(|&c| c == 1), "{:?}", seen);

    // The flow is feasible, conserved, and maximum (equal to the minimum cut).
    let dag: Vec<usize> = (0..nl).filter(|&i| kinds[i] == Kind::Forward).collect();
    prop_assert_eq!(out.max_flow, min_cut(inp, &dag));
    let mut balance: BTreeMap<&str, Ratio> = BTreeMap::new();
    for lp in &out.link_packets {
        let l = &inp.links[lp.link];
        prop_assert!(lp.exploitable.is_positive() && lp.exploitable <= l.bandwidth);
        let out_of = balance.entry(&l.from).or_insert(Ratio::ZERO);
        *out_of = out_of.checked_add(lp.exploitable).unwrap();
        let into = balance.entry(&l.to).or_insert(Ratio::ZERO);
        *into = into.checked_sub(lp.exploitable).unwrap();
    }
    for (switch, net) in &balance {
        let expected = if *switch == inp.source {
            out.max_flow
        } else if *switch == inp.sink {
            Ratio::ZERO.checked_sub(out.max_flow).unwrap()
        } else {
            Ratio::ZERO
        };
        prop_assert_eq!(*net, expected, "flow balance at {}", switch);
    }

    // N = lcm of the stage PDCs; N_ij = b_ij * N / z exactly; the cycle is the shortest one
    // (the packet counts have no common factor); each stage sends N packets.
    let l = out.stages.len();
    prop_assert_eq!(out.stage_pdc.len(), l - 1);
    let lcm_pdc = out
        .stage_pdc
        .iter()
        .fold(1u128, |a, &p| lcm(a, u128::from(p)).unwrap());
    prop_assert_eq!(u128::from(out.n), lcm_pdc);
    let mut per_stage = vec![0u64; l - 1];
    let mut common = 0u128;
    for lp in &out.link_packets {
        let scaled = Ratio::from_integer(i128::from(lp.packets)).checked_mul(out.max_flow);
        prop_assert_eq!(
            scaled,
            lp.exploitable
                .checked_mul(Ratio::from_integer(i128::from(out.n)))
        );
        per_stage[lp.stage - 1] += lp.packets;
        common = gcd(common, u128::from(lp.packets));
    }
    prop_assert!(per_stage.iter().all(|&p| p == out.n), "{:?}", per_stage);
    prop_assert_eq!(common, 1);

    // Every path goes from the source to the sink over consecutive links, one per stage.
    prop_assert_eq!(out.paths.len() as u64, out.n);
    prop_assert_eq!(out.path_links.len() as u64, out.n);
    let mut carried = vec![0u64; nl];
    for (names, links) in out.paths.iter().zip(&out.path_links) {
        prop_assert_eq!(names.len(), l);
        prop_assert_eq!(&names[0], &inp.source);
        prop_assert_eq!(&names[l - 1], &inp.sink);
        prop_assert_eq!(links.len(), l - 1);
        for (s, &i) in links.iter().enumerate() {
            prop_assert_eq!(&inp.links[i].from, &names[s]);
            prop_assert_eq!(&inp.links[i].to, &names[s + 1]);
            carried[i] += 1;
        }
    }
    // Every link carries exactly N_ij packets per cycle.
    for lp in &out.link_packets {
        prop_assert_eq!(carried[lp.link], lp.packets, "link {}", lp.link);
    }
    prop_assert_eq!(carried.iter().sum::<u64>(), out.n * (l as u64 - 1));

    // Lists: the source's has N entries, every other switch's Q(k); entry t of list_k is the
    // next hop of the t-th path through k.
    prop_assert_eq!(
        out.lists.len(),
        out.stages.iter().map(Vec::len).sum::<usize>() - 1
    );
    for list in &out.lists {
        let expected_len = if list.switch == inp.source {
            out.n
        } else {
            out.link_packets
                .iter()
                .filter(|lp| inp.links[lp.link].to == list.switch)
                .map(|lp| lp.packets)
                .sum()
        };
        prop_assert_eq!(
            list.next_hops.len() as u64,
            expected_len,
            "list of {}",
            &list.switch
        );
        let from_paths: Vec<&str> = out
            .path_links
            .iter()
            .filter_map(|p| p.iter().find(|&&i| inp.links[i].from == list.switch))
            .map(|&i| inp.links[i].hop_label())
            .collect();
        prop_assert_eq!(&list.next_hops, &from_paths);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn sec_iii_random_layered_networks(seed in any::<u64>()) {
        let (inp, kinds) = random_network(seed);
        let out = compile(&inp).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_cycle(&inp, &kinds, &out)?;
    }

    #[test]
    fn sec_iii_non_positive_bandwidth_is_rejected(seed in any::<u64>(), pick in any::<prop::sample::Index>(), negative in any::<bool>()) {
        let (mut inp, _) = random_network(seed);
        let i = pick.index(inp.links.len());
        inp.links[i].bandwidth = if negative { Ratio::new(-3, 2).unwrap() } else { Ratio::ZERO };
        let is_reported = matches!(compile(&inp), Err(CompileError::NonPositiveBandwidth { link, .. }) if link == i);
        prop_assert!(is_reported);
    }

    #[test]
    fn sec_iii_unreachable_sink_is_rejected(seed in any::<u64>()) {
        let (mut inp, _) = random_network(seed);
        let sink = inp.sink.clone();
        inp.links.retain(|l| l.to != sink);
        let is_reported = matches!(compile(&inp), Err(CompileError::SinkUnreachable { .. }));
        prop_assert!(is_reported);
    }

    #[test]
    fn sec_ii_uneven_out_degree_is_rejected(seed in any::<u64>(), pick in any::<prop::sample::Index>()) {
        // Drop one forward link of a switch that keeps another, in a layer where the source
        // reaches at least one other switch: that layer's out-degrees now differ.
        let (mut inp, kinds) = random_network(seed);
        let out = compile(&inp).unwrap();
        let candidates: Vec<usize> = (0..inp.links.len())
            .filter(|&i| {
                let from = &inp.links[i].from;
                let stage = out.stages.iter().position(|s| s.contains(from));
                kinds[i] == Kind::Forward
                    && stage.is_some_and(|s| out.stages[s].len() > 1)
                    && inp.links.iter().enumerate().filter(|&(j, l)| kinds[j] == Kind::Forward && &l.from == from).count() > 1
            })
            .collect();
        prop_assume!(!candidates.is_empty());
        let i = candidates[pick.index(candidates.len())];
        let from = inp.links[i].from.clone();
        let stage = out.stages.iter().position(|s| s.contains(&from)).unwrap() + 1;
        inp.links.remove(i);
        let is_reported = matches!(compile(&inp), Err(CompileError::UnevenOutDegree { stage: s, .. }) if s == stage);
        prop_assert!(is_reported, "{:?}", compile(&inp));
    }
}
