//! Every Invalid carries a validation report (docs/design/resolution.md#invalid-or-unavailable):
//! whatever makes a contract Invalid — a malformed reference, no source at all, an oversized
//! inline contract, a YAML syntax error, an override naming no configuration, and (through the
//! suite's real registry) a corrupt bundle, an oversized bundle and a bundle without
//! `pacto.yaml` — `kubectl get pacto -o yaml` shows `ContractValid False/Invalid` and a
//! `status.validation` with `valid: false` and an error naming a code and a path.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use pacto_api::testing::PactoBuilder;
use pacto_api::{ConfigurationOverride, ContractOverrides, ContractRef};
use pacto_contract::bundle::BundleFiles;
use pacto_contract::reference::Reference;
use pacto_e2e::{STATUS_DEADLINE, Stack, condition, expect_condition};
use pacto_oci::{ClientOptions, Credentials, RegistryClient};

const VALID: &str = "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\n";

/// One way to be Invalid: the manifest to create and the code and path `status.validation`
/// must name.
struct Case {
    name: &'static str,
    manifest: String,
    code: &'static str,
    path: String,
    /// A fragment of the error message.
    message: &'static str,
}

/// Pushes `layer` as the single layer of `<host>/pacto/<repository>:1.0.0` without any check of
/// its content (what `pacto push` would refuse to produce) and returns the `oci://` reference.
async fn push_raw(stack: &Stack, repository: &str, layer: Vec<u8>) -> String {
    let host = stack.registry.host();
    let client = RegistryClient::new(
        ClientOptions {
            insecure_registries: vec![host.clone()],
            ..ClientOptions::default()
        },
        &Credentials::Anonymous,
    )
    .unwrap();
    let reference = Reference::parse(&format!("{host}/pacto/{repository}:1.0.0")).unwrap();
    client
        .push_artifact(&reference, b"{}".to_vec(), layer, &|_| {})
        .await
        .unwrap();
    format!("oci://{reference}")
}

fn manifest(builder: PactoBuilder) -> String {
    builder.check_interval(30).manifest()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_invalid_carries_a_validation_report_with_code_and_path() {
    let stack = Stack::start().await.unwrap();

    // A bundle whose layer is not a gzip'd tar at all.
    let corrupt = push_raw(&stack, "corrupt", b"this is not a tarball".to_vec()).await;
    // A bundle with a file over the 10 MiB per-file extraction limit (zeros compress well).
    let mut big = BundleFiles::new();
    big.insert("pacto.yaml", VALID.as_bytes().to_vec());
    big.insert("interfaces/huge.bin", vec![0u8; 11 * 1024 * 1024]);
    let oversized = push_raw(&stack, "oversized", big.to_tar_gz().unwrap()).await;
    // A well-formed bundle without pacto.yaml.
    let mut empty = BundleFiles::new();
    empty.insert("README.md", b"no contract here\n".to_vec());
    let missing = push_raw(&stack, "missing", empty.to_tar_gz().unwrap()).await;

    // Over the resolver's 1 MiB inline limit: a valid contract padded with a comment.
    let huge_inline = format!("{VALID}# {}\n", "x".repeat(1024 * 1024 + 16));

    let cases = [
        Case {
            name: "bad-ref",
            manifest: manifest(PactoBuilder::oci(
                "bad-ref",
                "https://ghcr.io/acme/svc:1.0.0",
            )),
            code: "INVALID_OCI_REF",
            path: "spec.contractRef.oci".into(),
            message: "unsupported scheme",
        },
        Case {
            name: "no-source",
            manifest: manifest(PactoBuilder::new("no-source", ContractRef::default())),
            code: "PARSE_ERROR",
            path: "spec.contractRef".into(),
            message: "no contract source specified",
        },
        Case {
            name: "huge-inline",
            manifest: manifest(PactoBuilder::inline("huge-inline", &huge_inline)),
            code: "PARSE_ERROR",
            path: "spec.contractRef.inline".into(),
            message: "over the 1048576-byte limit",
        },
        Case {
            name: "bad-yaml",
            manifest: manifest(PactoBuilder::inline("bad-yaml", "service: [unclosed\n")),
            code: "YAML_PARSE_ERROR",
            path: "spec.contractRef.inline".into(),
            message: "",
        },
        Case {
            name: "bad-override",
            manifest: manifest(PactoBuilder::inline("bad-override", VALID).overrides(
                ContractOverrides {
                    configurations: vec![ConfigurationOverride {
                        name: "db".into(),
                        values: [("a".to_owned(), "b".to_owned())].into(),
                    }],
                },
            )),
            code: "PARSE_ERROR",
            path: "spec.overrides".into(),
            message: "configuration \"db\" not found",
        },
        Case {
            name: "corrupt",
            manifest: manifest(PactoBuilder::oci("corrupt", &corrupt)),
            code: "PARSE_ERROR",
            path: "spec.contractRef.oci".into(),
            message: "corrupt bundle archive",
        },
        Case {
            name: "oversized",
            manifest: manifest(PactoBuilder::oci("oversized", &oversized)),
            code: "PARSE_ERROR",
            path: "interfaces/huge.bin".into(),
            message: "larger than 10485760 bytes",
        },
        Case {
            name: "missing",
            manifest: manifest(PactoBuilder::oci("missing", &missing)),
            code: "FILE_NOT_FOUND",
            path: "pacto.yaml".into(),
            message: "pacto.yaml not found at the bundle root",
        },
    ];

    // The API server admits all of them (neither source set included: the CRD's schema does
    // not refuse it); `create`, not `apply`, because apply would copy the 1 MiB inline contract
    // into the last-applied annotation, which is capped at 256 KiB.
    for case in &cases {
        stack
            .kubectl(
                &["create", "-n", &stack.namespace, "-f", "-"],
                Some(&case.manifest),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    }
    for case in &cases {
        let pacto = stack
            .wait_contract_status(case.name, "Invalid", STATUS_DEADLINE)
            .await
            .unwrap();
        let condition_message = expect_condition(&pacto, "ContractValid", "False", "Invalid");
        assert!(condition(&pacto, "RuntimeObserved").is_none(), "{pacto}");
        let validation = &pacto["status"]["validation"];
        assert_eq!(
            validation["valid"], false,
            "{}: status.validation must be present and invalid: {:#}",
            case.name, pacto["status"]
        );
        let errors = validation["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no status.validation.errors: {:#}", case.name, pacto));
        let first = &errors[0];
        assert_eq!(
            (first["code"].as_str(), first["path"].as_str()),
            (Some(case.code), Some(case.path.as_str())),
            "{}: {validation:#}",
            case.name
        );
        let message = first["message"].as_str().unwrap_or_default();
        assert!(
            !message.is_empty() && message.contains(case.message),
            "{}: {message:?} should mention {:?}",
            case.name,
            case.message
        );
        assert!(
            !condition_message.is_empty(),
            "{}: {condition_message}",
            case.name
        );
    }
    let described = stack
        .wait_describe(
            "missing",
            &["Validation:", "FILE_NOT_FOUND"],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();
    assert!(described.contains("ContractInvalid"), "{described}");
}
