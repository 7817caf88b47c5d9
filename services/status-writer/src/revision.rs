//! PactoRevision naming, labels and objects (docs/design/status.md#pactorevision), and the
//! TagOverwritten message of the revision mirror. Pure functions; the API calls live in
//! [`crate::reconcile::revisions`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use pacto_api::labels::{GROUP, LABEL_PACTO, LABEL_VERSION, VERSION};
use pacto_api::{PactoRevision, PactoRevisionSpec, PactoRevisionStatus, RevisionSource};

/// Maximum length of a DNS-1123 subdomain (object names).
const MAX_NAME: usize = 253;
/// Maximum length of a label value.
const MAX_LABEL: usize = 63;
/// Length of the short hash in revision names.
const SHORT_HASH: usize = 7;
/// Digest prefix length in TagOverwritten messages (`sha256:xxxxx`).
const DIGEST_PREFIX: usize = 12;

/// `service.version`, or `unknown` when the contract has none.
pub fn revision_version(version: &str) -> &str {
    if version.is_empty() {
        "unknown"
    } else {
        version
    }
}

/// `<pactoName>-<version with "." → "-">-<hash[:7]>`, sanitised to a DNS-1123 subdomain:
/// lowercase, every other invalid character → `-`, at most 253 characters, trimmed to start and
/// end alphanumeric.
pub fn revision_name(pacto: &str, version: &str, hash: &str) -> String {
    let short: String = hash.chars().take(SHORT_HASH).collect();
    let raw = format!(
        "{pacto}-{}-{short}",
        revision_version(version).replace('.', "-")
    );
    let sanitised: String = raw
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_NAME)
        .collect();
    sanitised
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// A label value: `[A-Za-z0-9._-]` (others → `_`), at most 63 characters, starting and ending
/// alphanumeric (empty when nothing alphanumeric remains).
pub fn label_value(value: &str) -> String {
    let sanitised: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_LABEL)
        .collect();
    sanitised
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// What a new revision records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionInput<'a> {
    /// The Pacto's name.
    pub pacto_name: &'a str,
    /// The Pacto's namespace.
    pub namespace: &'a str,
    /// The Pacto's UID (owner reference).
    pub pacto_uid: &'a str,
    /// `service.version`.
    pub version: &'a str,
    /// `service.name`.
    pub service_name: &'a str,
    /// SHA-256 hex of the original contract bytes.
    pub hash: &'a str,
    /// The resolved OCI reference (no `oci://`), if any.
    pub resolved_ref: Option<&'a str>,
    /// The manifest digest, if any.
    pub digest: Option<&'a str>,
    /// `spec.contractRef.oci`, used when there is no resolved reference.
    pub spec_oci: Option<&'a str>,
    /// The contract was given inline.
    pub inline: bool,
}

/// The revision object to create (spec, labels, controller owner reference).
pub fn revision_object(input: &RevisionInput<'_>) -> PactoRevision {
    let version = revision_version(input.version);
    let name = revision_name(input.pacto_name, version, input.hash);
    let source = if input.inline {
        RevisionSource {
            inline: Some(true),
            ..RevisionSource::default()
        }
    } else {
        RevisionSource {
            oci: input
                .resolved_ref
                .filter(|r| !r.is_empty())
                .or(input.spec_oci)
                .map(|r| r.trim_start_matches("oci://").to_owned()),
            digest: input.digest.filter(|d| !d.is_empty()).map(str::to_owned),
            inline: None,
        }
    };
    let labels = BTreeMap::from([
        (LABEL_PACTO.to_owned(), label_value(input.pacto_name)),
        (LABEL_VERSION.to_owned(), label_value(version)),
    ]);
    let mut revision = PactoRevision::new(
        &name,
        PactoRevisionSpec {
            version: version.to_owned(),
            source,
            pacto_ref: input.pacto_name.to_owned(),
            service_name: (!input.service_name.is_empty()).then(|| input.service_name.to_owned()),
        },
    );
    revision.metadata = ObjectMeta {
        name: Some(name),
        namespace: Some(input.namespace.to_owned()),
        labels: Some(labels),
        owner_references: Some(vec![OwnerReference {
            api_version: format!("{GROUP}/{VERSION}"),
            kind: "Pacto".to_owned(),
            name: input.pacto_name.to_owned(),
            uid: input.pacto_uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    };
    revision
}

/// The status of a freshly recorded revision.
pub fn resolved_status(hash: &str, now: &Time) -> PactoRevisionStatus {
    PactoRevisionStatus {
        resolved: true,
        contract_hash: Some(hash.to_owned()),
        created_at: Some(now.clone()),
        ..PactoRevisionStatus::default()
    }
}

/// Whether an existing revision's status lacks what [`resolved_status`] records (backfill).
pub fn needs_backfill(status: Option<&PactoRevisionStatus>) -> bool {
    status.is_none_or(|s| !s.resolved || s.contract_hash.is_none() || s.created_at.is_none())
}

/// `Created revision <name> for contract v<version>`.
pub fn revision_created_message(name: &str, version: &str) -> String {
    format!("Created revision {name} for contract v{version}")
}

/// `Tag <tag> was force-pushed (digest changed from <old12> to <new12>)`.
pub fn tag_overwritten_message(tag: &str, old: &str, new: &str) -> String {
    let prefix = |d: &str| d.chars().take(DIGEST_PREFIX).collect::<String>();
    format!(
        "Tag {tag} was force-pushed (digest changed from {} to {})",
        prefix(old),
        prefix(new)
    )
}

/// `Revision mirror failed for <ref>: <err>`.
pub fn mirror_failure_message(reference: &str, error: &str) -> String {
    format!("Revision mirror failed for {reference}: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_dns_subdomains() {
        let hash = "abcdef0123456789";
        assert_eq!(
            revision_name("orders", "1.2.0", hash),
            "orders-1-2-0-abcdef0"
        );
        assert_eq!(revision_name("orders", "", hash), "orders-unknown-abcdef0");
        assert_eq!(
            revision_name("orders", "1.2.0+Build_7", hash),
            "orders-1-2-0-build-7-abcdef0"
        );
        let long = "a".repeat(300);
        let name = revision_name(&long, "1.0.0", hash);
        assert_eq!(name.len(), 253);
        assert!(name.chars().all(|c| c == 'a'));
        // Truncation that ends on a separator is trimmed.
        let pacto = "b".repeat(252);
        let name = revision_name(&pacto, "1", hash);
        assert_eq!(name, "b".repeat(252));
    }

    #[test]
    fn label_values_are_sanitised() {
        assert_eq!(label_value("1.2.0"), "1.2.0");
        assert_eq!(label_value("1.2.0+build"), "1.2.0_build");
        assert_eq!(label_value("+1.0+"), "1.0");
        assert_eq!(label_value(&"9".repeat(80)).len(), 63);
        assert_eq!(label_value("++"), "");
    }

    #[test]
    fn objects_carry_labels_owner_and_source() {
        let input = RevisionInput {
            pacto_name: "orders",
            namespace: "shop",
            pacto_uid: "uid-1",
            version: "1.2.0",
            service_name: "orders",
            hash: "0123456789abcdef",
            resolved_ref: Some("reg.local/orders:1.2.0"),
            digest: Some("sha256:feed"),
            spec_oci: Some("oci://reg.local/orders"),
            inline: false,
        };
        let rev = revision_object(&input);
        assert_eq!(rev.metadata.name.as_deref(), Some("orders-1-2-0-0123456"));
        let labels = rev.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[LABEL_PACTO], "orders");
        assert_eq!(labels[LABEL_VERSION], "1.2.0");
        let owner = &rev.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.kind, "Pacto");
        assert_eq!(owner.uid, "uid-1");
        assert_eq!(owner.controller, Some(true));
        assert_eq!(
            rev.spec.source.oci.as_deref(),
            Some("reg.local/orders:1.2.0")
        );
        assert_eq!(rev.spec.source.digest.as_deref(), Some("sha256:feed"));
        assert_eq!(rev.spec.pacto_ref, "orders");

        let rev = revision_object(&RevisionInput {
            resolved_ref: None,
            digest: None,
            ..input.clone()
        });
        assert_eq!(rev.spec.source.oci.as_deref(), Some("reg.local/orders"));
        let rev = revision_object(&RevisionInput {
            inline: true,
            ..input
        });
        assert_eq!(rev.spec.source.inline, Some(true));
        assert_eq!(rev.spec.source.oci, None);
    }

    #[test]
    fn messages() {
        assert_eq!(
            revision_created_message("orders-1-2-0-0123456", "1.2.0"),
            "Created revision orders-1-2-0-0123456 for contract v1.2.0"
        );
        assert_eq!(
            tag_overwritten_message("1.2.0", "sha256:aaaaaaaaaaaa", "sha256:bbbbbbbbbbbbbb"),
            "Tag 1.2.0 was force-pushed (digest changed from sha256:aaaaa to sha256:bbbbb)"
        );
        assert!(needs_backfill(None));
        assert!(!needs_backfill(Some(&resolved_status(
            "h",
            &Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
        ))));
    }
}
