//! P4Runtime Writes and Reads through the service's conversion and validation layer and the
//! control plane (`Service::write_as_primary`, `Service::read_blocking`), on `basic` or `ecmp`:
//! random sequences of updates of every entity (generated with small id domains, converted to
//! P4Runtime messages, now and then corrupted at the protobuf level), random atomicity, then
//! reads. Nothing may panic, and after every Write the control plane's two copies of the state
//! must be identical (`Control::check_copies`), and a wildcard read must list what the control
//! plane holds.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use std::sync::{Arc, OnceLock};

use common::{Bytes, update};
use libfuzzer_sys::fuzz_target;
use p4runtime_server::convert;
use p4runtime_server::proto::p4::v1 as p4;
use p4runtime_server::server::{DeviceIo, ServerConfig, Service};
use pipeline::runtime::{Config, Pipeline};
use prost::Message;

struct Fixture {
    pipe: Arc<Pipeline>,
    service: Service,
}

fn fixtures() -> &'static [Fixture] {
    static F: OnceLock<Vec<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        ["basic", "ecmp"]
            .into_iter()
            .map(|name| {
                let program = programs::by_name(name).expect(name);
                let pipe = Pipeline::new(program, 1, Config::default());
                let service = Service::new(
                    pipe.control.clone(),
                    DeviceIo::detached(),
                    ServerConfig::default(),
                );
                Fixture { pipe, service }
            })
            .collect()
    })
}

fn read_all(f: &Fixture, entities: Vec<p4::Entity>) -> Vec<p4::Entity> {
    let req = p4::ReadRequest {
        device_id: 1,
        role: String::new(),
        entities,
    };
    let mut out = Vec::new();
    for r in f.service.read_blocking(&req) {
        match r {
            Ok(resp) => out.extend(resp.entities),
            Err(_) => return out,
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let all = fixtures();
    let f = &all[b.below(all.len())];
    let control = &f.pipe.control;
    let schema = control.schema().clone();
    // Each input starts from a clean pipeline.
    control.clear();
    let mut batches = 0;
    while !b.is_empty() && batches < 16 {
        batches += 1;
        let n = 1 + b.below(8);
        let mut updates = Vec::with_capacity(n);
        for _ in 0..n {
            let u = update(&mut b, &schema);
            let mut msg = convert::update_msg(&schema, &u);
            // Now and then corrupt the encoded message: what a client could send.
            if b.u8() % 8 == 0 {
                let mut bytes = msg.encode_to_vec();
                if !bytes.is_empty() {
                    let i = b.below(bytes.len());
                    bytes[i] ^= b.u8() | 1;
                    if b.flag() {
                        bytes.truncate(b.below(bytes.len()));
                    }
                }
                match p4::Update::decode(bytes.as_slice()) {
                    Ok(m) => msg = m,
                    Err(_) => continue,
                }
            }
            updates.push(msg);
        }
        let req = p4::WriteRequest {
            device_id: if b.u8() == 0xff { 7 } else { 1 },
            updates,
            atomicity: i32::from(b.u8() % 4),
            ..Default::default()
        };
        let _ = f.service.write_as_primary(&req);
        if let Err(e) = control.check_copies() {
            panic!("after a Write: {e}");
        }
        // Reads: the entities written, as specific reads, now and then.
        if b.u8() % 4 == 0 {
            let entities = req
                .updates
                .iter()
                .filter_map(|u| u.entity.clone())
                .collect();
            let _ = read_all(f, entities);
        }
    }
    // A wildcard read of every table lists what the control plane holds.
    let wildcard = p4::Entity {
        entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry::default())),
    };
    let listed = read_all(f, vec![wildcard]).len();
    let held = control
        .read_entries(None, false, false)
        .map_or(0, |e| e.len());
    assert_eq!(
        listed, held,
        "a wildcard Read lists {listed} entries, the control plane holds {held}"
    );
    // Every other kind of wildcard read answers without panicking (one input in 8: they read
    // every cell of every counter, meter and register).
    if data.len() % 8 != 0 {
        return;
    }
    use p4::entity::Entity as E;
    let wildcards = vec![
        E::ActionProfileMember(p4::ActionProfileMember::default()),
        E::ActionProfileGroup(p4::ActionProfileGroup::default()),
        E::CounterEntry(p4::CounterEntry::default()),
        E::MeterEntry(p4::MeterEntry::default()),
        E::RegisterEntry(p4::RegisterEntry::default()),
        E::DirectCounterEntry(p4::DirectCounterEntry {
            table_entry: Some(p4::TableEntry::default()),
            ..Default::default()
        }),
        E::DirectMeterEntry(p4::DirectMeterEntry {
            table_entry: Some(p4::TableEntry::default()),
            ..Default::default()
        }),
        E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry::default()),
        E::DigestEntry(p4::DigestEntry::default()),
    ];
    let _ = read_all(
        f,
        wildcards
            .into_iter()
            .map(|e| p4::Entity { entity: Some(e) })
            .collect(),
    );
});
