//! The fixture the P4Runtime service tests share: the service over real gRPC on loopback,
//! against the `basic` program's control plane (no data plane: packet-out frames land in a
//! channel, packet-ins and digests are fed by the test), and helpers to build and check updates.
#![allow(
    dead_code,
    unused_imports,
    reason = "each test file uses a different subset of the fixture and its imports"
)]

pub(crate) use std::sync::Arc;
pub(crate) use std::time::{Duration, Instant};

pub(crate) use p4runtime_server::arbitration::Election;
pub(crate) use p4runtime_server::client::{Client, ClientError};
pub(crate) use p4runtime_server::proto::p4::v1 as p4;
pub(crate) use p4runtime_server::server::{DeviceIo, Running, ServerConfig, Service, serve};
pub(crate) use pipeline::control::Control;
pub(crate) use pipeline::runtime::{Config, Pipeline};
pub(crate) use tonic::Code;

pub(crate) use p4::entity::Entity as E;
pub(crate) use p4::write_request::Atomicity;

pub(crate) struct Fixture {
    pub(crate) running: Running,
    pub(crate) control: Arc<Control>,
    pub(crate) packet_outs: crossbeam::channel::Receiver<Vec<u8>>,
    pub(crate) packet_ins: crossbeam::channel::Sender<Vec<u8>>,
}

impl Fixture {
    pub(crate) fn new(election: Election, device_id: u64) -> Fixture {
        Fixture::with_program("basic", election, device_id)
    }

    /// The same, running program `name`.
    pub(crate) fn with_program(name: &str, election: Election, device_id: u64) -> Fixture {
        Fixture::with_config(
            name,
            ServerConfig {
                device_id,
                election,
                ..ServerConfig::default()
            },
        )
    }

    /// The same, with the service's settings `config`.
    pub(crate) fn with_config(name: &str, config: ServerConfig) -> Fixture {
        let program = programs::by_name(name).unwrap();
        let pipe = Pipeline::new(program, 1, Config::default());
        let control = pipe.control.clone();
        let (out_tx, packet_outs) = crossbeam::channel::unbounded();
        let (packet_ins, in_rx) = crossbeam::channel::unbounded();
        let epoch = Instant::now();
        let io = DeviceIo {
            packet_out: Box::new(move |f| out_tx.send(f).is_ok()),
            max_packet_out: 3840,
            packet_in: in_rx,
            clock: Arc::new(move || epoch.elapsed().as_nanos() as u64),
            loader: None,
        };
        let service = Service::new(control.clone(), io, config);
        let running = serve(service, "127.0.0.1:0".parse().unwrap()).unwrap();
        Fixture {
            running,
            control,
            packet_outs,
            packet_ins,
        }
    }

    pub(crate) fn addr(&self) -> String {
        self.running.addr.to_string()
    }

    pub(crate) async fn client(&self, election_id: u128) -> Client {
        Client::connect(&self.addr(), 1, election_id).await.unwrap()
    }

    pub(crate) fn id(&self, kind: &str, name: &str) -> u32 {
        let s = self.control.schema();
        match kind {
            "table" => s.tables[s.table_by_name(name).unwrap()].id,
            "action" => s.actions[s.action_by_name(name).unwrap()].id,
            "counter" => s.counter_by_name(name).unwrap().id,
            "meter" => s.meter_by_name(name).unwrap().id,
            "register" => s.register_by_name(name).unwrap().id,
            "profile" => s.profile_by_name(name).unwrap().id,
            "digest" => s.digests.iter().find(|d| d.name == name).unwrap().id,
            _ => panic!("{kind}"),
        }
    }
}

pub(crate) fn update(t: p4::update::Type, e: E) -> p4::Update {
    p4::Update {
        r#type: t as i32,
        entity: Some(p4::Entity { entity: Some(e) }),
    }
}

/// An ipv4_lpm entry pointing at ECMP member 1 (the table takes members and groups only).
pub(crate) fn lpm_entry(f: &Fixture, value: Vec<u8>, len: i32) -> p4::TableEntry {
    use p4::field_match::{FieldMatchType, Lpm};
    p4::TableEntry {
        table_id: f.id("table", "ingress.ipv4_lpm"),
        r#match: vec![p4::FieldMatch {
            field_id: 1,
            field_match_type: Some(FieldMatchType::Lpm(Lpm {
                value,
                prefix_len: len,
            })),
        }],
        action: Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::ActionProfileMemberId(1)),
        }),
        ..Default::default()
    }
}

/// An l2_exact entry forwarding `mac` (any bytestring form) to `port`.
pub(crate) fn l2_entry(f: &Fixture, mac: Vec<u8>, port: Vec<u8>) -> p4::TableEntry {
    use p4::field_match::{Exact, FieldMatchType};
    p4::TableEntry {
        table_id: f.id("table", "ingress.l2_exact"),
        r#match: vec![p4::FieldMatch {
            field_id: 1,
            field_match_type: Some(FieldMatchType::Exact(Exact { value: mac })),
        }],
        action: Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(p4::Action {
                action_id: f.id("action", "ingress.l2_forward"),
                params: vec![p4::action::Param {
                    param_id: 1,
                    value: port,
                }],
            })),
        }),
        ..Default::default()
    }
}

pub(crate) const MEMBER1: &str =
    "act_prof_create_member ecmp_selector 1 set_nhop 02:00:00:00:00:02 02:00:00:00:00:fe 1";

pub(crate) fn codes(e: ClientError) -> Vec<Option<Code>> {
    match e {
        ClientError::Write { errors, .. } => errors.into_iter().map(|e| e.map(|e| e.0)).collect(),
        other => panic!("expected per-update errors, got {other}"),
    }
}

pub(crate) fn rpc_code(e: ClientError) -> Code {
    match e {
        ClientError::Rpc(s) => s.code(),
        other => panic!("expected an RPC status, got {other}"),
    }
}

/// Multicast group `g`'s copies as (port, rid), as the control plane reads them.
pub(crate) fn copies(control: &Control, g: u32) -> Vec<(u16, u16)> {
    let groups = control.read_multicast_groups(Some(g)).unwrap();
    groups[0]
        .1
        .replicas
        .iter()
        .map(|r| (r.port, r.rid))
        .collect()
}
