//! PactoRevision naming, labels and objects (docs/design/status.md#pactorevision), the tag
//! tracking behind TagOverwritten (docs/design/status.md#tag-overwrites) and the event messages.
//! Pure functions; the API calls live in [`crate::reconcile::revisions`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use pacto_api::labels::{GROUP, LABEL_PACTO, LABEL_VERSION, VERSION};
use pacto_api::{Pacto, PactoRevision, PactoRevisionSpec, PactoRevisionStatus, RevisionSource};
use sha2::{Digest, Sha256};

/// Maximum length of a DNS-1123 subdomain (object names).
const MAX_NAME: usize = 253;
/// Maximum length of a label value.
const MAX_LABEL: usize = 63;
/// Length of the short hash in revision names.
const SHORT_HASH: usize = 7;
/// Length of the name hash in a shortened `pacto.trianalab.io/pacto` label value.
const PACTO_LABEL_HASH: usize = 10;
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

/// `<pactoName>-<version with "." → "-">-<hash[:7]>`, a DNS-1123 subdomain
/// (docs/design/status.md#revision-names-and-labels): the human part `<pactoName>-<version>` is
/// lowercased, every other invalid character → `-`, and trimmed to alphanumeric ends; the
/// `-<hash[:7]>` suffix is always kept. When the whole would exceed 253 characters, the human part
/// is cut and followed by `-<sha256(human part)[:7]>`, so names that share a long prefix stay
/// distinct.
pub fn revision_name(pacto: &str, version: &str, hash: &str) -> String {
    let short: String = hash
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(SHORT_HASH)
        .collect();
    let human = trim_ends(&sanitise_name(&format!(
        "{pacto}-{}",
        revision_version(version).replace('.', "-")
    )))
    .to_owned();
    // Room for the human part: the name minus `-<short>`.
    let room = MAX_NAME - short.len() - usize::from(!short.is_empty());
    let human = if human.len() <= room {
        human
    } else {
        let tail = short_sha256(&human, SHORT_HASH);
        // `human` is ASCII after sanitising, so byte slicing is on character boundaries.
        let kept = trim_ends(&human[..room - tail.len() - 1]);
        if kept.is_empty() {
            tail
        } else {
            format!("{kept}-{tail}")
        }
    };
    match (human.is_empty(), short.is_empty()) {
        (_, true) => human,
        (true, false) => short,
        (false, false) => format!("{human}-{short}"),
    }
}

/// Lowercase; every character outside `[a-z0-9.-]` → `-`.
fn sanitise_name(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// `text` without non-alphanumeric characters at either end.
fn trim_ends(text: &str) -> &str {
    text.trim_matches(|c: char| !c.is_ascii_alphanumeric())
}

/// The first `len` hex digits of the SHA-256 of `text`.
fn short_sha256(text: &str, len: usize) -> String {
    let mut hex = hex::encode(Sha256::digest(text.as_bytes()));
    hex.truncate(len);
    hex
}

/// The value of the `pacto.trianalab.io/pacto` label of the revisions of Pacto `pacto`
/// (docs/design/status.md#revision-names-and-labels): the name itself when it fits a label value
/// (63 characters), else its first 52 characters (trimmed to an alphanumeric end) followed by
/// `-<sha256(name)[:10]>`. Revisions and their lookups use the same value; the lookups keep only
/// revisions whose `spec.pactoRef` is the exact name.
pub fn pacto_label(pacto: &str) -> String {
    if pacto.len() <= MAX_LABEL {
        return label_value(pacto);
    }
    let tail = short_sha256(pacto, PACTO_LABEL_HASH);
    let kept = label_value(&pacto[..pacto.floor_char_boundary(MAX_LABEL - PACTO_LABEL_HASH - 1)]);
    if kept.is_empty() {
        tail
    } else {
        format!("{kept}-{tail}")
    }
}

/// The label selector of the revisions of Pacto `pacto` (see [`pacto_label`]).
pub fn revision_selector(pacto: &str) -> String {
    format!("{LABEL_PACTO}={}", pacto_label(pacto))
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
        (LABEL_PACTO.to_owned(), pacto_label(input.pacto_name)),
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

/// The newest revision of one `spec.source.oci` reference and the digest last seen behind it
/// (docs/design/status.md#tag-overwrites).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedTag {
    /// The revision's name.
    pub revision: String,
    /// Its `metadata.resourceVersion` when it was read: recording a new digest is conditional on
    /// it, so two paths that see the same change record (and report) it once.
    pub resource_version: Option<String>,
    /// The digest last seen: `status.observedDigest`, else `spec.source.digest`.
    pub digest: String,
    /// The revision's content hash, if recorded.
    pub content_hash: Option<String>,
}

impl TrackedTag {
    /// The tracking state of one revision (`None` without a reference or a digest).
    pub fn of(revision: &PactoRevision) -> Option<(String, Self)> {
        let oci = revision.spec.source.oci.clone()?;
        let status = revision.status.as_ref();
        let digest = status
            .and_then(|s| s.observed_digest.clone())
            .or_else(|| revision.spec.source.digest.clone())
            .filter(|d| !d.is_empty())?;
        Some((
            oci,
            Self {
                revision: revision.metadata.name.clone().unwrap_or_default(),
                resource_version: revision.metadata.resource_version.clone(),
                digest,
                content_hash: status.and_then(|s| s.contract_hash.clone()),
            },
        ))
    }
}

/// The OCI reference of `spec.contractRef` whose tags are tracked: set, not inline, and not
/// pinned by digest. Returned without `oci://`.
pub fn mirrored_ref(pacto: &Pacto) -> Option<String> {
    let reference = &pacto.spec.contract_ref;
    if reference.inline.as_deref().is_some_and(|i| !i.is_empty()) {
        return None;
    }
    let oci = reference.oci.as_deref()?.trim_start_matches("oci://");
    (!oci.is_empty() && !oci.contains('@')).then(|| oci.to_owned())
}

/// The tag of a reference (`repo:tag`; a `:` before the last `/` is a port).
pub fn tag_of(reference: &str) -> Option<&str> {
    let reference = reference.split('@').next()?;
    let last = reference.rsplit('/').next()?;
    last.split_once(':')
        .map(|(_, tag)| tag)
        .filter(|t| !t.is_empty())
}

/// A reference without its tag and digest (`registry/repository`).
pub fn repository_of(reference: &str) -> &str {
    let reference = reference
        .trim_start_matches("oci://")
        .split('@')
        .next()
        .unwrap_or_default();
    match tag_of(reference) {
        Some(tag) => &reference[..reference.len() - tag.len() - 1],
        None => reference,
    }
}

/// Per `spec.source.oci`, the newest revision with a digest (latest `creationTimestamp`, then
/// the greatest name, so every reader picks the same one).
pub fn tracked_refs(revisions: &[PactoRevision]) -> BTreeMap<String, TrackedTag> {
    let mut newest: BTreeMap<String, &PactoRevision> = BTreeMap::new();
    for revision in revisions {
        let Some(oci) = revision.spec.source.oci.as_deref() else {
            continue;
        };
        let key = |r: &PactoRevision| {
            (
                r.metadata.creation_timestamp.as_ref().map(|t| t.0),
                r.metadata.name.clone(),
            )
        };
        if newest
            .get(oci)
            .is_none_or(|current| key(revision) > key(current))
        {
            newest.insert(oci.to_owned(), revision);
        }
    }
    newest.into_values().filter_map(TrackedTag::of).collect()
}

/// The tags of `reference`'s repository that have a revision with a digest, for the mirror.
pub fn tracked_tags(revisions: &[PactoRevision], reference: &str) -> BTreeMap<String, TrackedTag> {
    let repository = repository_of(reference);
    tracked_refs(revisions)
        .into_iter()
        .filter(|(oci, _)| repository_of(oci) == repository)
        .filter_map(|(oci, tracked)| Some((tag_of(&oci)?.to_owned(), tracked)))
        .collect()
}

/// The tag whose digest moved, when a reconcile resolved `resolved_ref` at `digest`: the tracked
/// revision of that exact reference and the tag, if its last seen digest differs. `None` for a
/// Pacto whose tags are not tracked (inline, pinned by digest), a reference without a tag, an
/// unknown digest, or a first resolution.
pub fn moved_tag<'a>(
    pacto: &Pacto,
    revisions: &'a [PactoRevision],
    resolved_ref: Option<&'a str>,
    digest: Option<&str>,
) -> Option<(&'a str, TrackedTag)> {
    mirrored_ref(pacto)?;
    let resolved_ref = resolved_ref.filter(|r| !r.contains('@'))?;
    let tag = tag_of(resolved_ref)?;
    let digest = digest.filter(|d| !d.is_empty())?;
    let tracked = tracked_refs(revisions).remove(resolved_ref)?;
    (tracked.digest != digest).then_some((tag, tracked))
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
    }

    #[test]
    fn long_names_keep_the_content_hash() {
        // A long human part is cut; the content hash always ends the name.
        let long = "a".repeat(300);
        let first = revision_name(&long, "1.0.0", "1111111aaaa");
        let second = revision_name(&long, "1.0.0", "2222222bbbb");
        assert_eq!(first.len(), 253);
        assert!(first.ends_with("-1111111"), "{first}");
        assert!(second.ends_with("-2222222"), "{second}");
        assert_ne!(first, second, "two contents, two names");
        // Two names that differ only beyond the cut differ in the name hash.
        let other = format!("{}b", "a".repeat(299));
        let third = revision_name(&other, "1.0.0", "1111111aaaa");
        assert_eq!(third.len(), 253);
        assert_ne!(first, third);
        for name in [&first, &second, &third] {
            assert!(is_dns_subdomain(name), "{name}");
        }
        // A 200-character Pacto name fits whole.
        let pacto = "p".repeat(200);
        assert_eq!(
            revision_name(&pacto, "1.2.0", "abcdef0123"),
            format!("{pacto}-1-2-0-abcdef0")
        );
        // A cut that ends on a separator is trimmed; the name stays valid.
        let dotted = format!("{}.{}", "b".repeat(236), "c".repeat(16));
        let name = revision_name(&dotted, "1", "abcdef0123");
        assert!(is_dns_subdomain(&name), "{name}");
        assert!(name.ends_with("-abcdef0"), "{name}");
    }

    fn is_dns_subdomain(name: &str) -> bool {
        name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && label.ends_with(|c: char| c.is_ascii_alphanumeric())
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    }

    #[test]
    fn pacto_labels_fit_and_stay_distinct() {
        assert_eq!(pacto_label("orders"), "orders");
        let exact = "o".repeat(63);
        assert_eq!(pacto_label(&exact), exact);
        let long = "o".repeat(200);
        let label = pacto_label(&long);
        assert_eq!(label.len(), 63);
        assert!(label.starts_with(&"o".repeat(52)), "{label}");
        assert_ne!(label, pacto_label(&format!("{}x", "o".repeat(199))));
        // A cut on a separator is trimmed to an alphanumeric end.
        let dotted = format!("{}.{}", "a".repeat(51), "b".repeat(100));
        let label = pacto_label(&dotted);
        assert!(
            label.starts_with(&format!("{}-", "a".repeat(51))),
            "{label}"
        );
        assert_eq!(
            revision_selector("orders"),
            "pacto.trianalab.io/pacto=orders"
        );
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
        assert_eq!(rev.spec.service_name.as_deref(), Some("orders"));

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

    fn rev(
        name: &str,
        oci: &str,
        digest: Option<&str>,
        observed: Option<&str>,
        at: i64,
    ) -> PactoRevision {
        let mut r = PactoRevision::new(
            name,
            PactoRevisionSpec {
                version: "1.0.0".into(),
                source: RevisionSource {
                    oci: Some(oci.into()),
                    digest: digest.map(Into::into),
                    inline: None,
                },
                pacto_ref: "p".into(),
                service_name: None,
            },
        );
        r.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(1_787_000_000 + at).unwrap(),
        ));
        r.metadata.resource_version = Some(format!("rv-{name}"));
        r.status = Some(PactoRevisionStatus {
            resolved: true,
            contract_hash: Some(format!("hash-{name}")),
            observed_digest: observed.map(Into::into),
            ..PactoRevisionStatus::default()
        });
        r
    }

    fn pacto(oci: Option<&str>, inline: Option<&str>) -> Pacto {
        Pacto::new(
            "p",
            pacto_api::PactoSpec {
                contract_ref: pacto_api::ContractRef {
                    oci: oci.map(Into::into),
                    inline: inline.map(Into::into),
                    pull_secret_ref: None,
                },
                target: None,
                overrides: None,
                check_interval_seconds: None,
            },
        )
    }

    #[test]
    fn tags_and_refs() {
        assert_eq!(tag_of("reg.local:5000/acme/x:1.2.0"), Some("1.2.0"));
        assert_eq!(tag_of("reg.local:5000/acme/x"), None);
        assert_eq!(tag_of("reg/x:1.0@sha256:abc"), Some("1.0"));
        assert_eq!(
            repository_of("reg.local:5000/acme/x:1.2.0"),
            "reg.local:5000/acme/x"
        );
        assert_eq!(
            repository_of("oci://reg.local:5000/acme/x"),
            "reg.local:5000/acme/x"
        );
        assert_eq!(repository_of("reg/x:1@sha256:abc"), "reg/x");
        assert_eq!(
            mirrored_ref(&pacto(Some("oci://reg/x:1"), None)).as_deref(),
            Some("reg/x:1")
        );
        assert_eq!(mirrored_ref(&pacto(Some("reg/x@sha256:1"), None)), None);
        assert_eq!(mirrored_ref(&pacto(Some("reg/x"), Some("yaml"))), None);
        assert_eq!(mirrored_ref(&pacto(None, None)), None);
    }

    #[test]
    fn newest_revision_per_ref_wins_and_observed_digest_counts() {
        let revisions = [
            rev("old", "reg/x:1.0.0", Some("sha256:a"), None, 0),
            rev("new", "reg/x:1.0.0", Some("sha256:b"), Some("sha256:c"), 10),
            rev("nodigest", "reg/x:2.0.0", None, None, 0),
            rev("untagged", "reg/x", Some("sha256:d"), None, 0),
            rev("elsewhere", "other/x:3.0.0", Some("sha256:e"), None, 0),
        ];
        let tracked = tracked_tags(&revisions, "reg/x:1.0.0");
        assert_eq!(tracked.len(), 1);
        let t = &tracked["1.0.0"];
        assert_eq!(t.revision, "new");
        assert_eq!(t.digest, "sha256:c");
        assert_eq!(t.resource_version.as_deref(), Some("rv-new"));
        assert_eq!(t.content_hash.as_deref(), Some("hash-new"));
        // Another repository's tags are not compared with this one's.
        assert_eq!(tracked_tags(&revisions, "other/x").len(), 1);
        // Created in the same second: the greater name wins, for every reader alike.
        let tied = [
            rev("b", "reg/x:1.0.0", Some("sha256:b"), None, 0),
            rev("a", "reg/x:1.0.0", Some("sha256:a"), None, 0),
        ];
        assert_eq!(tracked_refs(&tied)["reg/x:1.0.0"].revision, "b");
    }

    #[test]
    fn a_reconcile_sees_a_moved_tag() {
        let revisions = [rev("r1", "reg/x:1.0.0", Some("sha256:a"), None, 0)];
        let p = pacto(Some("oci://reg/x:1.0.0"), None);
        let (tag, tracked) =
            moved_tag(&p, &revisions, Some("reg/x:1.0.0"), Some("sha256:b")).unwrap();
        assert_eq!(tag, "1.0.0");
        assert_eq!(
            (tracked.revision.as_str(), tracked.digest.as_str()),
            ("r1", "sha256:a")
        );
        // Unchanged, first resolution, unknown digest, or a Pacto whose tags are not tracked.
        assert_eq!(
            moved_tag(&p, &revisions, Some("reg/x:1.0.0"), Some("sha256:a")),
            None
        );
        assert_eq!(
            moved_tag(&p, &revisions, Some("reg/x:2.0.0"), Some("sha256:b")),
            None
        );
        assert_eq!(moved_tag(&p, &revisions, Some("reg/x:1.0.0"), None), None);
        let pinned = pacto(Some("reg/x@sha256:a"), None);
        assert_eq!(
            moved_tag(
                &pinned,
                &revisions,
                Some("reg/x@sha256:b"),
                Some("sha256:b")
            ),
            None
        );
        let inline = pacto(None, Some("yaml"));
        assert_eq!(moved_tag(&inline, &revisions, None, None), None);
        // Recorded already (observedDigest): nothing moved.
        let recorded = [rev(
            "r1",
            "reg/x:1.0.0",
            Some("sha256:a"),
            Some("sha256:b"),
            0,
        )];
        assert_eq!(
            moved_tag(&p, &recorded, Some("reg/x:1.0.0"), Some("sha256:b")),
            None
        );
    }
}
