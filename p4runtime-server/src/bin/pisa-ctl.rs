//! `pisa-ctl`: a small P4Runtime controller for the command line, built on the client library.
//!
//! ```text
//! pisa-ctl --addr 127.0.0.1:9559 info
//! pisa-ctl cmd "table_add l2_exact l2_forward 02:00:00:00:00:02 => 2"
//! pisa-ctl file commands.txt          # BMv2-style lines, written as one P4Runtime batch
//! pisa-ctl read ipv4_lpm              # entries of one table (or all)
//! pisa-ctl counters port_rx           # non-zero cells of a counter (or all counters)
//! pisa-ctl registers flow_last_seen 3
//! pisa-ctl watch 10                   # packet-ins, digests, idle timeouts for 10 s
//! pisa-ctl digests egress.pint_record 60   # enables a digest, prints its entries' values
//! pisa-ctl packet-out 2 ffffffffffff0200000000010806...
//! pisa-ctl health                     # grpc.health.v1 check: does the switch answer at all
//! ```
//!
//! Every call has a deadline (`--timeout`, 10 s by default; 2 s at most for Capabilities and the
//! health check): a switch that does not answer is named, with how long pisa-ctl waited.

use std::time::Duration;

use clap::{Parser, Subcommand};
use p4runtime_server::client::{self, Client, ClientError, Deadlines, health_check};
use p4runtime_server::convert;
use p4runtime_server::proto::p4::v1 as p4;
use pipeline::control::{TableAction, TableEntry};
use pipeline::schema::{Schema, alias};
use pipeline::table::FieldMatch;

#[derive(Parser, Debug)]
#[command(version, about = "A P4Runtime controller for the command line")]
struct Args {
    /// The switch's P4Runtime address.
    #[arg(long, default_value = "127.0.0.1:9559")]
    addr: String,
    /// Device id.
    #[arg(long, default_value_t = 1)]
    device_id: u64,
    /// Election id (the highest connected controller is the primary; writes need it).
    #[arg(long, default_value_t = 1)]
    election_id: u128,
    /// Seconds to wait for each call (connecting, a write, a whole read) before giving up.
    #[arg(long, default_value_t = 10.0, value_parser = parse_seconds)]
    timeout: f64,
    #[command(subcommand)]
    cmd: Command,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("{s}: seconds, more than 0 and at most 86400")),
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// P4Runtime version, program and table sizes.
    Info,
    /// Asks the switch's gRPC health service whether it serves (no arbitration).
    Health,
    /// Runs BMv2-style command lines (table_add, act_prof_create_member, mc_group_create, ...)
    /// as one write batch.
    Cmd {
        /// The lines.
        lines: Vec<String>,
    },
    /// Runs the command lines of a file as one write batch.
    File {
        /// The file.
        path: std::path::PathBuf,
    },
    /// Prints the entries of a table (all tables if none is named).
    Read {
        /// Table name or alias.
        table: Option<String>,
    },
    /// Prints the non-zero cells of a counter (all counters if none is named).
    Counters {
        /// Counter name or alias.
        name: Option<String>,
    },
    /// Prints register cells.
    Registers {
        /// Register name or alias.
        name: String,
        /// One cell (all non-zero cells if omitted).
        index: Option<u64>,
    },
    /// Prints stream messages (packet-ins, digests, idle timeouts) for a while.
    Watch {
        /// Seconds (0 = until interrupted).
        #[arg(default_value_t = 0)]
        seconds: u64,
    },
    /// Enables digest NAME and prints each entry it delivers as one line of its field values in
    /// decimal (for `egress.pint_record`: the input of `pisa-pint decode`), acking every list.
    Digests {
        /// The digest's name (e.g. `egress.pint_record`).
        name: String,
        /// Seconds (0 = until interrupted).
        #[arg(default_value_t = 0)]
        seconds: u64,
    },
    /// Sends a packet-out through egress port PORT.
    PacketOut {
        /// Egress port.
        port: u16,
        /// The frame in hex.
        hex: String,
    },
    /// Pushes the switch's own P4Info (VERIFY_AND_COMMIT clears all forwarding state).
    SetPipeline {
        /// RECONCILE_AND_COMMIT instead: keep the state.
        #[arg(long)]
        reconcile: bool,
    },
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(run(args)) {
        eprintln!("pisa-ctl: {e}");
        if let ClientError::Write { errors, .. } = &e {
            for (i, err) in errors.iter().enumerate() {
                if let Some((code, msg)) = err {
                    eprintln!("  update {i}: {code:?}: {msg}");
                }
            }
        }
        std::process::exit(1);
    }
}

fn value(v: u128) -> String {
    if v < 1024 {
        v.to_string()
    } else {
        format!("{v:#x}")
    }
}

fn describe(schema: &Schema, e: &TableEntry) -> String {
    let Some(t) = schema.table_by_id(e.table_id).map(|t| &schema.tables[t]) else {
        return format!("table {:#x}: ?", e.table_id);
    };
    let mut s = alias(t.name).to_string();
    for (fid, m) in &e.matches {
        let name = t
            .fields
            .iter()
            .find(|f| f.id == *fid)
            .map_or("?", |f| f.name);
        let v = match m {
            FieldMatch::Exact(v) => value(*v),
            FieldMatch::Lpm {
                value: v,
                prefix_len,
            } => format!("{}/{prefix_len}", value(*v)),
            FieldMatch::Ternary { value: v, mask } => format!("{}&&&{}", value(*v), value(*mask)),
            FieldMatch::Range { low, high } => format!("{}->{}", value(*low), value(*high)),
            FieldMatch::Optional(v) => v.map_or_else(|| "*".into(), value),
        };
        s += &format!(" {name}={v}");
    }
    if e.priority != 0 {
        s += &format!(" priority={}", e.priority);
    }
    s += " => ";
    match &e.action {
        Some(TableAction::Action(a)) => {
            let def = schema.action_by_id(a.action_id).map(|i| &schema.actions[i]);
            s += def.map_or("?", |d| alias(d.name));
            let params: Vec<String> = a.params.iter().map(|(_, v)| value(*v)).collect();
            s += &format!("({})", params.join(", "));
        }
        Some(TableAction::Member(m)) => s += &format!("member {m}"),
        Some(TableAction::Group(g)) => s += &format!("group {g}"),
        None => s += "?",
    }
    if let Some(c) = e.counter_data {
        s += &format!("  [{} packets, {} bytes]", c.packets, c.bytes);
    }
    s
}

async fn run(args: Args) -> Result<(), ClientError> {
    let deadlines = Deadlines::all(Duration::from_secs_f64(args.timeout));
    if let Command::Health = args.cmd {
        let took = health_check(&args.addr, deadlines.probe).await?;
        println!(
            "{} serving (answered in {:.1} ms)",
            args.addr,
            took.as_secs_f64() * 1e3
        );
        return Ok(());
    }
    let mut c =
        Client::connect_with(&args.addr, args.device_id, args.election_id, deadlines).await?;
    let schema = c.schema().await?;
    match args.cmd {
        Command::Health => unreachable!("answered above"),
        Command::Info => {
            println!("P4Runtime {}", c.capabilities().await?);
            println!(
                "program {} (primary: {})",
                schema.name,
                if c.is_primary() {
                    "this client"
                } else {
                    "another"
                }
            );
            for t in &schema.tables {
                let n = c
                    .read_one(p4::entity::Entity::TableEntry(p4::TableEntry {
                        table_id: t.id,
                        ..Default::default()
                    }))
                    .await?
                    .len();
                println!("  {:<24} {n:>7} / {} entries", alias(t.name), t.size);
            }
        }
        Command::Cmd { lines } => {
            let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
            let n = c.run_commands(&lines).await?;
            println!("{n} updates written");
        }
        Command::File { path } => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ClientError::Usage(format!("{}: {e}", path.display())))?;
            let n = c.run_commands(&text.lines().collect::<Vec<_>>()).await?;
            println!("{n} updates written");
        }
        Command::Read { table } => {
            let table_id = match &table {
                Some(name) => {
                    let t = schema
                        .table_by_name(name)
                        .ok_or_else(|| ClientError::Usage(format!("no table {name}")))?;
                    schema.tables[t].id
                }
                None => 0,
            };
            let entities = c
                .read_one(p4::entity::Entity::TableEntry(p4::TableEntry {
                    table_id,
                    counter_data: Some(p4::CounterData::default()),
                    ..Default::default()
                }))
                .await?;
            for e in entities {
                if let Some(p4::entity::Entity::TableEntry(te)) = e.entity {
                    let mut entry = convert::table_entry(&schema, &te)
                        .map_err(|e| ClientError::Usage(e.message))?;
                    entry.counter_data =
                        te.counter_data.and_then(|d| convert::counter_data(&d).ok());
                    println!("{}", describe(&schema, &entry));
                }
            }
        }
        Command::Counters { name } => {
            let counter_id = match &name {
                Some(n) => {
                    schema
                        .counter_by_name(n)
                        .ok_or_else(|| ClientError::Usage(format!("no counter {n}")))?
                        .id
                }
                None => 0,
            };
            let cells = c
                .read_one(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                    counter_id,
                    ..Default::default()
                }))
                .await?;
            for e in cells {
                if let Some(p4::entity::Entity::CounterEntry(ce)) = e.entity {
                    let d = ce.data.unwrap_or_default();
                    if d.packet_count == 0 && d.byte_count == 0 {
                        continue;
                    }
                    let cname = schema
                        .counters
                        .iter()
                        .find(|x| x.id == ce.counter_id)
                        .map_or("?", |x| alias(x.name));
                    let index = ce.index.map_or(0, |i| i.index);
                    println!(
                        "{cname}[{index}] {} packets {} bytes",
                        d.packet_count, d.byte_count
                    );
                }
            }
        }
        Command::Registers { name, index } => {
            let r = schema
                .register_by_name(&name)
                .ok_or_else(|| ClientError::Usage(format!("no register {name}")))?;
            let cells = c
                .read_one(p4::entity::Entity::RegisterEntry(p4::RegisterEntry {
                    register_id: r.id,
                    index: index.map(|i| p4::Index {
                        index: i64::try_from(i).unwrap_or(i64::MAX),
                    }),
                    data: None,
                }))
                .await?;
            for e in cells {
                if let Some(p4::entity::Entity::RegisterEntry(re)) = e.entity {
                    let v = match re.data.and_then(|d| d.data) {
                        Some(p4::p4_data::Data::Bitstring(b)) => {
                            b.iter().fold(0u128, |a, &x| (a << 8) | u128::from(x))
                        }
                        _ => 0,
                    };
                    if v != 0 || index.is_some() {
                        let i = re.index.map_or(0, |i| i.index);
                        println!("{}[{i}] = {}", alias(r.name), value(v));
                    }
                }
            }
        }
        Command::Watch { seconds } => {
            let deadline =
                (seconds > 0).then(|| std::time::Instant::now() + Duration::from_secs(seconds));
            let role = |primary: bool| if primary { "primary" } else { "backup" };
            println!("arbitration: {}", role(c.is_primary()));
            loop {
                let left = deadline.map_or(Duration::from_secs(3600), |d| {
                    d.saturating_duration_since(std::time::Instant::now())
                });
                if left.is_zero() {
                    break;
                }
                if let Some(a) = c.arbitration_changed(Duration::ZERO).await {
                    let what = match a.status {
                        tonic::Code::Ok => "primary",
                        tonic::Code::AlreadyExists => "backup",
                        _ => "no primary",
                    };
                    println!("arbitration: {what} (election id {})", a.election_id);
                }
                use p4::stream_message_response::Update as U;
                match c.next_event(left.min(Duration::from_millis(100))).await {
                    None => continue,
                    Some(Err(s)) => return Err(ClientError::Rpc(s)),
                    Some(Ok(msg)) => match msg.update {
                        Some(U::Packet(p)) => {
                            let md: Vec<String> = p
                                .metadata
                                .iter()
                                .map(|m| format!("{}={:02x?}", m.metadata_id, m.value))
                                .collect();
                            println!("packet-in [{}] {} bytes", md.join(" "), p.payload.len());
                        }
                        Some(U::Digest(d)) => {
                            println!(
                                "digest {} list {}: {} messages",
                                d.digest_id,
                                d.list_id,
                                d.data.len()
                            );
                            c.ack_digest(d.digest_id, d.list_id).await?;
                        }
                        Some(U::IdleTimeoutNotification(n)) => {
                            println!("idle timeout: {} entries", n.table_entry.len());
                        }
                        Some(U::Error(e)) => {
                            println!("stream error {}: {}", e.canonical_code, e.message)
                        }
                        _ => {}
                    },
                }
            }
        }
        Command::Digests { name, seconds } => {
            use std::io::Write;
            let id = c
                .enable_digest(&name, 1024, 1_000_000, 1_000_000_000)
                .await?;
            let deadline =
                (seconds > 0).then(|| std::time::Instant::now() + Duration::from_secs(seconds));
            let mut out = std::io::stdout().lock();
            loop {
                let left = deadline.map_or(Duration::from_secs(3600), |d| {
                    d.saturating_duration_since(std::time::Instant::now())
                });
                if left.is_zero() {
                    break;
                }
                use p4::stream_message_response::Update as U;
                match c.next_event(left.min(Duration::from_millis(100))).await {
                    None => continue,
                    Some(Err(s)) => return Err(ClientError::Rpc(s)),
                    Some(Ok(p4::StreamMessageResponse {
                        update: Some(U::Digest(d)),
                    })) if d.digest_id == id => {
                        for v in d.data.iter().filter_map(client::digest_values) {
                            let line: Vec<String> = v.iter().map(u128::to_string).collect();
                            // A closed stdout (the reader stopped) ends the watch.
                            if writeln!(out, "{}", line.join(" ")).is_err() {
                                return Ok(());
                            }
                        }
                        let _ = out.flush();
                        c.ack_digest(d.digest_id, d.list_id).await?;
                    }
                    Some(Ok(_)) => {}
                }
            }
        }
        Command::PacketOut { port, hex } => {
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("x"), 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| ClientError::Usage("the frame must be hex digits".into()))?;
            let h = schema
                .controller_header("packet_out")
                .ok_or_else(|| ClientError::Usage("the program has no packet_out header".into()))?;
            let port_field = h.fields.first().map_or(1, |f| f.0);
            c.packet_out(bytes, &[(port_field, u128::from(port))])
                .await?;
            // Give the stream a moment to carry it before the session ends.
            tokio::time::sleep(Duration::from_millis(200)).await;
            println!("sent");
        }
        Command::SetPipeline { reconcile } => {
            use p4::set_forwarding_pipeline_config_request::Action;
            let (p4info, cookie) = c.get_pipeline().await?;
            let p4info = p4info.ok_or_else(|| ClientError::Usage("no P4Info".into()))?;
            let action = if reconcile {
                Action::ReconcileAndCommit
            } else {
                Action::VerifyAndCommit
            };
            c.set_pipeline(action, p4info, Vec::new(), cookie).await?;
            println!("pipeline config set ({action:?})");
        }
    }
    Ok(())
}
