//! Arbitrary frames through the `basic` program on the in-memory switch, on a host port or the
//! CPU port (first byte chooses): nothing may panic, and every frame is forwarded or counted.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pipeline::control::{ActionSpec, Atomicity, Entity, TableAction, TableEntry, Update, UpdateKind};
use pipeline::runtime::{Config, Pipeline};
use sim::SimSwitch;

fn pipeline() -> &'static std::sync::Arc<Pipeline> {
    static P: OnceLock<std::sync::Arc<Pipeline>> = OnceLock::new();
    P.get_or_init(|| {
        let program = programs::by_name("basic").expect("basic");
        let p = Pipeline::new(program, 1, Config::default());
        // Default routes through one next hop, so that the routing path runs too.
        let c = &p.control;
        let s = c.schema().clone();
        let profile = s.action_profiles[0].id;
        let nhop = s.actions[s.action_by_name("set_nhop").expect("set_nhop")].id;
        let member = ActionSpec { action_id: nhop, params: vec![(1, 0x0200_0000_0001), (2, 0x0200_0000_00fe), (3, 2)] };
        let mut ups = vec![Update {
            kind: UpdateKind::Insert,
            entity: Entity::Member { profile_id: profile, member_id: 1, action: Some(member) },
        }];
        for t in ["ipv4_lpm", "ipv6_lpm"] {
            let table_id = s.tables[s.table_by_name(t).expect(t)].id;
            let entry = TableEntry { table_id, action: Some(TableAction::Member(1)), ..TableEntry::default() };
            ups.push(Update { kind: UpdateKind::Insert, entity: Entity::TableEntry(entry) });
        }
        for r in c.write(&ups, Atomicity::ContinueOnError) {
            r.expect("fuzz fixture");
        }
        p
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, frame)) = data.split_first() else { return };
    let p = pipeline();
    let port = if sel & 1 == 0 { 1 } else { p.config.cpu_port };
    let mut sw = SimSwitch::new(p.clone());
    let _ = sw.inject(port, frame, u64::from(sel));
});
