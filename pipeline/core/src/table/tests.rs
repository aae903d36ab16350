//! Tests: property tests against a linear-scan reference, error cases, profiles, timing.

use super::exact::exact_value;
use super::*;
use proptest::prelude::*;

/// splitmix64: deterministic randomness inside a proptest case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn u128(&mut self) -> u128 {
        (u128::from(self.next()) << 64) | u128::from(self.next())
    }
    /// A value of `w` bits, often from a tiny pool so that entries collide.
    fn value(&mut self, w: u8) -> u128 {
        match self.below(3) {
            0 => self.u128() & ones(w),
            1 => self.u128() & ones(w.min(3)),
            _ => (self.u128() & ones(w.min(2))) << (w - w.min(2)),
        }
    }
    fn mask(&mut self, w: u8) -> u128 {
        match self.below(5) {
            0 => 0,
            1 => ones(w),
            2 => prefix_mask(w, self.below(u64::from(w) + 1) as u8),
            3 => self.u128() & ones(w),
            _ => self.u128() & ones(w.min(3)),
        }
    }
    fn prefix_len(&mut self, w: u8) -> u8 {
        match self.below(4) {
            0 => 0,
            1 => w,
            _ => self.below(u64::from(w) + 1) as u8,
        }
    }
}

fn gen_field(r: &mut Rng, f: KeyField) -> FieldMatch {
    let w = f.bitwidth;
    match f.kind {
        MatchKind::Exact => FieldMatch::Exact(r.value(w)),
        MatchKind::Lpm => {
            let l = r.prefix_len(w);
            FieldMatch::Lpm {
                value: r.value(w) & prefix_mask(w, l),
                prefix_len: l,
            }
        }
        MatchKind::Ternary => {
            let mask = r.mask(w);
            FieldMatch::Ternary {
                value: r.value(w) & mask,
                mask,
            }
        }
        MatchKind::Range => {
            let (a, b) = if r.below(4) == 0 {
                (0, ones(w))
            } else {
                (r.value(w), r.value(w))
            };
            FieldMatch::Range {
                low: a.min(b),
                high: a.max(b),
            }
        }
        MatchKind::Optional => FieldMatch::Optional((r.below(2) == 0).then(|| r.value(w))),
    }
}

fn field_matches(m: &FieldMatch, v: u128, w: u8) -> bool {
    match *m {
        FieldMatch::Exact(x) | FieldMatch::Optional(Some(x)) => v == x,
        FieldMatch::Optional(None) => true,
        FieldMatch::Lpm { value, prefix_len } => v & prefix_mask(w, prefix_len) == value,
        FieldMatch::Ternary { value, mask } => v & mask == value,
        FieldMatch::Range { low, high } => (low..=high).contains(&v),
    }
}

/// A lookup key matched by the entry key `k` (random where it does not care).
fn key_in(r: &mut Rng, fields: &[KeyField], k: &[FieldMatch]) -> Vec<u128> {
    fields
        .iter()
        .zip(k)
        .map(|(f, m)| {
            let w = f.bitwidth;
            let rnd = r.value(w);
            match *m {
                FieldMatch::Exact(x) | FieldMatch::Optional(Some(x)) => x,
                FieldMatch::Optional(None) => rnd,
                FieldMatch::Lpm { value, prefix_len } => {
                    value | (rnd & !prefix_mask(w, prefix_len))
                }
                FieldMatch::Ternary { value, mask } => value | (rnd & !mask),
                FieldMatch::Range { low, high } => match (high - low).checked_add(1) {
                    Some(n) => low + r.u128() % n,
                    None => rnd,
                },
            }
        })
        .collect()
}

/// Linear-scan reference with the same semantics as [`MatchTable`].
#[derive(Clone)]
struct Reference {
    fields: Vec<KeyField>,
    cap: usize,
    entries: Vec<Option<(Vec<FieldMatch>, u32)>>,
}

impl Reference {
    fn live(&self) -> impl Iterator<Item = (EntryId, &Vec<FieldMatch>, u32)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|(k, p)| (i as EntryId, k, *p)))
    }
    fn find(&self, k: &[FieldMatch], p: u32) -> Option<EntryId> {
        self.live().find(|e| *e.1 == k && e.2 == p).map(|e| e.0)
    }
    fn insert(&mut self, k: &[FieldMatch], p: u32) -> Result<EntryId, TableError> {
        if self.find(k, p).is_some() {
            return Err(TableError::AlreadyExists);
        }
        if self.live().count() >= self.cap {
            return Err(TableError::Full);
        }
        let id = match self.entries.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.entries.push(None);
                self.entries.len() - 1
            }
        };
        self.entries[id] = Some((k.to_vec(), p));
        Ok(id as EntryId)
    }
    fn remove(&mut self, k: &[FieldMatch], p: u32) -> Result<EntryId, TableError> {
        let id = self.find(k, p).ok_or(TableError::NotFound)?;
        self.entries[id as usize] = None;
        Ok(id)
    }
    fn matching(&self, key: &[u128]) -> impl Iterator<Item = (EntryId, &Vec<FieldMatch>, u32)> {
        self.live().filter(move |(_, k, _)| {
            k.iter()
                .zip(key)
                .zip(&self.fields)
                .all(|((m, &v), f)| field_matches(m, v, f.bitwidth))
        })
    }
    /// Winner: (id, priority, prefix length of the lpm field if any).
    fn lookup(&self, key: &[u128], by_prio: bool) -> Option<(EntryId, u32)> {
        let lpm_len = |k: &Vec<FieldMatch>| {
            k.iter()
                .map(|m| match m {
                    FieldMatch::Lpm { prefix_len, .. } => *prefix_len,
                    _ => 0,
                })
                .sum::<u8>()
        };
        if by_prio {
            self.matching(key).max_by_key(|e| e.2).map(|e| (e.0, e.2))
        } else {
            self.matching(key)
                .max_by_key(|e| lpm_len(e.1))
                .map(|e| (e.0, e.2))
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Shape {
    Exact,
    Lpm,
    Mixed,
}

fn gen_spec(r: &mut Rng, shape: Shape) -> Vec<KeyField> {
    let width = |r: &mut Rng| -> u8 {
        match r.below(5) {
            0 => 128,
            1 => [8, 16, 32, 48, 64][r.below(5) as usize],
            _ => 1 + r.below(128) as u8,
        }
    };
    let n = 1 + r.below(3) as usize;
    let mut v: Vec<KeyField> = (0..n)
        .map(|_| {
            let kind = match shape {
                Shape::Exact | Shape::Lpm => MatchKind::Exact,
                Shape::Mixed => [
                    MatchKind::Exact,
                    MatchKind::Lpm,
                    MatchKind::Ternary,
                    MatchKind::Range,
                    MatchKind::Optional,
                ][r.below(5) as usize],
            };
            KeyField {
                bitwidth: width(r),
                kind,
            }
        })
        .collect();
    match shape {
        Shape::Lpm => {
            let i = r.below(n as u64) as usize;
            v[i].kind = MatchKind::Lpm;
            if r.below(2) == 0 {
                v[i].bitwidth = [8, 12, 32, 128][r.below(4) as usize];
            }
        }
        Shape::Mixed => {
            if !v.iter().any(|f| {
                matches!(
                    f.kind,
                    MatchKind::Ternary | MatchKind::Range | MatchKind::Optional
                )
            }) {
                v[0].kind = MatchKind::Ternary;
            }
        }
        Shape::Exact => {}
    }
    v
}

fn run_model(shape: Shape, seed: u64, nops: usize) {
    let mut r = Rng(seed);
    let fields = gen_spec(&mut r, shape);
    let cap = if r.below(4) == 0 { 8 } else { 1000 };
    let mut t = MatchTable::new(&fields, cap);
    let by_prio = t.needs_priority();
    assert_eq!(by_prio, matches!(shape, Shape::Mixed));
    let mut reference = Reference {
        fields: fields.clone(),
        cap,
        entries: Vec::new(),
    };
    let mut twin: Option<MatchTable> = None;
    for step in 0..nops {
        if step == nops / 2 {
            twin = Some(t.clone());
        }
        let prio = if by_prio { 1 + r.below(6) as u32 } else { 0 };
        let live: Vec<(EntryId, Vec<FieldMatch>, u32)> = reference
            .live()
            .map(|(i, k, p)| (i, k.clone(), p))
            .collect();
        match r.below(10) {
            0..=3 => {
                let key: MatchKey = fields.iter().map(|&f| gen_field(&mut r, f)).collect();
                let want = reference.insert(&key, prio);
                assert_eq!(t.validate(&key, prio), Ok(()));
                let got = t.insert(key.clone(), prio);
                assert_eq!(got, want, "insert {key:?} prio {prio} into {fields:?}");
                if let Some(tw) = &mut twin {
                    assert_eq!(tw.insert(key, prio), want, "twin diverged");
                }
            }
            4 | 5 if !live.is_empty() => {
                let (id, k, p) = &live[r.below(live.len() as u64) as usize];
                assert_eq!(t.remove(k, *p), Ok(*id));
                assert_eq!(reference.remove(k, *p), Ok(*id));
                if let Some(tw) = &mut twin {
                    assert_eq!(tw.remove(k, *p), Ok(*id));
                }
                assert_eq!(t.remove(k, *p), Err(TableError::NotFound));
            }
            _ => {
                let key = if !live.is_empty() && r.below(3) != 0 {
                    let (_, k, _) = &live[r.below(live.len() as u64) as usize];
                    key_in(&mut r, &fields, k)
                } else {
                    fields.iter().map(|f| r.value(f.bitwidth)).collect()
                };
                let want = reference.lookup(&key, by_prio);
                let got = t.lookup(&key);
                if by_prio {
                    let got_p = got.map(|id| t.key_of(id).expect("live winner").1);
                    assert_eq!(got_p, want.map(|w| w.1), "lookup {key:x?} in {fields:?}");
                    if let Some(id) = got {
                        assert!(reference.matching(&key).any(|e| e.0 == id));
                    }
                } else {
                    assert_eq!(got, want.map(|w| w.0), "lookup {key:x?} in {fields:?}");
                }
                if let Some(tw) = &twin {
                    assert_eq!(tw.lookup(&key), got);
                }
            }
        }
    }
    assert_eq!(t.len(), reference.live().count());
    let mine: Vec<_> = t.iter().map(|(i, k, p)| (i, k.to_vec(), p)).collect();
    let theirs: Vec<_> = reference
        .live()
        .map(|(i, k, p)| (i, k.clone(), p))
        .collect();
    assert_eq!(mine, theirs);
    for (id, k, p) in &theirs {
        assert_eq!(t.find(k, *p), Some(*id));
        assert_eq!(t.key_of(*id), Some((&k[..], *p)));
    }
    // Removing everything must leave empty indexes behind.
    for (_, k, p) in &theirs {
        t.remove(k, *p).unwrap();
    }
    let key: Vec<u128> = fields.iter().map(|f| r.value(f.bitwidth)).collect();
    assert_eq!(t.lookup(&key), None);
    assert!(t.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn exact_matches_reference(seed in any::<u64>()) {
        run_model(Shape::Exact, seed, 300);
    }

    #[test]
    fn lpm_matches_reference(seed in any::<u64>()) {
        run_model(Shape::Lpm, seed, 300);
    }

    #[test]
    fn mixed_matches_reference(seed in any::<u64>()) {
        run_model(Shape::Mixed, seed, 300);
    }
}

/// A dense LPM run: many nested prefixes of one address family, few exact parts.
#[test]
fn lpm_dense_nested() {
    for seed in 0..20u64 {
        let mut r = Rng(seed);
        let w = [32u8, 128, 20][seed as usize % 3];
        let fields = [
            KeyField {
                bitwidth: 2,
                kind: MatchKind::Exact,
            },
            KeyField {
                bitwidth: w,
                kind: MatchKind::Lpm,
            },
        ];
        let base = r.u128() & ones(w);
        let mut t = MatchTable::new(&fields, 10_000);
        let mut reference = Reference {
            fields: fields.to_vec(),
            cap: 10_000,
            entries: Vec::new(),
        };
        for step in 0..3000 {
            let l = r.below(u64::from(w) + 1) as u8;
            // Prefixes of `base` with a few flipped bits near the end: heavy nesting.
            let near_end = prefix_mask(w, l) & !prefix_mask(w, l.saturating_sub(3));
            let v = (base ^ (r.u128() & near_end)) & prefix_mask(w, l);
            let v = if r.below(2) == 0 {
                base & prefix_mask(w, l)
            } else {
                v
            };
            let key: MatchKey = vec![
                FieldMatch::Exact(u128::from(r.below(2) as u8)),
                FieldMatch::Lpm {
                    value: v,
                    prefix_len: l,
                },
            ]
            .into();
            if step % 3 == 2 {
                let _ = t.remove(&key, 0);
                let _ = reference.remove(&key, 0);
            } else {
                assert_eq!(t.insert(key.clone(), 0), reference.insert(&key, 0));
            }
            let probe = vec![
                u128::from(r.below(2) as u8),
                base ^ (r.u128() & ones(w) & ones(r.below(u64::from(w) + 1) as u8)),
            ];
            assert_eq!(
                t.lookup(&probe),
                reference.lookup(&probe, false).map(|x| x.0)
            );
        }
    }
}

fn f(bitwidth: u8, kind: MatchKind) -> KeyField {
    KeyField { bitwidth, kind }
}

#[test]
fn errors() {
    use FieldMatch as M;
    let t = MatchTable::new(
        &[
            f(8, MatchKind::Exact),
            f(8, MatchKind::Lpm),
            f(8, MatchKind::Ternary),
            f(8, MatchKind::Range),
            f(8, MatchKind::Optional),
        ],
        1,
    );
    let ok = [
        M::Exact(1),
        M::Lpm {
            value: 0x80,
            prefix_len: 1,
        },
        M::Ternary { value: 1, mask: 3 },
        M::Range { low: 1, high: 2 },
        M::Optional(None),
    ];
    assert!(t.needs_priority());
    assert_eq!(t.validate(&ok, 1), Ok(()));
    let bad = |i: usize, m: M| {
        let mut k = ok.clone();
        k[i] = m;
        t.validate(&k, 1)
    };
    let inv = TableError::InvalidKey;
    assert_eq!(t.validate(&ok[..4], 1), Err(inv("wrong number of fields")));
    assert_eq!(
        bad(0, M::Optional(Some(1))),
        Err(inv("field match kind differs from the key spec"))
    );
    assert_eq!(
        bad(0, M::Exact(256)),
        Err(inv("value wider than the field"))
    );
    assert_eq!(
        bad(4, M::Optional(Some(256))),
        Err(inv("value wider than the field"))
    );
    assert_eq!(
        bad(
            1,
            M::Lpm {
                value: 0x40,
                prefix_len: 1
            }
        ),
        Err(inv("lpm value has bits set beyond the prefix"))
    );
    assert_eq!(
        bad(
            1,
            M::Lpm {
                value: 0,
                prefix_len: 9
            }
        ),
        Err(inv("prefix longer than the field"))
    );
    assert_eq!(
        bad(2, M::Ternary { value: 4, mask: 3 }),
        Err(inv("ternary value has bits outside the mask"))
    );
    assert_eq!(
        bad(
            2,
            M::Ternary {
                value: 0,
                mask: 0x100
            }
        ),
        Err(inv("value wider than the field"))
    );
    assert_eq!(
        bad(3, M::Range { low: 3, high: 2 }),
        Err(inv("range low > high"))
    );
    assert_eq!(
        bad(3, M::Range { low: 0, high: 256 }),
        Err(inv("value wider than the field"))
    );
    assert!(matches!(
        t.validate(&ok, 0),
        Err(TableError::InvalidPriority(_))
    ));

    let mut t = t;
    assert_eq!(
        t.insert(ok.clone().into(), 0).map(|_| ()),
        Err(TableError::InvalidPriority(
            "must be non-zero for ternary/range/optional tables"
        ))
    );
    assert_eq!(t.len(), 0);
    assert_eq!(t.insert(ok.clone().into(), 5), Ok(0));
    assert_eq!(
        t.insert(ok.clone().into(), 5),
        Err(TableError::AlreadyExists)
    );
    assert_eq!(t.insert(ok.clone().into(), 6), Err(TableError::Full));
    assert_eq!(t.remove(&ok, 6), Err(TableError::NotFound));
    assert_eq!(t.find(&ok, 5), Some(0));
    assert_eq!(t.remove(&ok, 5), Ok(0));
    assert_eq!(t.remove(&ok, 5), Err(TableError::NotFound));

    let mut e = MatchTable::new(&[f(16, MatchKind::Exact)], 4);
    assert!(!e.needs_priority());
    assert!(matches!(
        e.insert(vec![M::Exact(1)].into(), 1),
        Err(TableError::InvalidPriority(_))
    ));
    let mut l = MatchTable::new(&[f(32, MatchKind::Lpm)], 4);
    assert!(!l.needs_priority());
    let k: MatchKey = vec![M::Lpm {
        value: 0,
        prefix_len: 0,
    }]
    .into();
    assert!(matches!(
        l.insert(k.clone(), 3),
        Err(TableError::InvalidPriority(_))
    ));
    assert_eq!(l.insert(k, 0), Ok(0));
    assert_eq!(l.lookup(&[0xdead_beef]), Some(0));
    assert_eq!(e.insert(vec![M::Exact(7)].into(), 0), Ok(0));
    e.clear();
    assert_eq!(e.len(), 0);
    assert_eq!(e.lookup(&[7]), None);
    assert_eq!(e.insert(vec![M::Exact(8)].into(), 0), Ok(0));
}

#[test]
fn deterministic_lowest_free_ids() {
    let ops = |t: &mut MatchTable| -> Vec<EntryId> {
        let mut out = Vec::new();
        for v in 0..10u128 {
            out.push(t.insert(vec![FieldMatch::Exact(v)].into(), 0).unwrap());
        }
        for v in [7u128, 2, 5] {
            out.push(t.remove(&[FieldMatch::Exact(v)], 0).unwrap());
        }
        for v in 20..25u128 {
            out.push(t.insert(vec![FieldMatch::Exact(v)].into(), 0).unwrap());
        }
        out
    };
    let mut a = MatchTable::new(&[f(32, MatchKind::Exact)], 100);
    let mut b = MatchTable::new(&[f(32, MatchKind::Exact)], 100);
    let ia = ops(&mut a);
    assert_eq!(ia, ops(&mut b));
    assert_eq!(&ia[13..], &[2, 5, 7, 10, 11]);
    let c = a.clone();
    assert!(c.iter().eq(a.iter()));
}

#[test]
fn selector_weights() {
    let mut p = ActionProfile::<&str>::new(4, 2, 8);
    p.insert_member(10, "a").unwrap();
    p.insert_member(20, "b").unwrap();
    p.insert_group(1, &[(10, 1), (20, 3)], 0).unwrap();
    let gi = p.group_index(1).unwrap();
    let mut counts = [0u32; 2];
    let mut r = Rng(1);
    for _ in 0..40_000 {
        match *p.select_by_index(gi, r.next()).unwrap() {
            "a" => counts[0] += 1,
            _ => counts[1] += 1,
        }
    }
    assert!((9_000..11_000).contains(&counts[0]), "{counts:?}");
    assert!((29_000..31_000).contains(&counts[1]), "{counts:?}");
    // Exactly 1:3 over consecutive hashes.
    let a = (0..4u64).filter(|&h| p.select(1, h) == Some(&"a")).count();
    assert_eq!(a, 1);
    p.modify_member(20, "c").unwrap();
    assert_eq!(p.select(1, 3), Some(&"c"));
}

#[test]
fn profile_errors_and_refs() {
    use ProfileError as E;
    let mut p = ActionProfile::<u32>::new(2, 1, 4);
    assert_eq!(p.insert_member(1, 10), Ok(()));
    assert_eq!(p.insert_member(1, 10), Err(E::AlreadyExists));
    assert_eq!(p.insert_member(2, 20), Ok(()));
    assert_eq!(p.insert_member(3, 30), Err(E::Full));
    assert_eq!(p.modify_member(3, 30), Err(E::NotFound));
    assert_eq!(p.insert_group(5, &[(9, 1)], 0), Err(E::MemberNotFound(9)));
    assert_eq!(p.insert_group(5, &[(1, 0)], 0), Err(E::InvalidWeight(1)));
    assert_eq!(
        p.insert_group(5, &[(1, 1), (1, 2)], 0),
        Err(E::DuplicateMember(1))
    );
    assert_eq!(
        p.insert_group(5, &[(1, 3), (2, 2)], 0),
        Err(E::GroupTooLarge)
    );
    assert_eq!(p.insert_group(5, &[(1, 1)], 8), Err(E::GroupTooLarge));
    assert_eq!(p.insert_group(5, &[(1, 2), (2, 1)], 3), Ok(()));
    assert_eq!(p.insert_group(5, &[], 0), Err(E::AlreadyExists));
    assert_eq!(p.insert_group(6, &[], 0), Err(E::Full));
    assert_eq!(p.remove_member(1), Err(E::InUse));
    assert_eq!(p.modify_group(5, &[(2, 1)], 0), Ok(()));
    assert_eq!(p.group(5), Some(&[(2, 1)][..]));
    assert_eq!(p.remove_member(1), Ok(()));
    assert_eq!(p.remove_member(1), Err(E::NotFound));
    assert_eq!(p.add_group_ref(5), Ok(0));
    assert_eq!(p.remove_group(5), Err(E::InUse));
    assert_eq!(p.release_group(5), Ok(()));
    assert_eq!(p.release_group(5), Err(E::NotFound));
    assert_eq!(p.remove_group(5), Ok(()));
    assert_eq!(p.add_member_ref(2), Ok(1));
    assert_eq!(p.remove_member(2), Err(E::InUse));
    assert_eq!(p.release_member(2), Ok(()));
    assert_eq!(p.remove_member(2), Ok(()));
    assert_eq!(p.members().count(), 0);
    assert_eq!(p.groups().count(), 0);
    // Empty group selects nothing; dense indices are reused lowest first.
    p.insert_member(7, 70).unwrap();
    assert_eq!(p.member_index(7), Some(0));
    p.insert_group(8, &[], 0).unwrap();
    assert_eq!(p.select(8, 123), None);
}

#[test]
fn hit_times() {
    let h = HitTimes::new(4);
    h.reset(1, 5_000_000);
    h.touch(1, 5_500_000);
    assert_eq!(h.last_hit(1), Some(5_000_000));
    h.touch(1, 6_000_000);
    assert_eq!(h.last_hit(1), Some(6_000_000));
    h.touch(9, 1);
    assert_eq!(h.last_hit(9), None);
    assert_eq!(h.clone().last_hit(1), Some(6_000_000));
}

fn max_insert_time(t: &mut MatchTable, keys: Vec<MatchKey>) -> std::time::Duration {
    let mut max = std::time::Duration::ZERO;
    for k in keys {
        let start = std::time::Instant::now();
        let r = t.insert(k, 0);
        max = max.max(start.elapsed());
        assert!(matches!(r, Ok(_) | Err(TableError::AlreadyExists)));
    }
    max
}

fn lpm_route(r: &mut Rng) -> MatchKey {
    let l = 8 + r.below(25) as u8;
    vec![FieldMatch::Lpm {
        value: (r.next() as u128 & ones(32)) & prefix_mask(32, l),
        prefix_len: l,
    }]
    .into()
}

/// One insert into a 1M-entry exact table and a 1M-route LPM table stays well under 1 ms.
/// Also prints lookup times.
#[test]
#[cfg_attr(debug_assertions, ignore = "timing: run with --release")]
fn million_entry_inserts_and_lookups() {
    use std::hint::black_box;
    use std::time::Instant;
    const N: usize = 1_000_000;
    let mut r = Rng(42);

    let mut t = MatchTable::new(&[f(32, MatchKind::Exact), f(16, MatchKind::Exact)], N + 100);
    let key = |r: &mut Rng| -> MatchKey {
        vec![
            FieldMatch::Exact(u128::from(r.next() as u32)),
            FieldMatch::Exact(u128::from(r.next() as u16)),
        ]
        .into()
    };
    let mut inserted = 0;
    while inserted < N {
        if t.insert(key(&mut r), 0).is_ok() {
            inserted += 1;
        }
    }
    let extra: Vec<MatchKey> = (0..100).map(|_| key(&mut r)).collect();
    let exact_max = max_insert_time(&mut t, extra);
    let probes: Vec<[u128; 2]> = t
        .iter()
        .step_by(7)
        .map(|(_, k, _)| [exact_value(&k[0]), exact_value(&k[1])])
        .collect();
    let start = Instant::now();
    for p in &probes {
        black_box(t.lookup(black_box(p)));
    }
    let exact_ns = start.elapsed().as_nanos() as f64 / probes.len() as f64;
    drop(t);

    let mut l = MatchTable::new(&[f(32, MatchKind::Lpm)], N + 100);
    while l.len() < N {
        let _ = l.insert(lpm_route(&mut r), 0);
    }
    let extra: Vec<MatchKey> = (0..100).map(|_| lpm_route(&mut r)).collect();
    let lpm_max = max_insert_time(&mut l, extra.clone());
    let mut lpm_rm_max = std::time::Duration::ZERO;
    for k in &extra {
        let s = Instant::now();
        let _ = l.remove(k, 0);
        lpm_rm_max = lpm_rm_max.max(s.elapsed());
    }
    let probes: Vec<[u128; 1]> = (0..1_000_000)
        .map(|_| [u128::from(r.next() as u32)])
        .collect();
    let start = Instant::now();
    for p in &probes {
        black_box(l.lookup(black_box(p)));
    }
    let lpm_ns = start.elapsed().as_nanos() as f64 / probes.len() as f64;

    println!(
        "exact 1M: max insert {exact_max:?}, lookup {exact_ns:.1} ns; \
         lpm 1M: max insert {lpm_max:?}, max remove {lpm_rm_max:?}, lookup {lpm_ns:.1} ns"
    );
    assert!(exact_max.as_micros() < 1000, "{exact_max:?}");
    assert!(lpm_max.as_micros() < 1000, "{lpm_max:?}");
    assert!(lpm_rm_max.as_micros() < 1000, "{lpm_rm_max:?}");
}

/// Tuple-space lookup time with 20 masks x 1k entries (prints, asserts nothing on speed).
#[test]
#[cfg_attr(debug_assertions, ignore = "timing: run with --release")]
fn ternary_lookup_time() {
    use std::hint::black_box;
    use std::time::Instant;
    let fields = [
        f(32, MatchKind::Ternary),
        f(32, MatchKind::Ternary),
        f(16, MatchKind::Exact),
    ];
    let mut t = MatchTable::new(&fields, 100_000);
    let mut r = Rng(7);
    let masks: Vec<(u128, u128)> = (0..20)
        .map(|i| (prefix_mask(32, 8 + i), prefix_mask(32, 32 - i)))
        .collect();
    for (i, &(m0, m1)) in masks.iter().enumerate() {
        for j in 0..1000u32 {
            let k: MatchKey = vec![
                FieldMatch::Ternary {
                    value: u128::from(r.next() as u32) & m0,
                    mask: m0,
                },
                FieldMatch::Ternary {
                    value: u128::from(r.next() as u32) & m1,
                    mask: m1,
                },
                FieldMatch::Exact(u128::from(r.next() as u16 & 7)),
            ]
            .into();
            let _ = t.insert(k, 1 + (i as u32) * 1000 + j);
        }
    }
    let all: Vec<(Vec<u128>, u32)> = t
        .iter()
        .map(|(_, k, p)| (key_in(&mut r, &fields, k), p))
        .collect();
    // Hits on random entries (early exit varies) and misses (all 20 tuples probed). Keys are
    // stored contiguously so that the loop measures the lookup, not cache misses on the keys.
    let hits: Vec<u128> = (0..200_000)
        .flat_map(|i| all[i % all.len()].0.clone())
        .collect();
    let misses: Vec<u128> = (0..200_000)
        .flat_map(|_| [u128::from(r.next() as u32), u128::from(r.next() as u32), 9])
        .collect();
    for (name, keys) in [("hit", &hits), ("miss", &misses)] {
        let start = Instant::now();
        for k in keys.chunks_exact(3) {
            black_box(t.lookup(black_box(k)));
        }
        let ns = start.elapsed().as_nanos() as f64 / (keys.len() / 3) as f64;
        println!("ternary 20 masks x 1k: {name} lookup {ns:.1} ns");
    }
}

/// Tuple-space filters through growth, the always-pass state of very large tuples, stale-bit
/// rebuilds after deletes, and filter compaction: lookups agree with a linear scan.
#[test]
fn ternary_filters_grow_and_shrink() {
    let fields = [f(32, MatchKind::Ternary), f(16, MatchKind::Ternary)];
    let masks = [
        (prefix_mask(32, 24), ones(16)),
        (prefix_mask(32, 16), 0),
        (ones(32), 0xff00),
    ];
    let mut t = MatchTable::new(&fields, 20_000);
    let mut r = Rng(99);
    let mut live: Vec<(MatchKey, u32)> = Vec::new();
    let check = |t: &MatchTable, live: &[(MatchKey, u32)], r: &mut Rng| {
        for i in 0..300 {
            let key: Vec<u128> = if i % 2 == 0 && !live.is_empty() {
                let j = r.below(live.len() as u64) as usize;
                key_in(r, &fields, &live[j].0)
            } else {
                vec![u128::from(r.next() as u32), u128::from(r.next() as u16)]
            };
            let want = live
                .iter()
                .filter(|(k, _)| {
                    k.iter()
                        .zip(&key)
                        .zip(&fields)
                        .all(|((m, &v), f)| field_matches(m, v, f.bitwidth))
                })
                .map(|&(_, p)| p)
                .max();
            let got = t.lookup(&key).map(|id| t.key_of(id).unwrap().1);
            assert_eq!(got, want, "{key:x?}");
        }
    };
    for round in 0..3 {
        let n = [15_000, 3_000, 6_000][round];
        for _ in 0..n {
            let (m0, m1) = masks[r.below(masks.len() as u64) as usize];
            let k: MatchKey = vec![
                FieldMatch::Ternary {
                    value: u128::from(r.next() as u32) & m0,
                    mask: m0,
                },
                FieldMatch::Ternary {
                    value: u128::from(r.next() as u16) & m1,
                    mask: m1,
                },
            ]
            .into();
            let p = 1 + r.below(1000) as u32;
            if t.insert(k.clone(), p).is_ok() {
                live.push((k, p));
            }
        }
        check(&t, &live, &mut r);
        // Delete most entries, in random order.
        let keep = live.len() / 8;
        while live.len() > keep {
            let (k, p) = live.swap_remove(r.below(live.len() as u64) as usize);
            t.remove(&k, p).unwrap();
            if live.len().is_multiple_of(1000) {
                check(&t, &live, &mut r);
            }
        }
        check(&t, &live, &mut r);
    }
}

/// Expanded (small total weight) and cumulative (large) groups both select the member owning
/// `hash % total_weight`.
#[test]
fn selector_expanded_and_cumulative_agree() {
    let mut p = ActionProfile::<u32>::new(200, 4, 0);
    for m in 0..200 {
        p.insert_member(m, m * 10).unwrap();
    }
    let mut r = Rng(5);
    for (g, max_w) in [(1u32, 40u64), (2, 250), (3, 1)] {
        let members: Vec<(u32, u32)> = (0..64)
            .map(|i| (i * 3 % 200, 1 + r.below(max_w) as u32))
            .collect();
        p.insert_group(g, &members, 0).unwrap();
        let total: u64 = members.iter().map(|&(_, w)| u64::from(w)).sum();
        for _ in 0..5000 {
            let h = r.next();
            let mut x = h % total;
            let want = members
                .iter()
                .find(|&&(_, w)| {
                    if x < u64::from(w) {
                        true
                    } else {
                        x -= u64::from(w);
                        false
                    }
                })
                .map(|&(m, _)| m * 10);
            assert_eq!(p.select(g, h).copied(), want, "group {g} total {total}");
        }
    }
}
