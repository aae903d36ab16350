//! Thrift's binary protocol (strict and old-style messages), read into a value tree.
//!
//! A request's arguments are read whole into a [`Struct`], and a reply is built as one and
//! written; the service's methods address fields by the ids of BMv2's IDL, with no generated
//! code. The codec is written here rather than taken from the `thrift` crate because that
//! crate's reader allocates whatever length prefix a peer sends before reading the bytes (a
//! negative or huge length aborts the process) and recurses without a depth limit; a server
//! that must survive any input reads with limits.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

/// Wire types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TType {
    /// The end of a struct.
    Stop = 0,
    /// `bool`.
    Bool = 2,
    /// `byte`.
    I8 = 3,
    /// `double`.
    Double = 4,
    /// `i16`.
    I16 = 6,
    /// `i32`.
    I32 = 8,
    /// `i64`.
    I64 = 10,
    /// `string` and `binary`.
    String = 11,
    /// A struct, union or exception.
    Struct = 12,
    /// `map`.
    Map = 13,
    /// `set`.
    Set = 14,
    /// `list`.
    List = 15,
}

impl TType {
    fn from_u8(b: u8) -> io::Result<TType> {
        Ok(match b {
            0 => TType::Stop,
            2 => TType::Bool,
            3 => TType::I8,
            4 => TType::Double,
            6 => TType::I16,
            8 => TType::I32,
            10 => TType::I64,
            11 => TType::String,
            12 => TType::Struct,
            13 => TType::Map,
            14 => TType::Set,
            15 => TType::List,
            _ => return Err(invalid(format!("unknown wire type {b}"))),
        })
    }
}

/// One Thrift value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `byte`.
    I8(i8),
    /// `i16`.
    I16(i16),
    /// `i32` (and enums).
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `double`.
    Double(f64),
    /// `string` and `binary`.
    Bytes(Vec<u8>),
    /// A struct, union or exception: its fields by id.
    Struct(Struct),
    /// `list<T>` with T's wire type.
    List(TType, Vec<Value>),
    /// `set<T>`.
    Set(TType, Vec<Value>),
    /// `map<K, V>`.
    Map(TType, TType, Vec<(Value, Value)>),
}

/// A struct's fields by id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Struct(pub BTreeMap<i16, Value>);

/// A message's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageType {
    /// A request expecting a reply.
    Call = 1,
    /// A reply.
    Reply = 2,
    /// An application exception in place of a reply.
    Exception = 3,
    /// A request expecting none.
    Oneway = 4,
}

/// A message's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Method name (`service:method` through a multiplexed protocol).
    pub name: String,
    /// Kind.
    pub kind: MessageType,
    /// Sequence id, echoed in the reply.
    pub seq: i32,
}

/// An argument missing or of the wrong type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("field {id}: {what}")]
pub struct FieldError {
    /// The field id.
    pub id: i16,
    /// What was wrong.
    pub what: &'static str,
}

/// The longest string or binary a peer may send (a program's JSON config is the largest).
pub const MAX_BYTES: usize = 64 << 20;
/// The most elements of one list, set or map.
pub const MAX_ELEMENTS: usize = 1 << 20;
/// The deepest nesting of structs and containers.
pub const MAX_DEPTH: usize = 32;
/// The most values one message may hold (a value takes tens of bytes in memory, whatever its
/// size on the wire).
pub const MAX_MESSAGE_VALUES: usize = 1 << 20;
/// The most string and binary bytes one message may hold.
pub const MAX_MESSAGE_BYTES: usize = 2 * MAX_BYTES;

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads values from a byte stream, within the limits above.
#[derive(Debug)]
pub struct Reader<R> {
    r: R,
    /// What the current message may still hold.
    values: usize,
    bytes: usize,
}

impl<R: Read> Reader<R> {
    /// A reader of `r`.
    pub fn new(r: R) -> Self {
        Reader {
            r,
            values: MAX_MESSAGE_VALUES,
            bytes: MAX_MESSAGE_BYTES,
        }
    }

    fn array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut b = [0; N];
        self.r.read_exact(&mut b)?;
        Ok(b)
    }

    fn i32(&mut self) -> io::Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn length(&mut self, max: usize) -> io::Result<usize> {
        let n = self.i32()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| invalid(format!("length {n} out of bounds")))
    }

    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.length(MAX_BYTES)?;
        self.bytes = self
            .bytes
            .checked_sub(n)
            .ok_or_else(|| invalid("a message of too many bytes"))?;
        let mut b = Vec::new();
        // Reads what arrives, never trusting the prefix for the allocation.
        (&mut self.r).take(n as u64).read_to_end(&mut b)?;
        if b.len() != n {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(b)
    }

    /// Reads a message header, strict (`0x8001` version word) or old-style; the message's
    /// budget of values and bytes starts afresh.
    pub fn message(&mut self) -> io::Result<Message> {
        self.values = MAX_MESSAGE_VALUES;
        self.bytes = MAX_MESSAGE_BYTES;
        let first = self.i32()?;
        let (name, kind) = if first < 0 {
            if (first as u32) & 0xffff_0000 != 0x8001_0000 {
                return Err(invalid(format!("bad protocol version {first:#x}")));
            }
            (self.bytes()?, (first & 0xff) as u8)
        } else {
            let n = usize::try_from(first).unwrap_or(usize::MAX);
            if n > 4096 {
                return Err(invalid("method name too long"));
            }
            let mut name = vec![0; n];
            self.r.read_exact(&mut name)?;
            (name, self.array::<1>()?[0])
        };
        let kind = match kind {
            1 => MessageType::Call,
            2 => MessageType::Reply,
            3 => MessageType::Exception,
            4 => MessageType::Oneway,
            k => return Err(invalid(format!("bad message type {k}"))),
        };
        let name = String::from_utf8(name).map_err(|_| invalid("method name is not UTF-8"))?;
        Ok(Message {
            name,
            kind,
            seq: self.i32()?,
        })
    }

    /// Reads a struct up to its stop.
    pub fn strukt(&mut self) -> io::Result<Struct> {
        self.strukt_at(0)
    }

    fn strukt_at(&mut self, depth: usize) -> io::Result<Struct> {
        if depth > MAX_DEPTH {
            return Err(invalid("nested too deep"));
        }
        let mut fields = BTreeMap::new();
        loop {
            let t = TType::from_u8(self.array::<1>()?[0])?;
            if t == TType::Stop {
                return Ok(Struct(fields));
            }
            let id = i16::from_be_bytes(self.array()?);
            fields.insert(id, self.value(t, depth + 1)?);
        }
    }

    fn elements(&mut self, t: TType, n: usize, depth: usize) -> io::Result<Vec<Value>> {
        let mut v = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            v.push(self.value(t, depth)?);
        }
        Ok(v)
    }

    fn value(&mut self, t: TType, depth: usize) -> io::Result<Value> {
        if depth > MAX_DEPTH {
            return Err(invalid("nested too deep"));
        }
        self.values = self
            .values
            .checked_sub(1)
            .ok_or_else(|| invalid("a message of too many values"))?;
        Ok(match t {
            TType::Stop => return Err(invalid("a stop where a value belongs")),
            TType::Bool => Value::Bool(self.array::<1>()?[0] != 0),
            TType::I8 => Value::I8(i8::from_be_bytes(self.array()?)),
            TType::I16 => Value::I16(i16::from_be_bytes(self.array()?)),
            TType::I32 => Value::I32(self.i32()?),
            TType::I64 => Value::I64(i64::from_be_bytes(self.array()?)),
            TType::Double => Value::Double(f64::from_be_bytes(self.array()?)),
            TType::String => Value::Bytes(self.bytes()?),
            TType::Struct => Value::Struct(self.strukt_at(depth + 1)?),
            TType::List | TType::Set => {
                let e = TType::from_u8(self.array::<1>()?[0])?;
                let n = self.length(MAX_ELEMENTS)?;
                let items = self.elements(e, n, depth + 1)?;
                if t == TType::List {
                    Value::List(e, items)
                } else {
                    Value::Set(e, items)
                }
            }
            TType::Map => {
                let [k, v] = self.array::<2>()?;
                let (k, v) = (TType::from_u8(k)?, TType::from_u8(v)?);
                let n = self.length(MAX_ELEMENTS)?;
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push((self.value(k, depth + 1)?, self.value(v, depth + 1)?));
                }
                Value::Map(k, v, items)
            }
        })
    }
}

/// Writes values to a byte buffer.
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes so far.
    pub buf: Vec<u8>,
}

impl Writer {
    fn len(&mut self, n: usize) {
        // Sizes come from our own replies, far below i32::MAX.
        self.buf.extend_from_slice(&(n as i32).to_be_bytes());
    }

    /// A strict message header.
    pub fn message(&mut self, m: &Message) {
        let word = 0x8001_0000u32 | m.kind as u32;
        self.buf.extend_from_slice(&word.to_be_bytes());
        self.len(m.name.len());
        self.buf.extend_from_slice(m.name.as_bytes());
        self.buf.extend_from_slice(&m.seq.to_be_bytes());
    }

    /// A struct and its stop.
    pub fn strukt(&mut self, s: &Struct) {
        for (id, v) in &s.0 {
            self.buf.push(v.ttype() as u8);
            self.buf.extend_from_slice(&id.to_be_bytes());
            self.value(v);
        }
        self.buf.push(TType::Stop as u8);
    }

    /// A value.
    pub fn value(&mut self, v: &Value) {
        match v {
            Value::Bool(b) => self.buf.push(u8::from(*b)),
            Value::I8(x) => self.buf.extend_from_slice(&x.to_be_bytes()),
            Value::I16(x) => self.buf.extend_from_slice(&x.to_be_bytes()),
            Value::I32(x) => self.buf.extend_from_slice(&x.to_be_bytes()),
            Value::I64(x) => self.buf.extend_from_slice(&x.to_be_bytes()),
            Value::Double(x) => self.buf.extend_from_slice(&x.to_be_bytes()),
            Value::Bytes(b) => {
                self.len(b.len());
                self.buf.extend_from_slice(b);
            }
            Value::Struct(s) => self.strukt(s),
            Value::List(t, items) | Value::Set(t, items) => {
                self.buf.push(*t as u8);
                self.len(items.len());
                items.iter().for_each(|v| self.value(v));
            }
            Value::Map(k, t, items) => {
                self.buf.extend_from_slice(&[*k as u8, *t as u8]);
                self.len(items.len());
                for (key, value) in items {
                    self.value(key);
                    self.value(value);
                }
            }
        }
    }

    /// Sends the bytes and starts over.
    pub fn flush_to(&mut self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.buf)?;
        w.flush()?;
        self.buf.clear();
        Ok(())
    }
}

impl Value {
    /// The wire type.
    pub fn ttype(&self) -> TType {
        match self {
            Value::Bool(_) => TType::Bool,
            Value::I8(_) => TType::I8,
            Value::I16(_) => TType::I16,
            Value::I32(_) => TType::I32,
            Value::I64(_) => TType::I64,
            Value::Double(_) => TType::Double,
            Value::Bytes(_) => TType::String,
            Value::Struct(_) => TType::Struct,
            Value::List(..) => TType::List,
            Value::Set(..) => TType::Set,
            Value::Map(..) => TType::Map,
        }
    }

    /// A `string` value.
    pub fn str(s: impl Into<String>) -> Value {
        Value::Bytes(s.into().into_bytes())
    }

    /// A list of structs.
    pub fn structs(items: impl IntoIterator<Item = Struct>) -> Value {
        Value::List(
            TType::Struct,
            items.into_iter().map(Value::Struct).collect(),
        )
    }
}

impl Struct {
    /// An empty struct.
    pub fn new() -> Self {
        Struct::default()
    }

    /// Adds field `id`.
    pub fn with(mut self, id: i16, v: Value) -> Self {
        self.0.insert(id, v);
        self
    }

    /// Field `id`, if present.
    pub fn get(&self, id: i16) -> Option<&Value> {
        self.0.get(&id)
    }

    fn need(&self, id: i16) -> Result<&Value, FieldError> {
        self.get(id).ok_or(FieldError {
            id,
            what: "missing",
        })
    }

    /// A `string` field.
    pub fn string(&self, id: i16) -> Result<String, FieldError> {
        String::from_utf8(self.bytes(id)?.to_vec()).map_err(|_| FieldError {
            id,
            what: "not UTF-8",
        })
    }

    /// A `binary` field.
    pub fn bytes(&self, id: i16) -> Result<&[u8], FieldError> {
        match self.need(id)? {
            Value::Bytes(b) => Ok(b),
            _ => Err(FieldError {
                id,
                what: "not a string",
            }),
        }
    }

    /// An integer field of any width (enums are i32).
    pub fn int(&self, id: i16) -> Result<i64, FieldError> {
        match self.need(id)? {
            Value::I8(v) => Ok(i64::from(*v)),
            Value::I16(v) => Ok(i64::from(*v)),
            Value::I32(v) => Ok(i64::from(*v)),
            Value::I64(v) => Ok(*v),
            _ => Err(FieldError {
                id,
                what: "not an integer",
            }),
        }
    }

    /// A `double` field.
    pub fn double(&self, id: i16) -> Result<f64, FieldError> {
        match self.need(id)? {
            Value::Double(v) => Ok(*v),
            _ => Err(FieldError {
                id,
                what: "not a double",
            }),
        }
    }

    /// A struct field.
    pub fn strukt(&self, id: i16) -> Result<&Struct, FieldError> {
        match self.need(id)? {
            Value::Struct(s) => Ok(s),
            _ => Err(FieldError {
                id,
                what: "not a struct",
            }),
        }
    }

    /// A list (or set) field.
    pub fn list(&self, id: i16) -> Result<&[Value], FieldError> {
        match self.need(id)? {
            Value::List(_, v) | Value::Set(_, v) => Ok(v),
            _ => Err(FieldError {
                id,
                what: "not a list",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Struct {
        Struct::new()
            .with(1, Value::I32(-7))
            .with(2, Value::str("ingress.ipv4_lpm"))
            .with(
                3,
                Value::List(TType::String, vec![Value::Bytes(vec![10, 0, 0, 1])]),
            )
            .with(4, Value::Struct(Struct::new().with(1, Value::I64(1 << 40))))
            .with(
                5,
                Value::Map(
                    TType::I32,
                    TType::Bool,
                    vec![(Value::I32(1), Value::Bool(true))],
                ),
            )
            .with(6, Value::Double(0.25))
            .with(7, Value::Set(TType::I16, vec![Value::I16(3)]))
    }

    #[test]
    fn a_message_and_struct_survive_the_round_trip() {
        let mut w = Writer::default();
        let m = Message {
            name: "standard:bm_mt_add_entry".into(),
            kind: MessageType::Call,
            seq: 9,
        };
        w.message(&m);
        w.strukt(&sample());
        let mut r = Reader::new(&w.buf[..]);
        assert_eq!(r.message().unwrap(), m);
        let back = r.strukt().unwrap();
        assert_eq!(back, sample());
        assert_eq!(back.string(2).unwrap(), "ingress.ipv4_lpm");
        assert_eq!(back.int(1).unwrap(), -7);
        assert_eq!(back.strukt(4).unwrap().int(1).unwrap(), 1 << 40);
        assert_eq!(
            back.string(1),
            Err(FieldError {
                id: 1,
                what: "not a string"
            })
        );
        assert_eq!(
            back.list(9),
            Err(FieldError {
                id: 9,
                what: "missing"
            })
        );
    }

    #[test]
    fn an_old_style_message_header_is_read() {
        let mut b = Vec::new();
        b.extend_from_slice(&4i32.to_be_bytes());
        b.extend_from_slice(b"ping");
        b.push(1);
        b.extend_from_slice(&5i32.to_be_bytes());
        let m = Reader::new(&b[..]).message().unwrap();
        assert_eq!(
            (m.name.as_str(), m.kind, m.seq),
            ("ping", MessageType::Call, 5)
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_crash() {
        let mut w = Writer::default();
        w.strukt(&sample());
        // Every truncation fails cleanly.
        for cut in 0..w.buf.len() {
            assert!(Reader::new(&w.buf[..cut]).strukt().is_err(), "cut {cut}");
        }
        // A negative or huge length is refused before anything is allocated.
        for n in [-1i32, i32::MAX] {
            let mut b = vec![TType::String as u8, 0, 1];
            b.extend_from_slice(&n.to_be_bytes());
            let e = Reader::new(&b[..]).strukt().unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        }
        // A list claiming a million elements with none sent runs out of input.
        let mut b = vec![TType::List as u8, 0, 1, TType::I64 as u8];
        b.extend_from_slice(&1_000_000i32.to_be_bytes());
        assert!(Reader::new(&b[..]).strukt().is_err());
        // Deep nesting stops at the limit.
        let b: Vec<u8> = std::iter::repeat_n([TType::Struct as u8, 0, 1], 100)
            .flatten()
            .collect();
        assert_eq!(
            Reader::new(&b[..]).strukt().unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        // A message of more values than its budget, however small each, is refused.
        let mut w = Writer::default();
        let lists = (0..4)
            .map(|_| Value::List(TType::Bool, vec![Value::Bool(true); MAX_MESSAGE_VALUES / 3]))
            .collect();
        w.strukt(&Struct::new().with(1, Value::List(TType::List, lists)));
        let e = Reader::new(&w.buf[..]).strukt().unwrap_err();
        assert!(e.to_string().contains("too many values"), "{e}");
        // Unknown wire types and message versions.
        assert!(Reader::new(&[7u8, 0, 1][..]).strukt().is_err());
        assert!(
            Reader::new(&0x8002_0001u32.to_be_bytes()[..])
                .message()
                .is_err()
        );
    }
}
