//! The real `pacto-contract-resolver` binary as a process, configured only through flags and
//! environment variables (KUBECONFIG for its own least-privilege identity): it resolves a private
//! contract with a pull Secret from the real API server over mTLS, and drains on SIGTERM.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed step should fail the test"
)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::push_contract;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use pacto_proto::resolver::{
    ContractRef, ResolveRequest, contract_resolver_client::ContractResolverClient, resolve_response,
};
use pacto_runtime::testing::{JsonLog, TestCa, addr_field, wait_exit, within, write_tls_files};
use pacto_testenv::ControlPlaneOptions;
use pacto_testenv::registry::Registry;

const DEADLINE: Duration = Duration::from_secs(30);
const SERVER_NAME: &str = "contract-resolver.pacto.svc";
const STATUS_WRITER: &str = "status-writer.pacto.svc";
const USER: &str = "pacto-contract-resolver-process";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_resolves_with_a_pull_secret_and_drains_on_sigterm() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let cp = pacto_testenv::shared(ControlPlaneOptions::default)
        .await
        .unwrap();
    let admin = cp.client().unwrap();
    let ns = cp.create_namespace("resolver-process").await.unwrap();
    let registry = Registry::start_with_basic_auth("bob", "builder-s3cr3t-pw").unwrap();
    let host = registry.host();
    let (digest, _) = push_contract(&registry, "acme/svc", "2.1.0", "2.1.0", "process").await;

    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("pull".into()),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        string_data: Some(
            [("username", "bob"), ("password", "builder-s3cr3t-pw")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        ),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pull-secret-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"] }]
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pull-secret-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pull-secret-reader" },
        "subjects": [{ "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": USER }]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin, &ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let kubeconfig = cp
        .write_kubeconfig(
            &format!("{ns}-resolver.kubeconfig"),
            &cp.user_kubeconfig(USER, &[]).unwrap(),
        )
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto process test CA").unwrap();
    let server_cert = ca.issue(&[SERVER_NAME, "127.0.0.1"]).unwrap();
    let files = write_tls_files(dir.path(), "server", &ca.pem(), &server_cert).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pacto-contract-resolver"))
        .env("KUBECONFIG", &kubeconfig)
        .env("PACTO_RESOLVER_LISTEN_ADDR", "127.0.0.1:0")
        .env("PACTO_ADMIN_ADDR", "127.0.0.1:0")
        .env("PACTO_TLS_CA", &files.ca)
        .env("PACTO_TLS_CERT", &files.cert)
        .env("PACTO_TLS_KEY", &files.key)
        .env("PACTO_RESOLVER_INSECURE_REGISTRIES", &host)
        .env("PACTO_RESOLVER_ALLOWED_IDENTITIES", STATUS_WRITER)
        .env("PACTO_LOG_FORMAT", "json")
        .env_remove("PACTO_INSECURE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = JsonLog::follow(child.stderr.take().unwrap(), DEADLINE);
    let grpc_addr = log.wait_for("the serving log line", |v| {
        (v.get("message")?.as_str()? == "serving ContractResolver")
            .then(|| addr_field(v, "grpc_addr"))
            .flatten()
    });

    let client = ContractResolverClient::new(ca.channel(
        dir.path(),
        "client",
        &[STATUS_WRITER],
        grpc_addr,
        SERVER_NAME,
    ));
    let request = ResolveRequest {
        namespace: ns.clone(),
        pacto_name: "svc".into(),
        contract_ref: Some(ContractRef {
            oci: format!("oci://{host}/acme/svc"),
            inline: String::new(),
            pull_secret_ref: "pull".into(),
        }),
        overrides: Vec::new(),
    };
    // RBAC grants apply asynchronously: retry Unavailable (secret unreadable) with a deadline.
    let resolved = within("the pull secret to be readable", DEADLINE, || {
        let mut client = client.clone();
        let request = request.clone();
        let log = &log;
        async move {
            let response = client.resolve(request).await.unwrap().into_inner();
            match response.result {
                Some(resolve_response::Result::Resolved(r)) => Ok(r),
                Some(resolve_response::Result::Unavailable(u)) => {
                    assert!(u.reason.contains("pull secret"), "{}", u.reason);
                    Err(u.reason)
                }
                other => panic!("{other:?}; logs:\n{}", log.text()),
            }
        }
    })
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}; logs:\n{}", log.text()));
    assert_eq!(resolved.digest, digest);
    assert_eq!(resolved.resolved_ref, format!("{host}/acme/svc:2.1.0"));

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    log.wait_for("the stopped log line", |v| {
        (v.get("message")?.as_str()? == "contract resolver stopped").then_some(())
    });
    let exit = wait_exit(&mut child, DEADLINE, &log).await;
    assert!(exit.success(), "exit {exit:?}; logs:\n{}", log.text());
    assert!(
        !log.text().contains("s3cr3t"),
        "the password never appears in the logs"
    );
}
