//! The replication engine and the packet path's loops: resubmit, recirculation with its bound,
//! E2E clones; and const tables. A small test program drives each case from the first byte of the
//! frame, through a const table.

use std::sync::Arc;

use pipeline::control::{
    ActionSpec, Atomicity, Entity, TableAction, TableEntry, Update, UpdateKind, WriteError,
};
use pipeline::frame::Frame;
use pipeline::metadata::{DropReason, InstanceType, StdMeta};
use pipeline::pre::{CloneSession, Replica};
use pipeline::program::{Ctx, Program};
use pipeline::runtime::{Config, Pipeline};
use pipeline::schema::{
    ActionScope, ConstEntry, RegisterIx, Schema, SchemaBuilder, TableIx, TableSpec,
};
use pipeline::table::{FieldMatch, MatchKind};
use sim::SimSwitch;

#[derive(Debug)]
struct Looper {
    schema: Arc<Schema>,
    mode: TableIx,
    passes: RegisterIx,
    /// The program's own drop reason: frames of mode 0.
    mode_zero: DropReason,
    fwd: usize,
    resubmit_once: usize,
    recirc_forever: usize,
    e2e_clone: usize,
}

/// Index of the mode table, for the control-plane side of the tests.
const MODE: usize = 0;

impl Looper {
    fn new() -> Self {
        let mut b = SchemaBuilder::new("looper", "0");
        let fwd = b.action("fwd", &[("port", 9)]);
        let resubmit_once = b.action("resubmit_once", &[]);
        let recirc_forever = b.action("recirc_forever", &[]);
        let e2e_clone = b.action("e2e_clone", &[("session", 10)]);
        let all = [fwd, resubmit_once, recirc_forever, e2e_clone];
        let mode = b.table(TableSpec {
            name: "ingress.mode",
            fields: vec![("hdr.mode", 8, MatchKind::Exact)],
            actions: all
                .iter()
                .map(|&a| (a, ActionScope::TableAndDefault))
                .collect(),
            default_action: (fwd, vec![1]),
            const_default: true,
            size: 16,
            idle_timeout: false,
        });
        let entry = |m: u128, action: usize, params: Vec<u128>| ConstEntry {
            key: vec![FieldMatch::Exact(m)],
            priority: 0,
            action,
            params,
        };
        b.const_entries(
            mode,
            vec![
                entry(1, fwd, vec![2]),
                entry(2, resubmit_once, vec![]),
                entry(3, recirc_forever, vec![]),
                entry(4, e2e_clone, vec![7]),
            ],
        );
        let passes = b.register("ingress.passes", 32, 8);
        let mode_zero = b.drop_reason("mode_zero");
        let schema = Arc::new(b.build().unwrap());
        Looper {
            schema,
            mode,
            passes,
            mode_zero,
            fwd,
            resubmit_once,
            recirc_forever,
            e2e_clone,
        }
    }
}

impl Program for Looper {
    fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    fn ingress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        let mode = pkt.data().first().copied().unwrap_or(0);
        cx.register(self.passes).rmw(usize::from(mode), |v| v + 1);
        if mode == 0 {
            md.mark_to_drop(self.mode_zero);
            return;
        }
        if mode == 5 {
            // Clone to session 7, drop the original (ngsdn's clone_to_cpu after a table miss).
            md.clone_session = Some(7);
            md.mark_to_drop(self.mode_zero);
            return;
        }
        let r = cx.apply(self.mode, &[u128::from(mode)], 0);
        let a = usize::from(r.action.action);
        md.bridged[0] = a as u64;
        if a == self.fwd {
            md.egress_spec = Some(r.action.arg(0) as u16);
        } else if a == self.resubmit_once {
            if md.instance_type == InstanceType::Resubmitted {
                md.egress_spec = Some(3);
            } else {
                md.resubmit = true;
            }
        } else if a == self.recirc_forever {
            md.egress_spec = Some(4);
        } else if a == self.e2e_clone {
            md.egress_spec = Some(5);
            md.bridged[1] = r.action.arg(0) as u64;
        }
    }

    fn egress(&self, _cx: &mut Ctx<'_>, _pkt: &mut Frame<'_>, md: &mut StdMeta) {
        let a = md.bridged[0] as usize;
        if a == self.recirc_forever {
            md.recirculate = true;
        } else if a == self.e2e_clone {
            md.clone_session = Some(md.bridged[1] as u32);
        }
    }
}

fn setup() -> Arc<Pipeline> {
    let pipe = Pipeline::new(Arc::new(Looper::new()), 1, Config::default());
    let up = Update {
        kind: UpdateKind::Insert,
        entity: Entity::CloneSession {
            session_id: 7,
            session: CloneSession {
                replicas: vec![Replica { port: 6, rid: 9 }],
                class_of_service: 2,
                truncate: 3,
            },
        },
    };
    assert!(pipe.control.write(&[up], Atomicity::ContinueOnError)[0].is_ok());
    pipe
}

fn passes(pipe: &Pipeline, mode: u64) -> u64 {
    let v = pipe.control.read_registers(None, Some(mode)).unwrap()[0].value;
    u64::try_from(v).unwrap()
}

#[test]
fn const_entries_forward_and_refuse_writes() {
    let pipe = setup();
    let mut sw = SimSwitch::new(pipe.clone());
    let out = sw.inject(9, &[1, 0xaa, 0xbb], 0);
    assert_eq!(
        (out[0].port, out[0].bytes.clone()),
        (2, vec![1, 0xaa, 0xbb])
    );
    // A mode no entry matches takes the const default: port 1.
    assert_eq!(sw.inject(9, &[9], 0)[0].port, 1);
    let c = &pipe.control;
    let s = c.schema().clone();
    let e = TableEntry {
        table_id: s.tables[MODE].id,
        matches: vec![(1, FieldMatch::Exact(5))],
        action: Some(TableAction::Action(ActionSpec {
            action_id: s.actions[0].id,
            params: vec![(1, 1)],
        })),
        ..TableEntry::default()
    };
    let r = c.write(
        &[Update {
            kind: UpdateKind::Insert,
            entity: Entity::TableEntry(e),
        }],
        Atomicity::ContinueOnError,
    );
    assert!(matches!(r[0], Err(WriteError::PermissionDenied(_))));
    let def = TableEntry {
        table_id: s.tables[MODE].id,
        is_default: true,
        ..TableEntry::default()
    };
    let r = c.write(
        &[Update {
            kind: UpdateKind::Modify,
            entity: Entity::TableEntry(def),
        }],
        Atomicity::ContinueOnError,
    );
    assert!(matches!(r[0], Err(WriteError::PermissionDenied(_))));
    assert_eq!(
        c.read_entries(Some(s.tables[MODE].id), false, false)
            .unwrap()
            .len(),
        4
    );
    // Clearing the forwarding state keeps const entries.
    c.clear();
    assert_eq!(c.read_entries(None, false, false).unwrap().len(), 4);
    assert!(pipeline::p4info::to_text(&s).contains("is_const_table: true"));
}

#[test]
fn resubmit_reenters_ingress_once() {
    let pipe = setup();
    let mut sw = SimSwitch::new(pipe.clone());
    let out = sw.inject(9, &[2, 1], 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 3);
    assert_eq!(out[0].instance_type, InstanceType::Resubmitted);
    assert_eq!(passes(&pipe, 2), 2);
}

#[test]
fn recirculation_is_bounded_and_counted() {
    let pipe = setup();
    let mut sw = SimSwitch::new(pipe.clone());
    assert!(sw.inject(9, &[3], 0).is_empty());
    let max = u64::from(pipe.config.max_recirculations);
    // The first pass plus one per recirculation, then the limit drops it.
    assert_eq!(passes(&pipe, 3), 1 + max);
    let limit = pipe
        .control
        .drop_counts()
        .into_iter()
        .find(|(n, _)| *n == "recirc_limit")
        .unwrap()
        .1;
    assert_eq!(limit.packets, 1);
}

#[test]
fn e2e_clone_sends_a_truncated_copy_once() {
    let pipe = setup();
    let mut sw = SimSwitch::new(pipe.clone());
    let out = sw.inject(9, &[4, 1, 2, 3, 4, 5], 0);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(
        (out[0].port, out[0].instance_type),
        (5, InstanceType::Normal)
    );
    assert_eq!(out[0].bytes, vec![4, 1, 2, 3, 4, 5]);
    assert_eq!(
        (out[1].port, out[1].rid, out[1].instance_type),
        (6, 9, InstanceType::EgressClone)
    );
    assert_eq!(out[1].bytes, vec![4, 1, 2]);
    // Without the session the clone is dropped and counted, the original still goes out.
    let del = Update {
        kind: UpdateKind::Delete,
        entity: Entity::CloneSession {
            session_id: 7,
            session: CloneSession::default(),
        },
    };
    assert!(pipe.control.write(&[del], Atomicity::ContinueOnError)[0].is_ok());
    let out = sw.inject(9, &[4], 0);
    assert_eq!(out.len(), 1);
    let missing = pipe
        .control
        .drop_counts()
        .into_iter()
        .find(|(n, _)| *n == "no_such_group")
        .unwrap()
        .1;
    assert_eq!(missing.packets, 1);
}

#[test]
fn an_ingress_clone_of_a_dropped_packet_goes_out() {
    let pipe = setup();
    let mut sw = SimSwitch::new(pipe.clone());
    let out = sw.inject(9, &[5, 1, 2, 3, 4, 5], 0);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        (out[0].port, out[0].rid, out[0].instance_type),
        (6, 9, InstanceType::IngressClone)
    );
    assert_eq!(out[0].bytes, vec![5, 1, 2]);
}

#[test]
fn a_programs_own_drop_reason_is_counted_under_its_name() {
    let pipe = setup();
    let mut sw = SimSwitch::new(pipe.clone());
    for _ in 0..3 {
        assert!(sw.inject(9, &[0, 1], 0).is_empty());
    }
    let counts = pipe.control.drop_counts();
    let named: Vec<(&str, u64)> = counts
        .iter()
        .filter(|(_, c)| c.packets > 0)
        .map(|(n, c)| (*n, c.packets))
        .collect();
    assert_eq!(named, vec![("mode_zero", 3)]);
}
