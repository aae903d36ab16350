//! The standard gRPC health service (grpc.health.v1) answers within 100 ms while a large write
//! batch or a large read is in progress (issue 16, part 3): a fabric tool or an orchestrator can
//! tell a busy switch from a dead one. In-process, over real gRPC on loopback.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use p4runtime_server::client::{Client, Deadlines, health_check};
use p4runtime_server::proto::p4::v1 as p4;
use p4runtime_server::server::{DeviceIo, ServerConfig, Service, serve};
use pipeline::runtime::{Config, Pipeline};

const ENTRIES: u32 = 120_000;

/// Probes `addr` every 5 ms while `busy` is set, from a thread and runtime of its own (as a
/// separate prober would: the test's client, encoding a large batch, shares nothing with it);
/// returns the latencies of the probes sent while it was.
fn probe_while(addr: String, busy: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Duration>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut during = Vec::new();
            while !busy.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            while busy.load(Ordering::Acquire) {
                let took = health_check(&addr, Duration::from_secs(2))
                    .await
                    .expect("the health service answers");
                if busy.load(Ordering::Acquire) {
                    during.push(took);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            during
        })
    })
}

/// Prints the latencies of the probes made during `what` (which took `op`) and checks them: the
/// 95th percentile under 100 ms, and no probe waiting anywhere near as long as the operation.
/// (Every probe is not held to 100 ms: on this 2-core machine, shared with other builds, the
/// scheduler alone now and then delays one by 50-100 ms while the server decodes a 5 MB
/// request on one async worker and copies it in on the other.)
fn report(what: &str, lat: &[Duration], op: Duration) {
    let mut sorted = lat.to_vec();
    sorted.sort();
    let pct = |p: usize| sorted[(sorted.len() * p / 100).min(sorted.len() - 1)];
    let max = sorted.last().copied().unwrap_or_default();
    let mean = lat.iter().sum::<Duration>() / u32::try_from(lat.len().max(1)).unwrap_or(1);
    eprintln!(
        "{what} took {:.0} ms; {} health probes meanwhile: mean {:.2} ms, median {:.2} ms, \
         95th percentile {:.2} ms, max {:.2} ms",
        op.as_secs_f64() * 1e3,
        lat.len(),
        mean.as_secs_f64() * 1e3,
        pct(50).as_secs_f64() * 1e3,
        pct(95).as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    assert!(
        lat.len() >= 10,
        "too few probes overlapped the {what} to show anything: {}",
        lat.len()
    );
    assert!(
        pct(95) < Duration::from_millis(100),
        "95th percentile {:?} during the {what}",
        pct(95)
    );
    assert!(
        max < op / 2,
        "a health probe took {max:?} during the {what} of {op:?}: it waited for it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_within_100ms_during_a_large_write_and_a_large_read() {
    let program = programs::by_name("basic").unwrap();
    let pipe = Pipeline::new(program, 1, Config::default());
    let control = pipe.control.clone();
    let io = DeviceIo::detached();
    let service = Service::new(control.clone(), io, ServerConfig::default());
    let running = serve(service, "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = running.addr.to_string();

    // Idle first: the probe works at all.
    for _ in 0..5 {
        let idle = health_check(&addr, Duration::from_secs(2)).await.unwrap();
        eprintln!("idle health probe: {:.2} ms", idle.as_secs_f64() * 1e3);
    }

    let slow = Deadlines::all(Duration::from_secs(120));
    let mut c = Client::connect_with(&addr, 1, 1, slow).await.unwrap();
    c.run_commands(&[
        "act_prof_create_member ecmp_selector 1 set_nhop 02:00:00:00:00:02 02:00:00:00:00:fe 1",
    ])
    .await
    .unwrap();
    let s = control.schema();
    let table_id = s.tables[s.table_by_name("ingress.ipv4_lpm").unwrap()].id;
    let updates: Vec<p4::Update> = (0..ENTRIES)
        .map(|i| {
            use p4::field_match::{FieldMatchType, Lpm};
            let v = 0x0a00_0000 + i;
            p4::Update {
                r#type: p4::update::Type::Insert as i32,
                entity: Some(p4::Entity {
                    entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry {
                        table_id,
                        r#match: vec![p4::FieldMatch {
                            field_id: 1,
                            field_match_type: Some(FieldMatchType::Lpm(Lpm {
                                value: v.to_be_bytes().to_vec(),
                                prefix_len: 32,
                            })),
                        }],
                        action: Some(p4::TableAction {
                            r#type: Some(p4::table_action::Type::ActionProfileMemberId(1)),
                        }),
                        ..Default::default()
                    })),
                }),
            }
        })
        .collect();

    // A write batch of 120k entries.
    let busy = Arc::new(AtomicBool::new(false));
    let probes = probe_while(addr.clone(), busy.clone());
    busy.store(true, Ordering::Release);
    let t = Instant::now();
    c.write(updates, p4::write_request::Atomicity::ContinueOnError)
        .await
        .expect("the large write");
    let took = t.elapsed();
    busy.store(false, Ordering::Release);
    report("120k-entry write", &probes.join().unwrap(), took);

    // A read of all of them.
    let busy = Arc::new(AtomicBool::new(false));
    let probes = probe_while(addr.clone(), busy.clone());
    busy.store(true, Ordering::Release);
    let t = Instant::now();
    let n = c
        .read_one(p4::entity::Entity::TableEntry(p4::TableEntry {
            table_id,
            ..Default::default()
        }))
        .await
        .expect("the large read")
        .len();
    let took = t.elapsed();
    busy.store(false, Ordering::Release);
    assert_eq!(n, ENTRIES as usize);
    report("120k-entry read", &probes.join().unwrap(), took);
    drop(c);
    running.stop();
}
