//! Our DCTCP (`pisa_fabric::dctcp`, BPF struct_ops): it loads, registers and unregisters with its
//! guard, sockets select it, and over a path where a pisa-switch marks CE it negotiates ECN and
//! holds the queue below the switch's buffer without retransmissions, where cubic without ECN on
//! the same path overflows it. Needs root, a kernel with BTF and BPF struct_ops, iproute2 and the
//! workspace binaries (pisa-switch, pisa-fabric, pisa-traffic).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dataplane::sockopt;
use pisa_fabric::dctcp::{self, Dctcp, NAME};
use socket2::{Domain, Protocol, Socket, Type};

/// The registration is global to the kernel: the tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn our_dctcp_registers_with_its_guard_carries_a_loopback_flow_and_unregisters() {
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert!(
        !dctcp::registered(),
        "{NAME} is registered by another process: this test needs it free"
    );
    let d = Dctcp::ensure().expect("loading our DCTCP");
    assert!(d.owned(), "{d:?}");
    assert!(dctcp::registered());
    // A second guard borrows the registration; its drop leaves it in place.
    let borrowed = Dctcp::ensure().expect("borrowing");
    assert!(!borrowed.owned());
    drop(borrowed);
    assert!(dctcp::registered());

    // A loopback flow with pisa_dctcp on both ends: init, the ACK events and Reno's growth run,
    // and the flow completes.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    sockopt::set_congestion(&l, NAME).expect("selecting pisa_dctcp on the listener");
    // Selected before connecting, so that the SYN asks for ECN.
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
    sockopt::set_congestion(&sock, NAME).expect("selecting pisa_dctcp");
    sock.connect(&l.local_addr().unwrap().into()).unwrap();
    let mut c: TcpStream = sock.into();
    let (mut s, _) = l.accept().unwrap();
    assert_eq!(sockopt::congestion(&c).unwrap(), NAME);
    assert_eq!(sockopt::congestion(&s).unwrap(), NAME);
    let size = 20_000_000usize;
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0usize;
        while got < size {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "EOF after {got} bytes");
            got += n;
        }
        s
    });
    let chunk = vec![1u8; 1 << 16];
    let mut sent = 0;
    while sent < size {
        let n = chunk.len().min(size - sent);
        c.write_all(&chunk[..n]).unwrap();
        sent += n;
    }
    let s = reader.join().unwrap();
    let rx = sockopt::tcp_info(&s).unwrap();
    assert_eq!(rx.bytes_received, size as u64);
    wait_for("all bytes acknowledged", || {
        sockopt::tcp_info(&c).unwrap().bytes_acked > size as u64
    });
    let tx = sockopt::tcp_info(&c).unwrap();
    // TCP_CONG_NEEDS_ECN: the client asks for ECN whatever net.ipv4.tcp_ecn says, and the
    // server (pisa_dctcp too) agrees.
    assert_ne!(
        tx.options & sockopt::TCPI_OPT_ECN,
        0,
        "ECN not negotiated: {tx:?}"
    );
    assert!(tx.snd_cwnd >= 10, "{tx:?}");
    drop((c, s, l));

    drop(d);
    wait_for("pisa_dctcp to be unregistered", || !dctcp::registered());
}
