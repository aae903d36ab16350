//! A JSON value with deterministic output (object keys keep their insertion order), enough for
//! the simulator's report: two runs with one seed print the same bytes.

use std::fmt::Write as _;

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

    /// Pretty-printed text, two spaces per level.
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, depth: usize) {
        let pad = |out: &mut String, d: usize| {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', 2 * d));
        };
        match self {
            Json::U(v) => {
                let _ = write!(out, "{v}");
            }
            Json::F(v) if v.is_finite() => {
                let s = format!("{v:.3}");
                let s = s.trim_end_matches('0').trim_end_matches('.');
                out.push_str(if s.is_empty() || s == "-" { "0" } else { s });
            }
            Json::F(_) => out.push_str("null"),
            Json::S(s) => quote(out, s),
            Json::A(items) if items.is_empty() => out.push_str("[]"),
            Json::A(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    pad(out, depth + 1);
                    v.write(out, depth + 1);
                }
                pad(out, depth);
                out.push(']');
            }
            Json::O(fields) if fields.is_empty() => out.push_str("{}"),
            Json::O(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    pad(out, depth + 1);
                    quote(out, k);
                    out.push_str(": ");
                    v.write(out, depth + 1);
                }
                pad(out, depth);
                out.push('}');
            }
        }
    }
}

fn quote(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
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
