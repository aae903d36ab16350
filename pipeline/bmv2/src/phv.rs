//! The packet header vector ([`Phv`]) of one packet: the values and validity the parser,
//! the controls and the deparser read and write, laid out by [`Layout`].

use pipeline::metadata::{InstanceType, StdMeta};

use crate::bits;
use crate::layout::{DROP_PORT, Layout, StdFields};

/// The packet header vector of one packet: every field's value (masked to its width) and every
/// header's validity.
#[derive(Debug, Clone, Default)]
pub(crate) struct Phv {
    pub vals: Vec<u128>,
    pub valid: Vec<bool>,
    /// Each header stack's next index (the number of elements extracted or pushed), then each
    /// header union stack's ([`Layout::next_len`]).
    pub next: Vec<u8>,
    /// The bytes of each field held as bytes ([`Layout::wide`]): a varbit field's length is
    /// its current length.
    pub wide: Vec<Vec<u8>>,
}

impl Phv {
    /// Field `f`'s value as a signed integer (sign-extended for a signed field).
    #[inline]
    pub(crate) fn get(&self, l: &Layout, f: u32) -> i128 {
        let v = self.vals[f as usize];
        let fd = &l.fields[f as usize];
        if fd.signed && fd.width < 128 && (v >> (fd.width - 1)) & 1 == 1 {
            (v | !fd.mask) as i128
        } else {
            v as i128
        }
    }

    /// Sets field `f` to `v` truncated to its width.
    #[inline]
    pub(crate) fn set(&mut self, l: &Layout, f: u32, v: i128) {
        self.vals[f as usize] = (v as u128) & l.fields[f as usize].mask;
    }

    fn set_opt(&mut self, l: &Layout, f: Option<u32>, v: u128) {
        if let Some(f) = f {
            self.set(l, f, v as i128);
        }
    }

    fn get_opt(&self, f: Option<u32>) -> Option<u128> {
        f.map(|f| self.vals[f as usize])
    }

    /// Resets every metadata field to zero and invalidates every header.
    pub(crate) fn reset(&mut self, l: &Layout) {
        self.vals.iter_mut().for_each(|v| *v = 0);
        self.next.clear();
        self.next.resize(l.next_len(), 0);
        for (v, h) in self.valid.iter_mut().zip(&l.headers) {
            *v = h.metadata;
        }
        if !l.wide.is_empty() {
            self.wide.resize_with(l.wide.len(), Vec::new);
            for (b, w) in self.wide.iter_mut().zip(&l.wide) {
                b.clear();
                if !w.varbit {
                    b.resize(w.bytes, 0);
                }
            }
        }
    }

    /// Header `h`'s length on the wire: its fixed bytes and its varbit field's.
    #[inline]
    pub(crate) fn header_bytes(&self, l: &Layout, h: u32) -> usize {
        let hd = &l.headers[h as usize];
        match hd.varbit {
            None => hd.bytes,
            Some(k) => hd.bytes + self.wide[k as usize].len(),
        }
    }

    /// Sets header `h`'s varbit field to `bytes` bytes (its most, at most).
    pub(crate) fn set_varbit_len(&mut self, l: &Layout, h: u32, bytes: usize) {
        if let Some(k) = l.headers[h as usize].varbit {
            let b = &mut self.wide[k as usize];
            b.clear();
            b.resize(bytes.min(l.wide[k as usize].bytes), 0);
        }
    }

    /// Header `h`'s fields from `bytes` (at least [`Phv::header_bytes`]); marks it valid. A
    /// varbit field takes the length it has.
    pub(crate) fn extract(&mut self, l: &Layout, h: u32, bytes: &[u8]) {
        let hd = &l.headers[h as usize];
        // A header's fields are contiguous from its first bit.
        let mut u = bits::Unpacker::new(&bytes[..self.header_bytes(l, h)]);
        if hd.wide {
            for f in hd.first..hd.first + hd.count {
                let fd = &l.fields[f as usize];
                match fd.wide {
                    None => self.vals[f as usize] = u.take(fd.width),
                    Some(k) => u.take_bytes(&mut self.wide[k as usize]),
                }
            }
        } else {
            for f in hd.first..hd.first + hd.count {
                self.vals[f as usize] = u.take(l.fields[f as usize].width);
            }
        }
        self.make_valid(l, h);
    }

    /// Marks header `h` valid; a union's other members become invalid (P4-16 8.20: at most
    /// one member of a union is valid).
    #[inline]
    pub(crate) fn make_valid(&mut self, l: &Layout, h: u32) {
        self.valid[h as usize] = true;
        if let Some(u) = l.union_of.get(h as usize).copied().flatten() {
            for &o in &l.unions[u as usize] {
                if o != h {
                    self.valid[o as usize] = false;
                }
            }
        }
    }

    /// Copies header `src`'s fields and validity to `dst` (of the same type).
    pub(crate) fn copy_header(&mut self, l: &Layout, dst: u32, src: u32) {
        let (d, s) = (&l.headers[dst as usize], &l.headers[src as usize]);
        for k in 0..d.count.min(s.count) {
            let (df, sf) = (d.first + k, s.first + k);
            self.vals[df as usize] = self.vals[sf as usize];
            if let (Some(dk), Some(sk)) = (l.fields[df as usize].wide, l.fields[sf as usize].wide) {
                self.copy_wide(l, dk, sk);
            }
        }
        if self.valid[src as usize] {
            self.make_valid(l, dst);
        } else {
            self.valid[dst as usize] = false;
        }
    }

    /// Copies union `src`'s members (values and validity) to union `dst`, member by member
    /// (BMv2's `assign_union`).
    pub(crate) fn copy_union(&mut self, l: &Layout, dst: u32, src: u32) {
        for k in 0..l.unions[dst as usize]
            .len()
            .min(l.unions[src as usize].len())
        {
            let (d, s) = (l.unions[dst as usize][k], l.unions[src as usize][k]);
            self.copy_header(l, d, s);
        }
    }

    /// Copies the bytes of wide field `src` to wide field `dst` of the same kind (a varbit field
    /// takes the source's length, up to its most).
    pub(crate) fn copy_wide(&mut self, l: &Layout, dst: u32, src: u32) {
        if dst == src {
            return;
        }
        let from = std::mem::take(&mut self.wide[src as usize]);
        let w = l.wide[dst as usize];
        let n = from.len().min(w.bytes);
        let to = &mut self.wide[dst as usize];
        to.clear();
        to.extend_from_slice(&from[..n]);
        if !w.varbit {
            // A fixed field keeps its size (a shorter source, by an assign_header between
            // types, is zero-extended).
            to.resize(w.bytes, 0);
        }
        self.wide[src as usize] = from;
    }

    /// Zeroes header `h`'s fields (a varbit field becomes empty).
    pub(crate) fn zero_header(&mut self, l: &Layout, h: u32) {
        let hd = &l.headers[h as usize];
        for f in hd.first..hd.first + hd.count {
            self.vals[f as usize] = 0;
            if let Some(k) = l.fields[f as usize].wide {
                let b = &mut self.wide[k as usize];
                if l.wide[k as usize].varbit {
                    b.clear();
                } else {
                    b.fill(0);
                }
            }
        }
    }

    fn invalidate_union(&mut self, l: &Layout, u: u32) {
        for &h in &l.unions[u as usize] {
            self.valid[h as usize] = false;
        }
    }

    /// Union stack `k`'s `push_front(n)`: unions move up by `n`, the first `n` become invalid.
    pub(crate) fn push_unions(&mut self, l: &Layout, k: u32, n: usize) {
        let unions = &l.union_stacks[k as usize].0;
        let size = unions.len();
        for i in (0..size).rev() {
            if i >= n {
                self.copy_union(l, unions[i], unions[i - n]);
            } else {
                self.invalidate_union(l, unions[i]);
            }
        }
        let next = &mut self.next[l.union_next(k)];
        *next = (usize::from(*next) + n).min(size) as u8;
    }

    /// Union stack `k`'s `pop_front(n)`: unions move down by `n`, the last `n` become invalid.
    pub(crate) fn pop_unions(&mut self, l: &Layout, k: u32, n: usize) {
        let unions = &l.union_stacks[k as usize].0;
        let size = unions.len();
        for i in 0..size {
            if i + n < size {
                self.copy_union(l, unions[i], unions[i + n]);
            } else {
                self.invalidate_union(l, unions[i]);
            }
        }
        let next = &mut self.next[l.union_next(k)];
        *next = usize::from(*next).saturating_sub(n) as u8;
    }

    /// The stack's `push_front(n)`: elements move up by `n`, the first `n` become invalid.
    pub(crate) fn push_front(&mut self, l: &Layout, stack: u32, n: usize) {
        let elems = &l.stacks[stack as usize];
        let size = elems.len();
        for i in (0..size).rev() {
            if i >= n {
                self.copy_header(l, elems[i], elems[i - n]);
            } else {
                self.valid[elems[i] as usize] = false;
            }
        }
        let next = &mut self.next[stack as usize];
        *next = (usize::from(*next) + n).min(size) as u8;
    }

    /// The stack's `pop_front(n)`: elements move down by `n`, the last `n` become invalid.
    pub(crate) fn pop_front(&mut self, l: &Layout, stack: u32, n: usize) {
        let elems = &l.stacks[stack as usize];
        let size = elems.len();
        for i in 0..size {
            if i + n < size {
                self.copy_header(l, elems[i], elems[i + n]);
            } else {
                self.valid[elems[i] as usize] = false;
            }
        }
        let next = &mut self.next[stack as usize];
        *next = usize::from(*next).saturating_sub(n) as u8;
    }

    /// Header `h`'s fields into `out` (at least its `saved_bytes`), each in whole bytes of its
    /// own, little end first: cheaper than the wire's bit packing, for the bridge.
    pub(crate) fn save(&self, l: &Layout, h: u32, out: &mut [u8]) {
        let hd = &l.headers[h as usize];
        let mut off = 0;
        for f in hd.first..hd.first + hd.count {
            if let Some(k) = l.fields[f as usize].wide {
                let (w, b) = (l.wide[k as usize], &self.wide[k as usize]);
                if w.varbit {
                    let n = u16::try_from(b.len()).unwrap_or(u16::MAX);
                    out[off..off + 2].copy_from_slice(&n.to_be_bytes());
                    off += 2;
                }
                out[off..off + b.len()].copy_from_slice(b);
                out[off + b.len()..off + w.bytes].fill(0);
                off += w.bytes;
                continue;
            }
            let n = l.fields[f as usize].width.div_ceil(8) as usize;
            // Byte by byte: a field is a few bytes, and a copy of a variable length would be a
            // call.
            let v = self.vals[f as usize];
            for (k, b) in out[off..off + n].iter_mut().enumerate() {
                *b = (v >> (8 * k)) as u8;
            }
            off += n;
        }
    }

    /// The inverse of [`Phv::save`]; marks the header valid.
    pub(crate) fn load(&mut self, l: &Layout, h: u32, bytes: &[u8]) {
        let hd = &l.headers[h as usize];
        let mut off = 0;
        for f in hd.first..hd.first + hd.count {
            if let Some(k) = l.fields[f as usize].wide {
                let w = l.wide[k as usize];
                let mut n = w.bytes;
                if w.varbit {
                    n = usize::from(u16::from_be_bytes([bytes[off], bytes[off + 1]])).min(n);
                    off += 2;
                }
                let b = &mut self.wide[k as usize];
                b.clear();
                b.extend_from_slice(&bytes[off..off + n]);
                off += w.bytes;
                continue;
            }
            let n = l.fields[f as usize].width.div_ceil(8) as usize;
            self.vals[f as usize] = bytes[off..off + n]
                .iter()
                .rev()
                .fold(0u128, |v, &b| (v << 8) | u128::from(b));
            off += n;
        }
        self.make_valid(l, h);
    }

    /// Header `h`'s fields into `out` (at least its length).
    pub(crate) fn emit(&self, l: &Layout, h: u32, out: &mut [u8]) {
        let hd = &l.headers[h as usize];
        let mut p = bits::Packer::new(&mut out[..self.header_bytes(l, h)]);
        if hd.wide {
            for f in hd.first..hd.first + hd.count {
                let fd = &l.fields[f as usize];
                match fd.wide {
                    None => p.put(fd.width, self.vals[f as usize]),
                    Some(k) => p.put_bytes(&self.wide[k as usize]),
                }
            }
        } else {
            for f in hd.first..hd.first + hd.count {
                p.put(l.fields[f as usize].width, self.vals[f as usize]);
            }
        }
        p.finish();
    }

    /// Header `h`'s fields into a calculation's input, as the wire has them.
    pub(crate) fn push_header(&self, l: &Layout, h: u32, w: &mut bits::BitWriter) {
        let hd = &l.headers[h as usize];
        for f in hd.first..hd.first + hd.count {
            let fd = &l.fields[f as usize];
            match fd.wide {
                None => w.push(fd.width, self.vals[f as usize]),
                Some(k) => w.push_bytes(&self.wide[k as usize]),
            }
        }
    }

    /// The v1model's ingress view of `md`: ports, length, times (BMv2 counts microseconds),
    /// instance type.
    pub(crate) fn load_ingress(&mut self, l: &Layout, md: &StdMeta) {
        let s = l.std;
        self.set_opt(l, s.ingress_port, u128::from(md.ingress_port));
        self.set_opt(l, s.packet_length, u128::from(md.packet_length));
        self.set_opt(l, s.instance_type, instance_code(md.instance_type));
        self.set_opt(
            l,
            s.ingress_global_timestamp,
            u128::from(md.ingress_global_timestamp / 1000),
        );
    }

    /// What the traffic manager set before egress: the port, replica id, queue and its depths
    /// and times, the instance type.
    pub(crate) fn load_egress(&mut self, l: &Layout, md: &StdMeta) {
        let s = l.std;
        self.set_opt(l, s.egress_port, u128::from(md.egress_port));
        // BMv2 sets egress_spec to a port other than the drop port before egress, so that only
        // mark_to_drop in egress drops.
        self.set_opt(l, s.egress_spec, DROP_PORT + 1);
        self.set_opt(l, s.egress_rid, u128::from(md.egress_rid));
        self.set_opt(l, s.instance_type, instance_code(md.instance_type));
        self.set_opt(l, s.enq_timestamp, u128::from(md.enq_timestamp / 1000));
        self.set_opt(l, s.enq_qdepth, u128::from(md.enq_qdepth));
        self.set_opt(l, s.deq_timedelta, u128::from(md.deq_timedelta / 1000));
        self.set_opt(l, s.deq_qdepth, u128::from(md.deq_qdepth));
        self.set_opt(l, s.qid, u128::from(md.qid));
        self.set_opt(
            l,
            s.egress_global_timestamp,
            u128::from(md.egress_global_timestamp / 1000),
        );
    }

    pub(crate) fn egress_spec(&self, l: &Layout) -> u128 {
        self.get_opt(l.std.egress_spec).unwrap_or(0)
    }

    pub(crate) fn mcast_grp(&self, l: &Layout) -> u16 {
        self.get_opt(l.std.mcast_grp).unwrap_or(0) as u16
    }

    /// The egress queue the program asked for (`standard_metadata.priority`, as BMv2 with
    /// priority queues; 0 without the field).
    pub(crate) fn priority(&self, l: &Layout) -> u8 {
        (self.get_opt(l.std.priority).unwrap_or(0) & 7) as u8
    }

    pub(crate) fn set_std(&mut self, l: &Layout, f: fn(&StdFields) -> Option<u32>, v: u128) {
        self.set_opt(l, f(&l.std), v);
    }
}

/// The v1model's `instance_type` values (`PKT_INSTANCE_TYPE_*` of simple_switch).
pub(crate) fn instance_code(t: InstanceType) -> u128 {
    match t {
        InstanceType::Normal => 0,
        InstanceType::IngressClone => 1,
        InstanceType::EgressClone => 2,
        InstanceType::Recirculated => 4,
        InstanceType::Replicated => 5,
        InstanceType::Resubmitted => 6,
        // A packet the switch made (pktgen): BMv2 has none; it enters as a normal packet.
        InstanceType::Generated => 0,
    }
}
