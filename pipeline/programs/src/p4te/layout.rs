//! P4TE's table dependency graph and PHV fields, for the RMT estimate of
//! [`pipeline::resources`] (`pisa-switch --program p4te --resources`).

use pipeline::resources::{Gress, Layout, Step};

use Gress::{Egress, Ingress};

const fn step(
    name: &'static str,
    gress: Gress,
    uses: &'static [&'static str],
    after: &'static [&'static str],
) -> Step {
    Step {
        name,
        gress,
        uses,
        after,
    }
}

/// The layout: ingress and egress steps in dependency order.
pub fn layout() -> Layout {
    let steps = vec![
        // Ingress. Hashes and the port tables need only parsed fields.
        step("count_rx", Ingress, &["ingress.port_rx"], &[]),
        step("class_meter", Ingress, &["ingress.class_rate"], &[]),
        step("edge_in", Ingress, &["ingress.edge_port"], &[]),
        step(
            "mat_down",
            Ingress,
            &["ingress.down_v4", "ingress.down_v6"],
            &[],
        ),
        step(
            "mat_up",
            Ingress,
            &[
                "ingress.queue_depth_up",
                "ingress.link_util_up",
                "ingress.ecmp_up",
            ],
            &[],
        ),
        step(
            "flowlet_time",
            Ingress,
            &["ingress.flowlet_last_seen", "ingress.flowlet_gap_ns"],
            &[],
        ),
        // Anti-repeat: flag (a) needs the class and whether the packet came from a host.
        // Every register access per packet is declared, the ones a target could not place
        // included (the report lists them): rate adaptation's switch is an egress register.
        step(
            "anti_repeat",
            Ingress,
            &["ingress.rc_seq", "ingress.rc_bytes", "egress.rate_control"],
            &["edge_in", "class_meter"],
        ),
        // Alg. 2: the utilisation of the two candidates, then the flowlet's port.
        step(
            "port_util",
            Ingress,
            &["ingress.port_utilizations", "ingress.routing"],
            &["mat_up"],
        ),
        step(
            "flowlet_port",
            Ingress,
            &["ingress.flowlet_port"],
            &["flowlet_time", "port_util", "mat_down"],
        ),
        step(
            "edge_out",
            Ingress,
            &["ingress.edge_port"],
            &["flowlet_port"],
        ),
        // A-P4TE-24: the link meter on offered load, once the port is known.
        step(
            "offered_meter",
            Ingress,
            &["ingress.meter_offered", "ingress.offered_rate"],
            &["flowlet_port"],
        ),
        // Toward the sender: learn the ACK or patch the FACK.
        step(
            "last_ack",
            Ingress,
            &[
                "ingress.last_ack",
                "ingress.last_win",
                "ingress.last_tsval",
                "ingress.last_tsecr",
                // A FACK passing its source leaf moves rcSeq.
                "ingress.rc_seq",
            ],
            &["edge_out"],
        ),
        step("fack_patch", Ingress, &[], &["last_ack", "anti_repeat"]),
        // Egress.
        step("macs", Egress, &["egress.port_mac"], &[]),
        step("count_tx", Egress, &["egress.port_tx"], &[]),
        step(
            "qdepth",
            Egress,
            &["egress.old_queue_depths", "egress.qdepth_delta"],
            &[],
        ),
        step("util_meter", Egress, &["egress.link_util_rate"], &[]),
        // A-P4TE-23: the worst colour of the last hold time, one timestamp per colour.
        step(
            "colour_hold",
            Egress,
            &[
                "egress.color_hold_ns",
                "egress.yellow_seen_ns",
                "egress.red_seen_ns",
            ],
            &["util_meter"],
        ),
        step(
            "colour_change",
            Egress,
            &["egress.old_packet_colors"],
            &["colour_hold"],
        ),
        step(
            "rate_decision",
            Egress,
            &["egress.rate_control"],
            &["colour_hold"],
        ),
        // Not P4TE's: the optional ECN marking beyond K.
        step("ecn_mark", Egress, &["egress.ecn_threshold"], &[]),
        // The last hop clears P4TE's flags: is the egress port a host's?
        step(
            "last_hop",
            Egress,
            &["ingress.edge_port"],
            &["rate_decision"],
        ),
        step(
            "report",
            Egress,
            &[
                "egress.feedback",
                "egress.qdepth_events",
                "egress.color_events",
                "egress.facks",
            ],
            &["qdepth", "colour_change", "rate_decision"],
        ),
    ];
    let mut phv = Vec::new();
    for g in [Ingress, Egress] {
        // Headers: Ethernet, IPv4 and IPv6 (either may be valid), TCP with the timestamp option.
        for (f, b) in [
            ("eth.dst", 48),
            ("eth.src", 48),
            ("eth.type", 16),
            ("ipv4.ver_ihl", 8),
            ("ipv4.tos", 8),
            ("ipv4.len", 16),
            ("ipv4.id", 16),
            ("ipv4.frag", 16),
            ("ipv4.ttl", 8),
            ("ipv4.proto", 8),
            ("ipv4.csum", 16),
            ("ipv4.src", 32),
            ("ipv4.dst", 32),
            ("ipv6.ver_tc_fl", 32),
            ("ipv6.len", 16),
            ("ipv6.nh", 8),
            ("ipv6.hl", 8),
            ("ipv6.src", 128),
            ("ipv6.dst", 128),
            ("tcp.ports", 32),
            ("tcp.seq", 32),
            ("tcp.ack", 32),
            ("tcp.off_flags", 16),
            ("tcp.win", 16),
            ("tcp.csum", 16),
            ("tcp.urg", 16),
            ("tcp.ts_kind", 16),
            ("tcp.tsval", 32),
            ("tcp.tsecr", 32),
            ("port", 9),
            ("bridged.in_colour", 2),
            ("bridged.offered_colour", 2),
            ("bridged.events", 64),
        ] {
            phv.push((g, f, b));
        }
    }
    for (f, b) in [
        ("ig.ingress_port", 9),
        ("ig.egress_spec", 9),
        ("ig.timestamp", 48),
        ("ig.class", 2),
        ("ig.flow_hash", 32),
        ("ig.flowlet_cell", 13),
        ("ig.last_seen", 48),
        ("ig.low_queue_port", 9),
        ("ig.low_util_port", 9),
        ("ig.util_q", 2),
        ("ig.util_u", 2),
        ("ig.rc_cell", 16),
        ("ig.rc_seq", 32),
        ("ig.last_ack", 32),
        ("ig.last_win", 17),
        ("ig.last_tsval", 32),
        ("ig.last_tsecr", 32),
        ("ig.edge_in", 1),
        ("ig.edge_out", 1),
    ] {
        phv.push((Ingress, f, b));
    }
    for (f, b) in [
        ("eg.egress_port", 9),
        ("eg.enq_qdepth", 19),
        ("eg.old_depth", 32),
        ("eg.delta", 32),
        ("eg.timestamp", 48),
        ("eg.metered_colour", 2),
        ("eg.colour", 2),
        ("eg.old_colour", 2),
        ("eg.q_event", 2),
        ("eg.u_event", 2),
        ("eg.action", 2),
        ("eg.clone_session", 10),
        ("eg.instance_type", 4),
        ("eg.rid", 16),
    ] {
        phv.push((Egress, f, b));
    }
    Layout { steps, phv }
}
