//! The contract-derived part of the status (docs/design/status.md#the-pacto-api): contract metadata,
//! interfaces, capabilities, configurations (with overridden keys), dependencies, policies and
//! the stringified `metadata`. Pure functions of the effective contract and the Pacto spec.

use std::collections::{BTreeMap, BTreeSet};

use pacto_api::{
    CapabilityInfo, ConfigurationInfo, ContractInfo, DependencyInfo, InterfaceInfo, InterfaceType,
    OwnerContact, OwnerInfo, PactoSpec, PactoStatus, PolicyInfo, SchemaProperty,
};
use pacto_contract::model::{self, Contract};
use serde_json::{Map, Value};

use crate::model::ResolvedContract;

/// Prefix of configuration values that reference a secret.
const SECRET_PREFIX: &str = "secret://";

/// Writes every contract-derived field of `status` from `resolved` (the empty lists of
/// `configurations`, `policies` and `capabilities` are `[]`, not absent).
pub fn apply_contract(status: &mut PactoStatus, resolved: &ResolvedContract, spec: &PactoSpec) {
    let contract = &resolved.contract;
    status.contract_version = Some(contract.service.version.clone());
    status.contract = Some(contract_info(contract, resolved.resolved_ref.as_deref()));
    status.interfaces = contract.interfaces.iter().filter_map(interface).collect();
    status.capabilities = Some(
        contract
            .capabilities
            .iter()
            .map(|c| CapabilityInfo {
                capability_type: c.kind.clone(),
                r#ref: c.reference.clone().filter(|r| !r.is_empty()),
            })
            .collect(),
    );
    status.configurations = Some(
        contract
            .configurations
            .iter()
            .map(|c| configuration(c, spec, &resolved.configuration_schemas))
            .collect(),
    );
    status.dependencies = contract
        .dependencies
        .iter()
        .map(|d| DependencyInfo {
            name: d.name.clone(),
            r#ref: d.reference.clone(),
            required: d.required,
            compatibility: non_empty(&d.compatibility),
        })
        .collect();
    status.policies = Some(contract.policies.iter().map(policy).collect());
    status.metadata = contract
        .metadata
        .as_ref()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), go_format(v)))
                .collect::<BTreeMap<_, _>>()
        })
        .unwrap_or_default();
}

/// `status.contract`.
pub fn contract_info(contract: &Contract, resolved_ref: Option<&str>) -> ContractInfo {
    let owner = contract.service.owner.as_ref();
    ContractInfo {
        service_name: contract.service.name.clone(),
        version: contract.service.version.clone(),
        owner: owner.and_then(owner_info),
        owner_display: owner.and_then(model::Owner::key).map(str::to_owned),
        resolved_ref: resolved_ref.filter(|r| !r.is_empty()).map(str::to_owned),
    }
}

fn owner_info(owner: &model::Owner) -> Option<OwnerInfo> {
    let info = OwnerInfo {
        team: owner.team.clone().filter(|t| !t.is_empty()),
        dri: owner.dri.clone().filter(|d| !d.is_empty()),
        contacts: owner
            .contacts
            .iter()
            .map(|c| OwnerContact {
                contact_type: c.kind.clone(),
                value: c.value.clone(),
                purpose: c.purpose.clone().filter(|p| !p.is_empty()),
            })
            .collect(),
    };
    // The CRD requires at least one property on `owner`.
    (info.team.is_some() || info.dri.is_some() || !info.contacts.is_empty()).then_some(info)
}

fn interface(i: &model::Interface) -> Option<InterfaceInfo> {
    // Validation rejects unknown types before this point; skip rather than invent one.
    let interface_type = match i.interface_type()? {
        model::InterfaceType::OpenApi => InterfaceType::Openapi,
        model::InterfaceType::AsyncApi => InterfaceType::Asyncapi,
        model::InterfaceType::Grpc => InterfaceType::Grpc,
    };
    Some(InterfaceInfo {
        name: i.name.clone(),
        interface_type,
        r#ref: non_empty(&i.reference),
        visibility: i.visibility.clone().filter(|v| !v.is_empty()),
    })
}

fn configuration(
    c: &model::Configuration,
    spec: &PactoSpec,
    schemas: &BTreeMap<String, Vec<u8>>,
) -> ConfigurationInfo {
    let values = c.values.as_ref();
    let value_keys: Vec<String> = values
        .map(|v| {
            v.keys()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        })
        .unwrap_or_default();
    let secret_keys: Vec<String> = values
        .map(|v| {
            v.iter()
                .filter(|(_, value)| value.as_str().is_some_and(|s| s.starts_with(SECRET_PREFIX)))
                .map(|(k, _)| k.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        })
        .unwrap_or_default();
    let overridden_keys: Vec<String> = spec
        .overrides
        .iter()
        .flat_map(|o| &o.configurations)
        .filter(|o| o.name == c.name)
        .flat_map(|o| o.values.keys().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let properties = match values {
        Some(values) if !values.is_empty() => value_properties(values),
        _ => schemas
            .get(&c.name)
            .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
            .map(|schema| schema_properties(&schema))
            .unwrap_or_default(),
    };
    ConfigurationInfo {
        name: c.name.clone(),
        has_schema: c.schema.as_deref().is_some_and(|s| !s.is_empty()),
        r#ref: c.reference.clone().filter(|r| !r.is_empty()),
        value_keys,
        secret_keys,
        overridden_keys,
        properties,
    }
}

fn policy(p: &model::Policy) -> PolicyInfo {
    let schema = p.schema.clone().filter(|s| !s.is_empty());
    PolicyInfo {
        name: p.name.clone(),
        has_schema: schema.is_some(),
        schema,
        r#ref: p.reference.clone().filter(|r| !r.is_empty()),
        // Title, description and properties live in the bundled schema file, which the
        // resolver does not return (see the crate docs).
        title: None,
        description: None,
        properties: Vec::new(),
    }
}

/// Literal values flattened to dot-notation keys, sorted.
pub fn value_properties(values: &Map<String, Value>) -> Vec<SchemaProperty> {
    let mut out = Vec::new();
    flatten_values("", values, &mut out);
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

fn flatten_values(prefix: &str, values: &Map<String, Value>, out: &mut Vec<SchemaProperty>) {
    for (key, value) in values {
        let full = join(prefix, key);
        match value {
            Value::Object(inner) if !inner.is_empty() => flatten_values(&full, inner, out),
            other => out.push(SchemaProperty {
                key: full,
                value: Some(go_format(other)),
                r#type: Some(json_type(other).to_owned()),
            }),
        }
    }
}

/// The keys of a JSON Schema's `properties` (recursively), with type and default, sorted.
pub fn schema_properties(schema: &Value) -> Vec<SchemaProperty> {
    let mut out = Vec::new();
    flatten_schema("", schema, &mut out);
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

fn flatten_schema(prefix: &str, schema: &Value, out: &mut Vec<SchemaProperty>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, property) in properties {
        let full = join(prefix, key);
        if property
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
        {
            flatten_schema(&full, property, out);
        } else {
            out.push(SchemaProperty {
                key: full,
                value: property.get("default").map(go_format),
                r#type: property
                    .get("type")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value rendered like Go's `%v` on the decoded YAML: strings as is, `<nil>`, `[a b]`,
/// `map[k:v]` with sorted keys.
pub fn go_format(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_format).collect();
            format!("[{}]", inner.join(" "))
        }
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            let inner: Vec<String> = sorted
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_format(v)))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_format_matches_go_verbs() {
        assert_eq!(go_format(&json!(null)), "<nil>");
        assert_eq!(go_format(&json!("x")), "x");
        assert_eq!(go_format(&json!(3)), "3");
        assert_eq!(go_format(&json!(1.5)), "1.5");
        assert_eq!(go_format(&json!([1, "a", true])), "[1 a true]");
        assert_eq!(
            go_format(&json!({"b": 1, "a": {"c": "d"}})),
            "map[a:map[c:d] b:1]"
        );
    }

    #[test]
    fn properties_from_values_and_schema() {
        let values = json!({"port": 8080, "db": {"host": "h", "tls": true}, "name": "x"});
        let props = value_properties(values.as_object().unwrap());
        let keys: Vec<_> = props.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["db.host", "db.tls", "name", "port"]);
        assert_eq!(props[3].r#type.as_deref(), Some("integer"));
        assert_eq!(props[3].value.as_deref(), Some("8080"));

        let schema = json!({"type": "object", "properties": {
            "level": {"type": "string", "default": "info"},
            "limits": {"type": "object", "properties": {"cpu": {"type": "number"}}}
        }});
        let props = schema_properties(&schema);
        assert_eq!(props.len(), 2);
        assert_eq!(props[0].key, "level");
        assert_eq!(props[0].value.as_deref(), Some("info"));
        assert_eq!(props[1].key, "limits.cpu");
        assert_eq!(props[1].value, None);
        assert_eq!(props[1].r#type.as_deref(), Some("number"));
    }
}
