//! YAML parsing into the two views of a contract: the generic JSON value (layers 1 and 3) and the
//! typed model (layer 2, readiness, overrides).
//!
//! Only the first YAML document counts; merge keys (`<<`) are honoured; non-string mapping keys
//! are stringified; YAML dates stay verbatim strings; tags are dropped (their value is kept).
//!
//! Every YAML document from a user goes through [`first_document_with`], which is bounded
//! (docs/design/contract.md#yaml-limits) by fixed ceilings that do not grow with the document: at
//! most [`YamlLimits::max_bytes`] of input, at most [`YamlLimits::max_tokens`] tokens counted
//! before anything is parsed (the YAML crate loads every event of a document before handing out
//! the first, so this count is what bounds its memory), and a budget of nodes and scalar bytes
//! after alias expansion, so an alias bomb is refused while it is being read instead of being
//! materialised. `pacto.yaml` has its own, smaller ceilings ([`YamlLimits::CONTRACT`]) than the
//! other documents of a bundle ([`YamlLimits::DOCUMENT`]).

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
    #[error("invalid merge key")]
    Merge {
        #[source]
        source: serde_norway::Error,
    },
    /// A float that JSON cannot represent (`.nan`, `.inf`).
    #[error("{path}: non-finite number {value} cannot be represented in JSON")]
    NonFiniteNumber { path: String, value: String },
    /// The document is larger than [`YamlLimits::max_bytes`].
    #[error("yaml: {document} is {size} bytes, over the limit of {limit} bytes for {document}")]
    TooLarge {
        /// What was parsed (`pacto.yaml` or `document`, [`YamlLimits::document`]).
        document: &'static str,
        /// Size of the document, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The document has more tokens than [`YamlLimits::max_tokens`] (counted before parsing).
    #[error(
        "yaml: {document} has more than {limit} tokens (scalars, indicators and words), over \
         the limit of {limit} tokens for {document}; it is refused before parsing"
    )]
    TooManyTokens {
        /// What was parsed ([`YamlLimits::document`]).
        document: &'static str,
        /// The limit, in tokens.
        limit: usize,
    },
    /// Alias expansion (or the document itself) exceeds the node or scalar-byte budget.
    #[error(
        "yaml: {document} expands (aliases included) to more than {limit} {what}; \
         alias bombs and oversized documents are refused"
    )]
    ExpansionLimit {
        /// What was parsed ([`YamlLimits::document`]).
        document: &'static str,
        /// `"nodes"` or `"scalar bytes"`.
        what: &'static str,
        /// The budget that was exceeded.
        limit: usize,
    },
    /// The generic value does not fit the typed model.
    #[error("contract does not match the typed model")]
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

/// Bounds on one YAML document (docs/design/contract.md#yaml-limits): fixed ceilings, the same
/// whatever the size of the document.
///
/// Parsing takes memory in proportion to the tokens of the text (the YAML crate materialises
/// every event of the document first, about 200 bytes per node measured) and to the nodes built
/// (alias replays included), so [`YamlLimits::peak_bytes`] bounds what one parse can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YamlLimits {
    /// What the document is, as errors name it (`pacto.yaml`, `document`).
    pub document: &'static str,
    /// Largest document, in bytes.
    pub max_bytes: usize,
    /// Most tokens of the text, counted before parsing ([`count_tokens`]: an upper bound on the
    /// scalars, indicators and collections the YAML crate reads).
    pub max_tokens: usize,
    /// Most nodes built, alias replays included.
    pub max_nodes: usize,
    /// Most scalar bytes built, alias replays included.
    pub max_scalar_bytes: usize,
}

impl Default for YamlLimits {
    fn default() -> Self {
        Self::DOCUMENT
    }
}

/// Peak bytes of a parse per token of the text: the YAML crate's events (at most two per token,
/// about 110 bytes each with their mark). Measured: 170 to 250 bytes per token for the densest
/// documents, nodes included (`examples/yaml_bomb_rss.rs`, docs/design/contract.md#yaml-limits).
pub const PEAK_BYTES_PER_TOKEN: usize = 256;
/// Peak bytes of a parse per node built: the YAML value and its JSON copy. Measured: about 110
/// bytes per node for the value alone.
pub const PEAK_BYTES_PER_NODE: usize = 256;

impl YamlLimits {
    /// Any YAML document of a bundle or a user other than `pacto.yaml`: an interface spec, an
    /// override values file, a ConfigMap value checked against a schema. 10 MiB (the per-file
    /// bundle limit), 100,000 tokens and nodes (about 700 KB of OpenAPI YAML; a JSON interface
    /// spec is checked without building values and has no token ceiling), 4 MiB of scalars.
    pub const DOCUMENT: YamlLimits = YamlLimits {
        document: "document",
        max_bytes: 10 * 1024 * 1024,
        max_tokens: 100_000,
        max_nodes: 100_000,
        max_scalar_bytes: 4 * 1024 * 1024,
    };

    /// `pacto.yaml` (a bundle's or an inline contract): 1 MiB (the resolver's inline limit),
    /// 50,000 tokens, 100,000 nodes (alias replays included) and 2 MiB of scalars. The largest
    /// contract in tests/fixtures has 2.2 KB and about 400 tokens: the ceilings leave more than a
    /// hundredfold headroom, and the 5,000-interface contract of the end-to-end size test
    /// (200 KiB, 20,000 tokens) still parses.
    pub const CONTRACT: YamlLimits = YamlLimits {
        document: "pacto.yaml",
        max_bytes: 1024 * 1024,
        max_tokens: 50_000,
        max_nodes: 100_000,
        max_scalar_bytes: 2 * 1024 * 1024,
    };

    /// The most memory one parse within these limits can take, besides the input itself: the
    /// token ceiling's events, the node ceiling's values (a YAML tree and its JSON copy), the
    /// events' copy of the scalars (at most the input) and the values' (at most the scalar
    /// ceiling).
    pub const fn peak_bytes(&self) -> usize {
        self.max_tokens * PEAK_BYTES_PER_TOKEN
            + self.max_nodes * PEAK_BYTES_PER_NODE
            + self.max_bytes
            + self.max_scalar_bytes
    }

    /// Whether `bytes` is within the byte and token ceilings (what is checked before parsing).
    pub fn check_size(&self, bytes: &[u8]) -> Result<(), ParseError> {
        if bytes.len() > self.max_bytes {
            return Err(ParseError::TooLarge {
                document: self.document,
                size: bytes.len(),
                limit: self.max_bytes,
            });
        }
        if count_tokens(bytes, self.max_tokens) > self.max_tokens {
            return Err(ParseError::TooManyTokens {
                document: self.document,
                limit: self.max_tokens,
            });
        }
        Ok(())
    }
}

/// An upper bound on the tokens of a YAML (or JSON) text, counting stops past `stop_after`.
///
/// Every token the YAML scanner produces (a scalar, an alias, an anchor, a tag, an indicator
/// `- ? : , [ ] { }`) starts at a position counted here: the first byte, a non-blank byte after a
/// blank or a line break (including the Unicode breaks and the byte order mark), after a flow
/// indicator, `?`, `:` or a quote, any byte that can itself be an indicator (`, [ ] { } ? : & * !
/// | > " '`), and a `-` followed by a blank. Words inside scalars and comments count too, so the
/// bound is loose for prose but never below the truth. One pass over the bytes, no allocation.
pub fn count_tokens(bytes: &[u8], stop_after: usize) -> usize {
    let blank = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let mut count = 0usize;
    let mut after_separator = true;
    for (i, &b) in bytes.iter().enumerate() {
        if !blank(b) {
            let starts = after_separator
                || matches!(
                    b,
                    b',' | b'['
                        | b']'
                        | b'{'
                        | b'}'
                        | b'?'
                        | b':'
                        | b'&'
                        | b'*'
                        | b'!'
                        | b'|'
                        | b'>'
                        | b'"'
                        | b'\''
                )
                || (b == b'-' && bytes.get(i + 1).is_none_or(|&n| blank(n)));
            if starts {
                count += 1;
                if count > stop_after {
                    return count;
                }
            }
        }
        after_separator = blank(b)
            || matches!(
                b,
                b',' | b'[' | b']' | b'{' | b'}' | b'?' | b':' | b'"' | b'\''
            )
            || unicode_break_ends_at(bytes, i);
    }
    count
}

/// Whether a NEL, LS or PS line break or a byte order mark ends at `i`.
fn unicode_break_ends_at(bytes: &[u8], i: usize) -> bool {
    let ends =
        |pattern: &[u8]| i + 1 >= pattern.len() && bytes[i + 1 - pattern.len()..=i] == *pattern;
    bytes[i] >= 0x80
        && (ends(&[0xC2, 0x85])
            || ends(&[0xE2, 0x80, 0xA8])
            || ends(&[0xE2, 0x80, 0xA9])
            || ends(&[0xEF, 0xBB, 0xBF]))
}

/// Parses JSON bytes into a value within `limits` (its byte and token ceilings; serde_json caps
/// nesting at 128): the bundle's JSON Schema files. The error is a message for a finding.
pub fn parse_json_with(bytes: &[u8], limits: &YamlLimits) -> Result<Value, String> {
    limits.check_size(bytes).map_err(|e| match e {
        ParseError::TooLarge { size, limit, .. } => {
            format!("is {size} bytes, over the limit of {limit} bytes")
        }
        ParseError::TooManyTokens { limit, .. } => format!(
            "has more than {limit} tokens (values, keys and punctuation), over the limit of \
             {limit} tokens"
        ),
        other => other.to_string(),
    })?;
    serde_json::from_slice(bytes).map_err(|e| format!("is not valid JSON: {e}"))
}

/// The token budget the JSON Schema files of one validation share (configuration and policy
/// schemas, local or from policy bundles): their compiled validators are all held until the
/// validation ends, so each file's own ceiling ([`YamlLimits::DOCUMENT`]) is not enough; together
/// they get that ceiling once.
#[derive(Debug)]
pub(crate) struct SchemaBudget {
    tokens_left: Cell<usize>,
}

impl SchemaBudget {
    /// The budget of one validation.
    pub(crate) fn new() -> Self {
        Self {
            tokens_left: Cell::new(YamlLimits::DOCUMENT.max_tokens),
        }
    }

    /// Parses one schema file, charging its tokens; the error is a message for a finding.
    pub(crate) fn parse_json(&self, bytes: &[u8]) -> Result<Value, String> {
        let limits = YamlLimits::DOCUMENT;
        let left = self.tokens_left.get();
        let tokens = count_tokens(bytes, left.min(limits.max_tokens));
        if tokens > left && tokens <= limits.max_tokens {
            return Err(format!(
                "is over the schema budget: the JSON Schema files of one contract have at most \
                 {} tokens together",
                limits.max_tokens
            ));
        }
        let value = parse_json_with(bytes, &limits)?;
        self.tokens_left.set(left.saturating_sub(tokens));
        Ok(value)
    }
}

/// Parses YAML bytes into the generic JSON view within [`YamlLimits::DOCUMENT`]. An empty
/// document yields `null`. `pacto.yaml` goes through [`parse_contract_yaml`] instead.
pub fn parse_yaml(bytes: &[u8]) -> Result<Value, ParseError> {
    parse_yaml_with(bytes, &YamlLimits::DOCUMENT)
}

/// Parses the bytes of a `pacto.yaml` into the generic JSON view within
/// [`YamlLimits::CONTRACT`].
pub fn parse_contract_yaml(bytes: &[u8]) -> Result<Value, ParseError> {
    parse_yaml_with(bytes, &YamlLimits::CONTRACT)
}

/// [`parse_yaml`] with explicit limits.
pub fn parse_yaml_with(bytes: &[u8], limits: &YamlLimits) -> Result<Value, ParseError> {
    let yaml = first_document_with(bytes, limits)?;
    yaml_to_json(yaml, "")
}

/// Parses YAML bytes into a generic YAML value (first document, merges applied) within
/// `limits`: the size and token ceilings are checked before the YAML crate sees the bytes, the
/// node and scalar budgets while the value is built.
pub(crate) fn first_document_with(
    bytes: &[u8],
    limits: &YamlLimits,
) -> Result<serde_norway::Value, ParseError> {
    limits.check_size(bytes)?;
    let mut docs = serde_norway::Deserializer::from_slice(bytes);
    let Some(first) = docs.next() else {
        return Ok(serde_norway::Value::Null);
    };
    let budget = Budget {
        nodes: Cell::new(limits.max_nodes),
        scalar_bytes: Cell::new(limits.max_scalar_bytes),
        node_limit: limits.max_nodes,
        scalar_limit: limits.max_scalar_bytes,
        exceeded: Cell::new(None),
    };
    let mut value = match (BoundedValue { budget: &budget }).deserialize(first) {
        Ok(v) => v,
        Err(e) => {
            return Err(match budget.exceeded.get() {
                Some((what, limit)) => ParseError::ExpansionLimit {
                    document: limits.document,
                    what,
                    limit,
                },
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

/// Parses the bytes of a `pacto.yaml` into both views, within [`YamlLimits::CONTRACT`].
pub fn parse_contract(bytes: &[u8]) -> Result<(Value, Contract), ParseError> {
    let doc = parse_contract_yaml(bytes)?;
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
        let err = parse_contract_yaml(bomb.as_bytes()).unwrap_err();
        assert!(
            matches!(
                err,
                ParseError::ExpansionLimit {
                    what: "nodes",
                    limit: 100_000,
                    ..
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
        let err = parse_contract_yaml(doc.as_bytes()).unwrap_err();
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

    /// A plain `[1,1,…]` of `bytes` bytes: no aliases, one node per two bytes.
    fn flow_list(bytes: usize) -> Vec<u8> {
        let mut doc = Vec::with_capacity(bytes);
        doc.push(b'[');
        while doc.len() + 3 < bytes {
            doc.extend_from_slice(b"1,");
        }
        doc.extend_from_slice(b"1]\n");
        doc
    }

    #[test]
    fn a_plain_document_of_millions_of_scalars_is_refused_before_parsing() {
        // The document: 9.2 MB, 4.6 million plain scalars, no aliases. Its parse used to
        // build every node (893 MiB, seconds); now the fixed ceilings refuse it from one pass
        // over the bytes.
        let doc = flow_list(9_200_000);
        let err = parse_yaml(&doc).unwrap_err();
        assert!(
            matches!(
                err,
                ParseError::TooManyTokens {
                    document: "document",
                    limit: 100_000
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("more than 100000 tokens"), "{err}");
        let err = parse_contract(&doc).unwrap_err();
        assert_eq!(
            err.to_string(),
            "yaml: pacto.yaml is 9200000 bytes, over the limit of 1048576 bytes for pacto.yaml"
        );
        // Under the byte ceiling of pacto.yaml, the token ceiling names the file too.
        let err = parse_contract(&flow_list(1_000_000)).unwrap_err();
        assert!(
            matches!(
                err,
                ParseError::TooManyTokens {
                    document: "pacto.yaml",
                    limit: 50_000
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("pacto.yaml"), "{err}");
    }

    #[test]
    fn the_ceilings_are_fixed_and_a_document_under_them_parses() {
        // The same ceiling for a small and a large document: the budget no longer grows with it.
        let under = flow_list(99_000);
        assert!(parse_yaml(&under).unwrap().as_array().unwrap().len() > 49_000);
        let tight = YamlLimits {
            max_tokens: 10,
            ..YamlLimits::DOCUMENT
        };
        assert!(parse_yaml_with(b"a: [1, 2, 3]", &tight).is_ok());
        assert!(matches!(
            parse_yaml_with(&flow_list(100), &tight),
            Err(ParseError::TooManyTokens { limit: 10, .. })
        ));
        let few_nodes = YamlLimits {
            max_nodes: 10,
            ..YamlLimits::DOCUMENT
        };
        assert!(matches!(
            parse_yaml_with(&flow_list(100), &few_nodes),
            Err(ParseError::ExpansionLimit {
                what: "nodes",
                limit: 10,
                ..
            })
        ));
        const { assert!(YamlLimits::CONTRACT.max_bytes < YamlLimits::DOCUMENT.max_bytes) };
        const { assert!(YamlLimits::CONTRACT.max_tokens < YamlLimits::DOCUMENT.max_tokens) };
    }

    #[test]
    fn tokens_are_counted_at_every_token_start() {
        let count = |text: &str| count_tokens(text.as_bytes(), usize::MAX);
        assert_eq!(count(""), 0);
        assert_eq!(count("[1,1,1]"), 7);
        assert_eq!(count("key: value"), 3);
        assert_eq!(count("- a\n- b\n"), 4);
        assert_eq!(count("name: unexpected-key-padding"), 3);
        assert_eq!(count("{\"a\":1}"), 7);
        // A token after a NEL line break (which libyaml honours) is counted.
        assert_eq!(count("a: 1\u{85}b: 2"), 6);
        assert_eq!(count_tokens(b"[1,1,1,1,1]", 3), 4, "stops past the limit");
    }

    #[test]
    fn the_real_contracts_are_far_under_the_contract_ceilings() {
        // docs/design/contract.md#yaml-limits: the ceilings are sized from these.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        let mut largest = (0, 0, String::new());
        let mut seen = 0;
        for entry in walkdir::WalkDir::new(&root) {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy();
            if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
                continue;
            }
            let bytes = std::fs::read(entry.path()).unwrap();
            let tokens = count_tokens(&bytes, usize::MAX);
            seen += 1;
            if tokens > largest.0 {
                largest = (tokens, bytes.len(), entry.path().display().to_string());
            }
        }
        println!(
            "{seen} YAML files; the most tokens: {} ({} bytes) in {}",
            largest.0, largest.1, largest.2
        );
        assert!(seen > 40, "{seen}");
        assert!(
            largest.0 * 100 < YamlLimits::CONTRACT.max_tokens,
            "{largest:?}"
        );
        assert!(
            largest.1 * 100 < YamlLimits::CONTRACT.max_bytes,
            "{largest:?}"
        );
    }

    #[test]
    fn json_schema_files_have_the_document_ceilings() {
        assert!(parse_json_with(b"{\"type\":\"object\"}", &YamlLimits::DOCUMENT).is_ok());
        let err = parse_json_with(&flow_list(1_000_000), &YamlLimits::DOCUMENT).unwrap_err();
        assert!(err.contains("more than 100000 tokens"), "{err}");
        let budget = SchemaBudget::new();
        let half = flow_list(60_000);
        assert!(budget.parse_json(&half).is_ok());
        let err = budget.parse_json(&half).unwrap_err();
        assert!(err.contains("schema budget"), "{err}");
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
            match parse_contract_yaml(doc.as_bytes()) {
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

        /// The token count bounds what the YAML crate builds: for any text of YAML's significant
        /// pieces that parses, at most three nodes per counted token (the densest: a lone `?`
        /// or `:` makes a mapping, an empty key and an empty value).
        #[test]
        fn the_token_count_bounds_the_nodes(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "-", "- ", "?", "? ", ":", ": ", ",", "[", "]", "{", "}", "a", "b1", "\n",
                    "\n  ", " ", "\"q\"", "'s'", "&x ", "!t ", "|\n  t\n", "# c\n", "\u{85}",
                    "a:b", "-1", "\t",
                ]),
                0..60,
            ),
        ) {
            let text: String = pieces.concat();
            let unbounded = YamlLimits {
                max_tokens: usize::MAX,
                max_nodes: usize::MAX,
                ..YamlLimits::DOCUMENT
            };
            if let Ok(value) = parse_yaml_with(text.as_bytes(), &unbounded) {
                let tokens = count_tokens(text.as_bytes(), usize::MAX);
                proptest::prop_assert!(
                    nodes(&value) <= 3 * tokens + 1,
                    "{text:?}: {} nodes, {tokens} tokens",
                    nodes(&value)
                );
            }
        }
    }

    /// Nodes of a JSON value, keys included.
    fn nodes(v: &Value) -> usize {
        match v {
            Value::Array(a) => 1 + a.iter().map(nodes).sum::<usize>(),
            Value::Object(o) => 1 + o.values().map(|x| 1 + nodes(x)).sum::<usize>(),
            _ => 1,
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
