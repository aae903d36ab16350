//! Header instances and their fields: where each lives in the packet header vector ([`Phv`]),
//! and how the v1model's standard metadata maps onto the engine's [`StdMeta`].

use std::collections::HashMap;

#[cfg(doc)]
use crate::phv::Phv;
#[cfg(doc)]
use pipeline::metadata::StdMeta;

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
