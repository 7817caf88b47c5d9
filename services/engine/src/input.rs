//! The engine's view of a contract (docs/design/evaluation.md#engine-inputs): only the assertions it evaluates.

use serde::{Deserialize, Serialize};

/// The declared assertions of one effective contract.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContractAssertions {
    /// `service.name`: the subject name of the workload and persistence assertions.
    pub service_name: String,
    /// `interfaces[].name`, in contract order (always required).
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// `capabilities[]`, in contract order.
    #[serde(default)]
    pub capabilities: Vec<CapabilityAssertion>,
    /// `dependencies[].{name, required}`, in contract order.
    #[serde(default)]
    pub dependencies: Vec<NamedAssertion>,
    /// `configurations[].{name, required}`, in contract order.
    #[serde(default)]
    pub configurations: Vec<NamedAssertion>,
    /// `workload` (`service`, `job`, `scheduled`); `None` or empty = undeclared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// `state.persistence.durability == "persistent"`.
    #[serde(default)]
    pub persistent: bool,
}

/// A dependency or configuration assertion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedAssertion {
    /// The declared name (the observation's `subject.name`).
    pub name: String,
    /// Whether the contract marks it required.
    pub required: bool,
}

impl NamedAssertion {
    /// Convenience constructor.
    pub fn new(name: impl Into<String>, required: bool) -> Self {
        Self {
            name: name.into(),
            required,
        }
    }
}

/// A capability assertion. Health and metrics are observed under the key `health`/`metrics`;
/// an extension is identified by its `ref` and never observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum CapabilityAssertion {
    /// `type: health`.
    Health,
    /// `type: metrics`.
    Metrics,
    /// `type: extension` with its namespaced `ref`.
    Extension {
        /// The extension's `ref` (its assertion key).
        #[serde(rename = "ref")]
        reference: String,
    },
}

/// Errors building contract input from untyped data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A capability type other than health/metrics/extension.
    #[error("{field}: unknown capability type {value:?} (expected health, metrics or extension)")]
    UnknownCapabilityType {
        /// Field path, e.g. `capabilities[2].type`.
        field: String,
        /// The rejected type.
        value: String,
    },
    /// An extension capability without a ref.
    #[error("{field}: an extension capability needs a ref")]
    MissingExtensionRef {
        /// Field path, e.g. `capabilities[2].ref`.
        field: String,
    },
}

impl CapabilityAssertion {
    /// The assertion key: `health`, `metrics` or the extension ref.
    pub fn key(&self) -> &str {
        match self {
            Self::Health => "health",
            Self::Metrics => "metrics",
            Self::Extension { reference } => reference,
        }
    }

    /// Builds from the contract's `type` and `ref` of `capabilities[index]`.
    pub fn from_type(
        index: usize,
        capability_type: &str,
        reference: Option<&str>,
    ) -> Result<Self, InputError> {
        match capability_type {
            "health" => Ok(Self::Health),
            "metrics" => Ok(Self::Metrics),
            "extension" => match reference {
                Some(r) if !r.is_empty() => Ok(Self::Extension {
                    reference: r.to_owned(),
                }),
                _ => Err(InputError::MissingExtensionRef {
                    field: format!("capabilities[{index}].ref"),
                }),
            },
            other => Err(InputError::UnknownCapabilityType {
                field: format!("capabilities[{index}].type"),
                value: other.to_owned(),
            }),
        }
    }
}

impl ContractAssertions {
    /// The declared workload type, if any (empty counts as undeclared).
    pub fn declared_workload(&self) -> Option<&str> {
        self.workload.as_deref().filter(|w| !w.is_empty())
    }

    /// The number of required assertions (what `coverage.required` will be).
    pub fn required_count(&self) -> usize {
        self.interfaces.len()
            + self.capabilities.len()
            + self.dependencies.iter().filter(|d| d.required).count()
            + self.configurations.iter().filter(|c| c.required).count()
            + usize::from(self.declared_workload().is_some())
            + usize::from(self.persistent)
    }
}
