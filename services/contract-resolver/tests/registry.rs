//! The resolver against a real docker-registry (anonymous access): reference forms, semver
//! selection, force-pushed and missing tags, repositories without semver tags, an unreachable
//! registry, corrupt and oversized blobs, caching, ref policies and ListRevisions.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use common::*;
use pacto_contract::reference::Reference;
use pacto_contract::version::Constraint;
use pacto_contract_resolver::sha256_hex;
use pacto_contract_resolver::{ContractSource, ListInput, Outcome, ResolutionPolicy, Resolver};
use pacto_oci::{Credentials, RegistryClient};
use pacto_testenv::registry::Registry;

#[tokio::test]
async fn three_reference_forms_and_inline() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    let (d100, y100) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "a").await;
    let (d110, y110) = push_contract(&registry, "acme/svc", "1.1.0", "1.1.0", "b").await;
    let resolver = resolver(&registry, None);

    // Unversioned: the highest semver tag.
    let latest = expect_resolved(
        resolver
            .resolve(&oci_input(&format!("oci://{host}/acme/svc"), None))
            .await,
    );
    assert_eq!(latest.resolved_ref, format!("{host}/acme/svc:1.1.0"));
    assert_eq!(latest.digest, d110);
    assert_eq!(latest.policy, ResolutionPolicy::Latest);
    assert_eq!(latest.raw_yaml, y110.as_bytes());
    assert_eq!(latest.content_hash, sha256_hex(y110.as_bytes()));
    assert_eq!(latest.effective_yaml, y110.as_bytes());
    assert!(latest.report.is_valid());

    // Tagged (percent-encoded, without scheme).
    let encoded = format!("{host}/acme/svc:1.0.0").replace(':', "%3A");
    let tagged = expect_resolved(resolver.resolve(&oci_input(&encoded, None)).await);
    assert_eq!(tagged.resolved_ref, format!("{host}/acme/svc:1.0.0"));
    assert_eq!(tagged.digest, d100);
    assert_eq!(tagged.policy, ResolutionPolicy::PinnedTag);
    assert_eq!(tagged.raw_yaml, y100.as_bytes());

    // Digest.
    let pinned = expect_resolved(
        resolver
            .resolve(&oci_input(&format!("{host}/acme/svc@{d100}"), None))
            .await,
    );
    assert_eq!(pinned.resolved_ref, format!("{host}/acme/svc@{d100}"));
    assert_eq!(pinned.digest, d100);
    assert_eq!(pinned.policy, ResolutionPolicy::PinnedDigest);
    assert_eq!(pinned.raw_yaml, y100.as_bytes());

    // Inline wins over OCI; no source is Invalid; a malformed reference is Invalid.
    let mut input = oci_input("unused", None);
    input.source = ContractSource::from_fields(&format!("{host}/acme/svc"), &y100);
    let inline = expect_resolved(resolver.resolve(&input).await);
    assert_eq!(inline.policy, ResolutionPolicy::None);
    assert!(inline.resolved_ref.is_empty() && inline.digest.is_empty());
    input.source = ContractSource::None;
    let (message, issues) = expect_invalid_report(resolver.resolve(&input).await);
    assert!(
        message.starts_with("no contract source specified"),
        "{message}"
    );
    assert_eq!(
        issues,
        [("PARSE_ERROR".to_owned(), "spec.contractRef".to_owned())]
    );
    let (message, issues) = expect_invalid_report(
        resolver
            .resolve(&oci_input(&format!("{host}/Acme/UPPER:1.0.0"), None))
            .await,
    );
    assert!(message.starts_with("invalid OCI reference"), "{message}");
    assert_eq!(issues, [oci_issue("INVALID_OCI_REF")]);
}

#[tokio::test]
async fn highest_semver_with_prereleases_constraints_and_non_semver_tags() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    for tag in [
        "1.0.0",
        "2.0.0",
        "2.3.0",
        "2.4.0-beta.1",
        "3.0.0-rc.1",
        "v2.9.0",
    ] {
        push_contract(&registry, "acme/svc", tag, tag.trim_start_matches('v'), tag).await;
    }
    // Non-semver tags carrying "higher" contracts must be ignored.
    push_contract(&registry, "acme/svc", "latest", "9.9.9", "latest").await;
    push_contract(&registry, "acme/svc", "main", "9.9.8", "main").await;
    let resolver = resolver(&registry, None);

    let resolved = expect_resolved(
        resolver
            .resolve(&oci_input(&format!("{host}/acme/svc"), None))
            .await,
    );
    assert_eq!(
        resolved.resolved_ref,
        format!("{host}/acme/svc:3.0.0-rc.1"),
        "without a constraint pre-releases compete"
    );

    let mut input = oci_input(&format!("{host}/acme/svc"), None);
    input.constraint = Some(Constraint::parse("^2.0.0").unwrap());
    let resolved = expect_resolved(resolver.resolve(&input).await);
    assert_eq!(
        resolved.resolved_ref,
        format!("{host}/acme/svc:v2.9.0"),
        "^2.0.0 excludes 2.4.0-beta.1 and keeps the tag's spelling"
    );
    input.constraint = Some(Constraint::parse(">=4.0.0").unwrap());
    let (message, issues) = expect_invalid_report(resolver.resolve(&input).await);
    assert!(message.contains("no tags satisfy constraint"), "{message}");
    assert_eq!(issues, [oci_issue("PARSE_ERROR")]);
}

#[tokio::test]
async fn force_pushed_missing_and_non_semver_repositories() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    let (first, y1) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "first").await;
    let resolver = resolver(&registry, None);
    let tagged = format!("{host}/acme/svc:1.0.0");
    let before = expect_resolved(resolver.resolve(&oci_input(&tagged, None)).await);
    assert_eq!(
        (before.digest.as_str(), before.raw_yaml.as_slice()),
        (first.as_str(), y1.as_bytes())
    );

    // Force-push other content under the same tag: the next resolve sees it.
    let (second, y2) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "second").await;
    assert_ne!(first, second);
    let after = expect_resolved(resolver.resolve(&oci_input(&tagged, None)).await);
    assert_eq!(after.digest, second);
    assert_eq!(after.raw_yaml, y2.as_bytes());
    assert_ne!(after.content_hash, before.content_hash);

    // A missing tag and a missing repository are Unavailable (artifact not found).
    let reason = expect_unavailable(
        resolver
            .resolve(&oci_input(&format!("{host}/acme/svc:7.7.7"), None))
            .await,
    );
    assert!(reason.contains("not found"), "{reason}");
    let reason = expect_unavailable(
        resolver
            .resolve(&oci_input(&format!("{host}/acme/nothing"), None))
            .await,
    );
    assert!(reason.contains("not found"), "{reason}");

    // A repository with only non-semver tags resolves nothing: Unavailable, like a missing tag
    // (docs/design/resolution.md#invalid-or-unavailable: the tagless fallback pull finds nothing).
    push_contract(&registry, "acme/tags", "latest", "1.0.0", "x").await;
    push_contract(&registry, "acme/tags", "main", "1.0.0", "y").await;
    let message = expect_unavailable(
        resolver
            .resolve(&oci_input(&format!("{host}/acme/tags"), None))
            .await,
    );
    assert!(message.contains("no semver tags found"), "{message}");
    assert!(
        message.contains("latest") && message.contains("main"),
        "{message}"
    );
}

#[tokio::test]
async fn unreachable_registry_is_unavailable() {
    let port = closed_port();
    let host = format!("127.0.0.1:{port}");
    let resolver =
        pacto_contract_resolver::Resolver::new(config(std::slice::from_ref(&host)), None).unwrap();
    for reference in [format!("{host}/acme/svc:1.0.0"), format!("{host}/acme/svc")] {
        let reason = expect_unavailable(resolver.resolve(&oci_input(&reference, None)).await);
        assert!(reason.contains("is unreachable"), "{reason}");
    }
}

/// The layer blob's data file in the registry's filesystem storage.
fn blob_path(registry: &Registry, digest: &str) -> std::path::PathBuf {
    let hex = digest.strip_prefix("sha256:").unwrap();
    registry
        .storage_dir()
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

#[tokio::test]
async fn corrupt_and_oversized_blobs_are_invalid() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    let yaml = contract_yaml("svc", "1.0.0", "corrupt-me");
    let files = bundle(&yaml);
    push(&registry, "acme/corrupt", "1.0.0", &files).await;
    // Tamper with the stored layer (same size, other bytes): the digest no longer matches.
    let layer = files.to_tar_gz().unwrap();
    let layer_digest = format!("sha256:{}", sha256_hex(&layer));
    let path = blob_path(&registry, &layer_digest);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes, layer, "stored layer is the pushed tar.gz");
    for b in bytes.iter_mut().skip(20) {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    let resolver = resolver(&registry, None);
    let (message, issues) = expect_invalid_report(
        resolver
            .resolve(&oci_input(&format!("{host}/acme/corrupt:1.0.0"), None))
            .await,
    );
    assert!(message.contains("corrupt"), "{message}");
    assert_eq!(issues, [oci_issue("PARSE_ERROR")], "{message}");

    // A layer that is not a tar.gz at all (correct digest): not a valid Pacto bundle.
    let pusher = pusher(&registry, &Credentials::Anonymous);
    let (message, issues) = push_layer_and_resolve(
        &pusher,
        &resolver,
        &host,
        "garbage",
        b"not a tarball".to_vec(),
    )
    .await;
    assert!(message.contains("not a valid Pacto bundle"), "{message}");
    assert_eq!(issues, [oci_issue("PARSE_ERROR")], "{message}");

    // A well-formed archive without pacto.yaml: FILE_NOT_FOUND at pacto.yaml.
    let mut readme = pacto_contract::bundle::BundleFiles::new();
    readme.insert("README.md", b"no contract\n".to_vec());
    let (message, issues) = push_layer_and_resolve(
        &pusher,
        &resolver,
        &host,
        "readme",
        readme.to_tar_gz().unwrap(),
    )
    .await;
    assert!(message.contains("pacto.yaml not found"), "{message}");
    assert_eq!(
        issues,
        [("FILE_NOT_FOUND".to_owned(), "pacto.yaml".to_owned())]
    );

    // A file over the per-file extraction limit: the report names that entry.
    let mut huge = bundle(&yaml);
    huge.insert("interfaces/huge.bin", vec![0u8; 11 * 1024 * 1024]);
    let (message, issues) =
        push_layer_and_resolve(&pusher, &resolver, &host, "huge", huge.to_tar_gz().unwrap()).await;
    assert!(message.contains("exceeds a size limit"), "{message}");
    assert_eq!(
        issues,
        [("PARSE_ERROR".to_owned(), "interfaces/huge.bin".to_owned())]
    );

    // An oversized layer (over the resolver's limit) is refused before extraction.
    let mut config = config(std::slice::from_ref(&host));
    config.registry.client.max_layer_bytes = 64 * 1024;
    let small = pacto_contract_resolver::Resolver::new(config, None).unwrap();
    let big: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let reference = Reference::parse(&format!("{host}/acme/big:1.0.0")).unwrap();
    pusher
        .push_artifact(&reference, b"{}".to_vec(), big, &|_| {})
        .await
        .unwrap();
    let (message, issues) = expect_invalid_report(
        small
            .resolve(&oci_input(&reference.to_string(), None))
            .await,
    );
    assert!(
        message.contains("size limit") && message.contains("65536"),
        "{message}"
    );
    assert_eq!(issues, [oci_issue("PARSE_ERROR")], "{message}");
}

/// Pushes `layer` as the only layer of `<host>/acme/<repository>:1.0.0` and resolves it, which
/// must give Invalid: its message and report issues.
async fn push_layer_and_resolve(
    pusher: &RegistryClient,
    resolver: &Resolver,
    host: &str,
    repository: &str,
    layer: Vec<u8>,
) -> (String, Vec<(String, String)>) {
    let reference = Reference::parse(&format!("{host}/acme/{repository}:1.0.0")).unwrap();
    pusher
        .push_artifact(&reference, b"{}".to_vec(), layer, &|_| {})
        .await
        .unwrap();
    expect_invalid_report(
        resolver
            .resolve(&oci_input(&reference.to_string(), None))
            .await,
    )
}

/// A report error at `spec.contractRef.oci`.
fn oci_issue(code: &str) -> (String, String) {
    (code.to_owned(), "spec.contractRef.oci".to_owned())
}

#[tokio::test]
async fn an_unchanged_tag_costs_one_manifest_request_and_no_blob() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "x").await;
    push_contract(&registry, "acme/svc", "1.1.0", "1.1.0", "y").await;
    let resolver = resolver(&registry, None);
    for reference in [format!("{host}/acme/svc:1.0.0"), format!("{host}/acme/svc")] {
        let first = expect_resolved(resolver.resolve(&oci_input(&reference, None)).await);
        let before = registry_requests_settled(&registry).await;
        let second = expect_resolved(resolver.resolve(&oci_input(&reference, None)).await);
        let after = registry_requests_settled(&registry).await;
        let new: Vec<_> = after[before.len()..].to_vec();
        assert_eq!(first.digest, second.digest);
        assert_eq!(new.len(), 1, "{reference}: steady state requests {new:?}");
        assert!(
            new[0].starts_with("HEAD /v2/acme/svc/manifests/"),
            "{new:?}"
        );
    }
    // A digest reference whose bundle is cached needs no request at all.
    let digest_ref = format!(
        "{host}/acme/svc@{}",
        expect_resolved(
            resolver
                .resolve(&oci_input(&format!("{host}/acme/svc:1.0.0"), None))
                .await,
        )
        .digest
    );
    expect_resolved(resolver.resolve(&oci_input(&digest_ref, None)).await);
    let before = registry_requests_settled(&registry).await;
    expect_resolved(resolver.resolve(&oci_input(&digest_ref, None)).await);
    let after = registry_requests_settled(&registry).await;
    assert_eq!(after.len(), before.len(), "{:?}", &after[before.len()..]);
}

#[tokio::test]
async fn overrides_schemas_and_ref_policies_from_oci() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    // A policy bundle requiring service.owner.
    let mut policy = bundle(&contract_yaml("org-policy", "1.0.0", "policy"));
    policy.insert(
        "policy/schema.json",
        br#"{"required":["metadata"],"properties":{"metadata":{"required":["tier"]}}}"#.to_vec(),
    );
    // The policy bundle has no policies of its own, so its policy/schema.json is used.
    push(&registry, "acme/policy", "1.0.0", &policy).await;
    let contract = |tier: bool, policy_ref: &str| {
        format!(
            "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\n{}configurations:\n  - name: app\n    required: true\n    schema: configuration/schema.json\n    values:\n      port: \"8080\"\npolicies:\n  - name: org\n    ref: {policy_ref}\n",
            if tier {
                "metadata:\n  tier: gold\n"
            } else {
                ""
            }
        )
    };
    let schema = br#"{"type":"object","properties":{"port":{"type":"string"}},"additionalProperties":false}"#;
    let with_schema = |yaml: &str| {
        let mut files = bundle(yaml);
        files.insert("configuration/schema.json", schema.to_vec());
        files
    };
    let policy_ref = format!("oci://{host}/acme/policy:1.0.0");
    push(
        &registry,
        "acme/good",
        "1.0.0",
        &with_schema(&contract(true, &policy_ref)),
    )
    .await;
    push(
        &registry,
        "acme/bad",
        "1.0.0",
        &with_schema(&contract(false, &policy_ref)),
    )
    .await;
    let missing_ref = format!("oci://{host}/acme/no-such-policy:1.0.0");
    push(
        &registry,
        "acme/unres",
        "1.0.0",
        &with_schema(&contract(false, &missing_ref)),
    )
    .await;
    let resolver = resolver(&registry, None);

    // Enforced and satisfied; the configuration schema travels with the result; overrides apply.
    let mut input = oci_input(&format!("{host}/acme/good:1.0.0"), None);
    input.overrides = vec![pacto_contract::ConfigurationOverride {
        name: "app".into(),
        values: [("port".to_owned(), "9090".to_owned())].into(),
    }];
    let good = expect_resolved(resolver.resolve(&input).await);
    assert_eq!(
        good.configuration_schemas.get("app").map(Vec::as_slice),
        Some(&schema[..])
    );
    let effective = String::from_utf8(good.effective_yaml.clone()).unwrap();
    assert!(
        effective.contains("9090") && !effective.contains("8080"),
        "{effective}"
    );
    assert!(
        String::from_utf8(good.raw_yaml).unwrap().contains("8080"),
        "raw is pre-override"
    );
    assert!(
        good.report.warnings.is_empty(),
        "{:?}",
        good.report.warnings
    );

    // An unknown override key is fine (strings), an unknown configuration is Invalid.
    input.overrides[0].name = "nope".into();
    let message = expect_invalid(resolver.resolve(&input).await);
    assert_eq!(
        message,
        "override error: configuration \"nope\" not found in contract"
    );
    // An override violating the bundled schema is a validation error.
    input.overrides[0].name = "app".into();
    input.overrides[0].values = [("extra".to_owned(), "1".to_owned())].into();
    let message = expect_invalid(resolver.resolve(&input).await);
    assert!(
        message.starts_with("Contract validation failed:"),
        "{message}"
    );

    // The OCI policy is enforced: a violation is Invalid.
    match resolver
        .resolve(&oci_input(&format!("{host}/acme/bad:1.0.0"), None))
        .await
    {
        Outcome::Invalid {
            message, report, ..
        } => {
            assert!(
                message.starts_with("Contract validation failed:"),
                "{message}"
            );
            assert!(
                report.errors.iter().any(|f| f.code == "POLICY_VIOLATION"),
                "{report:?}"
            );
        }
        other => panic!("{other:?}"),
    }

    // An unresolvable ref policy is skipped with POLICY_REF_NOT_ENFORCED.
    let unresolved = expect_resolved(
        resolver
            .resolve(&oci_input(&format!("{host}/acme/unres:1.0.0"), None))
            .await,
    );
    let warning = unresolved
        .report
        .warnings
        .iter()
        .find(|w| w.code == "POLICY_REF_NOT_ENFORCED")
        .expect("warning");
    assert_eq!(warning.path, "policies[0].ref");
    assert!(warning.message.contains("not found"), "{}", warning.message);
}

#[tokio::test]
async fn list_revisions_reports_digest_version_and_hash() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    let (d1, y1) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "a").await;
    let (d2, y2) = push_contract(&registry, "acme/svc", "v2.0.0", "2.0.0", "b").await;
    push_contract(&registry, "acme/svc", "latest", "2.0.0", "b").await;
    let resolver = resolver(&registry, None);
    let input = ListInput {
        namespace: "team-a".into(),
        pacto_name: "svc".into(),
        oci: format!("oci://{host}/acme/svc:1.0.0"),
        pull_secret: None,
        tags: Vec::new(),
        max_age: std::time::Duration::ZERO,
    };
    let revisions = resolver.list_revisions(&input).await.unwrap();
    let summary: Vec<_> = revisions
        .iter()
        .map(|r| {
            (
                r.tag.as_str(),
                r.digest.as_str(),
                r.version.as_str(),
                r.content_hash.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("v2.0.0", d2.as_str(), "2.0.0", sha256_hex(y2.as_bytes())),
            ("1.0.0", d1.as_str(), "1.0.0", sha256_hex(y1.as_bytes())),
        ]
    );
    assert_eq!(revisions[0].resolved_ref, format!("{host}/acme/svc:v2.0.0"));

    // Explicit tags, one missing: a per-tag, transient error.
    let (d3, _) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "overwritten").await;
    let input = ListInput {
        tags: vec!["1.0.0".into(), "5.0.0".into()],
        ..input
    };
    let revisions = resolver.list_revisions(&input).await.unwrap();
    assert_eq!(revisions[0].tag, "5.0.0");
    assert!(
        revisions[0].error.contains("not found") && revisions[0].transient,
        "{:?}",
        revisions[0]
    );
    assert_eq!(revisions[1].digest, d3, "force-push seen");
}

#[tokio::test]
async fn transient_failures_are_retried_with_a_bound_and_not_found_is_not() {
    // A peer that accepts TCP connections and closes them at once: every HEAD fails transiently.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&accepted);
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    let mut config = config(std::slice::from_ref(&host));
    config.registry.max_retries = 2;
    let broken = pacto_contract_resolver::Resolver::new(config, None).unwrap();
    let reason = expect_unavailable(
        broken
            .resolve(&oci_input(&format!("{host}/acme/svc:1.0.0"), None))
            .await,
    );
    assert!(reason.contains("is unreachable"), "{reason}");
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "one attempt and two retries"
    );
    task.abort();

    // A missing tag is not transient: exactly one HEAD reaches the registry.
    let registry = Registry::start().unwrap();
    push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "x").await;
    let resolver = resolver(&registry, None);
    let before = registry_requests_settled(&registry).await;
    expect_unavailable(
        resolver
            .resolve(&oci_input(
                &format!("{}/acme/svc:2.0.0", registry.host()),
                None,
            ))
            .await,
    );
    let after = registry_requests_settled(&registry).await;
    assert_eq!(
        after[before.len()..],
        ["HEAD /v2/acme/svc/manifests/2.0.0".to_owned()]
    );
}
