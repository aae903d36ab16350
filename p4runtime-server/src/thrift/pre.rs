//! BMv2's `simple_pre_lag` service (multicast groups built of nodes) and its `simple_switch`
//! service (mirroring sessions, the clock, queue settings).
//!
//! BMv2's packet replication engine has groups, and nodes (a replication id and a port set)
//! associated with at most one group each. The engine has P4Runtime's groups (a list of
//! (port, rid) copies), so the nodes are kept here and a group is rewritten whenever its nodes
//! change: its copies are its nodes in the order they were associated, each node's ports in
//! ascending order. LAGs are refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use pipeline::control::{Entity, Update, UpdateKind, WriteError};
use pipeline::pre::{CloneSession, Replica};
use serde_json::json;

use super::code::*;
use super::value::{Struct, Value};
use super::{Fail, Reply, Runtime};

/// The most ports a port map may name (BMv2's `bitset<512>`).
const MAX_PORTS: usize = 512;

#[derive(Debug)]
struct Node {
    rid: u16,
    ports: Vec<u16>,
    group: Option<u32>,
}

/// The nodes and groups written through this service, for one program instance.
#[derive(Debug, Default)]
pub(super) struct State {
    /// (control plane, its generation): a program load or a reset starts afresh.
    owner: Option<(usize, u64)>,
    nodes: BTreeMap<u32, Node>,
    /// Groups created here, with their nodes in association order.
    groups: BTreeMap<u32, Vec<u32>>,
    /// Mirroring sessions configured with a multicast group, and the group.
    mirror_groups: BTreeMap<u32, u32>,
}

/// The method `method` of `simple_pre_lag` or `simple_switch`, or None if it is neither's.
pub(super) fn call(rt: &Runtime, method: &str, a: &Struct) -> Option<Reply> {
    let control = rt.service.control();
    let owner = (Arc::as_ptr(&control) as usize, control.generation());
    let mut st = rt.pre.lock();
    if st.owner != Some(owner) {
        *st = State {
            owner: Some(owner),
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
        "mirroring_session_get" => mirror_get(rt, &st, a),
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

/// Rewrites group `g` from its nodes.
fn rewrite(rt: &Runtime, st: &State, g: u32) -> Result<(), Fail> {
    let replicas = st.groups[&g]
        .iter()
        .filter_map(|n| st.nodes.get(n))
        .flat_map(|n| n.ports.iter().map(|&port| Replica { port, rid: n.rid }))
        .collect();
    rt.write(&[Update {
        kind: UpdateKind::Modify,
        entity: Entity::MulticastGroup {
            group_id: g,
            replicas,
            metadata: Vec::new(),
        },
    }])
    .map_err(mc_err)
}

fn mgrp_create(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let g = group_id(a, 2, MC_INVALID_MGID)?;
    rt.write(&[Update {
        kind: UpdateKind::Insert,
        entity: Entity::MulticastGroup {
            group_id: g,
            replicas: Vec::new(),
            metadata: Vec::new(),
        },
    }])
    .map_err(mc_err)?;
    st.groups.insert(g, Vec::new());
    // BMv2's group handle is the group id.
    Ok(Some(Value::I32(g as i32)))
}

fn mgrp_destroy(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let g = group_id(a, 2, MC_INVALID_MGRP_HANDLE)?;
    rt.write(&[Update {
        kind: UpdateKind::Delete,
        entity: Entity::MulticastGroup {
            group_id: g,
            replicas: Vec::new(),
            metadata: Vec::new(),
        },
    }])
    .map_err(|e| match e {
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

fn node<'a>(st: &'a mut State, a: &Struct, id: i16) -> Result<(u32, &'a mut Node), Fail> {
    let h = a.int(id)?;
    let key = u32::try_from(h).unwrap_or(u32::MAX);
    st.nodes
        .get_mut(&key)
        .map(|n| (key, n))
        .ok_or_else(|| Fail::Code(MC_INVALID_L1_HANDLE, format!("no node {h}")))
}

fn node_update(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let ports = port_map(&a.string(3)?)?;
    no_lags(a, 4)?;
    let (_, n) = node(st, a, 2)?;
    n.ports = ports;
    if let Some(g) = n.group {
        rewrite(rt, st, g)?;
    }
    Ok(None)
}

fn node_destroy(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let (h, n) = node(st, a, 2)?;
    let group = n.group;
    st.nodes.remove(&h);
    if let Some(g) = group {
        st.groups.entry(g).or_default().retain(|&x| x != h);
        rewrite(rt, st, g)?;
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
    let (h, n) = node(st, a, 3)?;
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
    let members = st.groups.entry(g).or_default();
    if on {
        members.push(h);
    } else {
        members.retain(|&x| x != h);
    }
    rewrite(rt, st, g)?;
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

fn session_id(a: &Struct) -> Result<u32, Fail> {
    let id = a.int(1)?;
    u32::try_from(id)
        .ok()
        .filter(|&s| (1..=pipeline::pre::MAX_SESSION_ID).contains(&s))
        .ok_or_else(|| {
            Fail::App(format!(
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
            let port =
                u16::try_from(port).map_err(|_| Fail::App(format!("mirroring port {port}")))?;
            (vec![Replica { port, rid: 0 }], None)
        }
        // A session to a group copies the group's replicas as they are now.
        (None, Some(_)) => {
            let g = group_id(cfg, 2, MC_INVALID_MGID).map_err(|_| {
                Fail::App("mirroring to a multicast group needs a group id 1 to 65535".into())
            })?;
            let groups = rt
                .service
                .control()
                .read_multicast_groups(Some(g))
                .map_err(|e| Fail::App(e.to_string()))?;
            let replicas = groups.into_iter().flat_map(|(_, g)| g.replicas).collect();
            (replicas, Some(g))
        }
        (None, None) => {
            return Err(Fail::App(
                "a mirroring session needs a port or a group".into(),
            ));
        }
    };
    let session = CloneSession {
        replicas,
        ..CloneSession::default()
    };
    let write = |kind| {
        rt.write(&[Update {
            kind,
            entity: Entity::CloneSession {
                session_id: id,
                session: session.clone(),
            },
        }])
    };
    // BMv2's add replaces a session that exists.
    match write(UpdateKind::Insert) {
        Err(WriteError::AlreadyExists(_)) => write(UpdateKind::Modify),
        r => r,
    }
    .map_err(|e| Fail::App(e.to_string()))?;
    match group {
        Some(g) => st.mirror_groups.insert(id, g),
        None => st.mirror_groups.remove(&id),
    };
    Ok(None)
}

fn mirror_delete(rt: &Runtime, st: &mut State, a: &Struct) -> Reply {
    let id = session_id(a)?;
    rt.write(&[Update {
        kind: UpdateKind::Delete,
        entity: Entity::CloneSession {
            session_id: id,
            session: CloneSession::default(),
        },
    }])
    .map_err(|e| match e {
        WriteError::NotFound(m) => Fail::Code(SESSION_NOT_FOUND, m),
        e => Fail::App(e.to_string()),
    })?;
    st.mirror_groups.remove(&id);
    Ok(None)
}

fn mirror_get(rt: &Runtime, st: &State, a: &Struct) -> Reply {
    let id = session_id(a)?;
    let sessions = rt
        .service
        .control()
        .read_clone_sessions(Some(id))
        .map_err(|e| Fail::Code(SESSION_NOT_FOUND, e.to_string()))?;
    let (_, s) = sessions
        .into_iter()
        .next()
        .ok_or_else(|| Fail::Code(SESSION_NOT_FOUND, format!("no session {id}")))?;
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
    let line = match port {
        Some(p) => format!("{verb} {value} {p}"),
        None => format!("{verb} {value}"),
    };
    let done = match &rt.opts.admin {
        Some(run) => run(&line),
        None => Err("this switch has no queue settings".into()),
    };
    Ok(Some(Value::I32(match done {
        Ok(_) => 0,
        Err(e) => {
            tracing::info!("thrift {verb}: {e}");
            1
        }
    })))
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
