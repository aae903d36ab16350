//! BMv2's `simple_pre_lag` service (multicast groups built of nodes) and its `simple_switch`
//! service (mirroring sessions, the clock, queue settings).
//!
//! BMv2's packet replication engine has groups, and nodes (a replication id and a port set)
//! associated with at most one group each. The engine has P4Runtime's groups (a list of
//! (port, rid) copies), so the nodes are kept here and a group is rewritten whenever its nodes
//! change: its copies are its nodes in the order they were associated, each node's ports in
//! ascending order. A change is made on a copy of the nodes and kept only once the engine has
//! taken the group. A mirroring session to a group follows the group's changes. LAGs are
//! refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use pipeline::control::{Control, Entity, Update, UpdateKind, WriteError};
use pipeline::pre::{CloneSession, Replica};
use serde_json::json;

use super::code::*;
use super::value::{Struct, Value};
use super::{Fail, Reply, Runtime};

/// The most ports a port map may name (BMv2's `bitset<512>`).
const MAX_PORTS: usize = 512;
/// The most nodes (BMv2's L1 table has a size too).
const MAX_NODES: usize = 1 << 16;

#[derive(Debug, Clone)]
struct Node {
    rid: u16,
    ports: Vec<u16>,
    group: Option<u32>,
}

/// The nodes and groups written through this service, for one program instance.
#[derive(Debug, Default, Clone)]
pub(super) struct State {
    /// (control plane, its generation): a program load or a reset starts afresh. Held, so that
    /// no later control plane can have its address.
    owner: Option<(Arc<Control>, u64)>,
    nodes: BTreeMap<u32, Node>,
    /// Groups created here, with their nodes in association order.
    groups: BTreeMap<u32, Vec<u32>>,
    /// Mirroring sessions configured with a multicast group, and the group.
    mirror_groups: BTreeMap<u32, u32>,
}

/// The method `method` of `simple_pre_lag` or `simple_switch`, or None if it is neither's.
pub(super) fn call(rt: &Runtime, method: &str, a: &Struct) -> Option<Reply> {
    let control = rt.service.control();
    let generation = control.generation();
    let mut st = rt.pre.lock();
    let same = st
        .owner
        .as_ref()
        .is_some_and(|(c, g)| Arc::ptr_eq(c, &control) && *g == generation);
    if !same {
        *st = State {
            owner: Some((control, generation)),
            ..State::default()
        };
    }
    Some(match method {
        "bm_mc_mgrp_create" => mgrp_create(rt, &mut st, a),
        "bm_mc_mgrp_destroy" => mgrp_destroy(rt, &mut st, a),
        "bm_mc_node_create" => node_create(&mut st, a),
        "bm_mc_node_update" => node_update(rt, &mut st, a),
        "bm_mc_node_destroy" => node_destroy(rt, &mut st, a),
        "bm_mc_node_associate" => associate(rt, &mut st, a, true),
        "bm_mc_node_dissociate" => associate(rt, &mut st, a, false),
        "bm_mc_set_lag_membership" => Err(Fail::Code(MC_ERROR, "LAGs are not supported".into())),
        "bm_mc_get_entries" => Ok(Some(Value::str(entries(&st).to_string()))),
        "mirroring_session_add" => mirror_add(rt, &mut st, a),
        "mirroring_session_delete" => mirror_delete(rt, &mut st, a),
        "mirroring_session_get" => mirror_get(&st, a),
        "get_time_elapsed_us" => Ok(Some(Value::I64(
            i64::try_from(rt.started.elapsed().as_micros()).unwrap_or(i64::MAX),
        ))),
        "get_time_since_epoch_us" => Ok(Some(Value::I64(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
        ))),
        "set_egress_queue_depth" => queue(rt, a, "set_queue_depth", true),
        "set_all_egress_queue_depths" => queue(rt, a, "set_queue_depth", false),
        "set_egress_queue_rate" => queue(rt, a, "set_queue_rate", true),
        "set_all_egress_queue_rates" => queue(rt, a, "set_queue_rate", false),
        _ => return None,
    })
}

fn mc_err(e: WriteError) -> Fail {
    Fail::Code(MC_ERROR, e.to_string())
}

impl State {
    /// The control plane the state belongs to.
    fn control(&self) -> Arc<Control> {
        self.owner.as_ref().expect("set by call()").0.clone()
    }

    /// Group `g`'s copies: its nodes' ports with their replication ids.
    fn replicas(&self, g: u32) -> Vec<Replica> {
        self.groups
            .get(&g)
            .into_iter()
            .flatten()
            .filter_map(|n| self.nodes.get(n))
            .flat_map(|n| n.ports.iter().map(|&port| Replica { port, rid: n.rid }))
            .collect()
    }
}

/// Writes `updates` on the state's program; `err` reports a refusal.
fn write(
    rt: &Runtime,
    st: &State,
    updates: Vec<Update>,
    err: impl FnOnce(WriteError) -> Fail,
) -> Result<(), Fail> {
    let Ok(r) = rt.write_with::<std::convert::Infallible>(&st.control(), || Ok(updates));
    r.map_err(err)
}

/// Ports of a BMv2 port map: '1' at position i from the right is port i.
fn port_map(s: &str) -> Result<Vec<u16>, Fail> {
    if s.len() > MAX_PORTS {
        return Err(Fail::Code(
            MC_ERROR,
            format!("port map of {} ports", s.len()),
        ));
    }
    s.bytes()
        .rev()
        .enumerate()
        .filter_map(|(i, b)| match b {
            b'1' => Some(Ok(i as u16)),
            b'0' => None,
            _ => Some(Err(Fail::Code(MC_ERROR, format!("bad port map {s:?}")))),
        })
        .collect()
}

fn no_lags(a: &Struct, id: i16) -> Result<(), Fail> {
    match a.get(id) {
        Some(Value::Bytes(b)) if b.contains(&b'1') => {
            Err(Fail::Code(MC_ERROR, "LAGs are not supported".into()))
        }
        _ => Ok(()),
    }
}

fn group_id(a: &Struct, id: i16, invalid: i32) -> Result<u32, Fail> {
    let g = a.int(id)?;
    u32::try_from(g)
        .ok()
        .filter(|&g| (1..=pipeline::pre::MAX_GROUP_ID).contains(&g))
        .ok_or_else(|| Fail::Code(invalid, format!("multicast group {g}")))
}

/// Writes group `g` as `next` has it, with the mirroring sessions that copy it, and keeps
/// `next` only if the engine took them.
fn commit(rt: &Runtime, st: &mut State, next: State, g: u32) -> Result<(), Fail> {
    let replicas = next.replicas(g);
    let mut updates = vec![Update {
        kind: UpdateKind::Modify,
        entity: Entity::MulticastGroup {
            group_id: g,
            replicas: replicas.clone(),
            metadata: Vec::new(),
        },
    }];
    for (&session_id, _) in next.mirror_groups.iter().filter(|(_, x)| **x == g) {
        updates.push(Update {
            kind: UpdateKind::Modify,
            entity: Entity::CloneSession {
                session_id,
                session: CloneSession {
                    replicas: replicas.clone(),
                    ..CloneSession::default()
                },
            },
        });
    }
    write(rt, st, updates, mc_err)?;
    *st = next;
    Ok(())
}

fn group_update(kind: UpdateKind, g: u32) -> Vec<Update> {
    vec![Update {
        kind,
        entity: Entity::MulticastGroup {
            group_id: g,
            replicas: Vec::new(),
            metadata: Vec::new(),
        },
    }]
}

fn mgrp_create(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let g = group_id(a, 2, MC_INVALID_MGID)?;
    if !st.groups.contains_key(&g) {
        match write(rt, st, group_update(UpdateKind::Insert, g), mc_err) {
            // A group a P4Runtime client made: BMv2 answers a create of an existing group with
            // its handle, and its copies are this service's from now on.
            Ok(()) | Err(Fail::Code(_, _))
                if st.control().read_multicast_groups(Some(g)).is_ok() => {}
            Ok(()) => {}
            Err(f) => return Err(f),
        }
        st.groups.insert(g, Vec::new());
    }
    // BMv2's group handle is the group id.
    Ok(Some(Value::I32(g as i32)))
}

fn mgrp_destroy(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let g = group_id(a, 2, MC_INVALID_MGRP_HANDLE)?;
    write(rt, st, group_update(UpdateKind::Delete, g), |e| match e {
        WriteError::NotFound(m) => Fail::Code(MC_INVALID_MGRP_HANDLE, m),
        e => mc_err(e),
    })?;
    for n in st.groups.remove(&g).unwrap_or_default() {
        if let Some(n) = st.nodes.get_mut(&n) {
            n.group = None;
        }
    }
    Ok(None)
}

fn node_create(st: &mut State, a: &Struct) -> Reply {
    let rid = a.int(2)?;
    let rid = u16::try_from(rid)
        .map_err(|_| Fail::Code(MC_ERROR, format!("replication id {rid} is not 16 bits")))?;
    let ports = port_map(&a.string(3)?)?;
    no_lags(a, 4)?;
    if st.nodes.len() >= MAX_NODES {
        return Err(Fail::Code(MC_TABLE_FULL, format!("{MAX_NODES} nodes")));
    }
    let h = (0u32..).find(|h| !st.nodes.contains_key(h)).unwrap_or(0);
    st.nodes.insert(
        h,
        Node {
            rid,
            ports,
            group: None,
        },
    );
    Ok(Some(Value::I32(h as i32)))
}

/// The node whose handle is field `id`.
fn node_of(st: &State, a: &Struct, id: i16) -> Result<u32, Fail> {
    let h = a.int(id)?;
    u32::try_from(h)
        .ok()
        .filter(|k| st.nodes.contains_key(k))
        .ok_or_else(|| Fail::Code(MC_INVALID_L1_HANDLE, format!("no node {h}")))
}

fn node_update(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let ports = port_map(&a.string(3)?)?;
    no_lags(a, 4)?;
    let h = node_of(st, a, 2)?;
    let mut next = st.clone();
    let n = next.nodes.get_mut(&h).expect("checked");
    n.ports = ports;
    match n.group {
        Some(g) => commit(rt, st, next, g)?,
        None => *st = next,
    }
    Ok(None)
}

fn node_destroy(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let h = node_of(st, a, 2)?;
    let mut next = st.clone();
    let group = next.nodes.remove(&h).and_then(|n| n.group);
    match group {
        Some(g) => {
            next.groups.entry(g).or_default().retain(|&x| x != h);
            commit(rt, st, next, g)?;
        }
        None => *st = next,
    }
    Ok(None)
}

fn associate(rt: &Runtime, st: &mut State, a: &Struct, on: bool) -> Reply {
    let g = group_id(a, 2, MC_INVALID_MGRP_HANDLE)?;
    if !st.groups.contains_key(&g) {
        return Err(Fail::Code(
            MC_INVALID_MGRP_HANDLE,
            format!("group {g} was not created by this runtime API"),
        ));
    }
    let h = node_of(st, a, 3)?;
    let mut next = st.clone();
    let n = next.nodes.get_mut(&h).expect("checked");
    match (on, n.group) {
        (true, None) => n.group = Some(g),
        (false, Some(x)) if x == g => n.group = None,
        (true, Some(x)) => {
            return Err(Fail::Code(MC_ERROR, format!("node {h} is in group {x}")));
        }
        (false, _) => {
            return Err(Fail::Code(
                MC_ERROR,
                format!("node {h} is not in group {g}"),
            ));
        }
    }
    let members = next.groups.entry(g).or_default();
    if on {
        members.push(h);
    } else {
        members.retain(|&x| x != h);
    }
    commit(rt, st, next, g)?;
    Ok(None)
}

/// The PRE's state in the JSON form of BMv2's `mc_dump`.
fn entries(st: &State) -> serde_json::Value {
    let mgrps: Vec<_> = st
        .groups
        .iter()
        .map(|(g, nodes)| json!({"id": g, "l1_handles": nodes}))
        .collect();
    let l1: Vec<_> = st
        .nodes
        .iter()
        .filter(|(_, n)| n.group.is_some())
        .map(|(h, n)| json!({"handle": h, "rid": n.rid, "l2_handle": h}))
        .collect();
    let l2: Vec<_> = st
        .nodes
        .iter()
        .filter(|(_, n)| n.group.is_some())
        .map(|(h, n)| json!({"handle": h, "ports": n.ports, "lags": []}))
        .collect();
    json!({"mgrps": mgrps, "l1_handles": l1, "l2_handles": l2, "lags": []})
}

/// A mirroring failure: `simple_switch`'s service declares one error code, which the CLI
/// prints; the switch's log says why.
fn no_session(why: impl Into<String>) -> Fail {
    Fail::Code(SESSION_NOT_FOUND, why.into())
}

fn session_id(a: &Struct) -> Result<u32, Fail> {
    let id = a.int(1)?;
    u32::try_from(id)
        .ok()
        .filter(|&s| (1..=pipeline::pre::MAX_SESSION_ID).contains(&s))
        .ok_or_else(|| {
            no_session(format!(
                "mirroring session {id}: ids are 1 to {}",
                pipeline::pre::MAX_SESSION_ID
            ))
        })
}

fn mirror_add(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let id = session_id(a)?;
    let cfg = a.strukt(2)?;
    let (replicas, group) = match (cfg.get(1), cfg.get(2)) {
        (Some(_), _) => {
            let port = cfg.int(1)?;
            let port = u16::try_from(port).map_err(|_| no_session(format!("port {port}")))?;
            (vec![Replica { port, rid: 0 }], None)
        }
        // A session to a group copies the group's replicas, and follows the changes made
        // here to the group's nodes.
        (None, Some(_)) => {
            let g = group_id(cfg, 2, MC_INVALID_MGID)
                .map_err(|_| no_session("a group id is 1 to 65535"))?;
            let replicas = if st.groups.contains_key(&g) {
                st.replicas(g)
            } else {
                st.control()
                    .read_multicast_groups(Some(g))
                    .map_err(|e| no_session(e.to_string()))?
                    .into_iter()
                    .flat_map(|(_, g)| g.replicas)
                    .collect()
            };
            (replicas, Some(g))
        }
        (None, None) => return Err(no_session("a session needs a port or a group")),
    };
    let session = CloneSession {
        replicas,
        ..CloneSession::default()
    };
    let update = |kind| {
        vec![Update {
            kind,
            entity: Entity::CloneSession {
                session_id: id,
                session: session.clone(),
            },
        }]
    };
    // BMv2's add replaces a session that exists.
    match write(rt, st, update(UpdateKind::Insert), |e| match e {
        WriteError::AlreadyExists(m) => Fail::App(m),
        e => no_session(e.to_string()),
    }) {
        Err(Fail::App(_)) => write(rt, st, update(UpdateKind::Modify), |e| {
            no_session(e.to_string())
        })?,
        r => r?,
    }
    match group {
        Some(g) => st.mirror_groups.insert(id, g),
        None => st.mirror_groups.remove(&id),
    };
    Ok(None)
}

fn mirror_delete(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let id = session_id(a)?;
    let update = vec![Update {
        kind: UpdateKind::Delete,
        entity: Entity::CloneSession {
            session_id: id,
            session: CloneSession::default(),
        },
    }];
    write(rt, st, update, |e| no_session(e.to_string()))?;
    st.mirror_groups.remove(&id);
    Ok(None)
}

fn mirror_get(st: &State, a: &Struct) -> Reply {
    let id = session_id(a)?;
    let sessions = st
        .control()
        .read_clone_sessions(Some(id))
        .map_err(|e| no_session(e.to_string()))?;
    let (_, s) = sessions
        .into_iter()
        .next()
        .ok_or_else(|| no_session(format!("no session {id}")))?;
    let cfg = match (st.mirror_groups.get(&id), s.replicas.first()) {
        (Some(g), _) => Struct::new().with(2, Value::I32(*g as i32)),
        (None, Some(r)) => Struct::new().with(1, Value::I32(i32::from(r.port))),
        (None, None) => Struct::new(),
    };
    Ok(Some(Value::Struct(cfg)))
}

/// A queue setting through the switch's admin commands: 0 when done, 1 otherwise (the
/// `simple_switch` service declares no exception for them).
fn queue(rt: &Runtime, a: &Struct, verb: &str, one_port: bool) -> Reply {
    let (value, port) = if one_port {
        (a.int(2)?, Some(a.int(1)?))
    } else {
        (a.int(1)?, None)
    };
    let done = match queue_setting(rt, verb, value, port) {
        Ok(()) => 0,
        Err(e) => {
            tracing::info!("thrift {verb}: {e}");
            1
        }
    };
    Ok(Some(Value::I32(done)))
}

/// Sets every data port's queue (or `port`'s) with the admin command `verb` (`set_queue_depth`,
/// `set_queue_rate`) and `value`.
pub(super) fn queue_setting(
    rt: &Runtime,
    verb: &str,
    value: i64,
    port: Option<i64>,
) -> Result<(), String> {
    let line = match port {
        Some(p) => format!("{verb} {value} {p}"),
        None => format!("{verb} {value}"),
    };
    match &rt.opts.admin {
        Some(run) => run(&line).map(drop),
        None => Err("this switch has no queue settings".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_maps_read_from_the_right() {
        assert_eq!(port_map("1010").unwrap(), vec![1, 3]);
        assert_eq!(port_map("").unwrap(), Vec::<u16>::new());
        assert!(port_map("10x").is_err());
        assert!(port_map(&"1".repeat(513)).is_err());
    }
}
