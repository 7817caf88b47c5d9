//! Overrides (docs/design/contract.md#overrides): the CLI's `-f/--values` files and `--set key=value` merged into the raw
//! YAML before parsing (docs/design/contract.md#cli-overrides), and the operator's per-configuration overrides (docs/design/contract.md#operator-overrides), applied to
//! the raw document **and** the typed model so every layer sees them (docs/design/contract.md#operator-overrides).
//!
//! `--set` value typing, first success wins: base-10 `i64` → `f64` (`1.5`, `1e3`, `inf`, `nan`;
//! Go's hexadecimal float syntax is not accepted) → Go `ParseBool` spellings (`t`, `T`, `TRUE`,
//! `true`, `True`, `f`, `F`, `FALSE`, `false`, `False`) → string. So `1.0.0` stays a string,
//! `1.0` becomes a float and `t` becomes `true`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;
use serde_norway::{Mapping, Value as Yaml};

use crate::parse::{self, ParseError};

/// Errors of this module; each names the offending file, key or configuration.
#[derive(Debug, thiserror::Error)]
pub enum OverrideError {
    /// The base document is not YAML.
    #[error("base contract")]
    BaseParse {
        #[source]
        source: ParseError,
    },
    /// The base document is not a mapping.
    #[error("base contract is not a mapping")]
    BaseNotMapping,
    /// A values file is not YAML.
    #[error("values file {file}")]
    ValuesParse {
        file: String,
        #[source]
        source: ParseError,
    },
    /// A values file is not a mapping.
    #[error("values file {file} must contain a mapping")]
    ValuesNotMapping { file: String },
    /// `--set` without `=`.
    #[error("--set {arg:?}: expected key=value")]
    SetMissingEquals { arg: String },
    /// `--set` with an empty key or an empty key segment.
    #[error("--set {arg:?}: empty key segment")]
    SetEmptySegment { arg: String },
    /// `name[N]` on a missing key or a non-array.
    #[error("--set {arg:?}: {segment:?} is not an existing array")]
    SetNotArray { arg: String, segment: String },
    /// `name[N]` with N out of range (or negative).
    #[error("--set {arg:?}: index {index} out of range for {segment:?} (length {len})")]
    SetIndexOutOfRange {
        arg: String,
        segment: String,
        index: String,
        len: usize,
    },
    /// Traversal into a value that is not a mapping.
    #[error("--set {arg:?}: cannot traverse into {segment:?}: not a mapping")]
    SetNotMapping { arg: String, segment: String },
    /// Re-serialising the merged document failed.
    #[error("re-serialising the overridden contract")]
    Serialize {
        #[source]
        source: serde_norway::Error,
    },
    /// An operator override names a configuration the contract does not declare.
    #[error("configuration \"{name}\" not found in contract")]
    UnknownConfiguration { name: String },
    /// The configuration's `values` is not an object, so keys cannot be overridden.
    #[error("configuration \"{name}\": values is not an object")]
    ValuesNotObject { name: String },
}

/// A values file given with `-f/--values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuesFile {
    /// The name shown in errors (usually the path).
    pub name: String,
    pub bytes: Vec<u8>,
}

/// The CLI's overrides, in command-line order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CliOverrides {
    pub values_files: Vec<ValuesFile>,
    pub set: Vec<String>,
}

impl CliOverrides {
    /// True when there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.values_files.is_empty() && self.set.is_empty()
    }
}

/// Applies CLI overrides to the raw `pacto.yaml` bytes (docs/design/contract.md#cli-overrides). Without overrides the original
/// bytes are returned untouched. Precedence: base < values files (in order) < `--set` (in order).
pub fn apply_cli_overrides<'a>(
    base: &'a [u8],
    overrides: &CliOverrides,
) -> Result<Cow<'a, [u8]>, OverrideError> {
    if overrides.is_empty() {
        return Ok(Cow::Borrowed(base));
    }
    let mut doc = match parse::first_document_with(base, &parse::YamlLimits::CONTRACT)
        .map_err(|source| OverrideError::BaseParse { source })?
    {
        Yaml::Null => Mapping::new(),
        Yaml::Mapping(m) => stringify_keys(m),
        _ => return Err(OverrideError::BaseNotMapping),
    };
    for file in &overrides.values_files {
        let overlay = match parse::first_document_with(&file.bytes, &parse::YamlLimits::DOCUMENT)
            .map_err(|source| OverrideError::ValuesParse {
                file: file.name.clone(),
                source,
            })? {
            Yaml::Mapping(m) => stringify_keys(m),
            Yaml::Null => Mapping::new(),
            _ => {
                return Err(OverrideError::ValuesNotMapping {
                    file: file.name.clone(),
                });
            }
        };
        deep_merge(&mut doc, overlay);
    }
    for arg in &overrides.set {
        apply_set(&mut doc, arg)?;
    }
    serde_norway::to_string(&Yaml::Mapping(doc))
        .map(|s| Cow::Owned(s.into_bytes()))
        .map_err(|source| OverrideError::Serialize { source })
}

fn stringify_keys(m: Mapping) -> Mapping {
    m.into_iter()
        .map(|(k, v)| {
            let k = match k {
                Yaml::String(s) => Yaml::String(s),
                other => Yaml::String(key_text(&other)),
            };
            let v = match v {
                Yaml::Mapping(inner) => Yaml::Mapping(stringify_keys(inner)),
                other => other,
            };
            (k, v)
        })
        .collect()
}

fn key_text(k: &Yaml) -> String {
    match k {
        Yaml::String(s) => s.clone(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Number(n) => n.to_string(),
        Yaml::Null => "null".to_owned(),
        other => serde_norway::to_string(other)
            .unwrap_or_default()
            .trim_end()
            .to_owned(),
    }
}

/// For each key: both mappings → recurse; otherwise the overlay replaces the base wholesale
/// (arrays are replaced; an explicit null sets null).
pub fn deep_merge(base: &mut Mapping, overlay: Mapping) {
    for (k, v) in overlay {
        match (base.get_mut(&k), v) {
            (Some(Yaml::Mapping(b)), Yaml::Mapping(o)) => deep_merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// The typed value of a `--set` right-hand side.
pub fn typed_set_value(s: &str) -> Yaml {
    if let Ok(i) = s.parse::<i64>() {
        return Yaml::Number(i.into());
    }
    if let Ok(f) = s.parse::<f64>() {
        return Yaml::Number(f.into());
    }
    match s {
        "t" | "T" | "TRUE" | "true" | "True" => Yaml::Bool(true),
        "f" | "F" | "FALSE" | "false" | "False" => Yaml::Bool(false),
        _ => Yaml::String(s.to_owned()),
    }
}

enum Segment<'a> {
    Key(&'a str),
    Index(&'a str, &'a str),
}

fn segment(s: &str) -> Segment<'_> {
    if let Some(open) = s.find('[')
        && let Some(inner) = s[open + 1..].strip_suffix(']')
        && !inner.contains(['[', ']'])
        && !inner.is_empty()
        && inner
            .strip_prefix('-')
            .unwrap_or(inner)
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        return Segment::Index(&s[..open], inner);
    }
    Segment::Key(s)
}

fn apply_set(doc: &mut Mapping, arg: &str) -> Result<(), OverrideError> {
    let (key, raw) = arg
        .split_once('=')
        .ok_or_else(|| OverrideError::SetMissingEquals {
            arg: arg.to_owned(),
        })?;
    let value = typed_set_value(raw);
    let segments: Vec<&str> = key.split('.').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(OverrideError::SetEmptySegment {
            arg: arg.to_owned(),
        });
    }
    let mut current = doc;
    let last = segments.len() - 1;
    for (n, seg) in segments.iter().enumerate() {
        let is_last = n == last;
        match segment(seg) {
            Segment::Key(k) => {
                let k = Yaml::String(k.to_owned());
                if is_last {
                    current.insert(k, value);
                    return Ok(());
                }
                let next = current
                    .entry(k)
                    .or_insert_with(|| Yaml::Mapping(Mapping::new()));
                current = match next {
                    Yaml::Mapping(m) => m,
                    _ => {
                        return Err(OverrideError::SetNotMapping {
                            arg: arg.to_owned(),
                            segment: (*seg).to_owned(),
                        });
                    }
                };
            }
            Segment::Index(name, idx) => {
                let Some(Yaml::Sequence(seq)) = current.get_mut(name) else {
                    return Err(OverrideError::SetNotArray {
                        arg: arg.to_owned(),
                        segment: (*seg).to_owned(),
                    });
                };
                let len = seq.len();
                let slot = idx
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| seq.get_mut(i))
                    .ok_or_else(|| OverrideError::SetIndexOutOfRange {
                        arg: arg.to_owned(),
                        segment: (*seg).to_owned(),
                        index: idx.to_owned(),
                        len,
                    })?;
                if is_last {
                    *slot = value;
                    return Ok(());
                }
                current = match slot {
                    Yaml::Mapping(m) => m,
                    _ => {
                        return Err(OverrideError::SetNotMapping {
                            arg: arg.to_owned(),
                            segment: (*seg).to_owned(),
                        });
                    }
                };
            }
        }
    }
    Ok(())
}

/// One operator override entry (`spec.overrides.configurations[]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ConfigurationOverride {
    pub name: String,
    pub values: BTreeMap<String, String>,
}

/// Which keys of which configuration were overridden (`status.configurations[].overriddenKeys`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverriddenConfiguration {
    pub name: String,
    /// Sorted.
    pub overridden_keys: Vec<String>,
}

fn summaries(overrides: &[ConfigurationOverride]) -> Vec<OverriddenConfiguration> {
    overrides
        .iter()
        .map(|o| OverriddenConfiguration {
            name: o.name.clone(),
            // BTreeMap keys are already sorted.
            overridden_keys: o.values.keys().cloned().collect(),
        })
        .collect()
}

/// Checks every override names a declared configuration (before anything is applied).
pub fn check_configuration_names(
    names: &[&str],
    overrides: &[ConfigurationOverride],
) -> Result<(), OverrideError> {
    for o in overrides {
        if !names.contains(&o.name.as_str()) {
            return Err(OverrideError::UnknownConfiguration {
                name: o.name.clone(),
            });
        }
    }
    Ok(())
}

/// Applies operator overrides to the raw (generic JSON) document; the input is not mutated.
pub fn apply_configuration_overrides_raw(
    raw: &Value,
    overrides: &[ConfigurationOverride],
) -> Result<(Value, Vec<OverriddenConfiguration>), OverrideError> {
    let configs: &[Value] = raw
        .get("configurations")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let names: Vec<&str> = configs
        .iter()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    check_configuration_names(&names, overrides)?;
    let mut out = raw.clone();
    if let Some(configs) = out.get_mut("configurations").and_then(Value::as_array_mut) {
        for o in overrides {
            for cfg in configs
                .iter_mut()
                .filter(|c| c.get("name").and_then(Value::as_str) == Some(o.name.as_str()))
            {
                let Some(obj) = cfg.as_object_mut() else {
                    continue;
                };
                let values = obj
                    .entry("values")
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
                let Some(values) = values.as_object_mut() else {
                    return Err(OverrideError::ValuesNotObject {
                        name: o.name.clone(),
                    });
                };
                for (k, v) in &o.values {
                    values.insert(k.clone(), Value::String(v.clone()));
                }
            }
        }
    }
    Ok((out, summaries(overrides)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Contract;
    use serde_json::json;

    /// Applies operator overrides to the typed model; the input is not mutated.
    fn apply_configuration_overrides(
        contract: &Contract,
        overrides: &[ConfigurationOverride],
    ) -> Result<(Contract, Vec<OverriddenConfiguration>), OverrideError> {
        let names: Vec<&str> = contract
            .configurations
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        check_configuration_names(&names, overrides)?;
        let mut out = contract.clone();
        for o in overrides {
            for cfg in out.configurations.iter_mut().filter(|c| c.name == o.name) {
                let values = cfg.values.get_or_insert_with(serde_json::Map::new);
                for (k, v) in &o.values {
                    values.insert(k.clone(), Value::String(v.clone()));
                }
            }
        }
        Ok((out, summaries(overrides)))
    }

    /// Applies operator overrides to both views (§9.9).
    fn apply_configuration_overrides_both(
        raw: &Value,
        contract: &Contract,
        overrides: &[ConfigurationOverride],
    ) -> Result<(Value, Contract, Vec<OverriddenConfiguration>), OverrideError> {
        let (raw, summary) = apply_configuration_overrides_raw(raw, overrides)?;
        let (contract, _) = apply_configuration_overrides(contract, overrides)?;
        Ok((raw, contract, summary))
    }

    fn cli(base: &str, files: &[&str], set: &[&str]) -> Result<Value, OverrideError> {
        let o = CliOverrides {
            values_files: files
                .iter()
                .enumerate()
                .map(|(i, f)| ValuesFile {
                    name: format!("values{i}.yaml"),
                    bytes: f.as_bytes().to_vec(),
                })
                .collect(),
            set: set.iter().map(|s| (*s).to_owned()).collect(),
        };
        let out = apply_cli_overrides(base.as_bytes(), &o)?;
        Ok(parse::parse_yaml(&out).unwrap())
    }

    #[test]
    fn no_overrides_returns_bytes_untouched() {
        let base = b"# comment\nb: 1\na:   2\n";
        let out = apply_cli_overrides(base, &CliOverrides::default()).unwrap();
        assert!(matches!(out, Cow::Borrowed(_)));
        assert_eq!(&*out, base);
    }

    #[test]
    fn values_files_deep_merge_in_order() {
        let base = "service: {name: a, version: 1.0.0, owner: {team: t}}\nlist: [1, 2]\nx: 1\n";
        let v = cli(
            base,
            &[
                "service: {version: 2.0.0}\nlist: [3]\n",
                "service: {owner: null}\nx: {y: 1}\n",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"service": {"name": "a", "version": "2.0.0", "owner": null},
                   "list": [3], "x": {"y": 1}})
        );
    }

    #[test]
    fn set_typing_rules() {
        let v = cli(
            "a: 1\n",
            &[],
            &[
                "i=42",
                "neg=-7",
                "f=1.0",
                "e=1e3",
                "s=1.0.0",
                "t=t",
                "tt=True",
                "ff=F",
                "one=1",
                "zero=0",
                "str=hello",
                "eq=a=b",
                "d=2027-06-30",
                "empty=",
            ],
        )
        .unwrap();
        assert_eq!(v["i"], json!(42));
        assert_eq!(v["neg"], json!(-7));
        assert_eq!(v["f"], json!(1.0));
        assert!(v["f"].is_f64());
        assert_eq!(v["e"], json!(1000.0));
        assert_eq!(v["s"], json!("1.0.0"));
        assert_eq!(v["t"], json!(true));
        assert_eq!(v["tt"], json!(true));
        assert_eq!(v["ff"], json!(false));
        assert_eq!(v["one"], json!(1));
        assert_eq!(v["zero"], json!(0));
        assert_eq!(v["str"], json!("hello"));
        assert_eq!(v["eq"], json!("a=b"), "split at the first =");
        assert_eq!(v["d"], json!("2027-06-30"), "dates stay strings");
        assert_eq!(v["empty"], json!(""));
        assert!(matches!(typed_set_value("yes"), Yaml::String(_)));
        assert!(matches!(typed_set_value("inf"), Yaml::Number(_)));
    }

    #[test]
    fn set_paths_create_maps_and_index_existing_arrays() {
        let base = "configurations:\n  - name: c\n    values: {A: 1}\n  - name: d\n";
        let v = cli(
            base,
            &[],
            &[
                "configurations[0].values.B=x",
                "configurations[1].required=true",
                "new.deep.key=v",
            ],
        )
        .unwrap();
        assert_eq!(v["configurations"][0]["values"], json!({"A": 1, "B": "x"}));
        assert_eq!(v["configurations"][1]["required"], json!(true));
        assert_eq!(v["new"], json!({"deep": {"key": "v"}}));
        let v = cli("l: [a, b]\n", &[], &["l[1]=c"]).unwrap();
        assert_eq!(v["l"], json!(["a", "c"]));
    }

    #[test]
    fn set_errors() {
        let base = "l: [a]\nm: 1\n";
        assert!(matches!(
            cli(base, &[], &["novalue"]),
            Err(OverrideError::SetMissingEquals { .. })
        ));
        assert!(matches!(
            cli(base, &[], &["l[1]=x"]),
            Err(OverrideError::SetIndexOutOfRange { .. })
        ));
        assert!(matches!(
            cli(base, &[], &["l[-1]=x"]),
            Err(OverrideError::SetIndexOutOfRange { .. })
        ));
        assert!(matches!(
            cli(base, &[], &["missing[0]=x"]),
            Err(OverrideError::SetNotArray { .. })
        ));
        assert!(matches!(
            cli(base, &[], &["m[0]=x"]),
            Err(OverrideError::SetNotArray { .. })
        ));
        assert!(matches!(
            cli(base, &[], &["m.x=1"]),
            Err(OverrideError::SetNotMapping { .. })
        ));
        assert!(matches!(
            cli(base, &[], &["l[0].x=1"]),
            Err(OverrideError::SetNotMapping { .. })
        ));
        assert!(matches!(
            cli(base, &[], &["a..b=1"]),
            Err(OverrideError::SetEmptySegment { .. })
        ));
        assert!(matches!(
            cli("- 1\n", &[], &["a=1"]),
            Err(OverrideError::BaseNotMapping)
        ));
        assert!(matches!(
            cli(base, &["- 1\n"], &[]),
            Err(OverrideError::ValuesNotMapping { .. })
        ));
        assert!(matches!(
            cli(base, &["a: [\n"], &[]),
            Err(OverrideError::ValuesParse { .. })
        ));
    }

    #[test]
    fn precedence_set_wins_over_files() {
        let v = cli(
            "x: base\n",
            &["x: file1\n", "x: file2\n"],
            &["x=set1", "x=set2"],
        )
        .unwrap();
        assert_eq!(v["x"], json!("set2"));
        let v = cli("", &[], &["x=1"]).unwrap();
        assert_eq!(v, json!({"x": 1}), "an empty base is an empty map");
    }

    fn contract_doc() -> Value {
        json!({"pactoVersion": "2.0", "service": {"name": "a", "version": "1.0.0"},
            "configurations": [
                {"name": "runtime", "required": true, "schema": "s.json", "values": {"LOG_LEVEL": "info"}},
                {"name": "bare", "required": false, "schema": "s.json"}]})
    }

    #[test]
    fn operator_overrides_by_name_on_both_views() {
        let raw = contract_doc();
        let contract = parse::to_contract(&raw).unwrap();
        let overrides = vec![
            ConfigurationOverride {
                name: "runtime".into(),
                values: [
                    ("LOG_LEVEL".into(), "debug".into()),
                    ("A".into(), "1".into()),
                ]
                .into(),
            },
            ConfigurationOverride {
                name: "bare".into(),
                values: [("X".into(), "y".into())].into(),
            },
        ];
        let (raw2, c2, summary) =
            apply_configuration_overrides_both(&raw, &contract, &overrides).unwrap();
        assert_eq!(
            raw2["configurations"][0]["values"],
            json!({"LOG_LEVEL": "debug", "A": "1"})
        );
        assert_eq!(raw2["configurations"][1]["values"], json!({"X": "y"}));
        assert_eq!(parse::to_contract(&raw2).unwrap(), c2, "both views agree");
        assert_eq!(summary[0].overridden_keys, vec!["A", "LOG_LEVEL"]);
        assert_eq!(raw, contract_doc(), "input not mutated");
    }

    #[test]
    fn operator_override_of_unknown_configuration_fails_before_applying() {
        let raw = contract_doc();
        let contract = parse::to_contract(&raw).unwrap();
        let overrides = vec![
            ConfigurationOverride {
                name: "runtime".into(),
                values: [("A".into(), "1".into())].into(),
            },
            ConfigurationOverride {
                name: "nope".into(),
                values: [("A".into(), "1".into())].into(),
            },
        ];
        let err = apply_configuration_overrides(&contract, &overrides).unwrap_err();
        assert_eq!(
            err.to_string(),
            "configuration \"nope\" not found in contract"
        );
        assert!(apply_configuration_overrides_raw(&raw, &overrides).is_err());
    }
}
