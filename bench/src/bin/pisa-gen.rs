//! `pisa-gen`: an AF_XDP UDP frame generator for the line-rate harness. Sends `--size`-byte
//! Ethernet/IPv4/UDP frames (source ports varied over `--flows` flows) on `--iface` for
//! `--seconds`, at `--pps` (0 = as fast as it can), and prints the frames it sent.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use clap::Parser;
use dataplane::io::Frame;
use dataplane::io::xdp::{XdpMode, XdpPort, XdpSpec};
use dataplane::pool::{HEADROOM, LocalCache, Pool};

#[derive(Parser, Debug)]
struct Args {
    /// Interface to send on.
    #[arg(long)]
    iface: String,
    /// Frame size in bytes (>= 60).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Frames per second (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    pps: u64,
    /// How long.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Distinct flows (UDP source ports).
    #[arg(long, default_value_t = 64)]
    flows: u16,
    /// Destination MAC.
    #[arg(long, default_value = "02:00:00:00:00:fe")]
    dst_mac: String,
    /// Destination IPv4 address.
    #[arg(long, default_value = "10.0.2.1")]
    dst_ip: std::net::Ipv4Addr,
    /// Source IPv4 address.
    #[arg(long, default_value = "10.0.1.1")]
    src_ip: std::net::Ipv4Addr,
}

fn frame(args: &Args, flow: u16) -> Vec<u8> {
    let dst = pipeline::commands::parse_value(&args.dst_mac)
        .unwrap_or(0)
        .to_be_bytes();
    let b = etherparse::PacketBuilder::ethernet2(
        [2, 0, 0, 0, 1, 1],
        [dst[10], dst[11], dst[12], dst[13], dst[14], dst[15]],
    )
    .ipv4(args.src_ip.octets(), args.dst_ip.octets(), 64)
    .udp(10_000 + flow, 9);
    let payload = vec![0u8; args.size.max(60).saturating_sub(42)];
    let mut out = Vec::new();
    b.write(&mut out, &payload).expect("frame");
    out
}

fn main() {
    let args = Args::parse();
    let pool = Pool::umem(8192).expect("UMEM");
    let mut cache = LocalCache::default();
    let spec = XdpSpec {
        ifname: args.iface.clone(),
        mode: XdpMode::Generic,
        zero_copy: false,
    };
    let mut port = XdpPort::open(&spec, &pool, &mut cache).expect("AF_XDP socket");
    // Write every buffer once: buffer i holds flow i % flows. Sending then needs no copy: a
    // completed buffer still holds its frame.
    let templates: Vec<Vec<u8>> = (0..args.flows.max(1)).map(|f| frame(&args, f)).collect();
    let len = templates[0].len();
    let mut all = Vec::new();
    while let Some(mut b) = pool.alloc() {
        let t = &templates[b.index() as usize % templates.len()];
        pool.bytes_mut(&mut b)[HEADROOM..HEADROOM + t.len()].copy_from_slice(t);
        all.push(b);
    }
    all.into_iter().for_each(|b| pool.free(b));
    let mut out: VecDeque<Frame> = VecDeque::with_capacity(256);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.seconds);
    let mut sent = 0u64;
    while Instant::now() < end {
        let budget = if args.pps == 0 {
            256
        } else {
            let due = (start.elapsed().as_secs_f64() * args.pps as f64) as u64;
            due.saturating_sub(sent + out.len() as u64).min(256)
        };
        for _ in 0..budget {
            let Some(b) = cache.alloc(&pool) else { break };
            out.push_back(Frame {
                buf: b,
                start: HEADROOM,
                len,
            });
        }
        while !out.is_empty() {
            let n = port.send(&pool, &mut cache, &mut out);
            sent += n as u64;
            if n == 0 {
                break;
            }
        }
        if budget == 0 {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    println!(
        "sent {sent} frames in {:.3} s",
        start.elapsed().as_secs_f64()
    );
}
