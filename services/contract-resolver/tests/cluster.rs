//! Pull secrets read from a real kube-apiserver with the resolver's own least-privilege identity
//! (a Role granting only `get` on Secrets in the namespace), against real docker-registries with
//! htpasswd (basic) and token (bearer) authentication.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use common::*;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use pacto_contract_resolver::ListInput;
use pacto_contract_resolver::{KubeSecrets, SecretSource};
use pacto_oci::Credentials;
use pacto_runtime::testing::eventually;
use pacto_testenv::ControlPlaneOptions;
use pacto_testenv::registry::Registry;

const RESOLVER_USER: &str = "pacto-contract-resolver";
const TIMEOUT: Duration = Duration::from_secs(30);

async fn cluster() -> &'static pacto_testenv::ControlPlane {
    pacto_testenv::controlplane::ensure_crypto_provider();
    pacto_testenv::shared(ControlPlaneOptions::default)
        .await
        .unwrap()
}

/// Creates a Secret with `string_data` in `namespace`.
async fn secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    kind: &str,
    data: &[(&str, &str)],
) {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some(kind.to_owned()),
        string_data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// Grants the resolver's identity `get` (only) on Secrets in `namespace`.
async fn grant_get_secrets(client: &kube::Client, namespace: &str) {
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pacto-pull-secret-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"] }]
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pacto-pull-secret-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pacto-pull-secret-reader" },
        "subjects": [{ "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": RESOLVER_USER }]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// Waits until the resolver identity can GET `namespace/name` (RBAC grants apply asynchronously).
async fn wait_readable(source: &KubeSecrets, namespace: &str, name: &str) {
    eventually(
        &format!("the RBAC grant to take effect for {namespace}/{name}"),
        TIMEOUT,
        || async {
            let read = source.get(namespace, name).await;
            read.map(|_| ()).map_err(|e| format!("GET failed: {e}"))
        },
    )
    .await;
}

fn in_namespace(
    mut input: pacto_contract_resolver::ResolveInput,
    ns: &str,
) -> pacto_contract_resolver::ResolveInput {
    ns.clone_into(&mut input.namespace);
    input
}

#[tokio::test]
async fn htpasswd_registry_with_each_secret_kind_and_least_privilege() {
    let cp = cluster().await;
    let admin = cp.client().unwrap();
    let ns = cp.create_namespace("resolver").await.unwrap();
    let other = cp.create_namespace("resolver-other").await.unwrap();
    let registry = Registry::start_with_basic_auth("alice", "wonderland").unwrap();
    let host = registry.host();
    let (digest, yaml) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "private").await;

    let auth = base64::engine::general_purpose::STANDARD.encode("alice:wonderland");
    let dockerconfig = format!(r#"{{"auths":{{"http://{host}":{{"auth":"{auth}"}}}}}}"#);
    let elsewhere = r#"{"auths":{"ghcr.io":{"username":"alice","password":"wonderland"}}}"#;
    for (name, kind, data) in [
        (
            "basic",
            "Opaque",
            vec![
                ("registry", host.as_str()),
                ("username", "alice"),
                ("password", "wonderland"),
            ],
        ),
        (
            "dockercfg",
            "kubernetes.io/dockerconfigjson",
            vec![(".dockerconfigjson", dockerconfig.as_str())],
        ),
        (
            "dockercfg-elsewhere",
            "kubernetes.io/dockerconfigjson",
            vec![(".dockerconfigjson", elsewhere)],
        ),
        (
            "wrong",
            "Opaque",
            vec![
                ("registry", host.as_str()),
                ("username", "alice"),
                ("password", "queen-of-hearts"),
            ],
        ),
        (
            "scoped-here",
            "Opaque",
            vec![
                ("registry", host.as_str()),
                ("username", "alice"),
                ("password", "wonderland"),
            ],
        ),
        (
            "scoped-elsewhere",
            "Opaque",
            vec![
                ("registry", "registry.example.com"),
                ("username", "alice"),
                ("password", "wonderland"),
            ],
        ),
        ("malformed", "Opaque", vec![("user", "alice")]),
    ] {
        secret(&admin, &ns, name, kind, &data).await;
    }
    // The same Secret name with wrong credentials in another namespace.
    secret(
        &admin,
        &other,
        "basic",
        "Opaque",
        &[
            ("registry", host.as_str()),
            ("username", "alice"),
            ("password", "nope"),
        ],
    )
    .await;
    grant_get_secrets(&admin, &ns).await;
    grant_get_secrets(&admin, &other).await;

    let client = cp.user_client(RESOLVER_USER, &[]).await.unwrap();
    let source = KubeSecrets::new(client.clone());
    wait_readable(&source, &ns, "basic").await;
    wait_readable(&source, &other, "basic").await;
    let resolver = resolver(&registry, Some(Arc::new(source) as Arc<dyn SecretSource>));
    let tagged = format!("{host}/acme/svc:1.0.0");
    let input = |secret: Option<&str>| in_namespace(oci_input(&tagged, secret), &ns);

    // Each kind of Secret works.
    for name in ["basic", "dockercfg", "scoped-here"] {
        let resolved = expect_resolved(resolver.resolve(&input(Some(name))).await);
        assert_eq!(resolved.digest, digest, "{name}");
        assert_eq!(resolved.raw_yaml, yaml.as_bytes(), "{name}");
    }
    let latest = expect_resolved(
        resolver
            .resolve(&in_namespace(
                oci_input(&format!("{host}/acme/svc"), Some("basic")),
                &ns,
            ))
            .await,
    );
    assert_eq!(latest.resolved_ref, tagged);

    // Failures are Unavailable with actionable messages that never contain the password.
    let cases = [
        (None, "requires authentication"),
        (
            Some("wrong"),
            "rejected the credentials of pull secret \"wrong\"",
        ),
        (
            Some("scoped-elsewhere"),
            "is scoped to registry \"registry.example.com\" but credentials were requested for",
        ),
        (
            Some("dockercfg-elsewhere"),
            "has no credentials for registry",
        ),
        (
            Some("malformed"),
            "failed to read pull secret \"malformed\"",
        ),
        (Some("absent"), "not found in namespace"),
    ];
    for (secret, expected) in cases {
        let reason = expect_unavailable(resolver.resolve(&input(secret)).await);
        assert!(reason.contains(expected), "{secret:?}: {reason}");
        assert!(
            !reason.contains("wonderland") && !reason.contains("queen-of-hearts"),
            "{reason}"
        );
    }

    // Cache entries never cross namespaces or credentials: the digest is cached for `ns`'s
    // Secret, yet the other namespace's (wrong) Secret and anonymous access are refused.
    let pinned = format!("{host}/acme/svc@{digest}");
    expect_resolved(
        resolver
            .resolve(&in_namespace(oci_input(&pinned, Some("basic")), &ns))
            .await,
    );
    let reason = expect_unavailable(
        resolver
            .resolve(&in_namespace(oci_input(&pinned, Some("basic")), &other))
            .await,
    );
    assert!(reason.contains("rejected the credentials"), "{reason}");
    let reason = expect_unavailable(
        resolver
            .resolve(&in_namespace(oci_input(&pinned, None), &ns))
            .await,
    );
    assert!(reason.contains("requires authentication"), "{reason}");

    // Least privilege: the resolver's identity may get, but not list, Secrets, and may not get
    // them in a namespace without the grant.
    match Api::<Secret>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403),
        other => panic!("list must be forbidden, got {other:?}"),
    }
    let ungranted = cp.create_namespace("resolver-ungranted").await.unwrap();
    secret(
        &admin,
        &ungranted,
        "basic",
        "Opaque",
        &[
            ("registry", host.as_str()),
            ("username", "alice"),
            ("password", "wonderland"),
        ],
    )
    .await;
    let reason = expect_unavailable(
        resolver
            .resolve(&in_namespace(oci_input(&tagged, Some("basic")), &ungranted))
            .await,
    );
    assert!(reason.contains("may not get secret \"basic\""), "{reason}");

    // ListRevisions with a pull Secret.
    let revisions = resolver
        .list_revisions(&ListInput {
            namespace: ns.clone(),
            pacto_name: "svc".into(),
            oci: format!("{host}/acme/svc"),
            pull_secret: Some("dockercfg".into()),
            tags: Vec::new(),
            max_age: std::time::Duration::ZERO,
        })
        .await
        .unwrap();
    assert_eq!(revisions.len(), 1);
    assert_eq!(revisions[0].digest, digest);
}

#[tokio::test]
async fn token_registry_with_an_opaque_token_secret() {
    let cp = cluster().await;
    let admin = cp.client().unwrap();
    let ns = cp.create_namespace("resolver-token").await.unwrap();
    let registry = Registry::start_with_token_auth().unwrap();
    let host = registry.host();
    let push_token = registry.mint_token("acme/svc", &["pull", "push"]).unwrap();
    let yaml = contract_yaml("svc", "1.0.0", "token");
    let digest = push_with(
        &registry,
        &Credentials::Bearer(push_token),
        "acme/svc",
        "1.0.0",
        &bundle(&yaml),
    )
    .await;
    let pull = registry.mint_token("acme/svc", &["pull"]).unwrap();
    let untrusted = registry
        .mint_untrusted_token("acme/svc", &["pull"])
        .unwrap();
    secret(
        &admin,
        &ns,
        "token",
        "Opaque",
        &[("registry", &host), ("token", &pull)],
    )
    .await;
    secret(
        &admin,
        &ns,
        "untrusted",
        "Opaque",
        &[("registry", &host), ("token", &untrusted)],
    )
    .await;
    grant_get_secrets(&admin, &ns).await;
    let source = KubeSecrets::new(cp.user_client(RESOLVER_USER, &[]).await.unwrap());
    wait_readable(&source, &ns, "token").await;
    let resolver = resolver(&registry, Some(Arc::new(source) as Arc<dyn SecretSource>));

    let resolved = expect_resolved(
        resolver
            .resolve(&in_namespace(
                oci_input(&format!("{host}/acme/svc"), Some("token")),
                &ns,
            ))
            .await,
    );
    assert_eq!(resolved.digest, digest);
    assert_eq!(resolved.raw_yaml, yaml.as_bytes());
    let reason = expect_unavailable(
        resolver
            .resolve(&in_namespace(
                oci_input(&format!("{host}/acme/svc:1.0.0"), Some("untrusted")),
                &ns,
            ))
            .await,
    );
    assert!(
        reason.contains("rejected the credentials of pull secret \"untrusted\""),
        "{reason}"
    );
}
