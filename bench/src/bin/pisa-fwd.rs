//! `pisa-fwd`: the bare AF_XDP forwarder of the line-rate harness: frames received on `--a` are
//! sent on `--b` (and back) by descriptor passing over one shared UMEM, with no pipeline. The
//! limit for any AF_XDP switch on this machine. Runs until SIGINT or SIGTERM.

use std::collections::VecDeque;

use clap::Parser;
use dataplane::io::Frame;
use dataplane::io::xdp::{XdpMode, XdpPort, XdpSpec};
use dataplane::pool::{LocalCache, Pool};

#[derive(Parser, Debug)]
struct Args {
    /// First interface.
    #[arg(long)]
    a: String,
    /// Second interface.
    #[arg(long)]
    b: String,
}

fn main() {
    let args = Args::parse();
    let pool = Pool::umem(16384).expect("UMEM");
    let mut cache = LocalCache::default();
    let open = |name: &str, cache: &mut LocalCache| {
        let spec = XdpSpec {
            ifname: name.to_string(),
            mode: XdpMode::Generic,
            zero_copy: false,
        };
        XdpPort::open(&spec, &pool, cache).expect("AF_XDP socket")
    };
    let mut a = open(&args.a, &mut cache);
    let mut b = open(&args.b, &mut cache);
    // Stop cleanly on SIGINT/SIGTERM (dropping the sockets detaches their XDP programs).
    dataplane::signals::block_termination();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        dataplane::signals::wait_for_termination();
        flag.store(true, std::sync::atomic::Ordering::Release);
    });
    let mut rx: Vec<Frame> = Vec::with_capacity(64);
    let (mut to_a, mut to_b): (VecDeque<Frame>, VecDeque<Frame>) =
        (VecDeque::new(), VecDeque::new());
    println!("ready");
    while !stop.load(std::sync::atomic::Ordering::Acquire) {
        a.recv(&pool, &mut cache, &mut rx);
        to_b.extend(rx.drain(..));
        b.recv(&pool, &mut cache, &mut rx);
        to_a.extend(rx.drain(..));
        b.send(&pool, &mut cache, &mut to_b);
        a.send(&pool, &mut cache, &mut to_a);
        // Frames the TX ring could not take are dropped, as a switch with a full queue would.
        for f in to_a.drain(..).chain(to_b.drain(..)) {
            cache.free(&pool, f.buf);
        }
    }
}
