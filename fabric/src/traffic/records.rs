//! What a client records per flow: the rows of its CSVs for sized and paced flows.

use super::*;

/// The record of a sized flow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowRecord {
    /// Flow id.
    pub id: u64,
    /// Source host.
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Scheduled start, ns after the epoch.
    pub start_ns: u64,
    /// Bytes.
    pub size: u64,
    /// `short` or `large`.
    pub class: String,
    /// ToS / traffic class.
    pub tos: u8,
    /// Whether the receiver acknowledged every byte before the deadline.
    pub finished: bool,
    /// FCT, µs (finished flows).
    pub fct_us: Option<f64>,
    /// How late the flow started against its schedule, µs (the tool's own lag; 0 for a flow
    /// whose thread never ran).
    pub lag_us: f64,
    /// The sender's `TCP_INFO` before close.
    pub tx: TcpInfo,
    /// The receiver's out-of-order packets.
    pub rcv_ooopack: u32,
    /// Why it did not finish.
    pub error: String,
}

/// The CSV header of [`FlowRecord::csv`]: `cc,ecn` are the run's transport (what ran, after
/// [`Transport::resolve`]), `ecn_ok` whether this connection negotiated ECN (`TCP_INFO`).
pub const FLOW_CSV_HEADER: &str = "id,src,dst,start_ns,size_bytes,class,tos,cc,ecn,ecn_ok,finished,fct_us,\
    retransmits,reord_seen,reordering,dsack_dups,rcv_ooopack,delivered_ce,rtt_us,lag_us,error";

/// 1 when the connection negotiated ECN (`TCPI_OPT_ECN`), else 0 (also for a connection never
/// made).
fn ecn_ok(tx: &TcpInfo) -> u8 {
    u8::from(tx.options & sockopt::TCPI_OPT_ECN != 0)
}

fn csv_text(s: &str) -> String {
    s.replace([',', '\n', '\r'], ";")
}

impl FlowRecord {
    /// Its CSV row (columns of [`FLOW_CSV_HEADER`]).
    pub fn csv(&self, t: &Transport) -> String {
        format!(
            "{},{},{},{},{},{},{:#04x},{},{},{},{},{},{},{},{},{},{},{},{},{:.0},{}",
            self.id,
            self.src,
            self.dst,
            self.start_ns,
            self.size,
            self.class,
            self.tos,
            t.cc,
            t.ecn,
            ecn_ok(&self.tx),
            self.finished,
            self.fct_us.map_or(String::new(), |f| format!("{f:.1}")),
            self.tx.total_retrans,
            self.tx.reord_seen,
            self.tx.reordering,
            self.tx.dsack_dups,
            self.rcv_ooopack,
            self.tx.delivered_ce,
            self.tx.rtt_us,
            self.lag_us,
            csv_text(&self.error)
        )
    }
}

/// The record of a paced flow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PacedRecord {
    /// Flow id.
    pub id: u64,
    /// Source host.
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Scheduled start, ns after the epoch.
    pub start_ns: u64,
    /// Sending time, ns.
    pub duration_ns: u64,
    /// Pacing cap, bits/s.
    pub rate_bps: u64,
    /// Requested MSS (0: the kernel's).
    pub mss: u32,
    /// ToS / traffic class.
    pub tos: u8,
    /// Whether the receiver reported.
    pub finished: bool,
    /// Bytes the receiver read.
    pub bytes: u64,
    /// Goodput, bits/s, over the receiver's first-to-last-byte interval.
    pub goodput_bps: f64,
    /// The sender's `TCP_INFO` before close.
    pub tx: TcpInfo,
    /// The receiver's out-of-order packets (each answered by a DUPACK).
    pub rcv_ooopack: u32,
    /// The receiver's data segments.
    pub rcv_segs: u32,
    /// Why it did not finish.
    pub error: String,
}

/// The CSV header of [`PacedRecord::csv`].
pub const PACED_CSV_HEADER: &str = "id,src,dst,start_ns,duration_ms,rate_bps,mss,snd_mss,tos,cc,ecn,ecn_ok,\
    finished,bytes,goodput_bps,retransmits,reord_seen,reordering,dsack_dups,rcv_ooopack,rcv_segs,error";

impl PacedRecord {
    /// Its CSV row (columns of [`PACED_CSV_HEADER`]).
    pub fn csv(&self, t: &Transport) -> String {
        format!(
            "{},{},{},{},{:.3},{},{},{},{:#04x},{},{},{},{},{},{:.0},{},{},{},{},{},{},{}",
            self.id,
            self.src,
            self.dst,
            self.start_ns,
            self.duration_ns as f64 / 1e6,
            self.rate_bps,
            self.mss,
            self.tx.snd_mss,
            self.tos,
            t.cc,
            t.ecn,
            ecn_ok(&self.tx),
            self.finished,
            self.bytes,
            self.goodput_bps,
            self.tx.total_retrans,
            self.tx.reord_seen,
            self.tx.reordering,
            self.tx.dsack_dups,
            self.rcv_ooopack,
            self.rcv_segs,
            csv_text(&self.error)
        )
    }
}
