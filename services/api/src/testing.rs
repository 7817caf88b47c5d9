//! Test support (feature `test-support`): [`PactoBuilder`], the one way the tests, benches and
//! the end-to-end suite build a Pacto, as a typed object or as the manifest `kubectl apply`
//! reads.

use std::collections::BTreeMap;

use crate::{
    ContractInfo, ContractOverrides, ContractRef, Pacto, PactoSpec, PactoStatus, TargetRef,
};

/// A Pacto under construction. Starts from its contract ([`inline`](Self::inline),
/// [`oci`](Self::oci), [`new`](Self::new) or a whole [`spec`](Self::spec)); nothing else is set
/// unless asked for (no target: a reference-only Pacto; no `checkIntervalSeconds`: the
/// server's default).
#[derive(Debug, Clone)]
#[must_use]
pub struct PactoBuilder {
    name: String,
    namespace: Option<String>,
    spec: PactoSpec,
    labels: BTreeMap<String, String>,
    status: Option<PactoStatus>,
}

impl PactoBuilder {
    /// A Pacto `name` whose contract comes from `contract_ref`.
    pub fn new(name: &str, contract_ref: ContractRef) -> Self {
        Self::spec(
            name,
            PactoSpec {
                contract_ref,
                target: None,
                overrides: None,
                check_interval_seconds: None,
            },
        )
    }

    /// A Pacto `name` with the whole `spec` given.
    pub fn spec(name: &str, spec: PactoSpec) -> Self {
        Self {
            name: name.to_owned(),
            namespace: None,
            spec,
            labels: BTreeMap::new(),
            status: None,
        }
    }

    /// A Pacto `name` whose contract is the inline YAML `contract`.
    pub fn inline(name: &str, contract: &str) -> Self {
        Self::new(
            name,
            ContractRef {
                inline: Some(contract.to_owned()),
                ..ContractRef::default()
            },
        )
    }

    /// A Pacto `name` whose contract is the OCI reference `reference` (`oci://…`).
    pub fn oci(name: &str, reference: &str) -> Self {
        Self::new(
            name,
            ContractRef {
                oci: Some(reference.to_owned()),
                ..ContractRef::default()
            },
        )
    }

    /// Targets the Service `service` (`spec.target.serviceName`, nothing else).
    pub fn service(self, service: &str) -> Self {
        self.target(TargetRef {
            service_name: Some(service.to_owned()),
            ..TargetRef::default()
        })
    }

    /// Sets `spec.target`.
    pub fn target(mut self, target: TargetRef) -> Self {
        self.spec.target = Some(target);
        self
    }

    /// Sets `spec.overrides`.
    pub fn overrides(mut self, overrides: ContractOverrides) -> Self {
        self.spec.overrides = Some(overrides);
        self
    }

    /// Sets `spec.checkIntervalSeconds`.
    pub fn check_interval(mut self, seconds: i32) -> Self {
        self.spec.check_interval_seconds = Some(seconds);
        self
    }

    /// Adds the label `key: value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets `metadata.namespace` (for objects that never go through an API, e.g. a cache's
    /// content in a unit test).
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// Sets `status.contract` as the status-writer writes it once the contract `version` of
    /// service `service_name` resolved to `resolved_ref` (what sibling lookups read).
    pub fn resolved(mut self, service_name: &str, version: &str, resolved_ref: &str) -> Self {
        self.status = Some(PactoStatus {
            contract: Some(ContractInfo {
                service_name: service_name.to_owned(),
                version: version.to_owned(),
                owner: None,
                owner_display: None,
                resolved_ref: Some(resolved_ref.to_owned()),
            }),
            ..PactoStatus::default()
        });
        self
    }

    /// The typed Pacto (no namespace unless [`namespace`](Self::namespace) set one: the API it
    /// is created through sets it).
    pub fn build(self) -> Pacto {
        let mut pacto = Pacto::new(&self.name, self.spec);
        pacto.metadata.namespace = self.namespace;
        if !self.labels.is_empty() {
            pacto.metadata.labels = Some(self.labels);
        }
        pacto.status = self.status;
        pacto
    }

    /// The Pacto as a YAML manifest (`apiVersion`, `kind`, `metadata`, `spec`), as
    /// `kubectl apply -f -` reads it.
    pub fn manifest(self) -> String {
        serde_norway::to_string(&self.build()).expect("a Pacto always renders as YAML")
    }
}

/// Applies `pacto` as `kubectl apply --server-side` would (field manager `kubectl`), then `status`
/// (the JSON of the status fields) as the status-writer does (`pacto-status-writer`), and returns
/// the API server's copy, asserted to carry a managed-fields entry per writer: a test that checks
/// a cache drops the managed fields starts from an object that really has them.
pub async fn apply_as_two_managers(
    api: &kube::Api<Pacto>,
    pacto: &Pacto,
    status: serde_json::Value,
) -> Result<Pacto, kube::Error> {
    use kube::api::{Patch, PatchParams};

    let name = pacto.metadata.name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply("kubectl").force(),
        &Patch::Apply(pacto),
    )
    .await?;
    api.patch_status(
        &name,
        &PatchParams::apply("pacto-status-writer").force(),
        &Patch::Apply(serde_json::json!({
            "apiVersion": "pacto.trianalab.io/v1alpha1",
            "kind": "Pacto",
            "status": status,
        })),
    )
    .await?;
    let served = api.get(&name).await?;
    assert!(
        served
            .metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| m.len() >= 2),
        "the API server keeps a managed-fields entry per writer: {:?}",
        served.metadata.managed_fields
    );
    Ok(served)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConfigBinding, ConfigBindingKind};

    #[test]
    fn sets_only_what_is_asked_for() {
        let pacto = PactoBuilder::inline("orders", "pactoVersion: \"2.0\"\n").build();
        assert_eq!(pacto.metadata.name.as_deref(), Some("orders"));
        assert_eq!(pacto.metadata.labels, None);
        assert_eq!(
            pacto.spec.contract_ref.inline.as_deref(),
            Some("pactoVersion: \"2.0\"\n")
        );
        assert!(pacto.spec.is_reference());
        assert_eq!(pacto.spec.check_interval_seconds, None);
        assert!(pacto.status.is_none());
    }

    #[test]
    fn a_cached_sibling_has_its_namespace_and_resolved_contract() {
        let pacto = PactoBuilder::oci("db", "oci://reg.local/db")
            .namespace("team")
            .resolved("db", "1.4.0", "reg.local/db:1.4.0")
            .build();
        assert_eq!(pacto.metadata.namespace.as_deref(), Some("team"));
        let contract = pacto
            .status
            .and_then(|s| s.contract)
            .expect("status.contract");
        assert_eq!(contract.service_name, "db");
        assert_eq!(contract.version, "1.4.0");
        assert_eq!(contract.resolved_ref.as_deref(), Some("reg.local/db:1.4.0"));
    }

    #[test]
    fn the_manifest_reads_back_as_the_same_pacto() {
        let builder = PactoBuilder::oci("api", "oci://reg.local/api:1.0.0")
            .target(TargetRef {
                service_name: Some("api".into()),
                config_bindings: vec![ConfigBinding {
                    configuration: "app".into(),
                    kind: ConfigBindingKind::ConfigMap,
                    name: "api-config".into(),
                    key: Some("config.json".into()),
                    format: None,
                }],
                ..TargetRef::default()
            })
            .check_interval(30)
            .label("app", "api");
        let manifest = builder.clone().manifest();
        assert!(manifest.contains("kind: Pacto"), "{manifest}");
        assert!(!manifest.contains("status"), "{manifest}");
        let read: Pacto = serde_norway::from_str(&manifest).unwrap();
        let built = builder.build();
        assert_eq!(read.metadata, built.metadata);
        assert_eq!(
            serde_json::to_value(&read.spec).unwrap(),
            serde_json::to_value(&built.spec).unwrap()
        );
    }
}
