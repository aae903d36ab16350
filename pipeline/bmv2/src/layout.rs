//! Header instances and their fields: where each lives in the packet header vector ([`Phv`]),
//! and how the v1model's standard metadata maps onto the engine's [`StdMeta`].

use std::collections::HashMap;

use pipeline::metadata::{InstanceType, StdMeta};

use crate::bits;
use crate::error::{Result, invalid, unsupported};
use crate::json::Doc;

/// One field of one header instance.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub name: String,
    pub header: u32,
    pub width: u32,
    /// The low `width` bits.
    pub mask: u128,
    pub signed: bool,
    /// A field of over 128 bits or a varbit field: its bytes are [`Phv::wide`]`[k]`, and its
    /// slot in [`Phv::vals`] stays 0.
    pub wide: Option<u32>,
}

/// A field held as bytes: wider than 128 bits, or varbit. Such a field starts on a byte of its
/// header and is whole bytes; it is extracted, emitted, copied whole (`assign`, `assign_VL`,
/// `assign_header`) and fed to calculations over its header, and refused anywhere else.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wide {
    /// Its bytes (fixed), or the most it holds (varbit).
    pub bytes: usize,
    pub varbit: bool,
}

/// One header instance (metadata included).
#[derive(Debug, Clone)]
pub(crate) struct Header {
    pub name: String,
    /// Its fields: indices `first..first + count` of [`Layout::fields`].
    pub first: u32,
    pub count: u32,
    /// Whole bytes on the wire (metadata: its fields packed, rounded up); a varbit field counts
    /// as empty ([`Phv::header_bytes`] adds its length).
    pub bytes: usize,
    /// Some field is held as bytes ([`Wide`]).
    pub wide: bool,
    /// Its varbit field's slot in [`Layout::wide`].
    pub varbit: Option<u32>,
    /// Bytes in a bridge: each field in whole bytes of its own ([`Phv::save`]).
    pub saved_bytes: usize,
    pub metadata: bool,
}

/// A field reference: a field, or a header's hidden `$valid$` bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldRef {
    Field(u32),
    Valid(u32),
}

/// Where every header and field is.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    pub headers: Vec<Header>,
    pub fields: Vec<Field>,
    /// The fields held as bytes.
    pub wide: Vec<Wide>,
    header_ix: HashMap<String, u32>,
    field_ix: HashMap<(String, String), u32>,
    /// Header stacks: their elements' header indices, in order.
    pub stacks: Vec<Vec<u32>>,
    stack_ix: HashMap<String, u32>,
    /// Header unions: their members' header indices, in the union type's order.
    pub unions: Vec<Vec<u32>>,
    /// Per header: the union it is a member of.
    pub union_of: Vec<Option<u32>>,
    union_ix: HashMap<String, u32>,
    /// Header union stacks: their unions in order, and the member names of their union type.
    /// Union stack `k`'s next index is [`Phv::next`]`[stacks.len() + k]`.
    pub union_stacks: Vec<(Vec<u32>, Vec<String>)>,
    union_stack_ix: HashMap<String, u32>,
    /// The v1model's intrinsic fields that this program declares.
    pub std: StdFields,
}

/// The fields of `standard_metadata` (and of the `intrinsic_metadata` and `queueing_metadata`
/// aliases) that the switch reads or writes.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StdFields {
    pub ingress_port: Option<u32>,
    pub egress_spec: Option<u32>,
    pub egress_port: Option<u32>,
    pub instance_type: Option<u32>,
    pub packet_length: Option<u32>,
    pub enq_timestamp: Option<u32>,
    pub enq_qdepth: Option<u32>,
    pub deq_timedelta: Option<u32>,
    pub deq_qdepth: Option<u32>,
    pub ingress_global_timestamp: Option<u32>,
    pub egress_global_timestamp: Option<u32>,
    pub mcast_grp: Option<u32>,
    pub egress_rid: Option<u32>,
    pub checksum_error: Option<u32>,
    pub parser_error: Option<u32>,
    pub priority: Option<u32>,
    pub qid: Option<u32>,
}

/// The most bytes a field held as bytes may have (a varbit field's header, by its
/// `max_length`): a jumbo frame's worth, well within the bridge's 16-bit lengths.
pub(crate) const MAX_WIDE_BYTES: usize = 9216;

/// The v1model's drop port: `mark_to_drop` sets `egress_spec` to it.
pub(crate) const DROP_PORT: u128 = 511;

impl Layout {
    pub(crate) fn build(doc: &Doc) -> Result<Layout> {
        let mut l = Layout::default();
        let types: HashMap<&str, usize> = doc
            .header_types
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), i))
            .collect();
        for (hi, h) in doc.headers.iter().enumerate() {
            let path = format!("headers[{hi}]");
            let &ti = types
                .get(h.header_type.as_str())
                .ok_or_else(|| invalid(&path, format!("no header type {}", h.header_type)))?;
            let ty = &doc.header_types[ti];
            let header = u32::try_from(l.headers.len()).expect("fewer than 2^32 headers");
            let first = u32::try_from(l.fields.len()).expect("fewer than 2^32 fields");
            let mut offset = 0u32;
            let mut varbit = None;
            for (fi, f) in ty.fields.iter().enumerate() {
                let fpath = format!("header_types[{ti}].fields[{fi}]");
                let name = f
                    .first()
                    .and_then(|v| v.as_str())
                    .ok_or_else(|| invalid(&fpath, "a field is [name, width(, signed)]"))?;
                let is_varbit = f.get(1).and_then(|w| w.as_str()) == Some("*");
                let width = match f.get(1) {
                    _ if is_varbit => 0,
                    Some(w) => w
                        .as_u64()
                        .and_then(|w| u32::try_from(w).ok())
                        .ok_or_else(|| invalid(&fpath, "a field width is an integer"))?,
                    None => return Err(invalid(&fpath, "a field has a width")),
                };
                if !is_varbit && width == 0 {
                    return Err(invalid(&fpath, format!("field {name} of 0 bits")));
                }
                let signed = f.get(2).and_then(|v| v.as_bool()).unwrap_or(false);
                let wide = if is_varbit || width > 128 {
                    let ix = u32::try_from(l.wide.len()).expect("fewer than 2^32 fields");
                    if h.metadata || signed || !offset.is_multiple_of(8) {
                        return Err(unsupported(
                            &fpath,
                            format!(
                                "field {name} of {} in {}: fields over 128 bits and varbit \
                                 fields are run in headers, unsigned, from a byte boundary",
                                if is_varbit {
                                    "varbit".to_owned()
                                } else {
                                    format!("{width} bits")
                                },
                                h.name
                            ),
                        ));
                    }
                    let bytes = if is_varbit {
                        if varbit.is_some() {
                            return Err(invalid(&fpath, "a second varbit field in a header type"));
                        }
                        if ty.length_exp.is_some() {
                            return Err(unsupported(
                                &format!("header_types[{ti}].length_exp"),
                                "a varbit length given by the header type (P4_14); extract_VL's is run",
                            ));
                        }
                        varbit = Some(ix);
                        0
                    } else if width.is_multiple_of(8) && width as usize / 8 <= MAX_WIDE_BYTES {
                        width as usize / 8
                    } else {
                        return Err(unsupported(
                            &fpath,
                            format!(
                                "field {name} of {width} bits: over 128 bits, whole bytes up to \
                                 {MAX_WIDE_BYTES} are run"
                            ),
                        ));
                    };
                    l.wide.push(Wide {
                        bytes,
                        varbit: is_varbit,
                    });
                    Some(ix)
                } else {
                    None
                };
                let ix = u32::try_from(l.fields.len()).expect("fewer than 2^32 fields");
                l.field_ix.insert((h.name.clone(), name.to_owned()), ix);
                l.fields.push(Field {
                    name: name.to_owned(),
                    header,
                    width,
                    mask: if wide.is_some() { 0 } else { bits::mask(width) },
                    signed,
                    wide,
                });
                offset = offset.checked_add(width).ok_or_else(|| {
                    unsupported(&fpath, format!("header type {} of over 2^32 bits", ty.name))
                })?;
            }
            if let Some(k) = varbit {
                // The varbit field holds what max_length leaves after the fixed fields.
                let max = ty
                    .max_length
                    .and_then(|m| usize::try_from(m).ok())
                    .filter(|&m| m > 0)
                    .ok_or_else(|| {
                        unsupported(
                            &format!("header_types[{ti}]"),
                            "a varbit field without a max_length",
                        )
                    })?;
                if max > MAX_WIDE_BYTES {
                    return Err(unsupported(
                        &format!("header_types[{ti}].max_length"),
                        format!("max_length {max} (up to {MAX_WIDE_BYTES} bytes are run)"),
                    ));
                }
                let fixed = (offset as usize).div_ceil(8);
                l.wide[k as usize].bytes = max.checked_sub(fixed).ok_or_else(|| {
                    invalid(
                        &format!("header_types[{ti}].max_length"),
                        format!("max_length {max} is less than the fixed fields' {fixed} bytes"),
                    )
                })?;
            }
            if !h.metadata && !offset.is_multiple_of(8) {
                return Err(invalid(
                    &path,
                    format!("header {} is {offset} bits, not whole bytes", h.name),
                ));
            }
            l.header_ix.insert(h.name.clone(), header);
            let saved_bytes = (first..first + ty.fields.len() as u32)
                .map(|f| l.saved_len(f))
                .sum();
            l.headers.push(Header {
                saved_bytes,
                wide: (first..first + ty.fields.len() as u32)
                    .any(|f| l.fields[f as usize].wide.is_some()),
                varbit,
                name: h.name.clone(),
                first,
                count: u32::try_from(ty.fields.len()).expect("fewer than 2^32 fields"),
                bytes: (offset as usize).div_ceil(8),
                metadata: h.metadata,
            });
        }
        let by_id: HashMap<i64, u32> = doc
            .headers
            .iter()
            .enumerate()
            .map(|(i, h)| (h.id, i as u32))
            .collect();
        for (si, s) in doc.header_stacks.iter().enumerate() {
            let path = format!("header_stacks[{si}]");
            let mut elems = Vec::new();
            for (k, id) in s.header_ids.iter().enumerate() {
                let h = *by_id.get(id).ok_or_else(|| {
                    invalid(
                        &format!("{path}.header_ids[{k}]"),
                        format!("no header with id {id}"),
                    )
                })?;
                elems.push(h);
            }
            if elems.is_empty() || elems.len() > 255 {
                return Err(unsupported(
                    &path,
                    format!("a stack of {} headers", elems.len()),
                ));
            }
            l.stack_ix.insert(s.name.clone(), l.stacks.len() as u32);
            l.stacks.push(elems);
        }
        l.unions(doc, &by_id)?;
        l.std = l.std_fields(doc);
        Ok(l)
    }

    /// Header unions and union stacks.
    fn unions(&mut self, doc: &Doc, by_id: &HashMap<i64, u32>) -> Result<()> {
        // Each union type's members: (name, header type).
        let types: HashMap<&str, &[(String, String)]> = doc
            .header_union_types
            .iter()
            .map(|t| (t.name.as_str(), t.headers.as_slice()))
            .collect();
        let mut union_type: Vec<&str> = Vec::new();
        self.union_of = vec![None; self.headers.len()];
        let mut union_by_id = HashMap::new();
        for (ui, u) in doc.header_unions.iter().enumerate() {
            let path = format!("header_unions[{ui}]");
            let members = types
                .get(u.union_type.as_str())
                .ok_or_else(|| invalid(&path, format!("no union type {}", u.union_type)))?;
            if members.len() != u.header_ids.len() {
                return Err(invalid(
                    &path,
                    format!(
                        "{} headers for the {} members of {}",
                        u.header_ids.len(),
                        members.len(),
                        u.union_type
                    ),
                ));
            }
            let union = u32::try_from(self.unions.len()).expect("fewer than 2^32 unions");
            let mut hs = Vec::new();
            for (k, id) in u.header_ids.iter().enumerate() {
                let hpath = format!("{path}.header_ids[{k}]");
                let h = *by_id
                    .get(id)
                    .ok_or_else(|| invalid(&hpath, format!("no header with id {id}")))?;
                if self.headers[h as usize].metadata || self.union_of[h as usize].is_some() {
                    return Err(invalid(&hpath, "a union member is a header of one union"));
                }
                let want = &members[k].1;
                let have = doc.headers.get(h as usize).map(|x| x.header_type.as_str());
                if have != Some(want.as_str()) {
                    return Err(invalid(
                        &hpath,
                        format!("member {} of {} is a {want}", members[k].0, u.union_type),
                    ));
                }
                self.union_of[h as usize] = Some(union);
                hs.push(h);
            }
            union_by_id.insert(u.id, union);
            self.union_ix.insert(u.name.clone(), union);
            union_type.push(u.union_type.as_str());
            self.unions.push(hs);
        }
        for (si, s) in doc.header_union_stacks.iter().enumerate() {
            let path = format!("header_union_stacks[{si}]");
            let members = types
                .get(s.union_type.as_str())
                .ok_or_else(|| invalid(&path, format!("no union type {}", s.union_type)))?;
            let mut unions = Vec::new();
            for (k, id) in s.header_union_ids.iter().enumerate() {
                let upath = format!("{path}.header_union_ids[{k}]");
                let &u = union_by_id
                    .get(id)
                    .ok_or_else(|| invalid(&upath, format!("no header union with id {id}")))?;
                // A member is found by its position in the stack's type: every union of the
                // stack is of that type.
                if union_type[u as usize] != s.union_type {
                    return Err(invalid(
                        &upath,
                        format!(
                            "a union of type {} in a stack of {}",
                            union_type[u as usize], s.union_type
                        ),
                    ));
                }
                unions.push(u);
            }
            if unions.is_empty() || unions.len() > 255 {
                return Err(unsupported(
                    &path,
                    format!(
                        "a union stack of {} unions (1 to 255 are run)",
                        unions.len()
                    ),
                ));
            }
            self.union_stack_ix
                .insert(s.name.clone(), self.union_stacks.len() as u32);
            let names = members.iter().map(|(m, _)| m.clone()).collect();
            self.union_stacks.push((unions, names));
        }
        Ok(())
    }

    /// Header union `name`.
    pub(crate) fn union(&self, path: &str, name: &str) -> Result<u32> {
        self.union_ix
            .get(name)
            .copied()
            .ok_or_else(|| invalid(path, format!("no header union {name}")))
    }

    /// Header union stack `name`.
    pub(crate) fn union_stack(&self, path: &str, name: &str) -> Result<u32> {
        self.union_stack_ix
            .get(name)
            .copied()
            .ok_or_else(|| invalid(path, format!("no header union stack {name}")))
    }

    /// How many next indices a packet carries: one per header stack, then one per union stack.
    pub(crate) fn next_len(&self) -> usize {
        self.stacks.len() + self.union_stacks.len()
    }

    /// Union stack `name` and the position of its union type's member `member`.
    pub(crate) fn union_member(&self, path: &str, name: &str, member: &str) -> Result<(u32, u32)> {
        let &k = self
            .union_stack_ix
            .get(name)
            .ok_or_else(|| invalid(path, format!("no header union stack {name}")))?;
        let m = self.union_stacks[k as usize]
            .1
            .iter()
            .position(|x| x == member)
            .ok_or_else(|| invalid(path, format!("no member {member} in the unions of {name}")))?;
        Ok((k, m as u32))
    }

    /// Union stack `k`'s slot in [`Phv::next`].
    pub(crate) fn union_next(&self, k: u32) -> usize {
        self.stacks.len() + k as usize
    }

    fn std_fields(&self, doc: &Doc) -> StdFields {
        let sm = |f: &str| -> Option<u32> {
            // An alias (`intrinsic_metadata.mcast_grp` -> some field) wins over the default
            // place of the field in `standard_metadata`.
            for (alias, (h, field)) in &doc.field_aliases {
                if alias.rsplit('.').next() == Some(f)
                    && let Some(&i) = self.field_ix.get(&(h.clone(), field.clone()))
                {
                    return Some(i);
                }
            }
            // Then standard_metadata's own field; then, as P4_14 programs have them without
            // aliases, the field of a header instance named as simple_switch names it.
            [
                "standard_metadata",
                "intrinsic_metadata",
                "queueing_metadata",
            ]
            .iter()
            .find_map(|h| self.field_ix.get(&((*h).to_owned(), f.to_owned())))
            .copied()
        };
        StdFields {
            ingress_port: sm("ingress_port"),
            egress_spec: sm("egress_spec"),
            egress_port: sm("egress_port"),
            instance_type: sm("instance_type"),
            packet_length: sm("packet_length"),
            enq_timestamp: sm("enq_timestamp"),
            enq_qdepth: sm("enq_qdepth"),
            deq_timedelta: sm("deq_timedelta"),
            deq_qdepth: sm("deq_qdepth"),
            ingress_global_timestamp: sm("ingress_global_timestamp"),
            egress_global_timestamp: sm("egress_global_timestamp"),
            mcast_grp: sm("mcast_grp"),
            egress_rid: sm("egress_rid"),
            checksum_error: sm("checksum_error"),
            parser_error: sm("parser_error"),
            priority: sm("priority"),
            qid: sm("qid"),
        }
    }

    pub(crate) fn header(&self, path: &str, name: &str) -> Result<u32> {
        self.header_ix
            .get(name)
            .copied()
            .ok_or_else(|| invalid(path, format!("no header instance {name}")))
    }

    pub(crate) fn stack(&self, path: &str, name: &str) -> Result<u32> {
        self.stack_ix
            .get(name)
            .copied()
            .ok_or_else(|| invalid(path, format!("no header stack {name}")))
    }

    /// The offset of field `field` in header `h`'s type.
    pub(crate) fn field_offset(&self, path: &str, h: u32, field: &str) -> Result<u32> {
        let hd = &self.headers[h as usize];
        let f = (hd.first..hd.first + hd.count)
            .find(|&f| self.fields[f as usize].name == field)
            .ok_or_else(|| invalid(path, format!("no field {field} in {}", hd.name)))?;
        self.narrow(path, f)?;
        Ok(f - hd.first)
    }

    /// The field `header.field`, or the header's `$valid$` bit.
    pub(crate) fn field(&self, path: &str, header: &str, field: &str) -> Result<FieldRef> {
        if field == "$valid$" {
            return Ok(FieldRef::Valid(self.header(path, header)?));
        }
        let f = self.any_field(path, header, field)?;
        self.narrow(path, f)?;
        Ok(FieldRef::Field(f))
    }

    /// The field `header.field`, held as bytes or not.
    pub(crate) fn any_field(&self, path: &str, header: &str, field: &str) -> Result<u32> {
        self.field_ix
            .get(&(header.to_owned(), field.to_owned()))
            .copied()
            .ok_or_else(|| invalid(path, format!("no field {header}.{field}")))
    }

    /// Refuses field `f` where a value of at most 128 bits is needed.
    pub(crate) fn narrow(&self, path: &str, f: u32) -> Result<()> {
        let fd = &self.fields[f as usize];
        match fd.wide.map(|k| self.wide[k as usize]) {
            None => Ok(()),
            Some(w) => Err(unsupported(
                path,
                format!(
                    "{}.{}, a {} field, as a value (such fields are extracted, emitted, copied \
                     whole and checksummed)",
                    self.headers[fd.header as usize].name,
                    fd.name,
                    if w.varbit {
                        "varbit".to_owned()
                    } else {
                        format!("{}-bit", fd.width)
                    }
                ),
            )),
        }
    }

    /// Field `f`'s bytes in a bridge: its value's whole bytes, or a wide field's bytes (a
    /// varbit field's most, after two bytes of its length).
    fn saved_len(&self, f: u32) -> usize {
        let fd = &self.fields[f as usize];
        match fd.wide.map(|k| self.wide[k as usize]) {
            None => fd.width.div_ceil(8) as usize,
            Some(w) => w.bytes + if w.varbit { 2 } else { 0 },
        }
    }

    /// The width of a field reference.
    pub(crate) fn width(&self, r: FieldRef) -> u32 {
        match r {
            FieldRef::Field(f) => self.fields[f as usize].width,
            FieldRef::Valid(_) => 1,
        }
    }
}

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
