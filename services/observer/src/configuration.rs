//! Configurations (docs/design/observation.md#configurations): bound ConfigMaps (existence and schema conformance) and
//! Secrets (existence only, by metadata; values are never read).

use std::collections::BTreeMap;

use pacto_api::{ConfigBinding, ConfigFormat};
use pacto_engine::{ConfigurationValue, Outcome, Value};

use crate::verdict::{Fetched, Verdict};

/// What the fetch edge read for a binding.
#[derive(Debug, Clone, PartialEq)]
pub enum BoundObject {
    /// A Secret's metadata: `Some(())` when it exists.
    Secret(Fetched<()>),
    /// A Secret the observer does not read: it runs without `--observe-secrets`.
    SecretNotObserved,
    /// A ConfigMap's `data`.
    ConfigMap(Fetched<BTreeMap<String, String>>),
}

fn absent() -> Value {
    Value::Configuration(ConfigurationValue {
        present: false,
        conformant: false,
    })
}

/// How a present ConfigMap's content relates to the declared schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conformance {
    /// The value at `key` validates.
    Conformant,
    /// The value at `key` parses but does not validate.
    NotConformant,
    /// Conformance cannot be decided (no key/format, key absent, unparseable value, schema not
    /// locally resolvable).
    Undecided,
}

/// Checks `data[key]` (parsed as `format`) against the JSON Schema document `schema` (the
/// resolver's `configuration_schemas[name]`). The content is dropped after validation.
pub fn conformance(
    data: &BTreeMap<String, String>,
    key: Option<&str>,
    format: Option<ConfigFormat>,
    schema: Option<&[u8]>,
) -> Conformance {
    let (Some(key), Some(format)) = (key.filter(|k| !k.is_empty()), format) else {
        return Conformance::Undecided;
    };
    let Some(raw) = data.get(key) else {
        return Conformance::Undecided;
    };
    let parsed: Option<serde_json::Value> = match format {
        ConfigFormat::Json => serde_json::from_str(raw).ok(),
        // Bounded: an alias bomb in a ConfigMap value is refused, not expanded
        // (docs/design/contract.md#yaml-limits).
        ConfigFormat::Yaml => pacto_contract::parse_yaml(raw.as_bytes()).ok(),
    };
    let Some(instance) = parsed else {
        return Conformance::Undecided;
    };
    let Some(validator) = schema
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(bytes).ok())
        .and_then(|schema| pacto_contract::schema::compile(&schema).ok())
    else {
        return Conformance::Undecided;
    };
    if validator.is_valid(&instance) {
        Conformance::Conformant
    } else {
        Conformance::NotConformant
    }
}

/// Why a Secret binding is `Unsupported` when the observer runs without `--observe-secrets`.
pub const SECRETS_NOT_OBSERVED: &str = "the observer has no access to Secrets (pacto-observer \
     chart value rbac.secretMetadata is false, flag --observe-secrets is off); set \
     rbac.secretMetadata=true to observe Secret bindings";

/// The configuration assertion:
///
/// - no binding → `Unsupported` if required, else no observation;
/// - a Secret the observer does not read (no `--observe-secrets`) → `Unsupported`, explained by
///   [`SECRETS_NOT_OBSERVED`], whether the assertion is required or not (an optional one then
///   yields nothing);
/// - Secret: API error → `Failed`; NotFound → a windowed negative; exists → `Insufficient`
///   (existence only) and the window is cleared;
/// - ConfigMap: API error → `Failed`; NotFound → a windowed negative; exists → the window is
///   cleared, then Observed(present, conformant) / Observed(present, !conformant) (a
///   `CONFIGURATION_MISMATCH`, immediately) / `Insufficient` when undecided.
pub fn configuration_verdict(
    required: bool,
    binding: Option<&ConfigBinding>,
    object: Option<&BoundObject>,
    schema: Option<&[u8]>,
) -> Verdict {
    let (Some(binding), Some(object)) = (binding, object) else {
        return if required {
            Verdict::unsupported()
        } else {
            Verdict::Skip
        };
    };
    match object {
        BoundObject::SecretNotObserved => {
            Verdict::Explained(Outcome::Unsupported, SECRETS_NOT_OBSERVED)
        }
        BoundObject::Secret(fetched) => match fetched {
            Err(_) => Verdict::failed(),
            Ok(None) => Verdict::Negative(absent()),
            Ok(Some(())) => Verdict::Clear(Outcome::Insufficient),
        },
        BoundObject::ConfigMap(fetched) => match fetched {
            Err(_) => Verdict::failed(),
            Ok(None) => Verdict::Negative(absent()),
            Ok(Some(data)) => {
                let outcome =
                    match conformance(data, binding.key.as_deref(), binding.format, schema) {
                        Conformance::Conformant => {
                            Outcome::Observed(Value::Configuration(ConfigurationValue {
                                present: true,
                                conformant: true,
                            }))
                        }
                        Conformance::NotConformant => {
                            Outcome::Observed(Value::Configuration(ConfigurationValue {
                                present: true,
                                conformant: false,
                            }))
                        }
                        Conformance::Undecided => Outcome::Insufficient,
                    };
                Verdict::Clear(outcome)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::type_complexity,
        reason = "table-driven tests: each row is a tuple of inputs and the expected verdict"
    )]

    use pacto_api::ConfigBindingKind;

    use super::*;

    fn err<T>() -> Fetched<T> {
        Err(ApiFailure::new("boom"))
    }
    use crate::verdict::ApiFailure;

    const SCHEMA: &[u8] =
        br#"{"type":"object","required":["port"],"properties":{"port":{"type":"integer"}}}"#;

    fn binding(
        kind: ConfigBindingKind,
        key: Option<&str>,
        format: Option<ConfigFormat>,
    ) -> ConfigBinding {
        ConfigBinding {
            configuration: "app".into(),
            kind,
            name: "app-config".into(),
            key: key.map(str::to_owned),
            format,
        }
    }

    fn data(key: &str, value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(key.to_owned(), value.to_owned())])
    }

    #[test]
    fn conformance_table() {
        let cases: Vec<(
            &str,
            BTreeMap<String, String>,
            Option<&str>,
            Option<ConfigFormat>,
            Option<&[u8]>,
            Conformance,
        )> = vec![
            (
                "json valid",
                data("c.json", r#"{"port": 8080}"#),
                Some("c.json"),
                Some(ConfigFormat::Json),
                Some(SCHEMA),
                Conformance::Conformant,
            ),
            (
                "yaml valid",
                data("c.yaml", "port: 8080\n"),
                Some("c.yaml"),
                Some(ConfigFormat::Yaml),
                Some(SCHEMA),
                Conformance::Conformant,
            ),
            (
                "yaml invalid",
                data("c.yaml", "port: eighty\n"),
                Some("c.yaml"),
                Some(ConfigFormat::Yaml),
                Some(SCHEMA),
                Conformance::NotConformant,
            ),
            (
                "json missing required",
                data("c.json", "{}"),
                Some("c.json"),
                Some(ConfigFormat::Json),
                Some(SCHEMA),
                Conformance::NotConformant,
            ),
            (
                "no key",
                data("c.json", "{}"),
                None,
                Some(ConfigFormat::Json),
                Some(SCHEMA),
                Conformance::Undecided,
            ),
            (
                "no format",
                data("c.json", "{}"),
                Some("c.json"),
                None,
                Some(SCHEMA),
                Conformance::Undecided,
            ),
            (
                "key absent",
                data("other", "{}"),
                Some("c.json"),
                Some(ConfigFormat::Json),
                Some(SCHEMA),
                Conformance::Undecided,
            ),
            (
                "unparseable json",
                data("c.json", "{port"),
                Some("c.json"),
                Some(ConfigFormat::Json),
                Some(SCHEMA),
                Conformance::Undecided,
            ),
            (
                "no schema",
                data("c.json", "{}"),
                Some("c.json"),
                Some(ConfigFormat::Json),
                None,
                Conformance::Undecided,
            ),
            (
                "schema not json",
                data("c.json", "{}"),
                Some("c.json"),
                Some(ConfigFormat::Json),
                Some(b"not json"),
                Conformance::Undecided,
            ),
            (
                "schema does not compile",
                data("c.json", "{}"),
                Some("c.json"),
                Some(ConfigFormat::Json),
                Some(br#"{"type": 12}"#),
                Conformance::Undecided,
            ),
        ];
        for (name, data, key, format, schema, want) in cases {
            assert_eq!(conformance(&data, key, format, schema), want, "{name}");
        }
    }

    #[test]
    fn an_alias_bomb_in_a_configmap_value_is_undecided_not_expanded() {
        let bomb = pacto_contract::testing::alias_bomb("");
        let start = std::time::Instant::now();
        let got = conformance(
            &data("c.yaml", &bomb),
            Some("c.yaml"),
            Some(ConfigFormat::Yaml),
            Some(SCHEMA),
        );
        assert_eq!(got, Conformance::Undecided);
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn configuration_table() {
        let cm = binding(
            ConfigBindingKind::ConfigMap,
            Some("c.json"),
            Some(ConfigFormat::Json),
        );
        let secret = binding(
            ConfigBindingKind::Secret,
            Some("ignored"),
            Some(ConfigFormat::Json),
        );
        let observed = |conformant| {
            Verdict::Clear(Outcome::Observed(Value::Configuration(
                ConfigurationValue {
                    present: true,
                    conformant,
                },
            )))
        };
        let cases: Vec<(
            &str,
            bool,
            Option<&ConfigBinding>,
            Option<BoundObject>,
            Verdict,
        )> = vec![
            ("unbound required", true, None, None, Verdict::unsupported()),
            ("unbound optional", false, None, None, Verdict::Skip),
            (
                "secret not observed (no --observe-secrets)",
                true,
                Some(&secret),
                Some(BoundObject::SecretNotObserved),
                Verdict::Explained(Outcome::Unsupported, SECRETS_NOT_OBSERVED),
            ),
            (
                "secret api error",
                true,
                Some(&secret),
                Some(BoundObject::Secret(err())),
                Verdict::failed(),
            ),
            (
                "secret missing",
                true,
                Some(&secret),
                Some(BoundObject::Secret(Ok(None))),
                Verdict::Negative(absent()),
            ),
            (
                "secret exists",
                false,
                Some(&secret),
                Some(BoundObject::Secret(Ok(Some(())))),
                Verdict::Clear(Outcome::Insufficient),
            ),
            (
                "configmap api error",
                true,
                Some(&cm),
                Some(BoundObject::ConfigMap(err())),
                Verdict::failed(),
            ),
            (
                "configmap missing",
                true,
                Some(&cm),
                Some(BoundObject::ConfigMap(Ok(None))),
                Verdict::Negative(absent()),
            ),
            (
                "configmap conformant",
                true,
                Some(&cm),
                Some(BoundObject::ConfigMap(Ok(Some(data(
                    "c.json",
                    r#"{"port":1}"#,
                ))))),
                observed(true),
            ),
            (
                "configmap mismatch is immediate",
                true,
                Some(&cm),
                Some(BoundObject::ConfigMap(Ok(Some(data(
                    "c.json",
                    r#"{"port":"x"}"#,
                ))))),
                observed(false),
            ),
            (
                "configmap undecided",
                true,
                Some(&cm),
                Some(BoundObject::ConfigMap(Ok(Some(data("other", "{}"))))),
                Verdict::Clear(Outcome::Insufficient),
            ),
        ];
        for (name, required, binding, object, want) in cases {
            assert_eq!(
                configuration_verdict(required, binding, object.as_ref(), Some(SCHEMA)),
                want,
                "{name}"
            );
        }
    }
}
