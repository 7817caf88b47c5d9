//! JSON text exactly as Go's `encoding/json` writes it (docs/design/envelopes.md#canonical-bytes):
//! the one Go-JSON encoder of the workspace. The envelope's canonical bytes, the stored records
//! and the Evidence Server's response bodies are all written with it.
//!
//! serde_json's writer differs from Go's in the places that matter for a signature: Go escapes
//! `<`, `>` and `&` (HTML-safe output, `json.Marshal`'s default), U+2028 and U+2029, writes `\b`
//! and `\f` short (since Go 1.22, whose release notes, go.dev/doc/go1.22 under encoding/json,
//! say marshaling writes them so instead of `\u0008` and `\u000c`; `appendString` in
//! `src/encoding/json/encode.go` of go1.26 still does), every other control character as
//! `\u00XX` with lower-case hex, and each byte of invalid UTF-8 as `\ufffd`. [`string`] and
//! [`write_string`] write a string literal with those rules ([`write_bytes`] for bytes that may
//! not be UTF-8); `tests/gojson.rs` pins them with a vector Go wrote
//! (`tests/gojson-vector/generate.go`). Inside the crate, `Json` is a small ordered tree
//! written with them; `Json::sorted` gives the key order of a Go `map[string]any`; `compact` is
//! Go's `json.Compact` with HTML escaping, which is what `json.Marshal` does to a
//! `json.RawMessage`.

use std::fmt::Write as _;

/// A JSON value whose object keys keep the order they were inserted in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// A number literal, written verbatim (so a `u64` above 2^53 stays exact).
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
    /// Already-compacted Go JSON text, written verbatim (a `json.RawMessage`).
    Raw(String),
}

/// The raw text could not be parsed back into a tree (only for text that did not come from a
/// successful decode).
#[derive(Debug, thiserror::Error)]
#[error("raw JSON value does not parse: {0}")]
pub(crate) struct RawParseError(#[source] serde_json::Error);

impl Json {
    pub(crate) fn str(value: impl Into<String>) -> Self {
        Self::String(value.into())
    }

    /// The same tree with object keys sorted byte-wise at every depth and raw text parsed into
    /// the tree: what Go produces when it decodes JSON into `any` and marshals it again.
    pub(crate) fn sorted(self) -> Result<Self, RawParseError> {
        Ok(match self {
            Self::Array(items) => Self::Array(
                items
                    .into_iter()
                    .map(Self::sorted)
                    .collect::<Result<_, _>>()?,
            ),
            Self::Object(fields) => {
                let mut fields = fields
                    .into_iter()
                    .map(|(k, v)| v.sorted().map(|v| (k, v)))
                    .collect::<Result<Vec<_>, _>>()?;
                // a Go map keeps the last of duplicate keys; a stable sort then dedup keeping the
                // last of each run does the same
                fields.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                let mut out: Vec<(String, Json)> = Vec::with_capacity(fields.len());
                for (k, v) in fields {
                    match out.last_mut() {
                        Some(last) if last.0 == k => last.1 = v,
                        _ => out.push((k, v)),
                    }
                }
                Self::Object(out)
            }
            Self::Raw(text) => {
                let value: serde_json::Value =
                    serde_json::from_str(&text).map_err(RawParseError)?;
                Self::from_value(value).sorted()?
            }
            other => other,
        })
    }

    /// Converts a parsed serde_json value.
    pub(crate) fn from_value(value: serde_json::Value) -> Self {
        match value {
            serde_json::Value::Null => Self::Null,
            serde_json::Value::Bool(b) => Self::Bool(b),
            serde_json::Value::Number(n) => Self::Number(n.to_string()),
            serde_json::Value::String(s) => Self::String(s),
            serde_json::Value::Array(items) => {
                Self::Array(items.into_iter().map(Self::from_value).collect())
            }
            serde_json::Value::Object(map) => Self::Object(
                map.into_iter()
                    .map(|(k, v)| (k, Self::from_value(v)))
                    .collect(),
            ),
        }
    }

    /// Writes compact Go JSON text.
    pub(crate) fn write(&self, out: &mut String) {
        match self {
            Self::Null => out.push_str("null"),
            Self::Bool(true) => out.push_str("true"),
            Self::Bool(false) => out.push_str("false"),
            Self::Number(n) | Self::Raw(n) => out.push_str(n),
            Self::String(s) => write_string(s, out),
            Self::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Self::Object(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(k, out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }

    /// The compact Go JSON text.
    pub(crate) fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }
}

/// A JSON string literal with Go's escaping (HTML-safe, Go 1.22+ short forms), appended to
/// `out`.
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    write_chars(s, out);
    out.push('"');
}

/// A JSON string literal with Go's escaping: what `json.Marshal` writes for `value`.
pub fn string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    write_string(value, &mut out);
    out
}

/// A JSON string literal with Go's escaping for bytes that may not be UTF-8: what
/// `json.Marshal(string(bytes))` writes. Go writes each byte that does not start a valid UTF-8
/// sequence as `\ufffd` (`utf8.DecodeRuneInString` gives `RuneError` with size 1), so a truncated
/// sequence of two bytes becomes two of them.
pub fn write_bytes(bytes: &[u8], out: &mut String) {
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        write_chars(chunk.valid(), out);
        for _ in chunk.invalid() {
            out.push_str("\\ufffd");
        }
    }
    out.push('"');
}

/// The characters of a string literal, escaped as Go escapes them.
fn write_chars(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

/// Go's `json.Compact` with HTML escaping: insignificant whitespace removed, `<`, `>`, `&`,
/// U+2028 and U+2029 inside strings escaped, everything else (including other escapes) kept
/// byte for byte. The input must be valid JSON text.
pub(crate) fn compact(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in raw.chars() {
        if in_string {
            if escaped {
                escaped = false;
                out.push(c);
                continue;
            }
            match c {
                '\\' => {
                    escaped = true;
                    out.push(c);
                }
                '"' => {
                    in_string = false;
                    out.push(c);
                }
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                }
                c => out.push(c),
            }
        } else {
            match c {
                ' ' | '\t' | '\n' | '\r' => {}
                '"' => {
                    in_string = true;
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_use_go_escapes() {
        let mut out = String::new();
        write_string(
            "a<b>&\u{2028}\u{2029}\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}\"\\é",
            &mut out,
        );
        assert_eq!(
            out,
            "\"a\\u003cb\\u003e\\u0026\\u2028\\u2029\\n\\r\\t\\b\\f\\u0001\\u001f\u{7f}\\\"\\\\é\""
        );
    }

    #[test]
    fn compact_keeps_escapes_and_html_escapes() {
        assert_eq!(
            compact(" { \"a\" : \"x y\\u0041<\" ,\n \"b\":[1, 2] } "),
            "{\"a\":\"x y\\u0041\\u003c\",\"b\":[1,2]}"
        );
        assert_eq!(compact("\"\\\\\" "), "\"\\\\\"");
    }

    #[test]
    fn sorted_orders_keys_bytewise_and_keeps_last_duplicate() {
        let tree = Json::Object(vec![
            ("b".into(), Json::Null),
            ("B".into(), Json::Bool(true)),
            ("a".into(), Json::Raw("{\"z\":1,\"y\":2,\"z\":3}".into())),
        ]);
        assert_eq!(
            tree.sorted().unwrap().to_text(),
            "{\"B\":true,\"a\":{\"y\":2,\"z\":3},\"b\":null}"
        );
    }
}
