//! Pipeline micro-benchmarks on one core, no I/O: the parser, each match kind at 1k/100k/1M
//! entries, `basic` per packet in batches of 32, and control-plane write visibility at 1M entries.
//!
//! Run: `cargo bench -p bench --bench pipeline` (figures go to docs/performance.md).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench::{Workload, basic_with, ipv4_tcp_frame, traffic};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pipeline::control::{
    ActionSpec, Atomicity, Control, Entity, TableAction, TableEntry, Update, UpdateKind,
};
use pipeline::externs::Rng;
use pipeline::frame::Frame;
use pipeline::metadata::StdMeta;
use pipeline::runtime::{Dest, Worker};
use pipeline::schema::{ActionScope, SchemaBuilder, TableIx, TableSpec};
use pipeline::table::{FieldMatch, KeyField, MatchKind, MatchTable};
use pipeline::wire::{EthernetFrame, Ipv4Packet, TcpPacket};

fn parser(c: &mut Criterion) {
    let frame = ipv4_tcp_frame(0x0a000001, 0x0a000102, 1234, 80, 64);
    c.bench_function("parser/eth_ipv4_tcp", |b| {
        b.iter(|| {
            let f = black_box(&frame[..]);
            let eth = EthernetFrame::new_checked(f).ok()?;
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
            Some((ip.dst_addr(), tcp.dst_port()))
        })
    });
}

/// A table of `n` entries of `kind` and `n` lookup keys that hit it (mostly).
fn build(kind: MatchKind, n: usize, rng: &mut Rng) -> (MatchTable, Vec<[u128; 2]>) {
    let mut keys = Vec::with_capacity(n.min(4096));
    let (fields, prio) = match kind {
        MatchKind::Exact => (vec![KeyField { bitwidth: 48, kind }], false),
        MatchKind::Lpm => (vec![KeyField { bitwidth: 32, kind }], false),
        MatchKind::Ternary => (
            vec![
                KeyField { bitwidth: 32, kind },
                KeyField { bitwidth: 16, kind },
            ],
            true,
        ),
        MatchKind::Range => (
            vec![
                KeyField {
                    bitwidth: 16,
                    kind: MatchKind::Exact,
                },
                KeyField { bitwidth: 16, kind },
            ],
            true,
        ),
        MatchKind::Optional => (
            vec![
                KeyField { bitwidth: 32, kind },
                KeyField { bitwidth: 16, kind },
            ],
            true,
        ),
    };
    let mut t = MatchTable::new(&fields, n);
    let mut i = 0u32;
    while t.len() < n {
        i += 1;
        let a = u128::from(rng.next_u64());
        let (key, probe): (Vec<FieldMatch>, [u128; 2]) = match kind {
            MatchKind::Exact => (
                vec![FieldMatch::Exact(a & 0xffff_ffff_ffff)],
                [a & 0xffff_ffff_ffff, 0],
            ),
            MatchKind::Lpm => {
                let len = [16u8, 20, 24, 24, 24, 28, 32][rng.range(0, 6) as usize];
                let v = (a as u32 & (u32::MAX << (32 - u32::from(len)))) as u128;
                (
                    vec![FieldMatch::Lpm {
                        value: v,
                        prefix_len: len,
                    }],
                    [v | (a >> 40) & 0xff, 0],
                )
            }
            MatchKind::Ternary => {
                // 20 masks: prefixes of the 32-bit field crossed with 4 masks of the 16-bit one.
                let m = rng.range(0, 19) as u32;
                let m32 = u128::from(u32::MAX << (32 - (8 + (m % 5) * 6)));
                let m16 = [0xffffu128, 0xff00, 0xfff0, 0x00ff][(m / 5) as usize];
                let (v32, v16) = (a & m32, (a >> 32) & m16);
                let key = vec![
                    FieldMatch::Ternary {
                        value: v32,
                        mask: m32,
                    },
                    FieldMatch::Ternary {
                        value: v16,
                        mask: m16,
                    },
                ];
                (key, [a & 0xffff_ffff, (a >> 32) & 0xffff])
            }
            MatchKind::Range => {
                let lo = (a >> 16) & 0xff00;
                let key = vec![
                    FieldMatch::Exact(a & 0xffff),
                    FieldMatch::Range {
                        low: lo,
                        high: lo + 0xff,
                    },
                ];
                (key, [a & 0xffff, lo + 7])
            }
            MatchKind::Optional => {
                let (v32, v16) = (a & 0xffff_ffff, (a >> 32) & 0xffff);
                let o16 = if rng.range(0, 3) == 0 {
                    FieldMatch::Optional(None)
                } else {
                    FieldMatch::Optional(Some(v16))
                };
                (vec![FieldMatch::Optional(Some(v32)), o16], [v32, v16])
            }
        };
        let priority = if prio { i } else { 0 };
        if t.insert(key.into_boxed_slice(), priority).is_ok() && keys.len() < 4096 {
            keys.push(probe);
        }
    }
    (t, keys)
}

fn tables(c: &mut Criterion) {
    let mut g = c.benchmark_group("table");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(30);
    for kind in [
        MatchKind::Exact,
        MatchKind::Lpm,
        MatchKind::Ternary,
        MatchKind::Range,
        MatchKind::Optional,
    ] {
        for n in [1_000usize, 100_000, 1_000_000] {
            let mut rng = Rng::new(n as u64);
            let (t, keys) = build(kind, n, &mut rng);
            let nf = t.fields().len();
            g.throughput(Throughput::Elements(keys.len() as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("{kind:?}").to_lowercase(), n),
                &keys,
                |b, keys| {
                    b.iter(|| {
                        let mut hits = 0u32;
                        for k in keys {
                            hits += t.lookup(&k[..nf]).is_some() as u32;
                        }
                        hits
                    })
                },
            );
        }
    }
    g.finish();
}

/// Benchmark group `name`: `pipe` per packet, ingress and egress, in batches of 32 on one core,
/// traffic of 64, 4,096 and 65,536 flows towards `prefixes`.
fn batches(
    c: &mut Criterion,
    name: &str,
    pipe: &Arc<pipeline::runtime::Pipeline>,
    prefixes: &[(u32, u8)],
) {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(32));
    for flows in [64usize, 4096, 65536] {
        let frames = traffic(prefixes, flows, 64);
        let mut worker = Worker::new(pipe.clone(), 0, 1);
        let mut bufs: Vec<Vec<u8>> = (0..32).map(|_| vec![0u8; 2048]).collect();
        let mut next = 0usize;
        let mut now = 0u64;
        g.bench_function(BenchmarkId::new("batch32_flows", flows), |b| {
            b.iter(|| {
                worker.begin_batch();
                let mut sent = 0u32;
                for buf in bufs.iter_mut() {
                    let src = &frames[next % frames.len()];
                    next += 1;
                    now += 100;
                    buf[256..256 + src.len()].copy_from_slice(src);
                    let mut f = Frame::new(buf, 256, src.len());
                    let mut md = StdMeta::new(1, src.len(), now);
                    let v = worker.ingress(now, &mut f, &mut md);
                    if let Dest::Port { port, .. } = v.dest {
                        md.egress_port = port;
                        worker.egress(now, &mut f, &mut md);
                        sent += 1;
                    }
                }
                worker.end_batch();
                sent
            })
        });
    }
    g.finish();
    let drops: u64 = pipe
        .control
        .drop_counts()
        .iter()
        .map(|(_, d)| d.packets)
        .sum();
    eprintln!("{name}: {drops} drops");
}

/// `basic` on the workload, per packet, in batches of 32 (ingress and egress, one core).
/// The traffic cycles over `flows` distinct 5-tuples to random installed routes: 64 flows keep
/// the working set in L1/L2, 65536 spread it over the 100k-route trie (memory-latency bound).
fn basic(c: &mut Criterion) {
    let (pipe, prefixes) = basic_with(Workload::default(), 1);
    // The workload's ACL never matches the traffic: every lookup is a full miss.
    batches(c, "basic", &pipe, &prefixes);
}

/// The loader's test router (`pipeline/bmv2/tests/programs/router.json`: a P4 program in p4c's
/// BMv2 JSON, checksums verified and updated, LPM route, ternary ACL, egress counter and
/// register) on `basic`'s workload: the same routes and traffic, per packet, in batches of 32;
/// side by side with `basic` in one run.
fn bmv2_router(c: &mut Criterion) {
    let (_, prefixes) = basic_with(Workload::default(), 1);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pipeline/bmv2/tests/programs/router.json"
    );
    let text = std::fs::read_to_string(path).expect("router.json");
    // Room for basic's 100k routes (the file's table holds 1,024).
    let mut json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    for t in json["pipelines"][0]["tables"]
        .as_array_mut()
        .expect("tables")
    {
        if t["name"] == "ingress.ipv4_lpm" {
            t["max_size"] = 131_072.into();
        }
    }
    let program = bmv2::load(&json.to_string(), "router").expect("the router loads");
    let pipe = pipeline::runtime::Pipeline::new(Arc::new(program), 1, Default::default());
    let s = pipe.control.schema().clone();
    let table = s.tables[s.table_by_name("ipv4_lpm").unwrap()].id;
    let nhop = s.actions[s.action_by_name("set_nhop").unwrap()].id;
    let updates: Vec<Update> = prefixes
        .iter()
        .enumerate()
        .map(|(i, &(value, len))| Update {
            kind: UpdateKind::Insert,
            entity: Entity::TableEntry(TableEntry {
                table_id: table,
                matches: vec![(
                    1,
                    FieldMatch::Lpm {
                        value: u128::from(value),
                        prefix_len: len,
                    },
                )],
                action: Some(TableAction::Action(ActionSpec {
                    action_id: nhop,
                    params: vec![
                        (1, 0x0200_0000_0000 | i as u128),
                        (2, 0x0200_0000_00fe),
                        (3, 1 + (i as u128 % 4)),
                    ],
                })),
                ..TableEntry::default()
            }),
        })
        .collect();
    for chunk in updates.chunks(10_000) {
        for r in pipe.control.write(chunk, Atomicity::ContinueOnError) {
            r.expect("route");
        }
    }
    batches(c, "bmv2_router", &pipe, &prefixes);
}

/// Single-entry write visibility with 1M entries in the written table: time from the start of
/// `Control::write` until a fresh snapshot returns the new entry on lookup.
fn write_visibility(c: &mut Criterion) {
    let mut b = SchemaBuilder::new("visibility", "0");
    let fwd = b.action("fwd", &[("port", 9)]);
    let exact = b.table(TableSpec {
        name: "exact",
        fields: vec![("key", 48, MatchKind::Exact)],
        actions: vec![(fwd, ActionScope::TableAndDefault)],
        default_action: (fwd, vec![0]),
        const_default: false,
        size: 1_100_000,
        idle_timeout: false,
    });
    let lpm = b.table(TableSpec {
        name: "lpm",
        fields: vec![("key", 32, MatchKind::Lpm)],
        actions: vec![(fwd, ActionScope::TableAndDefault)],
        default_action: (fwd, vec![0]),
        const_default: false,
        size: 1_100_000,
        idle_timeout: false,
    });
    let schema = Arc::new(b.build().expect("schema"));
    let control = Control::new(schema.clone(), 1);
    let action = TableAction::Action(ActionSpec {
        action_id: schema.actions[fwd].id,
        params: vec![(1, 1)],
    });
    let entry = |t: TableIx, m: FieldMatch| TableEntry {
        table_id: schema.tables[t.index()].id,
        matches: vec![(1, m)],
        action: Some(action.clone()),
        ..TableEntry::default()
    };
    let mut rng = Rng::new(3);
    let mut ups = Vec::with_capacity(1000);
    for i in 0..1_000_000u64 {
        ups.push(Update {
            kind: UpdateKind::Insert,
            entity: Entity::TableEntry(entry(exact, FieldMatch::Exact(u128::from(i) << 8))),
        });
        let len = rng.range(8, 32) as u8;
        let v = (rng.next_u64() as u32 & (u32::MAX << (32 - u32::from(len)))) as u128;
        ups.push(Update {
            kind: UpdateKind::Insert,
            entity: Entity::TableEntry(entry(
                lpm,
                FieldMatch::Lpm {
                    value: v,
                    prefix_len: len,
                },
            )),
        });
        if ups.len() >= 2000 {
            // Duplicate random prefixes fail with ALREADY_EXISTS; that is fine here.
            let _ = control.write(&ups, Atomicity::ContinueOnError);
            ups.clear();
        }
    }
    let mut g = c.benchmark_group("control");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    let mut next = 0u64;
    g.bench_function("write_visible_exact_1m", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                next += 1;
                let key = (next << 8) | 1;
                let up = Update {
                    kind: UpdateKind::Insert,
                    entity: Entity::TableEntry(entry(exact, FieldMatch::Exact(u128::from(key)))),
                };
                let t0 = Instant::now();
                control.write(std::slice::from_ref(&up), Atomicity::ContinueOnError)[0]
                    .clone()
                    .expect("insert");
                let snap = control.snapshot();
                assert!(
                    snap.tables[exact.index()]
                        .matcher
                        .lookup(&[u128::from(key)])
                        .is_some()
                );
                total += t0.elapsed();
                drop(snap);
                // Untimed: keep the table at 1M entries.
                let del = Update {
                    kind: UpdateKind::Delete,
                    entity: up.entity,
                };
                control.write(std::slice::from_ref(&del), Atomicity::ContinueOnError)[0]
                    .clone()
                    .expect("delete");
            }
            total
        })
    });
    g.bench_function("write_visible_lpm_1m", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                next += 1;
                // /32s in 240.0.0.0/4, which the random fill almost never covers with a /32.
                let v = 0xf000_0000u32 | (next as u32 & 0x0fff_ffff);
                let up = Update {
                    kind: UpdateKind::Insert,
                    entity: Entity::TableEntry(entry(
                        lpm,
                        FieldMatch::Lpm {
                            value: u128::from(v),
                            prefix_len: 32,
                        },
                    )),
                };
                let t0 = Instant::now();
                let r = control.write(std::slice::from_ref(&up), Atomicity::ContinueOnError);
                let snap = control.snapshot();
                let hit = snap.tables[lpm.index()].matcher.lookup(&[u128::from(v)]);
                total += t0.elapsed();
                black_box((r, hit));
                drop(snap);
                let del = Update {
                    kind: UpdateKind::Delete,
                    entity: up.entity,
                };
                let _ = control.write(std::slice::from_ref(&del), Atomicity::ContinueOnError);
            }
            total
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    parser,
    tables,
    basic,
    bmv2_router,
    write_visibility
);
criterion_main!(benches);
