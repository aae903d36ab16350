//! The switch's text commands: table writes in the BMv2-style language of
//! [`pipeline::commands`], plus the traffic manager's settings and stats, as BMv2 users set queue
//! rate and depth at run time. Used for `--entries FILE` at start and by the admin socket.
//!
//! ```text
//! set_queue_depth <packets> [<port>]      set_queue_rate <pps> [<port>]
//! set_queue_bytes <bytes> [<port>]        (a queue's byte limit; 4 MiB by default)
//! set_port_rate <bits/s> [<port>]         set_port_delay <us> [<port>]
//! set_ecn_threshold <packets> [<port>]    show_ports | show_drops | show_queues <port>
//! show_fidelity                           (link lateness, input drops, worker loop times)
//! show_agent                              (the switch-local agent's counts, lag and reaction)
//! set_pfc on|off [<port>]                 (honour received PAUSE/PFC frames)
//! set_pfc_xoff <packets> [<port>]         (send PFC as an ingress port; 0: off)
//! set_pfc_xon <packets> [<port>]          (resume under this many; 0: 3/4 of xoff)
//! register_read <register> <index>        counter_read <counter> <index>
//! pktgen_set <app> <period_us> <batches> <packets> header|raw <template hex>
//! pktgen_enable <app>    pktgen_disable <app>    show_pktgen
//! set_cpu_class <class> <rate_pps|0> <burst> <share_eighths>   show_cpu
//! ```
//! Without `<port>` a setting applies to every data port.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pipeline::commands::{Command, parse_line};
use pipeline::control::Atomicity;
use pipeline::metadata::PortId;

use crate::switch::{InputCounters, Switch, sys};
use crate::tm::{Lateness, Setting, Shaping};

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, String> {
    args.get(i)
        .ok_or_else(|| format!("missing {what}"))?
        .parse()
        .map_err(|_| format!("bad {what}: {}", args[i]))
}

/// Runs one command line; returns its output, or an error message.
pub fn run(sw: &Switch, line: &str) -> Result<String, String> {
    let pipeline = sw.pipeline();
    let control = &pipeline.control;
    match parse_line(control.schema(), line).map_err(|e| e.to_string())? {
        Command::Nothing => Ok(String::new()),
        Command::Write(updates) => {
            for r in control.write(&updates, Atomicity::ContinueOnError) {
                r.map_err(|e| e.to_string())?;
            }
            Ok(String::new())
        }
        Command::Other(verb, args) => match verb.as_str() {
            v if let Some(setting) = Setting::parse(v, &args) => {
                let (setting, port) = setting?;
                let ports = port.map_or_else(|| sw.ports().to_vec(), |p| vec![p]);
                for p in ports {
                    let mut c = sw.tm().config(p).ok_or_else(|| format!("no port {p}"))?;
                    setting.apply(&mut c);
                    sw.tm().configure(p, c);
                }
                Ok(String::new())
            }
            v if let Some(c) = pipeline::pktgen::parse(v, &args) => match c? {
                pipeline::pktgen::Command::Set(app, config) => {
                    sw.pktgen().configure(app, config)?;
                    Ok(String::new())
                }
                pipeline::pktgen::Command::Enable(app, on) => {
                    sw.pktgen().enable(app, on)?;
                    Ok(String::new())
                }
            },
            "show_pktgen" => Ok(sw.pktgen().show()),
            "set_cpu_class" => {
                // set_cpu_class <class> <rate_pps|0> <burst> <share_eighths>
                let class: usize = arg(&args, 0, "class")?;
                let c = crate::switch::CpuClass {
                    rate_pps: arg(&args, 1, "rate (packets/s, 0 = unlimited)")?,
                    burst: arg(&args, 2, "burst")?,
                    share_eighths: arg(&args, 3, "share (eighths, 1 to 8)")?,
                };
                if !(1..=8).contains(&c.share_eighths) {
                    return Err("the share is in eighths, 1 to 8".into());
                }
                sw.cpu_port().set_class(class, c)?;
                Ok(String::new())
            }
            "show_cpu" => {
                let cpu = sw.cpu_port();
                let mut out = String::from(
                    "class rate_pps burst share_eighths delivered policed controller_full agent_full\n",
                );
                for class in 0..crate::switch::CPU_CLASSES {
                    if let (Some(c), Some(st)) = (cpu.class(class), cpu.class_stats(class)) {
                        out += &format!(
                            "{class} {} {} {} {} {} {} {}\n",
                            c.rate_pps,
                            c.burst,
                            c.share_eighths,
                            st.delivered,
                            st.policed,
                            st.controller_full,
                            st.agent_full
                        );
                    }
                }
                Ok(out)
            }
            "show_ports" => {
                let mut out = String::from(
                    "port rx tx errors pfc_rx pfc_tx pfc_paused_us qdelay_p50_us qdelay_p99_us \
                     qdelay_max_us\n",
                );
                let now = sw.clock()();
                for &p in sw.ports() {
                    if let Some(c) = sw.counters(p) {
                        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                        // Received PFC: how long the port's classes were held, summed.
                        let paused: u64 = (0..pipeline::tm::QUEUES)
                            .map(|q| sw.tm().paused_ns(p, q, now))
                            .sum();
                        // Queueing delay of what left the port (`-` if nothing has).
                        let delay = match sw.tm().queue_delay(p).filter(|d| d.count > 0) {
                            Some(d) => {
                                let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
                                let (q50, q99) = (d.quantile(0.5), d.quantile(0.99));
                                format!("{} {} {}", us(q50), us(q99), us(d.max))
                            }
                            None => "- - -".into(),
                        };
                        out += &format!(
                            "{p} {} {} {} {} {} {} {delay}\n",
                            l(&c.rx),
                            l(&c.tx),
                            l(&c.errors),
                            l(&c.pfc_rx),
                            l(&c.pfc_tx),
                            paused / 1000
                        );
                    }
                }
                Ok(out)
            }
            "show_drops" => Ok(control
                .drop_counts()
                .into_iter()
                .map(|(n, d)| format!("{n} {} {}\n", d.packets, d.bytes))
                .collect()),
            "show_queues" => {
                let p: PortId = arg(&args, 0, "port")?;
                let mut out = String::from("queue depth bytes enqueued dropped marked\n");
                for (q, (e, d, m)) in sw.tm().stats(p).into_iter().enumerate() {
                    let (depth, bytes) = sw.tm().depth(p, q);
                    out += &format!("{q} {depth} {bytes} {e} {d} {m}\n");
                }
                Ok(out)
            }
            "show_fidelity" => Ok(show_fidelity(sw)),
            // Nothing when no agent thread runs.
            "show_agent" => Ok(sw
                .agent_stats()
                .map(|a| a.show(sw.agent_packet_ins_dropped()))
                .unwrap_or_default()),
            "register_read" | "counter_read" => {
                let name = args.first().ok_or("missing name")?;
                let index: u64 = arg(&args, 1, "index")?;
                let s = control.schema();
                if verb == "register_read" {
                    let r = s
                        .register_by_name(name)
                        .ok_or_else(|| format!("no register {name}"))?;
                    let v = control
                        .read_registers(Some(r.id), Some(index))
                        .map_err(|e| e.to_string())?;
                    let c = v
                        .first()
                        .ok_or_else(|| format!("no cell {index} of {name}"))?;
                    Ok(format!("{}\n", c.value))
                } else {
                    let c = s
                        .counter_by_name(name)
                        .ok_or_else(|| format!("no counter {name}"))?;
                    let v = control
                        .read_counters(Some(c.id), Some(index))
                        .map_err(|e| e.to_string())?;
                    let c = v
                        .first()
                        .ok_or_else(|| format!("no cell {index} of {name}"))?;
                    Ok(format!("{} {}\n", c.value.packets, c.value.bytes))
                }
            }
            other => Err(format!("unknown command {other}")),
        },
    }
}

/// The fidelity monitors (docs/dataplane.md, "Fidelity monitors"), three tables whose lines
/// start with their name, each after a header line of its columns:
/// - `link`: per data port, its rate and the lateness of its backlogged departures against back
///   to back at that rate (`unshaped`: no rate, so no ideal time; `-` where nothing was
///   measured), in µs and in serialisation times;
/// - `input`: per data port, the kernel's drop counters of its socket (`-` where its kind of
///   socket has no such counter);
/// - `loop`: per worker, how long its loop iterations that did work took.
fn show_fidelity(sw: &Switch) -> String {
    let us = |ns: u64| format!("{:.3}", ns as f64 / 1000.0);
    let ser = |v: u64| format!("{:.3}", Lateness::in_ser(v));
    let mut out = String::from(
        "link port rate backlogged_departures late late_share p50_us p99_us max_us p50_ser p99_ser max_ser\n",
    );
    for &p in sw.ports() {
        let rate = match sw.tm().config(p).map(|c| c.shaping) {
            Some(Shaping::BitsPerSec(r)) => format!("{r}bps"),
            Some(Shaping::PacketsPerSec(r)) => format!("{r}pps"),
            _ => "unshaped".into(),
        };
        out += &match sw.tm().lateness(p).filter(|l| l.departures > 0) {
            Some(l) => format!(
                "link {p} {rate} {} {} {:.6} {} {} {} {} {} {}\n",
                l.departures,
                l.late,
                l.late_share(),
                us(l.ns.quantile(0.5)),
                us(l.ns.quantile(0.99)),
                us(l.ns.max),
                ser(l.ser.quantile(0.5)),
                ser(l.ser.quantile(0.99)),
                ser(l.ser.max),
            ),
            None => format!("link {p} {rate} 0 0 - - - - - - -\n"),
        };
    }
    out += "input port socket rx_dropped rx_invalid_descs tx_invalid_descs rx_ring_full \
            rx_fill_ring_empty_descs tx_ring_empty_descs tp_packets tp_drops\n";
    for i in sw.input_stats() {
        let cols = match i.counters {
            Ok(InputCounters::Xdp(x)) => format!(
                "{} {} {} {} {} {} - -",
                x.rx_dropped,
                x.rx_invalid_descs,
                x.tx_invalid_descs,
                x.rx_ring_full,
                x.rx_fill_ring_empty_descs,
                x.tx_ring_empty_descs
            ),
            Ok(InputCounters::Packet(c)) => format!("- - - - - - {} {}", c.packets, c.drops),
            Ok(InputCounters::None) | Err(_) => "- - - - - - - -".into(),
        };
        out += &format!("input {} {} {cols}\n", i.port, i.socket);
    }
    out += "loop worker busy_loops p50_us p99_us max_us\n";
    for (w, t) in sw.loop_times().iter().enumerate() {
        out += &format!(
            "loop {w} {} {} {} {}\n",
            t.count,
            us(t.quantile(0.5)),
            us(t.quantile(0.99)),
            us(t.max)
        );
    }
    out
}

/// Runs every line of `path`; stops at the first error, naming its line.
pub fn run_file(sw: &Switch, path: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        run(sw, line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        n += usize::from(!line.split('#').next().unwrap_or("").trim().is_empty());
    }
    Ok(n)
}

/// The longest command line the admin socket reads; a longer one is refused and its connection
/// closed, so a client cannot make the switch buffer without bound.
pub const MAX_LINE: usize = 64 * 1024;
/// The most admin connections served at once; further ones get an error line and are closed.
pub const MAX_CONNECTIONS: usize = 16;

/// Serves commands on a Unix socket, one per line, answering each with its output and a line
/// `ok` or `error: <message>`. Holds the switch weakly, so it never keeps a stopping switch alive.
///
/// The socket is private: it is created mode 0600 (bound inside a fresh 0700 directory, made
/// 0600, then renamed into place, so it is never reachable with the umask's mode), and a peer
/// whose user is neither root nor the switch's own is refused (SO_PEERCRED). Lines are at most
/// [`MAX_LINE`] bytes and at most [`MAX_CONNECTIONS`] clients are served at once.
pub fn serve(sw: &Arc<Switch>, path: &Path) -> std::io::Result<()> {
    let listener = bind_private(path)?;
    let weak = Arc::downgrade(sw);
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("pisa-admin".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let allowed = match sys::peer_uid(&conn) {
                    Ok(uid) => uid == 0 || uid == sys::euid(),
                    Err(_) => false,
                };
                if !allowed {
                    let _ = conn.write_all(b"error: permission denied\n");
                    continue;
                }
                if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::AcqRel);
                    let _ = conn.write_all(
                        format!("error: too many admin connections (at most {MAX_CONNECTIONS})\n")
                            .as_bytes(),
                    );
                    continue;
                }
                let weak = weak.clone();
                let slot = Slot(open.clone());
                let spawned = std::thread::Builder::new()
                    .name("pisa-admin-conn".into())
                    .spawn(move || {
                        let _slot = slot;
                        serve_connection(conn, &weak);
                    });
                // If the thread could not start, its closure (and the slot) is dropped here.
                drop(spawned);
            }
        })?;
    Ok(())
}

/// Holds one of the [`MAX_CONNECTIONS`] places while a connection is served.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Binds a listening socket at `path` that is mode 0600 from the moment it can be reached there.
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = parent.join(format!(".pisa-admin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    // 0700 (a umask can only clear bits): nobody else can reach the socket inside.
    std::fs::DirBuilder::new().mode(0o700).create(&tmp)?;
    let inner = tmp.join("s");
    let bound = UnixListener::bind(&inner).and_then(|l| {
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&inner, path)?;
        Ok(l)
    });
    let _ = std::fs::remove_dir_all(&tmp);
    bound
}

/// Reads one line of at most [`MAX_LINE`] bytes: `Ok(None)` at the end of input, `Err` for a
/// longer line (what was read of it is discarded).
fn read_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Option<()>> {
    line.clear();
    let n = r
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() > MAX_LINE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("line longer than {MAX_LINE} bytes"),
        ));
    }
    Ok(Some(()))
}

fn serve_connection(conn: UnixStream, weak: &std::sync::Weak<Switch>) {
    // A client that stops reading its answers cannot hold its place (and a thread) for ever.
    let _ = conn.set_write_timeout(Some(std::time::Duration::from_secs(10)));
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut input = BufReader::new(conn);
    let mut line = Vec::new();
    loop {
        let reply = match read_line(&mut input, &mut line) {
            Ok(None) => break,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                let _ = out.write_all(format!("error: {e}\n").as_bytes());
                break;
            }
            Err(_) => break,
            Ok(Some(())) => match std::str::from_utf8(&line) {
                Err(_) => "error: the line is not UTF-8\n".to_string(),
                Ok(text) => match weak
                    .upgrade()
                    .map(|sw| run(&sw, text.trim_end_matches('\r')))
                {
                    Some(Ok(text)) => format!("{text}ok\n"),
                    Some(Err(e)) => format!("error: {e}\n"),
                    None => "error: the switch is stopping\n".to_string(),
                },
            },
        };
        if out.write_all(reply.as_bytes()).is_err() {
            break;
        }
    }
}
