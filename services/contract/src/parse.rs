//! YAML parsing into the two views of a contract: the generic JSON value (layers 1 and 3) and the
//! typed model (layer 2, readiness, overrides).
//!
//! Only the first YAML document counts; merge keys (`<<`) are honoured; non-string mapping keys
//! are stringified; YAML dates stay verbatim strings; tags are dropped (their value is kept).

use serde::Deserialize;
use serde_json::Value;

use crate::model::{Contract, SUPPORTED_PACTO_VERSION};

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The YAML text is not well formed.
    #[error("{message}")]
    Yaml {
        /// Human message, including the 1-based line/column when known.
        message: String,
        /// 1-based line of the problem, when known.
        line: Option<usize>,
        /// 1-based column of the problem, when known.
        column: Option<usize>,
        #[source]
        source: serde_norway::Error,
    },
    /// Merge keys (`<<`) could not be applied.
    #[error("invalid merge key: {source}")]
    Merge {
        #[source]
        source: serde_norway::Error,
    },
    /// A float that JSON cannot represent (`.nan`, `.inf`).
    #[error("{path}: non-finite number {value} cannot be represented in JSON")]
    NonFiniteNumber { path: String, value: String },
    /// The generic value does not fit the typed model.
    #[error("contract does not match the typed model: {source}")]
    Model {
        #[source]
        source: serde_json::Error,
    },
}

impl ParseError {
    /// 1-based (line, column) of a YAML syntax error, when known.
    pub fn location(&self) -> Option<(usize, usize)> {
        match self {
            Self::Yaml {
                line: Some(l),
                column: Some(c),
                ..
            } => Some((*l, *c)),
            _ => None,
        }
    }
}

/// Parses YAML bytes into the generic JSON view. An empty document yields `null`.
pub fn parse_yaml(bytes: &[u8]) -> Result<Value, ParseError> {
    let yaml = first_document(bytes)?;
    yaml_to_json(yaml, "")
}

/// Parses YAML bytes into a generic YAML value (first document, merges applied).
pub(crate) fn first_document(bytes: &[u8]) -> Result<serde_norway::Value, ParseError> {
    let mut docs = serde_norway::Deserializer::from_slice(bytes);
    let Some(first) = docs.next() else {
        return Ok(serde_norway::Value::Null);
    };
    let mut value = serde_norway::Value::deserialize(first).map_err(yaml_error)?;
    value
        .apply_merge()
        .map_err(|source| ParseError::Merge { source })?;
    Ok(value)
}

fn yaml_error(source: serde_norway::Error) -> ParseError {
    let loc = source.location();
    let message = match &loc {
        Some(l) => format!(
            "yaml: line {}, column {}: {}",
            l.line(),
            l.column(),
            strip_location(&source.to_string())
        ),
        None => format!("yaml: {source}"),
    };
    ParseError::Yaml {
        message,
        line: loc.as_ref().map(serde_norway::Location::line),
        column: loc.as_ref().map(serde_norway::Location::column),
        source,
    }
}

/// serde_norway appends " at line L column C"; we print the location up front instead.
fn strip_location(s: &str) -> &str {
    s.find(" at line ").map_or(s, |i| &s[..i])
}

/// Converts a YAML value into JSON; `path` (dotted) locates errors.
pub(crate) fn yaml_to_json(v: serde_norway::Value, path: &str) -> Result<Value, ParseError> {
    use serde_norway::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                match serde_json::Number::from_f64(f) {
                    Some(num) => Value::Number(num),
                    None => {
                        return Err(ParseError::NonFiniteNumber {
                            path: path.to_owned(),
                            value: n.to_string(),
                        });
                    }
                }
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(seq) => Value::Array(
            seq.into_iter()
                .enumerate()
                .map(|(i, item)| yaml_to_json(item, &join(path, &i.to_string())))
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, val) in map {
                let key = key_string(k);
                let child = yaml_to_json(val, &join(path, &key))?;
                out.insert(key, child);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(t.value, path)?,
    })
}

fn join(path: &str, seg: &str) -> String {
    if path.is_empty() {
        seg.to_owned()
    } else {
        format!("{path}.{seg}")
    }
}

fn key_string(k: serde_norway::Value) -> String {
    use serde_norway::Value as Y;
    match k {
        Y::String(s) => s,
        Y::Null => "null".to_owned(),
        Y::Bool(b) => b.to_string(),
        Y::Number(n) => n.to_string(),
        Y::Tagged(t) => key_string(t.value),
        other @ (Y::Sequence(_) | Y::Mapping(_)) => yaml_to_json(other, "")
            .map(|j| j.to_string())
            .unwrap_or_default(),
    }
}

/// What the `pactoVersion` of a generic document says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionCheck {
    /// `"2.0"`.
    Supported,
    /// A recognised legacy version (`"1.0"`, `"1.1"`, `"1.2"`): rejected, no migration.
    Legacy(String),
    /// Anything else; missing or non-string values are reported as `""`.
    Unsupported(String),
}

impl VersionCheck {
    /// The finding message for a rejected version (`None` when supported).
    pub fn message(&self) -> Option<String> {
        match self {
            Self::Supported => None,
            Self::Legacy(v) => Some(format!(
                "pactoVersion \"{v}\" is a legacy 1.x format and is no longer supported \
                 (supported versions: {SUPPORTED_PACTO_VERSION}); there is no migration"
            )),
            Self::Unsupported(v) => Some(format!(
                "unsupported pactoVersion \"{v}\" (supported versions: {SUPPORTED_PACTO_VERSION}; \
                 the version must be a quoted string)"
            )),
        }
    }
}

/// Reads `pactoVersion` from the generic view. Only a JSON **string** counts: an unquoted
/// `2.0` is a float and is treated as missing (`""`).
pub fn check_version(doc: &Value) -> VersionCheck {
    let v = doc
        .get("pactoVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    match v {
        SUPPORTED_PACTO_VERSION => VersionCheck::Supported,
        "1.0" | "1.1" | "1.2" => VersionCheck::Legacy(v.to_owned()),
        other => VersionCheck::Unsupported(other.to_owned()),
    }
}

/// Builds the typed model from the generic view (tolerant of unknown keys).
pub fn to_contract(doc: &Value) -> Result<Contract, ParseError> {
    Contract::deserialize(doc).map_err(|source| ParseError::Model { source })
}

/// Parses YAML bytes into both views.
pub fn parse_contract(bytes: &[u8]) -> Result<(Value, Contract), ParseError> {
    let doc = parse_yaml(bytes)?;
    let contract = to_contract(&doc)?;
    Ok((doc, contract))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dates_stay_strings_and_numbers_are_numbers() {
        let v = parse_yaml(b"a: 2027-06-30\nb: 1.0\nc: 2.1.0\nd: 3\ne: true\nf: ~\n").unwrap();
        assert_eq!(
            v,
            json!({"a": "2027-06-30", "b": 1.0, "c": "2.1.0", "d": 3, "e": true, "f": null})
        );
    }

    #[test]
    fn only_first_document_counts() {
        let v = parse_yaml(b"a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(v, json!({"a": 1}));
        let v = parse_yaml(b"---\na: 1\n...\n---\nb: [\n").unwrap();
        assert_eq!(v, json!({"a": 1}));
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse_yaml(b"").unwrap(), Value::Null);
        assert_eq!(parse_yaml(b"# only a comment\n").unwrap(), Value::Null);
    }

    #[test]
    fn merge_keys_are_applied() {
        let y = b"base: &b\n  x: 1\n  y: 2\nother:\n  <<: *b\n  y: 3\n";
        let v = parse_yaml(y).unwrap();
        assert_eq!(v["other"], json!({"x": 1, "y": 3}));
        let y = b"a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: [*a, *b]\n";
        assert_eq!(parse_yaml(y).unwrap()["c"], json!({"x": 1, "y": 2}));
        assert!(matches!(
            parse_yaml(b"c:\n  <<: 3\n"),
            Err(ParseError::Merge { .. })
        ));
    }

    #[test]
    fn non_string_keys_are_stringified_and_tags_dropped() {
        let v = parse_yaml(b"1: a\ntrue: b\nx: !custom 5\n").unwrap();
        assert_eq!(v, json!({"1": "a", "true": "b", "x": 5}));
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let err = parse_yaml(b"a: 1\nb: [1, 2\n").unwrap_err();
        let (line, col) = err.location().expect("location");
        assert!(line >= 2, "{err}");
        assert!(col >= 1);
        assert!(err.to_string().starts_with("yaml: line "), "{err}");
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        assert!(matches!(
            parse_yaml(b"a: 1\na: 2\n"),
            Err(ParseError::Yaml { .. })
        ));
    }

    #[test]
    fn non_finite_numbers_are_rejected_with_path() {
        let err = parse_yaml(b"a:\n  - .nan\n").unwrap_err();
        assert!(err.to_string().starts_with("a.0:"), "{err}");
    }

    #[test]
    fn alias_bombs_and_deep_nesting_are_errors_not_explosions() {
        use std::fmt::Write as _;
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..12 {
            let prev = if i == 0 {
                "a".to_owned()
            } else {
                format!("b{}", i - 1)
            };
            let items = vec![format!("*{prev}"); 10].join(", ");
            writeln!(bomb, "b{i}: &b{i} [{items}]").unwrap();
        }
        assert!(parse_yaml(bomb.as_bytes()).is_err());
        let deep = "[".repeat(10_000);
        assert!(parse_yaml(deep.as_bytes()).is_err());
    }

    #[test]
    fn version_handling() {
        let s = |y: &[u8]| check_version(&parse_yaml(y).unwrap());
        assert_eq!(s(b"pactoVersion: \"2.0\""), VersionCheck::Supported);
        assert_eq!(s(b"pactoVersion: '2.0'"), VersionCheck::Supported);
        assert_eq!(
            s(b"pactoVersion: 2.0"),
            VersionCheck::Unsupported(String::new())
        );
        assert_eq!(s(b"other: 1"), VersionCheck::Unsupported(String::new()));
        assert_eq!(
            s(b"pactoVersion: \"1.1\""),
            VersionCheck::Legacy("1.1".into())
        );
        assert_eq!(
            s(b"pactoVersion: \"1.0\""),
            VersionCheck::Legacy("1.0".into())
        );
        assert_eq!(
            s(b"pactoVersion: \"1.2\""),
            VersionCheck::Legacy("1.2".into())
        );
        assert_eq!(
            s(b"pactoVersion: \"3.0\""),
            VersionCheck::Unsupported("3.0".into())
        );
        assert_eq!(s(b"- 1"), VersionCheck::Unsupported(String::new()));
        assert!(
            VersionCheck::Legacy("1.1".into())
                .message()
                .unwrap()
                .contains("2.0")
        );
        assert!(
            VersionCheck::Unsupported(String::new())
                .message()
                .unwrap()
                .contains("\"\"")
        );
    }

    #[test]
    fn typed_parse_of_a_minimal_contract() {
        let (_, c) =
            parse_contract(b"pactoVersion: \"2.0\"\nservice: {name: a, version: 1.2.3}\n").unwrap();
        assert_eq!(c.service.version, "1.2.3");
        assert!(c.is_reference());
    }
}
