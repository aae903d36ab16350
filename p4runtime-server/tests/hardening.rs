//! Issue 10: no client can take the switch down. In-process over real gRPC on loopback against
//! `basic`'s control plane, as `service.rs` does.

use std::sync::Arc;

use p4runtime_server::client::{Client, ClientError};
use p4runtime_server::proto::google::rpc;
use p4runtime_server::proto::p4::v1 as p4;
use p4runtime_server::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use p4runtime_server::server::{
    DeviceIo, MAX_READ_ENTITIES, MAX_READ_RESULTS, Running, ServerConfig, Service, serve,
};
use pipeline::control::Control;
use pipeline::runtime::{Config, Pipeline};
use prost::Message;
use tokio_stream::StreamExt;
use tonic::Code;

use p4::entity::Entity as E;

struct Fixture {
    running: Running,
    control: Arc<Control>,
}

impl Fixture {
    fn new() -> Fixture {
        let program = programs::by_name("basic").unwrap();
        let pipe = Pipeline::new(program, 1, Config::default());
        let control = pipe.control.clone();
        let io = DeviceIo::detached();
        let service = Service::new(control.clone(), io, ServerConfig::default());
        let running = serve(service, "127.0.0.1:0".parse().unwrap()).unwrap();
        Fixture { running, control }
    }

    /// A plain tonic client with tonic's default limits, as any client would have.
    async fn raw(&self) -> P4RuntimeClient<tonic::transport::Channel> {
        P4RuntimeClient::connect(format!("http://{}", self.running.addr))
            .await
            .unwrap()
    }

    fn register_id(&self) -> u32 {
        let s = self.control.schema();
        s.register_by_name("ingress.flow_last_seen").unwrap().id
    }
}

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

fn wildcard_registers(f: &Fixture, n: usize) -> p4::ReadRequest {
    let e = p4::Entity {
        entity: Some(E::RegisterEntry(p4::RegisterEntry {
            register_id: f.register_id(),
            ..Default::default()
        })),
    };
    p4::ReadRequest {
        device_id: 1,
        entities: vec![e; n],
        ..Default::default()
    }
}

/// Issue 10 item 1: a ~2 MB ReadRequest repeating a wildcard register read 300,000 times (4096
/// cells each: 1.2 billion entities) from a client with no role. The server gathered it all
/// into one Vec and was killed at 23 GB. Now it is refused at once, naming the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_naming_too_many_entities_is_refused_without_growing() {
    let f = Fixture::new();
    let mut c = f.raw().await;
    let req = wildcard_registers(&f, 300_000);
    assert!(req.encoded_len() > 1_500_000, "{}", req.encoded_len());
    let before = rss();
    let status = match c.read(req).await {
        Err(s) => s,
        Ok(r) => {
            let mut stream = r.into_inner();
            loop {
                match stream.next().await {
                    Some(Ok(_)) => continue,
                    Some(Err(s)) => break s,
                    None => panic!("the whole read was answered"),
                }
            }
        }
    };
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains(&MAX_READ_ENTITIES.to_string()),
        "the message names the bound: {}",
        status.message()
    );
    let grown = rss().saturating_sub(before);
    assert!(grown < 256 << 20, "grew by {} MB", grown >> 20);
    // The switch still serves.
    let mut c = Client::connect(&f.running.addr.to_string(), 1, 1)
        .await
        .unwrap();
    let cells = c
        .read_one(E::RegisterEntry(p4::RegisterEntry {
            register_id: f.register_id(),
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(cells.len(), 4096);
}

/// Issue 10 item 1, the other bound: a request within the entity bound whose answer is huge
/// (1,000 wildcards of 4096 cells) is streamed in chunks while the client reads, and ends with
/// RESOURCE_EXHAUSTED after MAX_READ_RESULTS entities, in bounded memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_read_answer_streams_in_bounded_memory_and_stops_at_the_bound() {
    let f = Fixture::new();
    let mut c = f.raw().await;
    let before = rss();
    let mut stream = c
        .read(wildcard_registers(&f, 1000))
        .await
        .unwrap()
        .into_inner();
    let mut got = 0usize;
    let mut largest = 0usize;
    let status = loop {
        match stream.next().await {
            Some(Ok(r)) => {
                got += r.entities.len();
                largest = largest.max(r.entities.len());
            }
            Some(Err(s)) => break s,
            None => panic!("answered {got} entities, past the bound"),
        }
    };
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains(&MAX_READ_RESULTS.to_string()));
    assert_eq!(got, MAX_READ_RESULTS);
    assert!(
        largest <= 1000,
        "chunks of at most 1000 entities: {largest}"
    );
    let grown = rss().saturating_sub(before);
    assert!(grown < 256 << 20, "grew by {} MB", grown >> 20);
}

/// An l2_exact entry for MAC 02:00:00:00:(i >> 8):(i & 0xff), forwarding to port 1.
fn l2_insert(f: &Fixture, i: usize) -> p4::Update {
    use p4::field_match::{Exact, FieldMatchType};
    let s = f.control.schema();
    let table = s.tables[s.table_by_name("ingress.l2_exact").unwrap()].id;
    let action = s.actions[s.action_by_name("ingress.l2_forward").unwrap()].id;
    let mac = vec![2, 0, 0, 0, (i >> 8) as u8, i as u8];
    p4::Update {
        r#type: p4::update::Type::Insert as i32,
        entity: Some(p4::Entity {
            entity: Some(E::TableEntry(p4::TableEntry {
                table_id: table,
                r#match: vec![p4::FieldMatch {
                    field_id: 1,
                    field_match_type: Some(FieldMatchType::Exact(Exact { value: mac })),
                }],
                action: Some(p4::TableAction {
                    r#type: Some(p4::table_action::Type::Action(p4::Action {
                        action_id: action,
                        params: vec![p4::action::Param {
                            param_id: 1,
                            value: vec![1],
                        }],
                    })),
                }),
                ..Default::default()
            })),
        }),
    }
}

/// Issue 10 item 11: a batch of 1,000 updates of which the last fails (a duplicate of the
/// first). Its error details took 35 KB, over gRPC's default 8 KiB metadata limit, and the
/// client (tonic with default limits here, p4runtime-shell alike) got no status details at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_errors_of_a_large_batch_reach_a_default_client() {
    let f = Fixture::new();
    let mut c = Client::connect(&f.running.addr.to_string(), 1, 1)
        .await
        .unwrap();
    let mut updates: Vec<p4::Update> = (0..999).map(|i| l2_insert(&f, i)).collect();
    updates.push(l2_insert(&f, 0));
    let req = p4::WriteRequest {
        device_id: 1,
        election_id: Some(p4::Uint128 { high: 0, low: 1 }),
        updates,
        ..Default::default()
    };
    // A plain tonic client with default limits gets the status and its details.
    let status = f.raw().await.write(req).await.unwrap_err();
    assert_eq!(status.code(), Code::Unknown, "{status:?}");
    let header = status.details().len().div_ceil(3) * 4 + status.message().len();
    assert!(header < 8000, "{header} bytes of metadata");
    let details = rpc::Status::decode(status.details()).unwrap();
    assert!(!details.details.is_empty());
    assert!(
        status.message().contains("update 999"),
        "{}",
        status.message()
    );
    // The client library places the failure at its index (fresh keys, the same shape).
    let mut updates: Vec<p4::Update> = (1000..1999).map(|i| l2_insert(&f, i)).collect();
    updates.push(l2_insert(&f, 1000));
    let Err(ClientError::Write { errors, summary }) = c.write(updates, Default::default()).await
    else {
        panic!("the batch was accepted")
    };
    assert_eq!(errors.len(), 1000, "{summary}");
    let failed: Vec<usize> = (0..1000).filter(|&i| errors[i].is_some()).collect();
    assert_eq!(failed, vec![999], "{summary}");
    assert_eq!(errors[999].as_ref().unwrap().0, Code::AlreadyExists);
}
