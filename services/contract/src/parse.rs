//! YAML parsing into the two views of a contract: the generic JSON value (layers 1 and 3) and the
//! typed model (layer 2, readiness, overrides).
//!
//! Only the first YAML document counts; merge keys (`<<`) are honoured; non-string mapping keys
//! are stringified; YAML dates stay verbatim strings; tags are dropped (their value is kept).
//!
//! Every YAML document from a user goes through [`first_document`], which is bounded
//! (docs/design/contract.md#yaml-limits): at most [`YamlLimits::max_bytes`] of input, and a budget
//! of nodes and scalar bytes after alias expansion, so an alias bomb is refused while it is being
//! read instead of being materialised.

use std::cell::Cell;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
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
    /// The document is larger than [`YamlLimits::max_bytes`].
    #[error("yaml: document is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Size of the document, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// Alias expansion (or the document itself) exceeds the node or scalar-byte budget.
    #[error(
        "yaml: document expands (aliases included) to more than {limit} {what}; \
         alias bombs and oversized documents are refused"
    )]
    ExpansionLimit {
        /// `"nodes"` or `"scalar bytes"`.
        what: &'static str,
        /// The budget that was exceeded.
        limit: usize,
    },
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

/// Bounds on one YAML document (docs/design/contract.md#yaml-limits).
///
/// The node and scalar budgets grow with the document: an alias-free document never produces
/// more nodes or scalar bytes than it has bytes, so only alias expansion can exhaust them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YamlLimits {
    /// Largest document, in bytes.
    pub max_bytes: usize,
    /// Node budget for small documents; a document of `n` bytes gets `max(min_nodes, n)`.
    pub min_nodes: usize,
    /// Scalar-byte budget for small documents; a document of `n` bytes gets
    /// `max(min_scalar_bytes, n)`.
    pub min_scalar_bytes: usize,
}

impl Default for YamlLimits {
    fn default() -> Self {
        YamlLimits {
            max_bytes: 10 * 1024 * 1024,
            min_nodes: 100_000,
            min_scalar_bytes: 4 * 1024 * 1024,
        }
    }
}

impl YamlLimits {
    /// The node budget for a document of `len` bytes.
    pub fn node_budget(&self, len: usize) -> usize {
        self.min_nodes.max(len)
    }

    /// The scalar-byte budget for a document of `len` bytes.
    pub fn scalar_budget(&self, len: usize) -> usize {
        self.min_scalar_bytes.max(len)
    }
}

/// Parses YAML bytes into the generic JSON view. An empty document yields `null`.
pub fn parse_yaml(bytes: &[u8]) -> Result<Value, ParseError> {
    parse_yaml_with(bytes, &YamlLimits::default())
}

/// [`parse_yaml`] with explicit limits.
pub fn parse_yaml_with(bytes: &[u8], limits: &YamlLimits) -> Result<Value, ParseError> {
    let yaml = first_document_with(bytes, limits)?;
    yaml_to_json(yaml, "")
}

/// Parses YAML bytes into a generic YAML value (first document, merges applied), within the
/// default [`YamlLimits`].
pub(crate) fn first_document(bytes: &[u8]) -> Result<serde_norway::Value, ParseError> {
    first_document_with(bytes, &YamlLimits::default())
}

fn first_document_with(
    bytes: &[u8],
    limits: &YamlLimits,
) -> Result<serde_norway::Value, ParseError> {
    if bytes.len() > limits.max_bytes {
        return Err(ParseError::TooLarge {
            size: bytes.len(),
            limit: limits.max_bytes,
        });
    }
    let mut docs = serde_norway::Deserializer::from_slice(bytes);
    let Some(first) = docs.next() else {
        return Ok(serde_norway::Value::Null);
    };
    let budget = Budget {
        nodes: Cell::new(limits.node_budget(bytes.len())),
        scalar_bytes: Cell::new(limits.scalar_budget(bytes.len())),
        node_limit: limits.node_budget(bytes.len()),
        scalar_limit: limits.scalar_budget(bytes.len()),
        exceeded: Cell::new(None),
    };
    let mut value = match (BoundedValue { budget: &budget }).deserialize(first) {
        Ok(v) => v,
        Err(e) => {
            return Err(match budget.exceeded.get() {
                Some((what, limit)) => ParseError::ExpansionLimit { what, limit },
                None => yaml_error(e),
            });
        }
    };
    value
        .apply_merge()
        .map_err(|source| ParseError::Merge { source })?;
    Ok(value)
}

/// What is left of a document's budget while it is read; aliases are replayed by the YAML
/// deserializer, so every replayed node is charged here.
struct Budget {
    nodes: Cell<usize>,
    scalar_bytes: Cell<usize>,
    node_limit: usize,
    scalar_limit: usize,
    exceeded: Cell<Option<(&'static str, usize)>>,
}

impl Budget {
    fn node<E: de::Error>(&self) -> Result<(), E> {
        match self.nodes.get().checked_sub(1) {
            Some(left) => {
                self.nodes.set(left);
                Ok(())
            }
            None => Err(self.exceed("nodes", self.node_limit)),
        }
    }

    fn scalar<E: de::Error>(&self, len: usize) -> Result<(), E> {
        self.node()?;
        match self.scalar_bytes.get().checked_sub(len) {
            Some(left) => {
                self.scalar_bytes.set(left);
                Ok(())
            }
            None => Err(self.exceed("scalar bytes", self.scalar_limit)),
        }
    }

    fn exceed<E: de::Error>(&self, what: &'static str, limit: usize) -> E {
        self.exceeded.set(Some((what, limit)));
        E::custom(format_args!("more than {limit} {what}"))
    }
}

/// Builds a `serde_norway::Value` like its own `Deserialize` impl does, charging the budget for
/// every node before allocating it.
#[derive(Clone, Copy)]
struct BoundedValue<'b> {
    budget: &'b Budget,
}

impl<'de> DeserializeSeed<'de> for BoundedValue<'_> {
    type Value = serde_norway::Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BoundedValue<'_> {
    type Value = serde_norway::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
        self.budget.node()?;
        Ok(serde_norway::Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Self::Value, E> {
        self.budget.node()?;
        Ok(serde_norway::Value::Number(i.into()))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Self::Value, E> {
        self.budget.node()?;
        Ok(serde_norway::Value::Number(u.into()))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Self::Value, E> {
        self.budget.node()?;
        Ok(serde_norway::Value::Number(f.into()))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        self.budget.scalar(s.len())?;
        Ok(serde_norway::Value::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        self.budget.scalar(s.len())?;
        Ok(serde_norway::Value::String(s))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.budget.node()?;
        Ok(serde_norway::Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        self.budget.node()?;
        let mut out = serde_norway::Sequence::new();
        while let Some(item) = seq.next_element_seed(self)? {
            out.push(item);
        }
        Ok(serde_norway::Value::Sequence(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        self.budget.node()?;
        let mut out = serde_norway::Mapping::new();
        while let Some(key) = map.next_key_seed(self)? {
            if out.contains_key(&key) {
                // The same words as serde_norway's own mapping.
                let which = match &key {
                    serde_norway::Value::Null => "with null key".to_owned(),
                    serde_norway::Value::Bool(b) => format!("with key `{b}`"),
                    serde_norway::Value::Number(n) => format!("with key {n}"),
                    serde_norway::Value::String(s) => format!("with key {s:?}"),
                    _ => "in YAML map".to_owned(),
                };
                return Err(de::Error::custom(format_args!("duplicate entry {which}")));
            }
            let value = map.next_value_seed(self)?;
            out.insert(key, value);
        }
        Ok(serde_norway::Value::Mapping(out))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.budget.node()?;
        let (tag, contents): (String, _) = data.variant()?;
        let value = contents.newtype_variant_seed(self)?;
        if tag.is_empty() {
            return Ok(value);
        }
        Ok(serde_norway::Value::Tagged(Box::new(
            serde_norway::value::TaggedValue {
                tag: serde_norway::value::Tag::new(tag),
                value,
            },
        )))
    }
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
        let err = parse_yaml(b"a: 1\na: 2\n").unwrap_err();
        assert!(matches!(err, ParseError::Yaml { .. }), "{err:?}");
        assert!(
            err.to_string().contains("duplicate entry with key \"a\""),
            "{err}"
        );
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

    fn alias_bomb() -> String {
        crate::testing::alias_bomb("pactoVersion: \"2.0\"\n")
    }

    #[test]
    fn a_16_kib_alias_bomb_is_refused_quickly_naming_the_limit() {
        let bomb = alias_bomb();
        assert!(bomb.len() <= 17 * 1024, "{}", bomb.len());
        let start = std::time::Instant::now();
        let err = parse_yaml(bomb.as_bytes()).unwrap_err();
        assert!(
            matches!(
                err,
                ParseError::ExpansionLimit {
                    what: "nodes",
                    limit: 100_000
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("more than 100000 nodes"), "{err}");
        // Generous: the budget stops it after 100,000 nodes (milliseconds); unbounded it runs
        // for seconds and gigabytes.
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn a_repeated_long_scalar_exhausts_the_scalar_budget() {
        use std::fmt::Write as _;
        let mut doc = format!("s: &s \"{}\"\n", "y".repeat(8 * 1024));
        let items = vec!["*s"; 30].join(",");
        writeln!(doc, "t: &t [{items}]").unwrap();
        let items = vec!["*t"; 30].join(",");
        writeln!(doc, "u: [{items}]").unwrap();
        let err = parse_yaml(doc.as_bytes()).unwrap_err();
        assert!(
            matches!(
                err,
                ParseError::ExpansionLimit {
                    what: "scalar bytes",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_normal_contract_with_a_few_aliases_still_parses() {
        let y = b"pactoVersion: \"2.0\"\nservice: {name: a, version: 1.0.0}\n\
                  defaults: &d {timeout: 5s, retries: 3}\nx: *d\ny:\n  <<: *d\n  retries: 4\n\
                  z: !custom {timeout: 5s, retries: 3}\n";
        let v = parse_yaml(y).unwrap();
        assert_eq!(v["x"], json!({"timeout": "5s", "retries": 3}));
        assert_eq!(v["y"], json!({"timeout": "5s", "retries": 4}));
        assert_eq!(v["z"], v["x"]);
    }

    #[test]
    fn the_budget_grows_with_the_document() {
        // 300,000 plain scalars: more than the small-document budget, fewer than one per byte.
        let doc = format!("[{}]", vec!["1"; 300_000].join(","));
        assert_eq!(
            parse_yaml(doc.as_bytes())
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            300_000
        );
        let tight = YamlLimits {
            min_nodes: 10,
            ..YamlLimits::default()
        };
        assert!(parse_yaml_with(b"a: [1, 2, 3]", &tight).is_ok());
        assert_eq!(tight.node_budget(5), 10);
        assert_eq!(tight.node_budget(50), 50);
    }

    #[test]
    fn a_document_over_the_size_limit_is_refused_with_its_size() {
        let limits = YamlLimits {
            max_bytes: 1024,
            ..YamlLimits::default()
        };
        let doc = format!("a: \"{}\"\n", "z".repeat(2000));
        let err = parse_yaml_with(doc.as_bytes(), &limits).unwrap_err();
        assert!(
            matches!(err, ParseError::TooLarge { size, limit: 1024 } if size == doc.len()),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("over the limit of 1024 bytes"),
            "{err}"
        );
        let huge = vec![b' '; YamlLimits::default().max_bytes + 1];
        assert!(matches!(
            parse_yaml(&huge),
            Err(ParseError::TooLarge { .. })
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Nested repetitions of any shape stay within the budget: refused, or small when parsed.
        #[test]
        fn nested_aliases_never_exceed_the_budget(
            base in 1usize..3000,
            fanouts in proptest::collection::vec(1usize..40, 0..6),
        ) {
            use std::fmt::Write as _;
            let mut doc = format!("l0: &l0 [{}]\n", vec!["ab"; base].join(","));
            for (i, n) in fanouts.iter().enumerate() {
                let items = vec![format!("*l{i}"); *n].join(",");
                writeln!(doc, "l{}: &l{} [{items}]", i + 1, i + 1).unwrap();
            }
            let expanded: f64 = fanouts
                .iter()
                .scan(base as f64, |size, n| { *size *= *n as f64; Some(*size) })
                .sum::<f64>() + base as f64;
            match parse_yaml(doc.as_bytes()) {
                Ok(_) => {
                    proptest::prop_assert!(expanded <= 100_000.0);
                }
                Err(ParseError::ExpansionLimit { .. }) => {
                    proptest::prop_assert!(expanded > 40_000.0);
                }
                // serde_norway's own cap on alias replays (100 per event) may come first.
                Err(e @ ParseError::Yaml { .. }) => {
                    proptest::prop_assert!(e.to_string().contains("repetition limit"), "{e}");
                }
                Err(e) => proptest::prop_assert!(false, "{e}"),
            }
        }
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
