//! Dependencies (docs/design/observation.md#dependencies): a dependency resolves to a sibling Pacto through its status,
//! then to that sibling's Service and its Ready endpoints.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use pacto_api::Pacto;
use pacto_contract::reference::Reference;
use pacto_contract::version::{Constraint, Version};
use pacto_engine::{DependencyValue, Outcome, Value};

use crate::interfaces::ready_endpoints;
use crate::verdict::{Fetched, Verdict};

/// The base of a contract reference, normalised: `oci://` stripped, default registry applied
/// (`docker.io` → `index.docker.io`), tag and digest removed. A reference the OCI parser
/// rejects falls back to upstream's textual rule (strip from the last `@`, else from the last
/// `:` after the last `/`).
pub fn reference_base(reference: &str) -> String {
    let trimmed = reference.trim();
    if let Ok(parsed) = Reference::parse(trimmed) {
        return parsed.without_version().repository_url();
    }
    let bare = trimmed.strip_prefix("oci://").unwrap_or(trimmed);
    if let Some(at) = bare.rfind('@') {
        return bare[..at].to_owned();
    }
    match (bare.rfind(':'), bare.rfind('/')) {
        (Some(colon), Some(slash)) if colon > slash => bare[..colon].to_owned(),
        (Some(colon), None) => bare[..colon].to_owned(),
        _ => bare.to_owned(),
    }
}

/// Whether `version` satisfies the dependency's compatibility range (empty = any). An
/// unparseable range or version never matches.
pub fn compatible(compatibility: &str, version: &str) -> bool {
    if compatibility.trim().is_empty() {
        return true;
    }
    match (Constraint::parse(compatibility), Version::parse(version)) {
        (Ok(constraint), Ok(version)) => constraint.matches(&version),
        _ => false,
    }
}

/// Where a dependency points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiblingMatch {
    /// No sibling Pacto: external or not Pacto-managed.
    None,
    /// More than one distinct `{namespace, serviceName}` (e.g. blue/green).
    Ambiguous,
    /// The single match is a reference-only Pacto (no serviceName).
    ReferenceOnly,
    /// The sibling's Service.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// Resolves a dependency (`ref`, `compatibility`) among the visible Pactos, excluding the
/// observed Pacto itself (`own` = namespace, name).
pub fn match_sibling(
    dependency_ref: &str,
    compatibility: &str,
    pactos: &[Pacto],
    own: (&str, &str),
) -> SiblingMatch {
    let wanted = reference_base(dependency_ref);
    let mut matches: BTreeSet<(String, String)> = BTreeSet::new();
    for pacto in pactos {
        let namespace = pacto.metadata.namespace.as_deref().unwrap_or_default();
        let name = pacto.metadata.name.as_deref().unwrap_or_default();
        if (namespace, name) == own {
            continue;
        }
        let Some(contract) = pacto.status.as_ref().and_then(|s| s.contract.as_ref()) else {
            continue;
        };
        let Some(resolved) = contract.resolved_ref.as_deref().filter(|r| !r.is_empty()) else {
            continue;
        };
        if reference_base(resolved) != wanted || !compatible(compatibility, &contract.version) {
            continue;
        }
        let service = pacto
            .spec
            .target
            .as_ref()
            .and_then(|t| t.service_name.clone())
            .unwrap_or_default();
        matches.insert((namespace.to_owned(), service));
    }
    let mut iter = matches.into_iter();
    match (iter.next(), iter.next()) {
        (None, _) => SiblingMatch::None,
        (Some(_), Some(_)) => SiblingMatch::Ambiguous,
        (Some((_, service)), None) if service.is_empty() => SiblingMatch::ReferenceOnly,
        (Some((namespace, name)), None) => SiblingMatch::Service { namespace, name },
    }
}

/// The dependency assertion after sibling resolution:
///
/// - listing Pactos failed → `Failed`; no sibling → `Unsupported`; ambiguous or reference-only
///   → `Insufficient`;
/// - sibling Service: API error → `Failed`; NotFound → a windowed negative; ExternalName →
///   `Unsupported`;
/// - Ready endpoints over all slices and ports: list error → `Failed`; 0 → a windowed
///   negative; >0 → positive.
pub fn dependency_verdict(
    sibling: &Result<SiblingMatch, crate::verdict::ApiFailure>,
    service: &Fetched<Service>,
    slices: &Fetched<Vec<EndpointSlice>>,
) -> Verdict {
    let unreachable = || Value::Dependency(DependencyValue { reachable: false });
    match sibling {
        Err(_) => return Verdict::failed(),
        Ok(SiblingMatch::None) => return Verdict::unsupported(),
        Ok(SiblingMatch::Ambiguous | SiblingMatch::ReferenceOnly) => {
            return Verdict::insufficient();
        }
        Ok(SiblingMatch::Service { .. }) => {}
    }
    let service = match service {
        Err(_) => return Verdict::failed(),
        Ok(None) => return Verdict::Negative(unreachable()),
        Ok(Some(s)) => s,
    };
    if service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
        return Verdict::unsupported();
    }
    let ready = match slices {
        Err(_) => return Verdict::failed(),
        Ok(None) => 0,
        Ok(Some(slices)) => ready_endpoints(slices),
    };
    if ready == 0 {
        Verdict::Negative(unreachable())
    } else {
        Verdict::Clear(Outcome::Observed(Value::Dependency(DependencyValue {
            reachable: true,
        })))
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::type_complexity,
        reason = "table-driven tests: each row is a tuple of inputs and the expected verdict"
    )]

    use k8s_openapi::api::core::v1::ServiceSpec;
    use pacto_api::ContractRef;
    use pacto_api::testing::PactoBuilder;

    use super::*;
    use crate::interfaces::fixtures::{service, slice};
    use crate::verdict::ApiFailure;

    fn sibling(
        ns: &str,
        name: &str,
        service: Option<&str>,
        resolved: &str,
        version: &str,
    ) -> Pacto {
        let builder = PactoBuilder::new(name, ContractRef::default())
            .namespace(ns)
            .resolved(name, version, resolved);
        match service {
            Some(s) => builder.service(s),
            None => builder,
        }
        .build()
    }

    #[test]
    fn reference_base_table() {
        let cases = [
            ("oci://ghcr.io/acme/db:1.2.3", "ghcr.io/acme/db"),
            (
                "ghcr.io/acme/db@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "ghcr.io/acme/db",
            ),
            ("localhost:5000/acme/db:2.0.0", "localhost:5000/acme/db"),
            ("docker.io/acme/db:1.0.0", "index.docker.io/acme/db"),
            ("ghcr.io/acme/db", "ghcr.io/acme/db"),
        ];
        for (input, want) in cases {
            assert_eq!(reference_base(input), want, "{input}");
        }
        assert_eq!(
            reference_base("oci://docker.io/acme/db"),
            reference_base("index.docker.io/acme/db:3")
        );
    }

    #[test]
    fn compatibility_table() {
        let cases = [
            ("", "1.0.0", true),
            ("^1.2.0", "1.9.0", true),
            ("^1.2.0", "2.0.0", false),
            ("~1.2.0", "1.2.9", true),
            ("~1.2.0", "1.3.0", false),
            ("1.x", "1.4.0", true),
            ("1.2.3", "1.2.3", true),
            ("not a range", "1.0.0", false),
            ("^1.0.0", "garbage", false),
        ];
        for (range, version, want) in cases {
            assert_eq!(compatible(range, version), want, "{range} {version}");
        }
    }

    #[test]
    fn sibling_matching_table() {
        let own = ("team", "orders");
        let db = sibling(
            "team",
            "db",
            Some("db-svc"),
            "ghcr.io/acme/db:1.4.0",
            "1.4.0",
        );
        let db_blue = sibling(
            "blue",
            "db",
            Some("db-svc"),
            "ghcr.io/acme/db:1.4.0",
            "1.4.0",
        );
        let db_ref_only = sibling("team", "db", None, "ghcr.io/acme/db:1.4.0", "1.4.0");
        let db_old = sibling(
            "old",
            "db",
            Some("db-svc"),
            "ghcr.io/acme/db:0.9.0",
            "0.9.0",
        );
        let myself = sibling(
            "team",
            "orders",
            Some("orders"),
            "ghcr.io/acme/db:1.4.0",
            "1.4.0",
        );
        let mut no_status = db.clone();
        no_status.status = None;
        let svc = |ns: &str, n: &str| SiblingMatch::Service {
            namespace: ns.into(),
            name: n.into(),
        };
        let cases: Vec<(&str, &str, &str, Vec<Pacto>, SiblingMatch)> = vec![
            (
                "none",
                "oci://ghcr.io/acme/db",
                "",
                vec![],
                SiblingMatch::None,
            ),
            (
                "one, oci:// and tag normalised",
                "oci://ghcr.io/acme/db:1.0.0",
                "^1.0.0",
                vec![db.clone(), db_old.clone()],
                svc("team", "db-svc"),
            ),
            (
                "incompatible excluded",
                "ghcr.io/acme/db",
                "^2.0.0",
                vec![db.clone()],
                SiblingMatch::None,
            ),
            (
                "ambiguous",
                "ghcr.io/acme/db",
                "",
                vec![db.clone(), db_blue],
                SiblingMatch::Ambiguous,
            ),
            (
                "reference-only",
                "ghcr.io/acme/db",
                "",
                vec![db_ref_only],
                SiblingMatch::ReferenceOnly,
            ),
            (
                "self excluded",
                "ghcr.io/acme/db",
                "^1.0.0",
                vec![myself],
                SiblingMatch::None,
            ),
            (
                "no status skipped",
                "ghcr.io/acme/db",
                "",
                vec![no_status],
                SiblingMatch::None,
            ),
            (
                "other repository",
                "ghcr.io/acme/cache",
                "",
                vec![db],
                SiblingMatch::None,
            ),
        ];
        for (name, reference, range, pactos, want) in cases {
            assert_eq!(
                match_sibling(reference, range, &pactos, own),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn dependency_table() {
        let matched = Ok(SiblingMatch::Service {
            namespace: "team".into(),
            name: "db".into(),
        });
        let svc = service(vec![]);
        let external = Service {
            spec: Some(ServiceSpec {
                type_: Some("ExternalName".into()),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        let ready = vec![slice(&[(Some("pg"), 5432)], &[Some(true)])];
        let unready = vec![slice(&[(Some("pg"), 5432)], &[Some(false)])];
        let reachable = |r| Value::Dependency(DependencyValue { reachable: r });
        let err = || ApiFailure::new("boom");
        let cases: Vec<(
            &str,
            Result<SiblingMatch, ApiFailure>,
            Fetched<Service>,
            Fetched<Vec<EndpointSlice>>,
            Verdict,
        )> = vec![
            (
                "list failed",
                Err(err()),
                Ok(None),
                Ok(None),
                Verdict::failed(),
            ),
            (
                "no sibling",
                Ok(SiblingMatch::None),
                Ok(None),
                Ok(None),
                Verdict::unsupported(),
            ),
            (
                "ambiguous",
                Ok(SiblingMatch::Ambiguous),
                Ok(None),
                Ok(None),
                Verdict::insufficient(),
            ),
            (
                "reference-only",
                Ok(SiblingMatch::ReferenceOnly),
                Ok(None),
                Ok(None),
                Verdict::insufficient(),
            ),
            (
                "service api error",
                matched.clone(),
                Err(err()),
                Ok(None),
                Verdict::failed(),
            ),
            (
                "service not found",
                matched.clone(),
                Ok(None),
                Ok(None),
                Verdict::Negative(reachable(false)),
            ),
            (
                "external name",
                matched.clone(),
                Ok(Some(external)),
                Ok(Some(ready.clone())),
                Verdict::unsupported(),
            ),
            (
                "slices api error",
                matched.clone(),
                Ok(Some(svc.clone())),
                Err(err()),
                Verdict::failed(),
            ),
            (
                "no ready",
                matched.clone(),
                Ok(Some(svc.clone())),
                Ok(Some(unready)),
                Verdict::Negative(reachable(false)),
            ),
            (
                "ready",
                matched,
                Ok(Some(svc)),
                Ok(Some(ready)),
                Verdict::Clear(Outcome::Observed(reachable(true))),
            ),
        ];
        for (name, sibling, service, slices, want) in cases {
            assert_eq!(
                dependency_verdict(&sibling, &service, &slices),
                want,
                "{name}"
            );
        }
    }
}
