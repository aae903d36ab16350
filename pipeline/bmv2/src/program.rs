//! The loaded program as the engine runs it: the v1model's packet life (parse, verify checksums,
//! ingress, the traffic manager, egress, update checksums, deparse) on [`Program`]'s two stages.
//!
//! # From ingress to egress
//!
//! In BMv2 egress sees the header vector ingress left. The engine hands egress a frame, so at the
//! end of ingress the headers are deparsed into the frame (the traffic manager then queues and
//! counts the packet's true bytes) and everything else of the header vector travels behind the
//! frame, as Tofino carries bridged metadata: each header's validity, every metadata instance,
//! any valid header the deparser does not emit, and, for an ingress-to-egress clone, the
//! original bytes the parser consumed (the clone is of the packet as received, re-parsed, as
//! simple_switch does). Egress reads it back, re-extracts the deparsed headers in deparser order
//! and strips it. [`StdMeta::bridged`] says how long it is, so no byte pattern is ever guessed.
//! Resubmission and recirculation carry their field lists the same way.

use std::cell::RefCell;
use std::sync::Arc;

use pipeline::frame::Frame;
use pipeline::metadata::{DropReason, InstanceType, StdMeta};
use pipeline::program::{Ctx, Program};
use pipeline::schema::{DigestIx, Schema};

use crate::action::{Action, Calc, Requests, Run};
use crate::bits::BitWriter;
use crate::control::Control;
use crate::expr::{Env, Expr};
use crate::layout::{DROP_PORT, Layout};
use crate::phv::{Phv, instance_code};

use crate::parse::{Parsed, Parser};

/// A checksum the parser verifies or the deparser updates.
#[derive(Debug)]
pub(crate) struct Checksum {
    pub target: u32,
    pub calc: usize,
    pub cond: Option<Expr>,
    pub verify: bool,
    pub update: bool,
}

/// A P4 program loaded from p4c's BMv2 JSON, run by the engine like a hard-wired one.
#[derive(Debug)]
pub struct Bmv2Program {
    pub(crate) schema: Arc<Schema>,
    pub(crate) l: Layout,
    pub(crate) parser: Parser,
    pub(crate) deparser: Vec<u32>,
    /// Per header: the deparser emits it.
    pub(crate) is_deparsed: Vec<bool>,
    /// The metadata fields that ride the bridge from ingress to egress (those egress may read,
    /// [`crate::live`]), and their bytes there.
    pub(crate) bridged: Vec<u32>,
    pub(crate) bridged_bytes: usize,
    pub(crate) ingress: Control,
    pub(crate) egress: Control,
    pub(crate) actions: Vec<Action>,
    pub(crate) calcs: Vec<Calc>,
    pub(crate) checksums: Vec<Checksum>,
    pub(crate) field_lists: Vec<Vec<u32>>,
    pub(crate) learn_lists: Vec<(DigestIx, Vec<u32>)>,
    pub(crate) assert_drop: DropReason,
    pub(crate) bridge_drop: DropReason,
    /// This program's tag in its bridges.
    pub(crate) tag: u32,
}

/// Per-thread buffers, so that a packet allocates nothing.
#[derive(Default)]
struct Scratch {
    phv: Phv,
    w: BitWriter,
    keys: Vec<u128>,
    buf: Vec<u8>,
    saved: Vec<u128>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `StdMeta::bridged` words: the bridge's length in bytes, and a truncation asked for in ingress
/// (length + 1).
const BRIDGE_LEN: usize = 0;
const TRUNCATE: usize = 1;
/// An egress-to-egress clone's bridge (its field list), at the end of its frame: its length.
const E2E_BRIDGE: usize = 2;

/// The bridge's fixed tail: emitted header bytes, original bytes, field list (+1), the
/// program's tag, total length.
const FOOTER: usize = 12;

/// Each loaded program's tag, so that a frame bridged by another program (queued when a
/// controller swapped programs) is never read as this one's.
static TAGS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// A fresh program tag.
pub(crate) fn new_tag() -> u32 {
    TAGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Program for Bmv2Program {
    fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    fn ingress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        SCRATCH.with_borrow_mut(|s| self.run_ingress(s, cx, pkt, md));
    }

    fn egress(&self, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        SCRATCH.with_borrow_mut(|s| self.run_egress(s, cx, pkt, md));
    }
}

impl Bmv2Program {
    fn fresh(&self, s: &mut Scratch) {
        let l = &self.l;
        s.phv.vals.resize(l.fields.len(), 0);
        s.phv.valid.resize(l.headers.len(), false);
        s.phv.reset(l);
    }

    fn run_ingress(
        &self,
        s: &mut Scratch,
        cx: &mut Ctx<'_>,
        pkt: &mut Frame<'_>,
        md: &mut StdMeta,
    ) {
        let l = &self.l;
        self.fresh(s);
        // A resubmitted or recirculated packet: the field list it keeps.
        let mut keep = 0;
        if md.bridged[BRIDGE_LEN] != 0 {
            match self.unbridge(s, pkt, md) {
                Some(f) => {
                    keep = f.list;
                    self.save_list(s, keep);
                    self.fresh(s);
                }
                None => return md.mark_to_drop(self.bridge_drop),
            }
            cx.packet_len = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
        }
        // Standard metadata and the kept field list first: a parser may branch on them (on the
        // ingress port, to take a controller's packet_out header from the CPU port).
        s.phv.load_ingress(l, md);
        self.restore_list(s, keep);
        if keep != 0 {
            // As simple_switch, a list's own instance type (and, recirculated, length) does not
            // survive: they are set after the list is copied.
            s.phv
                .set_std(l, |f| f.instance_type, instance_code(md.instance_type));
            if md.instance_type == InstanceType::Recirculated {
                s.phv
                    .set_std(l, |f| f.packet_length, u128::from(md.packet_length));
            }
        }
        let parsed = self.parse(s, cx, pkt.data(), true);
        let error = parsed.error.unwrap_or(self.parser.errors.no_error);
        s.phv.set_std(l, |f| f.parser_error, error as u128);
        if let Some(e) = parsed.error {
            cx.trace(|| format!("parser error={e} offset={}", parsed.offset));
        }
        let bad = self.verify_checksums(s, cx, &pkt.data()[parsed.offset..]);
        s.phv.set_std(l, |f| f.checksum_error, u128::from(bad));
        md.checksum_error = bad;

        let req = self.control(&self.ingress, s, cx);
        if req.assert_failed {
            cx.trace(|| "assert failed".into());
            return md.mark_to_drop(self.assert_drop);
        }
        if let Some(li) = req.digest {
            let (d, fields) = &self.learn_lists[li];
            let vals: Vec<u128> = fields.iter().map(|&f| s.phv.vals[f as usize]).collect();
            cx.digest(*d, &vals);
        }
        if let Some(list) = req.resubmit {
            // The packet as received, with the field list's values.
            md.resubmit = true;
            if !self.bridge(s, pkt, md, 0, None, list) {
                md.resubmit = false;
                md.mark_to_drop(self.bridge_drop);
            }
            return;
        }
        let clone = req.clone.filter(|c| !c.2);
        if let Some((session, _, _)) = clone {
            md.clone_session = Some(session);
        }
        md.mcast_grp = s.phv.mcast_grp(l);
        md.qid = s.phv.priority(l);
        let spec = s.phv.egress_spec(l);
        if md.mcast_grp == 0 {
            if spec == DROP_PORT {
                md.mark_to_drop(DropReason::Program);
                if clone.is_none() {
                    return;
                }
            } else {
                md.egress_spec = Some(spec as u16);
            }
        }
        if let Some(t) = req.truncate {
            md.bridged[TRUNCATE] = u64::from(t) + 1;
        }
        // The original bytes an ingress clone starts from.
        let orig_len = if clone.is_some() { parsed.offset } else { 0 };
        let mut orig = std::mem::take(&mut s.buf);
        orig.clear();
        orig.extend_from_slice(&pkt.data()[..orig_len]);
        let emitted = self.deparse(s, pkt, parsed.offset);
        let list = clone.map_or(0, |c| c.1);
        let ok = emitted.is_some_and(|e| self.bridge(s, pkt, md, e, Some(&orig), list));
        s.buf = orig;
        if !ok {
            md.mark_to_drop(self.bridge_drop);
        }
    }

    fn run_egress(&self, s: &mut Scratch, cx: &mut Ctx<'_>, pkt: &mut Frame<'_>, md: &mut StdMeta) {
        let l = &self.l;
        self.fresh(s);
        let region;
        // Only an egress clone reads its list's bridge; any other packet (one recirculated
        // after its egress made such a clone, say) drops the stale length here.
        let e2e = std::mem::take(&mut md.bridged[E2E_BRIDGE]);
        if md.instance_type == InstanceType::EgressClone {
            // An egress-to-egress clone is the packet egress emitted, with what rode behind it:
            // the original's recirculation bridge, if it had one (not the clone's), and behind
            // that the clone's field list, if it keeps one. Its headers are parsed again (BMv2
            // copies the header vector; the two agree when the parser recognises what the
            // deparser emitted); its metadata starts from zero but for the list.
            let recirculation = std::mem::take(&mut md.bridged[BRIDGE_LEN]);
            let mut list = 0;
            if e2e != 0 {
                md.bridged[BRIDGE_LEN] = e2e;
                let Some(f) = self.unbridge(s, pkt, md) else {
                    return md.mark_to_drop(self.bridge_drop);
                };
                list = f.list;
                self.save_list(s, list);
            }
            let Some(end) = usize::try_from(recirculation)
                .ok()
                .and_then(|r| pkt.len().checked_sub(r))
            else {
                return md.mark_to_drop(self.bridge_drop);
            };
            pkt.truncate(end);
            self.fresh(s);
            region = self.parse(s, cx, pkt.data(), false).offset;
            self.restore_list(s, list);
        } else if md.bridged[BRIDGE_LEN] == 0 {
            return md.mark_to_drop(self.bridge_drop);
        } else {
            let Some(f) = self.unbridge(s, pkt, md) else {
                return md.mark_to_drop(self.bridge_drop);
            };
            if md.instance_type == InstanceType::IngressClone {
                // The packet as received: its original bytes before the payload, parsed again
                // with the ingress port it came in on, and the clone's field list.
                self.save_list(s, f.list);
                let orig = std::mem::take(&mut s.buf);
                if !replace_front(pkt, f.emitted, &orig) {
                    s.buf = orig;
                    return md.mark_to_drop(self.bridge_drop);
                }
                s.buf = orig;
                self.fresh(s);
                s.phv.load_ingress(l, md);
                let p = self.parse(s, cx, pkt.data(), false);
                self.restore_list(s, f.list);
                region = p.offset;
            } else {
                // Re-extract what ingress deparsed.
                let data = pkt.data();
                let mut off = 0;
                for &h in &self.deparser {
                    if s.phv.valid[h as usize] {
                        // A varbit field's length came in the bridge.
                        let n = s.phv.header_bytes(l, h);
                        let Some(b) = data.get(off..off + n) else {
                            return md.mark_to_drop(self.bridge_drop);
                        };
                        s.phv.extract(l, h, b);
                        off += n;
                    }
                }
                region = f.emitted;
            }
        }
        // Counters and meters see the packet, not the bridge that rode behind it.
        cx.packet_len = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
        s.phv.load_egress(l, md);
        // As simple_switch, egress sees the length the packet has after ingress (headers added
        // or removed count), an ingress clone the length it was received with.
        s.phv
            .set_std(l, |f| f.packet_length, u128::from(cx.packet_len));
        let req = self.control(&self.egress, s, cx);
        if req.assert_failed {
            cx.trace(|| "assert failed".into());
            return md.mark_to_drop(self.assert_drop);
        }
        if let Some((session, _, _)) = req.clone {
            md.clone_session = Some(session);
        }
        if s.phv.egress_spec(l) == DROP_PORT {
            md.mark_to_drop(DropReason::Program);
        } else {
            self.finish_egress(s, cx, pkt, md, region, &req);
        }
        // An egress-to-egress clone that keeps a field list takes the list's values egress
        // left (metadata, which nothing after the control changes) in a bridge behind the
        // frame that only the clones keep (the driver strips it from this packet). A clone
        // does not clone again, so it appends none.
        if let Some((_, list, true)) = req.clone
            && list != 0
            && md.instance_type != InstanceType::EgressClone
        {
            let recirculation = std::mem::take(&mut md.bridged[BRIDGE_LEN]);
            if self.bridge(s, pkt, md, 0, None, list) {
                let n = std::mem::take(&mut md.bridged[BRIDGE_LEN]);
                md.bridged[E2E_BRIDGE] = n;
                md.e2e_tail = u32::try_from(n).unwrap_or(u32::MAX);
            } else {
                // No room behind the frame: the clones cannot keep their list.
                md.clone_session = None;
                cx.trace(|| "egress clone not made: no room for its field list".into());
            }
            md.bridged[BRIDGE_LEN] = recirculation;
        }
    }

    /// Egress after the control, for a packet that leaves: checksums, deparsing, truncation,
    /// recirculation.
    fn finish_egress(
        &self,
        s: &mut Scratch,
        cx: &mut Ctx<'_>,
        pkt: &mut Frame<'_>,
        md: &mut StdMeta,
        region: usize,
        req: &Requests,
    ) {
        self.update_checksums(s, cx, &pkt.data()[region.min(pkt.len())..]);
        if self.deparse(s, pkt, region).is_none() {
            return md.mark_to_drop(DropReason::NoHeadroom);
        }
        let asked = std::mem::take(&mut md.bridged[TRUNCATE]);
        let truncate = req.truncate.map(u64::from).or(asked.checked_sub(1));
        if let Some(t) = truncate {
            pkt.truncate(usize::try_from(t).unwrap_or(usize::MAX));
        }
        if let Some(list) = req.recirculate {
            md.recirculate = true;
            if !self.bridge(s, pkt, md, 0, None, list) {
                md.recirculate = false;
                md.mark_to_drop(self.bridge_drop);
            }
        }
    }

    /// Runs `control` on the header vector; returns what its actions asked of the switch.
    fn control(&self, control: &Control, s: &mut Scratch, cx: &mut Ctx<'_>) -> Requests {
        let mut req = Requests::default();
        let mut run = Run {
            l: &self.l,
            phv: &mut s.phv,
            cx,
            calcs: &self.calcs,
            req: &mut req,
            scratch: &mut s.w,
        };
        control.run(self, &mut run, &mut s.keys);
        req
    }

    /// Runs the parser on `data` into `s.phv`, with the primitives its states call.
    fn parse(&self, s: &mut Scratch, cx: &mut Ctx<'_>, data: &[u8], trace: bool) -> Parsed {
        let x = cx.externs;
        let trace = trace && cx.trace.is_some();
        let mut req = Requests::default();
        let (phv, w) = (&mut s.phv, &mut s.w);
        let parsed = self
            .parser
            .run(&self.l, phv, data, x, trace, &mut |p, phv| {
                let mut run = Run {
                    l: &self.l,
                    phv,
                    cx,
                    calcs: &self.calcs,
                    req: &mut req,
                    scratch: w,
                };
                run.prim(p, &[]);
            });
        for line in &parsed.trace {
            cx.trace(|| line.clone());
        }
        parsed
    }

    /// Emits the valid headers in deparser order in place of the first `consumed` bytes;
    /// returns their length (`None` without the headroom to grow).
    fn deparse(&self, s: &Scratch, pkt: &mut Frame<'_>, consumed: usize) -> Option<usize> {
        let l = &self.l;
        let valid = |h: &&u32| s.phv.valid[**h as usize];
        let e: usize = self
            .deparser
            .iter()
            .filter(valid)
            .map(|&h| s.phv.header_bytes(l, h))
            .sum();
        let consumed = consumed.min(pkt.len());
        if e > consumed {
            pkt.push_front(e - consumed)?;
        } else {
            pkt.pop_front(consumed - e);
        }
        let d = pkt.data_mut();
        let mut off = 0;
        for &h in self.deparser.iter().filter(valid) {
            let n = s.phv.header_bytes(l, h);
            // The packer writes every byte of a header (headers are whole bytes).
            s.phv.emit(l, h, &mut d[off..off + n]);
            off += n;
        }
        Some(e)
    }

    /// Appends the bridge: validity, headers the deparser does not emit, the metadata egress may
    /// read, `orig`, and the footer; records its length in `md`. False without room after the frame.
    fn bridge(
        &self,
        s: &mut Scratch,
        pkt: &mut Frame<'_>,
        md: &mut StdMeta,
        emitted: usize,
        orig: Option<&[u8]>,
        list: usize,
    ) -> bool {
        let l = &self.l;
        let orig = orig.unwrap_or_default();
        let nh = l.headers.len();
        let ns = l.next_len();
        let nv = 2 * l.wide.iter().filter(|w| w.varbit).count();
        let mut len = nh.div_ceil(8) + ns + nv + self.bridged_bytes + orig.len() + FOOTER;
        for (h, hd) in l.headers.iter().enumerate() {
            if self.rides(s, h) {
                len += hd.saved_bytes;
            }
        }
        let (Ok(e16), Ok(o16), Ok(l16), Ok(t16)) = (
            u16::try_from(emitted),
            u16::try_from(orig.len()),
            u16::try_from(list),
            u16::try_from(len),
        ) else {
            return false;
        };
        let Some(out) = pkt.push_back(len) else {
            return false;
        };
        out.fill(0);
        let mut off = 0;
        for h in 0..nh {
            if s.phv.valid[h] {
                out[h / 8] |= 0x80 >> (h % 8);
            }
        }
        off += nh.div_ceil(8);
        out[off..off + ns].copy_from_slice(&s.phv.next);
        off += ns;
        // Every varbit field's length, so that egress re-extracts a deparsed one whole.
        for (k, _) in l.wide.iter().enumerate().filter(|(_, w)| w.varbit) {
            let n = u16::try_from(s.phv.wide[k].len()).unwrap_or(u16::MAX);
            out[off..off + 2].copy_from_slice(&n.to_be_bytes());
            off += 2;
        }
        for (h, hd) in l.headers.iter().enumerate() {
            if self.rides(s, h) {
                s.phv.save(l, h as u32, &mut out[off..off + hd.saved_bytes]);
                off += hd.saved_bytes;
            }
        }
        // The metadata egress may read, each field in whole bytes, little end first (byte by
        // byte: a field is a few bytes, and a copy of a variable length would be a call).
        for &f in &self.bridged {
            let n = l.fields[f as usize].width.div_ceil(8) as usize;
            let v = s.phv.vals[f as usize];
            for (k, b) in out[off..off + n].iter_mut().enumerate() {
                *b = (v >> (8 * k)) as u8;
            }
            off += n;
        }
        out[off..off + orig.len()].copy_from_slice(orig);
        off += orig.len();
        for (k, v) in [e16, o16, l16].into_iter().enumerate() {
            out[off + 2 * k..off + 2 * k + 2].copy_from_slice(&v.to_be_bytes());
        }
        out[off + 6..off + 10].copy_from_slice(&self.tag.to_be_bytes());
        out[off + 10..off + 12].copy_from_slice(&t16.to_be_bytes());
        md.bridged[BRIDGE_LEN] = len as u64;
        true
    }

    /// Reads and strips the bridge into the header vector (validity, metadata, headers the
    /// deparser does not emit); leaves the original bytes, if any, in `s.buf`.
    fn unbridge(&self, s: &mut Scratch, pkt: &mut Frame<'_>, md: &mut StdMeta) -> Option<Footer> {
        let l = &self.l;
        let len = usize::try_from(std::mem::take(&mut md.bridged[BRIDGE_LEN])).ok()?;
        let data = pkt.data();
        let start = data.len().checked_sub(len)?;
        let b = &data[start..];
        let tail = b.get(len.checked_sub(FOOTER)?..)?;
        let word = |k: usize| usize::from(u16::from_be_bytes([tail[2 * k], tail[2 * k + 1]]));
        let f = Footer {
            emitted: word(0),
            list: word(2),
        };
        let orig_len = word(1);
        let tag = u32::from_be_bytes([tail[6], tail[7], tail[8], tail[9]]);
        let total = usize::from(u16::from_be_bytes([tail[10], tail[11]]));
        if total != len || tag != self.tag {
            return None;
        }
        let nh = l.headers.len();
        let ns = l.next_len();
        let mut off = nh.div_ceil(8);
        for h in 0..nh {
            s.phv.valid[h] = l.headers[h].metadata || b[h / 8] & (0x80 >> (h % 8)) != 0;
        }
        s.phv.next.copy_from_slice(b.get(off..off + ns)?);
        off += ns;
        for (k, w) in l.wide.iter().enumerate().filter(|(_, w)| w.varbit) {
            let n = b.get(off..off + 2)?;
            let n = usize::from(u16::from_be_bytes([n[0], n[1]])).min(w.bytes);
            s.phv.wide[k].resize(n, 0);
            off += 2;
        }
        for (h, hd) in l.headers.iter().enumerate() {
            if self.rides(s, h) {
                let bytes = b.get(off..off + hd.saved_bytes)?;
                s.phv.load(l, h as u32, bytes);
                off += hd.saved_bytes;
            }
        }
        for &f in &self.bridged {
            let n = l.fields[f as usize].width.div_ceil(8) as usize;
            let bytes = b.get(off..off + n)?;
            s.phv.vals[f as usize] = bytes
                .iter()
                .rev()
                .fold(0u128, |v, &x| (v << 8) | u128::from(x));
            off += n;
        }
        let orig = b.get(off..off + orig_len)?;
        s.buf.clear();
        s.buf.extend_from_slice(orig);
        pkt.truncate(start);
        Some(f)
    }

    fn deparsed(&self, h: u32) -> bool {
        self.is_deparsed[h as usize]
    }

    /// Header `h` rides the bridge whole: valid, not metadata (whose fields ride as
    /// [`Bmv2Program::bridged`]) and not emitted by the deparser.
    fn rides(&self, s: &Scratch, h: usize) -> bool {
        s.phv.valid[h] && !self.l.headers[h].metadata && !self.deparsed(h as u32)
    }

    /// Keeps the values of field list `list` (+1; 0 is none) of the header vector.
    fn save_list(&self, s: &mut Scratch, list: usize) {
        s.saved.clear();
        if let Some(fields) = list.checked_sub(1).and_then(|i| self.field_lists.get(i)) {
            s.saved
                .extend(fields.iter().map(|&f| s.phv.vals[f as usize]));
        }
    }

    fn restore_list(&self, s: &mut Scratch, list: usize) {
        if let Some(fields) = list.checked_sub(1).and_then(|i| self.field_lists.get(i)) {
            for (&f, &v) in fields.iter().zip(&s.saved) {
                s.phv.vals[f as usize] = v;
            }
        }
    }

    fn checksum_applies(&self, s: &Scratch, cx: &Ctx<'_>, c: &Checksum) -> bool {
        c.cond.as_ref().is_none_or(|e| {
            let env = Env {
                l: &self.l,
                phv: &s.phv,
                params: &[],
                look: &[],
                short: std::cell::Cell::new(false),
                x: cx.externs,
            };
            e.eval(&env) != 0
        })
    }

    fn checksum_value(
        &self,
        s: &mut Scratch,
        cx: &mut Ctx<'_>,
        c: &Checksum,
        payload: &[u8],
    ) -> u128 {
        let calc = &self.calcs[c.calc];
        let (l, phv, order) = (&self.l, &s.phv, &self.deparser);
        calc.input(l, phv, &mut s.w, &mut |w| {
            // Headers after the last one named, in deparser order, then the payload.
            let from = calc
                .payload_after
                .and_then(|h| order.iter().position(|&x| x == h))
                .map_or(0, |i| i + 1);
            for &h in &order[from..] {
                if phv.valid[h as usize] {
                    phv.push_header(l, h, w);
                }
            }
            w.push_bytes(payload);
        });
        u128::from(calc.hash.hash(&s.w.bytes, cx.rng))
    }

    fn verify_checksums(&self, s: &mut Scratch, cx: &mut Ctx<'_>, payload: &[u8]) -> bool {
        let mut bad = false;
        for c in self.checksums.iter().filter(|c| c.verify) {
            if self.checksum_applies(s, cx, c) {
                let width = self.l.fields[c.target as usize].width;
                let v = self.checksum_value(s, cx, c, payload) & crate::bits::mask(width);
                bad |= v != s.phv.vals[c.target as usize];
            }
        }
        bad
    }

    fn update_checksums(&self, s: &mut Scratch, cx: &mut Ctx<'_>, payload: &[u8]) {
        for c in self.checksums.iter().filter(|c| c.update) {
            if self.checksum_applies(s, cx, c) {
                let v = self.checksum_value(s, cx, c, payload);
                s.phv.set(&self.l, c.target, v as i128);
            }
        }
    }
}

/// What the bridge's footer says.
#[derive(Debug, Clone, Copy)]
struct Footer {
    emitted: usize,
    list: usize,
}

/// Replaces the first `n` bytes of the frame with `bytes`.
fn replace_front(pkt: &mut Frame<'_>, n: usize, bytes: &[u8]) -> bool {
    let n = n.min(pkt.len());
    if bytes.len() > n {
        if pkt.push_front(bytes.len() - n).is_none() {
            return false;
        }
    } else {
        pkt.pop_front(n - bytes.len());
    }
    pkt.data_mut()[..bytes.len()].copy_from_slice(bytes);
    true
}

/// No program: every frame is dropped (counted under `no_program`) until a controller loads
/// one, as `simple_switch_grpc --no-p4` waits for its first pipeline config.
#[derive(Debug)]
pub struct Empty {
    schema: Arc<Schema>,
    drop: DropReason,
}

impl Empty {
    /// The empty program.
    pub fn new() -> Self {
        let mut b = pipeline::schema::SchemaBuilder::new("none", "0");
        let drop = b.drop_reason("no_program");
        let schema = b.build().expect("an empty schema is valid");
        Empty {
            schema: Arc::new(schema),
            drop,
        }
    }
}

impl Default for Empty {
    fn default() -> Self {
        Self::new()
    }
}

impl Program for Empty {
    fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    fn ingress(&self, _cx: &mut Ctx<'_>, _pkt: &mut Frame<'_>, md: &mut StdMeta) {
        md.mark_to_drop(self.drop);
    }

    fn egress(&self, _cx: &mut Ctx<'_>, _pkt: &mut Frame<'_>, md: &mut StdMeta) {
        md.mark_to_drop(self.drop);
    }
}
