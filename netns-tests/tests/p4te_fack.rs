//! P4TE's fake ACKs (P4TE §4.3) against an unmodified Linux TCP sender, in namespaces.
//!
//! h1 -- [1] leaf (pisa-switch, program p4te) [2] -- h2. h1 sends one iperf3 flow tagged large
//! (ToS 0x10) to h2 at 40 Mb/s, below every link's capacity, so nothing is lost. The class
//! meter of (large, port 1) is set far below the flow's rate, so the flow's class is always
//! YELLOW: every B bytes the switch makes a FACK (one per B bytes of the flow), and the leaf
//! patches it from h2's last real ACK before it reaches h1.
//! - **INC** (the link to h2 GREEN): the FACK carries the last window × 1.25.
//! - **DEC** (the link's meter set below the flow's rate, so it is RED): the FACK carries the
//!   window halved and repeats the last ACK number.
//!
//! What Linux does with them (`tcp_ack`, `tcp_may_update_window`): an ACK that neither advances
//! `snd_una` nor carries newer data updates the send window only if the window grows. So an INC
//! FACK raises `snd_wnd`; a DEC FACK changes nothing and is a duplicate ACK. With SACK (the
//! default) a duplicate ACK without SACK blocks moves no loss-detection state; without SACK, three
//! in a row start a fast retransmit of data that was never lost. The test shows each of these
//! with the sender's own counters (nstat, ss -ti) against the same run with rate adaptation off.
//! Needs root, iproute2, iperf3, ethtool.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use pisa_fabric::{Netns, Process, run, veth, wait_for_path, workspace_bin};
use topo::plan::{host_mac, mac_text, switch_mac};
use topo::{End, Host, Link, LinkProps, Role, Switch, Topology};

const RATE: u64 = 200_000_000;

/// The flows compare sender counters: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn topology() -> Topology {
    let props = LinkProps {
        rate_bps: RATE,
        delay_us: 0,
        buffer: 256,
    };
    let host = |n: u8| Host {
        name: format!("h{n}"),
        ipv4: Ipv4Addr::new(10, 0, n, 1),
        ipv6: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, u16::from(n), 1),
    };
    Topology {
        switches: vec![Switch {
            name: "leaf1".into(),
            program: "p4te".into(),
            role: Some(Role::Leaf),
            switch_id: 1,
            params: BTreeMap::from([("rc_bytes".into(), "65536".into())]),
        }],
        hosts: vec![host(1), host(2)],
        links: (1..=2)
            .map(|n: u8| Link {
                a: End::Switch("leaf1".into(), u16::from(n)),
                b: End::Host(format!("h{n}")),
                props,
            })
            .collect(),
    }
}

struct Rig {
    h1: Netns,
    h2: Netns,
    _sw_ns: Netns,
    sw: Process,
    sock: PathBuf,
}

impl Rig {
    fn cli(&self, cmd: &str) -> String {
        let out = run(
            workspace_bin("pisa-cli").to_str().unwrap(),
            &[self.sock.to_str().unwrap(), cmd],
        )
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn counter(&self, name: &str, index: u32) -> u64 {
        let out = self.cli(&format!("counter_read {name} {index}"));
        // "PACKETS BYTES".
        out.split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("counter_read {name} {index}: {out}"))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.sw.terminate(Duration::from_secs(5));
    }
}

fn rig(tag: &str, extra: &[String]) -> Rig {
    let t = topology();
    let plan = programs::fabric_plan(&t).unwrap().remove("leaf1").unwrap();
    let sw_ns = Netns::new(&format!("{tag}s")).unwrap();
    let h1 = Netns::new(&format!("{tag}a")).unwrap();
    let h2 = Netns::new(&format!("{tag}b")).unwrap();
    let mut ports = Vec::new();
    for (i, h) in [&h1, &h2].into_iter().enumerate() {
        let (hif, sif) = veth(h, &sw_ns).unwrap();
        let ip = format!("10.0.{}.1", i + 1);
        let gw = format!("10.0.{}.254", i + 1);
        for args in [
            vec!["link", "set", &hif, "address", &mac_text(host_mac(i))],
            vec!["addr", "add", &format!("{ip}/24"), "dev", &hif],
            vec!["route", "add", "default", "via", &gw],
            vec![
                "neigh",
                "add",
                &gw,
                "lladdr",
                &mac_text(switch_mac(0)),
                "dev",
                &hif,
            ],
        ] {
            let args: Vec<&str> = args.iter().map(|s| s.as_ref()).collect();
            h.exec("ip", &args).unwrap();
        }
        h.exec("ethtool", &["-K", &hif, "tx", "off"]).unwrap();
        ports.push(format!("{}@{sif}", i + 1));
    }
    let dir = std::env::temp_dir().join(sw_ns.name());
    std::fs::create_dir_all(&dir).unwrap();
    let entries = dir.join("entries.txt");
    let mut lines = plan.tm.clone();
    lines.extend(plan.routes.iter().cloned());
    // The large class on port 1 is always over its safe rate: YELLOW.
    lines.push("meter_set class_rate 513 1000 1500 1000 1500".into());
    lines.extend(extra.iter().cloned());
    std::fs::write(&entries, lines.join("\n")).unwrap();
    let sock = dir.join("admin.sock");
    let log = dir.join("switch.log");
    let mut args = vec![
        "--program".to_string(),
        "p4te".into(),
        "--io".into(),
        "af-packet".into(),
        "--entries".into(),
        entries.display().to_string(),
        "--admin-socket".into(),
        sock.display().to_string(),
    ];
    for p in &ports {
        args.extend(["-i".to_string(), p.clone()]);
    }
    // P4TE_PCAP=DIR keeps a capture of every port, to look at the FACKs.
    if let Some(d) = std::env::var_os("P4TE_PCAP") {
        let d = std::path::Path::new(&d).join(tag);
        std::fs::create_dir_all(&d).unwrap();
        args.extend(["--pcap".to_string(), d.display().to_string()]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let sw = Process::spawn(
        &sw_ns,
        workspace_bin("pisa-switch").to_str().unwrap(),
        &argv,
        &log,
    )
    .unwrap();
    assert!(
        wait_for_path(&sock, Duration::from_secs(10)),
        "switch did not start: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    Rig {
        h1,
        h2,
        _sw_ns: sw_ns,
        sw,
        sock,
    }
}

/// The sender's view after one flow: nstat counters and the last `ss -ti` line of the flow.
#[derive(Debug, Default)]
struct Sender {
    nstat: BTreeMap<String, u64>,
    ss: String,
    facks: [u64; 2],
    /// The INC FACKs counted just before `ss` was sampled.
    inc_facks_at_ss: u64,
}

impl Sender {
    fn get(&self, k: &str) -> u64 {
        self.nstat.get(k).copied().unwrap_or(0)
    }

    /// A numeric field of the ss line, e.g. "snd_wnd" or "cwnd".
    fn ss_field(&self, k: &str) -> Option<u64> {
        self.ss.split_whitespace().find_map(|w| {
            w.strip_prefix(&format!("{k}:"))?
                .split('/')
                .next()?
                .parse()
                .ok()
        })
    }
}

/// One 3-second iperf3 flow h1 -> h2 tagged large, with SACK on or off at the sender.
fn flow(tag: &str, sack: bool, extra: &[String]) -> Sender {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let r = rig(tag, extra);
    r.h1.exec(
        "sysctl",
        &["-qw", &format!("net.ipv4.tcp_sack={}", u8::from(sack))],
    )
    .unwrap();
    let mut server = Process::spawn(
        &r.h2,
        "iperf3",
        &["-s", "-1"],
        &std::env::temp_dir().join(format!("{}-iperf3-s.log", r.h2.name())),
    )
    .unwrap();
    r.h2.wait_listening(5201, Duration::from_secs(30))
        .expect("iperf3 server listening");
    r.h1.exec("nstat", &["-n"]).unwrap();
    let client = std::thread::scope(|s| {
        let c = s.spawn(|| {
            r.h1.exec(
                "iperf3",
                &[
                    "-c", "10.0.2.1", "-t", "3", "-b", "40M", "-S", "16", "-M", "1400", "-C",
                    "cubic",
                ],
            )
        });
        // Mid-flow: the sender's socket state.
        std::thread::sleep(Duration::from_millis(2000));
        // The FACKs counted just before the sample: at most what the sender had taken by then.
        let facks = r.counter("egress.facks", 1);
        let ss = r.h1.exec("ss", &["-tin", "dst", "10.0.2.1"]).unwrap();
        (c.join().unwrap(), ss, facks)
    });
    let (out, ss, inc_facks_at_ss) = client;
    let out = out.unwrap();
    assert!(
        out.status.success(),
        "iperf3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.wait(Duration::from_secs(5));
    let nstat = r.h1.exec("nstat", &["-az"]).unwrap();
    let mut s = Sender {
        ss: String::from_utf8_lossy(&ss.stdout)
            .lines()
            .filter(|l| l.contains("cwnd"))
            .max_by_key(|l| l.len())
            .unwrap_or_default()
            .to_string(),
        facks: [r.counter("egress.facks", 0), r.counter("egress.facks", 1)],
        inc_facks_at_ss,
        ..Sender::default()
    };
    for l in String::from_utf8_lossy(&nstat.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if let [k, v, ..] = f.as_slice()
            && let Ok(v) = v.parse()
        {
            s.nstat.insert((*k).to_string(), v);
        }
    }
    let tail_drops: u64 = r
        .cli("show_drops")
        .lines()
        .find_map(|l| {
            l.strip_prefix("tail_drop ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    assert_eq!(tail_drops, 0, "no congestion losses");
    s
}

fn report(name: &str, s: &Sender) {
    let keys = [
        "TcpRetransSegs",
        "TcpExtTCPFastRetrans",
        "TcpExtTCPSackRecovery",
        "TcpExtTCPRenoRecovery",
        "TcpExtTCPLossUndo",
        "TcpExtTCPSpuriousRTOs",
        "TcpExtTCPRenoRecoveryFail",
    ];
    let counters: Vec<String> = keys.iter().map(|k| format!("{k}={}", s.get(k))).collect();
    eprintln!(
        "{name}: facks dec={} inc={}; {}; ss: {}",
        s.facks[0],
        s.facks[1],
        counters.join(" "),
        s.ss.trim()
    );
}

/// Rate adaptation off: the same flow, no FACKs.
fn nra() -> Vec<String> {
    vec!["register_write rate_control 0 0".into()]
}

/// The link to h2 metered below the flow's rate: RED, so every decision is DEC.
fn red_link() -> Vec<String> {
    vec!["meter_set_direct link_util_rate 2 => 1000 3000 2000 3000".into()]
}

#[test]
fn section_4_3_inc_facks_reach_the_linux_sender() {
    let off = flow("pfi0", true, &nra());
    let on = flow("pfi1", true, &[]);
    report("rate adaptation off", &off);
    report("INC FACKs", &on);
    assert_eq!(off.facks, [0, 0]);
    assert!(on.facks[1] > 0 && on.facks[0] == 0, "{:?}", on.facks);
    // They arrive: the sender takes in more segments than the receiver's ACKs. Both samples
    // are taken 2 s after iperf3 was started, which a busy machine can start late: the ACKs
    // the sender would have taken without FACKs are scaled from the run without them by the
    // segments each sent, and the FACKs are those counted when its sample was taken.
    let (in_off, out_off) = (
        off.ss_field("segs_in").unwrap() as f64,
        off.ss_field("segs_out").unwrap() as f64,
    );
    let (in_on, out_on) = (
        on.ss_field("segs_in").unwrap() as f64,
        on.ss_field("segs_out").unwrap() as f64,
    );
    let acks = out_on * in_off / out_off.max(1.0);
    assert!(
        in_on - acks > on.inc_facks_at_ss as f64 / 2.0,
        "segs_in {in_on} where the ACKs alone would give {acks:.0}; INC FACKs {} at the sample",
        on.inc_facks_at_ss
    );
}

#[test]
fn section_4_3_dec_facks_are_duplicate_acks_to_linux() {
    // With SACK: a DEC FACK repeats the last ACK with a smaller window; Linux neither shrinks
    // the window nor starts a recovery, and the flow carries as much as without FACKs.
    let control = flow("pfd0", true, &[red_link(), nra()].concat());
    let sack = flow("pfd1", true, &red_link());
    report("SACK, rate adaptation off", &control);
    report("SACK, DEC FACKs", &sack);
    assert!(sack.facks[0] > 0, "{:?}", sack.facks);
    assert_eq!(
        sack.get("TcpExtTCPSackRecovery"),
        control.get("TcpExtTCPSackRecovery")
    );
    // The flow is application-limited (40 of 200 Mb/s), so by its sample each has carried what
    // its sender offered: a window that DEC FACKs shrank would show here as fewer bytes.
    let acked = |s: &Sender| s.ss_field("bytes_acked").unwrap_or(0) as f64;
    assert!(
        acked(&sack) > 0.9 * acked(&control),
        "bytes acked: {} with DEC FACKs, {} without",
        acked(&sack),
        acked(&control)
    );
    // Without SACK, duplicate ACKs count: FACKs in a row are a fast retransmit of data that
    // was never lost.
    let control = flow("pfd2", false, &[red_link(), nra()].concat());
    let reno = flow("pfd3", false, &red_link());
    report("no SACK, rate adaptation off", &control);
    report("no SACK, DEC FACKs", &reno);
    assert!(reno.facks[0] > 0);
    assert_eq!(control.get("TcpExtTCPRenoRecovery"), 0);
    assert!(reno.get("TcpExtTCPRenoRecovery") > 0);
}
