//! Where the time of `basic` goes: each table of the benchmark workload looked up alone, on the
//! benchmark's traffic, next to the whole ingress+egress. `cargo run --release -p bench --example breakdown`
use std::time::Instant;

use bench::{Workload, basic_with, traffic};
use pipeline::frame::Frame;
use pipeline::metadata::StdMeta;
use pipeline::runtime::{Dest, Worker};

fn main() {
    let acl_entries = std::env::args().nth(1).map_or(1000, |a| a.parse().unwrap());
    let (pipe, prefixes) = basic_with(
        Workload {
            acl_entries,
            ..Workload::default()
        },
        1,
    );
    let flows = std::env::var("FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    let frames = traffic(&prefixes, flows, 64);
    let snap = pipe.control.snapshot();
    let s = pipe.control.schema();
    let t = |n: &str| s.table_by_name(n).unwrap();
    let keys: Vec<(u128, u128, u128, u128)> = frames
        .iter()
        .map(|f| {
            let src = u128::from(u32::from_be_bytes(f[26..30].try_into().unwrap()));
            let dst = u128::from(u32::from_be_bytes(f[30..34].try_into().unwrap()));
            let dport = u128::from(u16::from_be_bytes(f[36..38].try_into().unwrap()));
            (
                src,
                dst,
                dport,
                u128::from(u16::from_be_bytes(f[34..36].try_into().unwrap())),
            )
        })
        .collect();
    let n = if std::env::args().nth(2).is_some() {
        20_000_000usize
    } else {
        2_000_000
    };
    let only_basic = std::env::args().nth(2).is_some();
    let time = |name: &str, f: &mut dyn FnMut(usize) -> bool| {
        if only_basic && !name.starts_with("basic") {
            return;
        }
        let t0 = Instant::now();
        let mut hits = 0usize;
        for i in 0..n {
            hits += f(i % keys.len()) as usize;
        }
        println!(
            "{name:<28} {:>7.1} ns/op  ({hits} hits)",
            t0.elapsed().as_nanos() as f64 / n as f64
        );
    };
    let acl = &snap.tables[t("acl")].matcher;
    time("acl ternary (8 fields)", &mut |i| {
        let (src, dst, dport, sport) = keys[i];
        acl.lookup(&[1, 0x0200_0000_00fe, 0x800, src, dst, 6, sport, dport])
            .is_some()
    });
    let lpm = &snap.tables[t("ipv4_lpm")].matcher;
    time("ipv4 lpm (100k routes)", &mut |i| {
        lpm.lookup(&[keys[i].1]).is_some()
    });
    let l2 = &snap.tables[t("l2_exact")].matcher;
    time("l2 exact (empty)", &mut |i| {
        l2.lookup(&[keys[i].1]).is_some()
    });
    let meter = &pipe.control.externs().meters[0];
    time("port meter (unconfigured)", &mut |i| {
        meter.execute(1, i as u64, 64, None) == pipeline::externs::Color::Green
    });
    let h = pipeline::externs::HashFn::new(pipeline::externs::HashAlgorithm::Crc32, 0);
    let mut rng = pipeline::externs::Rng::new(1);
    time("crc32 of 13 bytes", &mut |i| {
        h.hash(&frames[i][26..39], &mut rng) & 1 == 0
    });
    let mut worker = Worker::new(pipe.clone(), 0, 1);
    let mut buf = vec![0u8; 2048];
    worker.begin_batch();
    time("basic ingress+egress", &mut |i| {
        let src = &frames[i];
        buf[256..256 + src.len()].copy_from_slice(src);
        let mut f = Frame::new(&mut buf, 256, src.len());
        let mut md = StdMeta::new(1, src.len(), i as u64);
        let v = worker.ingress(i as u64, &mut f, &mut md);
        if let Dest::Port { port, .. } = v.dest {
            md.egress_port = port;
            worker.egress(i as u64, &mut f, &mut md);
            return true;
        }
        false
    });
    worker.end_batch();
}
