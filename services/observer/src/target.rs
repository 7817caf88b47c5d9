//! What one Observe call is about: a Pacto's `spec.target` in its namespace (the wire `Target`,
//! validated). A leaf: it imports nothing from the crate.

use pacto_api::TargetRef;

/// What to observe (the wire `Target`, validated).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Namespace of the Pacto and its target.
    pub namespace: String,
    /// Name of the Pacto.
    pub pacto_name: String,
    /// `spec.target`.
    pub spec: TargetRef,
}

impl Target {
    /// The Service name, if set and non-empty.
    pub fn service_name(&self) -> Option<&str> {
        self.spec.service_name.as_deref().filter(|s| !s.is_empty())
    }
}
