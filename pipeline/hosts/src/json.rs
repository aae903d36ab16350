//! A JSON value with deterministic output (object keys keep their insertion order), enough for
//! the simulator's report: two runs with one seed print the same bytes. serde_json writes it.

use std::io;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::ser::{Formatter, PrettyFormatter};

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// An unsigned integer.
    U(u64),
    /// A float (printed with up to 3 decimals; non-finite values print as null).
    F(f64),
    /// A string.
    S(String),
    /// An array.
    A(Vec<Json>),
    /// An object, in insertion order.
    O(Vec<(String, Json)>),
}

impl Json {
    /// An empty object.
    pub fn object() -> Json {
        Json::O(Vec::new())
    }

    /// Adds `key: value` to an object (no effect on other values); returns the object.
    pub fn with(mut self, key: &str, value: impl Into<Json>) -> Json {
        if let Json::O(fields) = &mut self {
            fields.push((key.to_string(), value.into()));
        }
        self
    }

    /// The value of `key` in an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::O(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as an integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::U(v) => Some(*v),
            _ => None,
        }
    }

    /// Pretty-printed text, two spaces per level, and a final newline: serde_json's pretty
    /// printer, with floats rounded to 3 decimals (trailing zeros dropped, so 2.0 prints as 2).
    pub fn pretty(&self) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Report::default());
        // Writing to a Vec cannot fail, and every value serializes.
        self.serialize(&mut ser).expect("a Json value serializes");
        let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
        text.push('\n');
        text
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::U(v) => s.serialize_u64(*v),
            Json::F(v) if v.is_finite() => s.serialize_f64(*v),
            Json::F(_) => s.serialize_unit(),
            Json::S(v) => s.serialize_str(v),
            Json::A(items) => s.collect_seq(items),
            Json::O(fields) => {
                let mut m = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

/// serde_json's pretty formatter, with the report's float format.
#[derive(Debug, Default)]
struct Report(PrettyFormatter<'static>);

impl Formatter for Report {
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
        let s = format!("{v:.3}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        w.write_all(if s.is_empty() || s == "-" {
            b"0"
        } else {
            s.as_bytes()
        })
    }
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

impl From<u64> for Json {
    fn from(v: u64) -> Json {
        Json::U(v)
    }
}

impl From<u32> for Json {
    fn from(v: u32) -> Json {
        Json::U(u64::from(v))
    }
}

impl From<f64> for Json {
    fn from(v: f64) -> Json {
        Json::F(v)
    }
}

impl From<&str> for Json {
    fn from(v: &str) -> Json {
        Json::S(v.to_string())
    }
}

impl From<String> for Json {
    fn from(v: String) -> Json {
        Json::S(v)
    }
}

impl From<Vec<Json>> for Json {
    fn from(v: Vec<Json>) -> Json {
        Json::A(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_nested_values_in_insertion_order() {
        let j = Json::object()
            .with("b", 1u64)
            .with("a", Json::A(vec![Json::F(1.5), Json::F(2.0)]))
            .with("s", "q\"x")
            .with("e", Json::object());
        assert_eq!(
            j.pretty(),
            "{\n  \"b\": 1,\n  \"a\": [\n    1.5,\n    2\n  ],\n  \"s\": \"q\\\"x\",\n  \"e\": {}\n}\n"
        );
        assert_eq!(j.get("b").and_then(Json::as_u64), Some(1));
    }
}
