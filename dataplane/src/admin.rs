//! The switch's text commands: table writes in the BMv2-style language of
//! [`pipeline::commands`], plus the traffic manager's settings and stats, as BMv2 users set queue
//! rate and depth at run time. Used for `--entries FILE` at start and by the admin socket.
//!
//! ```text
//! set_queue_depth <packets> [<port>]      set_queue_rate <pps> [<port>]
//! set_port_rate <bits/s> [<port>]         set_port_delay <us> [<port>]
//! set_ecn_threshold <packets> [<port>]    show_ports | show_drops | show_queues <port>
//! set_pfc on|off [<port>]                 (honour received PAUSE/PFC frames)
//! register_read <register> <index>        counter_read <counter> <index>
//! pktgen_set <app> <period_us> <batches> <packets> header|raw <template hex>
//! pktgen_enable <app>    pktgen_disable <app>    show_pktgen
//! ```
//! Without `<port>` a setting applies to every data port.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use pipeline::commands::{Command, parse_line};
use pipeline::control::Atomicity;
use pipeline::metadata::PortId;

use crate::switch::Switch;
use crate::tm::Setting;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, String> {
    args.get(i)
        .ok_or_else(|| format!("missing {what}"))?
        .parse()
        .map_err(|_| format!("bad {what}: {}", args[i]))
}

/// Runs one command line; returns its output, or an error message.
pub fn run(sw: &Switch, line: &str) -> Result<String, String> {
    let control = &sw.pipeline().control;
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
            "pktgen_set" => {
                let app: u8 = arg(&args, 0, "application")?;
                let period_ns = crate::pktgen::period_ns_from_us(arg(&args, 1, "period (us)")?)?;
                let header = match args.get(4).map(String::as_str) {
                    Some("header") => true,
                    Some("raw") => false,
                    _ => return Err("expected header or raw".into()),
                };
                let hex = args.get(5).ok_or("missing template")?;
                let template = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("x"), 16))
                    .collect::<Result<Vec<u8>, _>>()
                    .map_err(|_| "the template must be hex digits".to_string())?;
                let config = crate::pktgen::AppConfig {
                    period_ns,
                    batches: arg(&args, 2, "batches")?,
                    packets: arg(&args, 3, "packets")?,
                    header,
                    template,
                };
                sw.pktgen().configure(app, config)?;
                Ok(String::new())
            }
            "pktgen_enable" | "pktgen_disable" => {
                let app: u8 = arg(&args, 0, "application")?;
                sw.pktgen().enable(app, verb == "pktgen_enable")?;
                Ok(String::new())
            }
            "show_pktgen" => Ok(sw.pktgen().show()),
            "show_ports" => {
                let mut out = String::from("port rx tx errors pfc_rx pfc_tx\n");
                for &p in sw.ports() {
                    if let Some(c) = sw.counters(p) {
                        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                        out += &format!(
                            "{p} {} {} {} {} {}\n",
                            l(&c.rx),
                            l(&c.tx),
                            l(&c.errors),
                            l(&c.pfc_rx),
                            l(&c.pfc_tx)
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
                    Ok(format!("{}\n", v[0].value))
                } else {
                    let c = s
                        .counter_by_name(name)
                        .ok_or_else(|| format!("no counter {name}"))?;
                    let v = control
                        .read_counters(Some(c.id), Some(index))
                        .map_err(|e| e.to_string())?;
                    Ok(format!("{} {}\n", v[0].value.packets, v[0].value.bytes))
                }
            }
            other => Err(format!("unknown command {other}")),
        },
    }
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

/// Serves commands on a Unix socket, one per line, answering each with its output and a line
/// `ok` or `error: <message>`. Holds the switch weakly, so it never keeps a stopping switch alive.
pub fn serve(sw: &Arc<Switch>, path: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    let weak = Arc::downgrade(sw);
    std::thread::Builder::new()
        .name("pisa-admin".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let weak = weak.clone();
                let _ = std::thread::Builder::new()
                    .name("pisa-admin-conn".into())
                    .spawn(move || {
                        let Ok(mut out) = conn.try_clone() else {
                            return;
                        };
                        for line in BufReader::new(conn).lines() {
                            let Ok(line) = line else { break };
                            let reply = match weak.upgrade().map(|sw| run(&sw, &line)) {
                                Some(Ok(text)) => format!("{text}ok\n"),
                                Some(Err(e)) => format!("error: {e}\n"),
                                None => "error: the switch is stopping\n".to_string(),
                            };
                            if out.write_all(reply.as_bytes()).is_err() {
                                break;
                            }
                        }
                    });
            }
        })?;
    Ok(())
}
