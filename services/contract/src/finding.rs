//! A validation finding and the layer that produced it: the leaf types that every validation
//! layer (schema, rules, policy) emits and the validation pipeline collects.

use std::fmt;

use serde::Serialize;

use crate::codes::{self, Category, Severity};

/// The validation layer that produced a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// Loading/parsing the document (CLI-level `PARSE_ERROR`).
    Load,
    /// Layer 1: YAML parse, version selection, JSON Schema.
    Structural,
    /// Layer 2: cross-field rules and bundle file checks.
    CrossField,
    /// Layer 3: policy resolution and enforcement.
    Policy,
}

impl Layer {
    /// A short human label (used by the CLI to group output).
    pub fn label(self) -> &'static str {
        match self {
            Self::Load => "load",
            Self::Structural => "structural",
            Self::CrossField => "cross-field",
            Self::Policy => "policy",
        }
    }

    /// The layer number of docs/design/contract.md#validation-pipeline (0 for loading).
    pub fn number(self) -> u8 {
        match self {
            Self::Load => 0,
            Self::Structural => 1,
            Self::CrossField => 2,
            Self::Policy => 3,
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One validation finding. Serialises to exactly `{"code","path","message"}`; severity,
/// category and layer are available on the struct (see [`Finding::detailed`] for a JSON form
/// that carries them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: String,
    pub path: String,
    pub message: String,
    #[serde(skip)]
    pub severity: Severity,
    #[serde(skip)]
    pub category: Category,
    #[serde(skip)]
    pub layer: Layer,
}

impl Finding {
    /// A finding whose severity and category come from the registry (docs/design/contract.md#finding-codes).
    pub fn new(
        code: &str,
        path: impl Into<String>,
        message: impl Into<String>,
        layer: Layer,
    ) -> Self {
        let (category, severity) = codes::lookup(code);
        Self {
            code: code.to_owned(),
            path: path.into(),
            message: message.into(),
            severity,
            category,
            layer,
        }
    }

    /// The same finding with another severity.
    #[must_use]
    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }

    /// A serialisable view with every field.
    pub fn detailed(&self) -> DetailedFinding<'_> {
        DetailedFinding {
            code: &self.code,
            path: &self.path,
            message: &self.message,
            severity: self.severity,
            category: self.category,
            layer: self.layer.number(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "[{}] {}", self.code, self.message)
        } else {
            write!(f, "[{}] {}: {}", self.code, self.path, self.message)
        }
    }
}

/// Every field of a [`Finding`], for detailed JSON output.
#[derive(Debug, Clone, Serialize)]
pub struct DetailedFinding<'a> {
    pub code: &'a str,
    pub path: &'a str,
    pub message: &'a str,
    pub severity: Severity,
    pub category: Category,
    pub layer: u8,
}
