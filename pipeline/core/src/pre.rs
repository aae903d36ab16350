//! The packet replication engine: multicast groups and clone sessions.
//!
//! Its configuration is part of the published [`crate::state::State`] snapshot, so a worker sees a
//! group either before or after a write, never half of one. The engine itself only *describes*
//! copies ([`Copy`]); whoever owns the buffers (the data plane, or [`crate::sim`]) makes them.

use crate::metadata::{InstanceType, PortId};

/// One copy of a multicast group or clone session: a port and a replica id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Replica {
    /// Egress port.
    pub port: PortId,
    /// Replica id, seen by egress as `egress_rid` (P4Runtime `instance`).
    pub rid: u16,
}

/// A multicast group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MulticastGroup {
    /// Copies, in order.
    pub replicas: Vec<Replica>,
    /// Controller metadata, echoed on read.
    pub metadata: Vec<u8>,
}

/// A clone (mirror) session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloneSession {
    /// Copies (usually one port).
    pub replicas: Vec<Replica>,
    /// Egress queue of the copies (class of service).
    pub class_of_service: u8,
    /// Truncate copies to this many bytes (0 = whole packet).
    pub truncate: u32,
}

/// A copy the engine asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copy {
    /// Egress port.
    pub port: PortId,
    /// Replica id.
    pub rid: u16,
    /// Instance type of the copy.
    pub instance_type: InstanceType,
    /// Egress queue.
    pub qid: u8,
    /// Truncation length (0 = none).
    pub truncate: u32,
}

/// Multicast groups and clone sessions, keyed by their ids.
#[derive(Clone, Debug, Default)]
pub struct Pre {
    /// Multicast groups by id (1..=65535).
    pub groups: hashbrown::HashMap<u32, MulticastGroup>,
    /// Clone sessions by id.
    pub sessions: hashbrown::HashMap<u32, CloneSession>,
}

/// Largest multicast group id (standard metadata `mcast_grp` is 16 bits).
pub const MAX_GROUP_ID: u32 = 0xffff;
/// Largest clone session id.
pub const MAX_SESSION_ID: u32 = 1023;
/// Most replicas in one group or session.
pub const MAX_REPLICAS: usize = 256;

impl Pre {
    /// Copies of multicast group `id`, or `None` if it does not exist.
    pub fn multicast(&self, id: u16, qid: u8) -> Option<impl Iterator<Item = Copy> + '_> {
        let g = self.groups.get(&u32::from(id))?;
        Some(g.replicas.iter().map(move |r| Copy {
            port: r.port,
            rid: r.rid,
            instance_type: InstanceType::Replicated,
            qid,
            truncate: 0,
        }))
    }

    /// Copies of clone session `id` made as `instance_type`, or `None` if it does not exist.
    pub fn clone_copies(
        &self,
        id: u32,
        instance_type: InstanceType,
    ) -> Option<impl Iterator<Item = Copy> + '_> {
        let s = self.sessions.get(&id)?;
        Some(s.replicas.iter().map(move |r| Copy {
            port: r.port,
            rid: r.rid,
            instance_type,
            qid: s.class_of_service,
            truncate: s.truncate,
        }))
    }
}
