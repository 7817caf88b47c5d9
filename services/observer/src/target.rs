//! What one Observe call is about: a Pacto's `spec.target` in its namespace (the wire `Target`,
//! validated). A leaf: it imports nothing from the crate.

use pacto_api::{TargetRef, WorkloadKind};

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

    /// `ResolvedWorkload()`: the workloadRef (empty kind ⇒ Deployment), else the Service name
    /// as a Deployment.
    pub fn resolved_workload(&self) -> Option<(String, WorkloadKind)> {
        if let Some(w) = &self.spec.workload_ref {
            return Some((w.name.clone(), w.kind.unwrap_or(WorkloadKind::Deployment)))
                .filter(|(n, _)| !n.is_empty());
        }
        self.service_name()
            .map(|s| (s.to_owned(), WorkloadKind::Deployment))
    }

    /// `WorkloadExplicit`: a workloadRef with a name and an explicit kind.
    pub fn workload_explicit(&self) -> bool {
        self.spec
            .workload_ref
            .as_ref()
            .is_some_and(|w| !w.name.is_empty() && w.kind.is_some())
    }
}
