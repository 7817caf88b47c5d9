//! The typed 2.0 contract model (serde).
//!
//! The model is deliberately tolerant: unknown keys are ignored (layer 1 reports them), and
//! enum-like fields are kept as strings so that layer 2 can be run on its own over values the
//! schema would reject (docs/design/contract.md#layer-2). Helper accessors interpret them.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// The only `pactoVersion` this crate consumes.
pub const SUPPORTED_PACTO_VERSION: &str = "2.0";

/// A `pacto.yaml` 2.0 contract.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Contract {
    #[serde(default)]
    pub pacto_version: String,
    #[serde(default)]
    pub service: Service,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configurations: Vec<Configuration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<Dependency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<Capability>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<Policy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Readiness>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Map<String, Value>>,
}

impl Contract {
    /// The parsed workload kind, if declared and known.
    pub fn workload_kind(&self) -> Option<Workload> {
        self.workload.as_deref().and_then(Workload::parse)
    }

    /// A contract with no workload is a *reference* contract (docs/design/contract.md#reference-contracts).
    pub fn is_reference(&self) -> bool {
        self.workload.is_none()
    }

    /// The interface with this name.
    pub fn interface(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// The configuration with this name.
    pub fn configuration(&self, name: &str) -> Option<&Configuration> {
        self.configurations.iter().find(|c| c.name == name)
    }
}

/// `service`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Service {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

/// `service.owner`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Owner {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dri: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contacts: Vec<Contact>,
}

impl Owner {
    /// The display and aggregation key: `team` if set, else `dri`.
    pub fn key(&self) -> Option<&str> {
        self.team
            .as_deref()
            .filter(|t| !t.is_empty())
            .or(self.dri.as_deref().filter(|d| !d.is_empty()))
    }
}

/// `service.owner.contacts[]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Contact {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
}

/// `interfaces[]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Interface {
    #[serde(default)]
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(rename = "ref", default)]
    pub reference: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<String>,
}

impl Interface {
    /// The parsed interface type, if known.
    pub fn interface_type(&self) -> Option<InterfaceType> {
        InterfaceType::parse(&self.kind)
    }
}

/// Interface types of 2.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InterfaceType {
    OpenApi,
    AsyncApi,
    Grpc,
}

impl InterfaceType {
    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "openapi" => Some(Self::OpenApi),
            "asyncapi" => Some(Self::AsyncApi),
            "grpc" => Some(Self::Grpc),
            _ => None,
        }
    }
}

/// `configurations[]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Configuration {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Map<String, Value>>,
}

/// `policies[]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Policy {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// `dependencies[]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Dependency {
    #[serde(default)]
    pub name: String,
    #[serde(rename = "ref", default)]
    pub reference: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub compatibility: String,
}

/// Workload kinds (`workload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    Service,
    Job,
    Scheduled,
}

impl Workload {
    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "service" => Some(Self::Service),
            "job" => Some(Self::Job),
            "scheduled" => Some(Self::Scheduled),
            _ => None,
        }
    }
}

/// `state`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub persistence: Persistence,
    #[serde(default)]
    pub data_criticality: String,
}

/// `state.persistence`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Persistence {
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub durability: String,
}

/// `capabilities[]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Capability {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<Binding>,
}

impl Capability {
    /// The assertion key: `ref` for `extension`, else `type` (docs/design/contract.md#capabilities-and-assertion-keys).
    pub fn assertion_key(&self) -> &str {
        if self.kind == "extension" {
            self.reference.as_deref().unwrap_or("")
        } else {
            &self.kind
        }
    }
}

/// `capabilities[].binding`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Binding {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub interface: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `readiness` (2.0 claim model).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    #[serde(default)]
    pub expires: String,
    #[serde(
        default,
        deserialize_with = "opt_integral",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_score: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_credit: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Revision>,
    #[serde(default)]
    pub claims: Vec<Claim>,
}

/// `readiness.history[]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Revision {
    #[serde(default)]
    pub date: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub author: String,
    #[serde(default)]
    pub description: String,
}

/// `readiness.claims[]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Claim {
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub evidence: String,
    #[serde(default, deserialize_with = "integral")]
    pub weight: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Claim {
    /// The parsed status; unknown spellings are `None` (scored as not-done).
    pub fn claim_status(&self) -> Option<ClaimStatus> {
        ClaimStatus::parse(&self.status)
    }
}

/// Claim statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimStatus {
    Done,
    Partial,
    NotDone,
    Deferred,
}

impl ClaimStatus {
    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "done" => Some(Self::Done),
            "partial" => Some(Self::Partial),
            "not-done" => Some(Self::NotDone),
            "deferred" => Some(Self::Deferred),
            _ => None,
        }
    }
}

/// JSON Schema `integer` accepts integral floats (`10.0`); accept them here too.
fn integral<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    number_to_i64(&n).ok_or_else(|| serde::de::Error::custom(format!("{n} is not an integer")))
}

fn opt_integral<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let n: Option<serde_json::Number> = Option::deserialize(d)?;
    n.map(|n| {
        number_to_i64(&n).ok_or_else(|| serde::de::Error::custom(format!("{n} is not an integer")))
    })
    .transpose()
}

fn number_to_i64(n: &serde_json::Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?;
    // i64::MAX as f64 rounds up to 2^63, so the upper bound is exclusive.
    let bound = 2f64.powi(63);
    if f.fract() == 0.0 && (-bound..bound).contains(&f) {
        Some(f as i64)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerant_of_unknown_keys_and_integral_floats() {
        let v = serde_json::json!({
            "pactoVersion": "2.0",
            "service": {"name": "a", "version": "1.0.0", "extra": 1},
            "runtime": {"workload": "service"},
            "readiness": {"expires": "2027-01-01", "minScore": 50.0,
                "claims": [{"id": "x", "type": "url", "status": "done", "evidence": "e", "weight": 10.0}]}
        });
        let c: Contract = serde_json::from_value(v).unwrap();
        assert_eq!(c.service.name, "a");
        let r = c.readiness.unwrap();
        assert_eq!(r.min_score, Some(50));
        assert_eq!(r.claims[0].weight, 10);
        assert!(c.workload.is_none());
    }

    #[test]
    fn non_integral_weight_is_an_error() {
        let v = serde_json::json!({"expires": "x", "claims": [{"weight": 1.5}]});
        assert!(serde_json::from_value::<Readiness>(v).is_err());
    }

    #[test]
    fn owner_key_and_assertion_key() {
        let o = Owner {
            team: None,
            dri: Some("j.doe".into()),
            contacts: vec![],
        };
        assert_eq!(o.key(), Some("j.doe"));
        let c = Capability {
            kind: "extension".into(),
            reference: Some("example.com/x".into()),
            binding: None,
        };
        assert_eq!(c.assertion_key(), "example.com/x");
        let h = Capability {
            kind: "health".into(),
            ..Capability::default()
        };
        assert_eq!(h.assertion_key(), "health");
    }
}
