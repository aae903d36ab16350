//! v1model-style standard metadata, with Tofino units where a program asks for them.
//!
//! Timestamps are nanoseconds on the switch's monotonic clock (the data plane reads the clock; the
//! pipeline only sees numbers). Queue depths are in packets, with 80-byte-cell variants as Tofino
//! reports them.

use crate::wire;

/// A switch port number. v1model ports are 9 bits wide; the P4Info declares them as `bit<9>`.
pub type PortId = u16;

/// Width of a port number in the P4Info and in controller packet metadata.
pub const PORT_BITS: u8 = 9;

/// Bytes in one Tofino buffer cell (queue depths in cells are `ceil(bytes / CELL_BYTES)`).
pub const CELL_BYTES: u32 = 80;

/// Bytes of bridged metadata a program can carry from ingress to egress ([`StdMeta::bridged`]).
pub const BRIDGED_BYTES: usize = 32;

/// How a packet came to be in the pipeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum InstanceType {
    /// A frame received on a port.
    #[default]
    Normal = 0,
    /// An ingress-to-egress clone.
    IngressClone = 1,
    /// An egress-to-egress clone.
    EgressClone = 2,
    /// A packet recirculated from egress back to ingress.
    Recirculated = 3,
    /// A packet resubmitted from the end of ingress to its start.
    Resubmitted = 4,
    /// A multicast replica.
    Replicated = 5,
    /// A frame made by the packet generator.
    Generated = 6,
}

/// Why a packet was dropped. Every drop has one, and every reason has a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The parser rejected a header (which one, and why).
    Malformed(HeaderKind, wire::Error),
    /// A table lookup missed and the program drops on miss (the table's index in the schema).
    TableMiss(u16),
    /// The program dropped the packet on purpose (an ACL, a `drop` action).
    Program,
    /// IPv4 TTL or IPv6 hop limit reached zero.
    TtlExpired,
    /// Ingress ended without choosing an egress port or a multicast group.
    NoEgress,
    /// A multicast group or clone session that does not exist.
    NoSuchGroup,
    /// A meter coloured the packet red.
    MeterRed,
    /// The packet was recirculated or resubmitted too many times.
    RecircLimit,
    /// A pushed header did not fit in the frame's headroom.
    NoHeadroom,
    /// The traffic manager's queue was full.
    TailDrop,
    /// A packet-out from the controller was malformed or named a bad port.
    BadPacketOut,
    /// The egress port does not exist on this switch.
    NoSuchPort,
    /// One of the program's own reasons (its index among the schema's `drop_reasons`, named
    /// there; see `SchemaBuilder::drop_reason`).
    Named(u8),
}

impl DropReason {
    /// Every reason's counter name, in [`DropReason::index`] order.
    pub const NAMES: [&'static str; 12] = [
        "malformed",
        "table_miss",
        "program",
        "ttl_expired",
        "no_egress",
        "no_such_group",
        "meter_red",
        "recirc_limit",
        "no_headroom",
        "tail_drop",
        "bad_packet_out",
        "no_such_port",
    ];

    /// A dense index for per-reason counters: the standard reasons first, then the program's
    /// own, in schema order.
    pub const fn index(self) -> usize {
        match self {
            DropReason::Malformed(..) => 0,
            DropReason::TableMiss(_) => 1,
            DropReason::Program => 2,
            DropReason::TtlExpired => 3,
            DropReason::NoEgress => 4,
            DropReason::NoSuchGroup => 5,
            DropReason::MeterRed => 6,
            DropReason::RecircLimit => 7,
            DropReason::NoHeadroom => 8,
            DropReason::TailDrop => 9,
            DropReason::BadPacketOut => 10,
            DropReason::NoSuchPort => 11,
            DropReason::Named(i) => Self::NAMES.len() + i as usize,
        }
    }
}

/// The headers a parser knows, for drop reasons and traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderKind {
    /// Ethernet II.
    Ethernet,
    /// 802.1Q tag.
    Vlan,
    /// ARP.
    Arp,
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP.
    Icmp,
    /// ICMPv6.
    Icmpv6,
    /// 802.1Qbb / 802.3x MAC control.
    Pfc,
    /// The controller's packet-out header.
    PacketOut,
    /// A program's own shim header.
    Shim,
}

/// The standard metadata of one packet, read and written by a program's stages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StdMeta {
    /// The port the frame arrived on (or the CPU / recirculation port).
    pub ingress_port: PortId,
    /// Set by ingress: where the packet goes. `None` with no multicast group means drop.
    pub egress_spec: Option<PortId>,
    /// Set by the traffic manager before egress: the port this copy leaves on.
    pub egress_port: PortId,
    /// How the packet came to be here.
    pub instance_type: InstanceType,
    /// Frame length in bytes as received (without FCS).
    pub packet_length: u32,
    /// When ingress started, ns.
    pub ingress_global_timestamp: u64,
    /// When egress started, ns.
    pub egress_global_timestamp: u64,
    /// When the packet entered its queue, ns.
    pub enq_timestamp: u64,
    /// Packets in the queue when this one was enqueued (not counting itself).
    pub enq_qdepth: u32,
    /// Bytes in the queue when this one was enqueued.
    pub enq_qdepth_bytes: u32,
    /// Time spent in the queue, ns.
    pub deq_timedelta: u64,
    /// Packets left in the queue when this one was dequeued.
    pub deq_qdepth: u32,
    /// Bytes left in the queue when this one was dequeued.
    pub deq_qdepth_bytes: u32,
    /// Multicast group chosen by ingress (0 = none).
    pub mcast_grp: u16,
    /// Replica id of a multicast copy.
    pub egress_rid: u16,
    /// Egress queue (priority) 0..=7; 7 is served first.
    pub qid: u8,
    /// Clone session requested by this stage (I2E in ingress, E2E in egress).
    pub clone_session: Option<u32>,
    /// Ingress asks for the original packet to be resubmitted.
    pub resubmit: bool,
    /// Egress asks for the packet to be recirculated to ingress.
    pub recirculate: bool,
    /// Bytes at the end of the frame egress left that belong to its egress-to-egress clones
    /// only (a program's data for them, such as the v1model's preserved field list): each copy
    /// keeps them, the packet itself leaves without them.
    pub e2e_tail: u32,
    /// How many times this packet was recirculated or resubmitted.
    pub recirc_count: u8,
    /// The parser found a bad checksum (verify_checksum).
    pub checksum_error: bool,
    /// Set when the packet is to be dropped.
    pub drop: Option<DropReason>,
    /// Program-defined data bridged from ingress to egress, and through resubmission and
    /// recirculation (Tofino's bridged metadata): [`BRIDGED_BYTES`] bytes as four words.
    pub bridged: [u64; 4],
}

impl StdMeta {
    /// Metadata for a frame of `len` bytes arriving on `port` at `now_ns`.
    pub fn new(port: PortId, len: usize, now_ns: u64) -> Self {
        StdMeta {
            ingress_port: port,
            packet_length: u32::try_from(len).unwrap_or(u32::MAX),
            ingress_global_timestamp: now_ns,
            ..StdMeta::default()
        }
    }

    /// v1model's `mark_to_drop`.
    pub fn mark_to_drop(&mut self, reason: DropReason) {
        self.drop = Some(reason);
        self.egress_spec = None;
        self.mcast_grp = 0;
    }

    /// Queue depth at enqueue in 80-byte cells, as Tofino reports it.
    pub fn enq_qdepth_cells(&self) -> u32 {
        self.enq_qdepth_bytes.div_ceil(CELL_BYTES)
    }

    /// Queue depth at dequeue in 80-byte cells.
    pub fn deq_qdepth_cells(&self) -> u32 {
        self.deq_qdepth_bytes.div_ceil(CELL_BYTES)
    }
}
