//! Loading the trust store (docs/design/envelopes.md#trust): the structured configuration
//! `pacto.dev/evidence-trust/v1`, bare `.pub` files and directories, and every load refusal
//! with the field it names.

use std::path::Path;

use ed25519_dalek::SigningKey;
use pacto_evidence::{TrustError, TrustStore, keys};

fn write_pub(dir: &Path, name: &str, seed: u8) {
    let key = SigningKey::from_bytes(&[seed; 32]);
    std::fs::write(
        dir.join(name),
        keys::verifying_key_text(&key.verifying_key()),
    )
    .expect("write");
}

fn config(dir: &Path, yaml: &str) -> Result<TrustStore, TrustError> {
    let path = dir.join("trust.yaml");
    std::fs::write(&path, yaml).expect("write");
    TrustStore::load(&path)
}

#[test]
fn structured_configuration_loads_bindings_and_scopes() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pub(dir.path(), "edge.pub", 1);
    write_pub(dir.path(), "edge-next.pub", 2);
    let store = config(
        dir.path(),
        "apiVersion: pacto.dev/evidence-trust/v1
keys:
  - keyId: k1
    producerId: edge-1
    publicKeyFile: edge.pub
    allowedSubjects: [\"shop/*\"]
    allowedContractRepos: [registry.example/acme]
  - keyId: k2
    producerId: edge-1
    publicKeyFile: edge-next.pub
",
    )
    .expect("loads");
    assert_eq!(store.key_ids().collect::<Vec<_>>(), ["k1", "k2"]);
    let k1 = store.entry("k1").expect("k1");
    assert_eq!(k1.producer_id, "edge-1");
    assert!(k1.subject_allowed("shop/orders"));
    assert!(!k1.subject_allowed("billing/ledger"));
    assert!(k1.repository_allowed("registry.example/acme/orders"));
    assert!(!k1.repository_allowed("registry.example/acmeco/orders"));
    let k2 = store.entry("k2").expect("k2");
    assert!(k2.subject_allowed("anything/at/all"));
    assert_eq!(
        k2.public_key,
        SigningKey::from_bytes(&[2; 32]).verifying_key()
    );
}

#[test]
fn structured_configuration_refusals_name_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pub(dir.path(), "a.pub", 1);
    let key = |extra: &str| {
        format!(
            "apiVersion: pacto.dev/evidence-trust/v1\nkeys:\n  - keyId: k1\n    producerId: p1\n    publicKeyFile: a.pub\n{extra}"
        )
    };
    let cases: Vec<(String, &str)> = vec![
        (
            "apiVersion: pacto.dev/evidence-trust/v2\nkeys: []\n".into(),
            "apiVersion: unsupported",
        ),
        ("apiVersion: pacto.dev/evidence-trust/v1\nkeys: []\n".into(), "the trust store is empty"),
        (key("    extra: 1\n"), "unknown field `extra`"),
        (
            "apiVersion: pacto.dev/evidence-trust/v1\nkeys:\n  - keyId: k_1\n    producerId: p1\n    publicKeyFile: a.pub\n".into(),
            "keys[0].keyId: \"k_1\" is not a valid identifier: contains '_'",
        ),
        (
            "apiVersion: pacto.dev/evidence-trust/v1\nkeys:\n  - keyId: k1\n    producerId: ..p\n    publicKeyFile: a.pub\n".into(),
            "keys[0].producerId",
        ),
        (
            key("  - keyId: k1\n    producerId: p1\n    publicKeyFile: a.pub\n"),
            "keys[1].keyId: duplicate key id \"k1\"",
        ),
        (
            key("  - keyId: k2\n    producerId: p2\n    publicKeyFile: a.pub\n"),
            "keys[1].publicKeyFile: \"a.pub\" is already bound to producer \"p1\"",
        ),
        (
            "apiVersion: pacto.dev/evidence-trust/v1\nkeys:\n  - keyId: k1\n    producerId: p1\n    publicKeyFile: ../a.pub\n".into(),
            "keys[0].publicKeyFile: \"../a.pub\" must be a bare file name",
        ),
        (
            "apiVersion: pacto.dev/evidence-trust/v1\nkeys:\n  - keyId: k1\n    producerId: p1\n    publicKeyFile: missing.pub\n".into(),
            "missing.pub: No such file",
        ),
        (key("    allowedSubjects: [\"shop/[\"]\n"), "keys[0].allowedSubjects[0]: \"shop/[\" is not a valid glob"),
        (key("    allowedContractRepos: [\"\"]\n"), "keys[0].allowedContractRepos[0]: \"\" is empty"),
        (key("    allowedContractRepos: [\"a b\"]\n"), "contains whitespace"),
        (key("    allowedContractRepos: [\"oci://r/x\"]\n"), "must not contain oci://"),
        (key("    allowedContractRepos: [\"r/x@sha256:1\"]\n"), "must not contain @"),
    ];
    for (yaml, want) in cases {
        let err = config(dir.path(), &yaml).expect_err(&yaml);
        let text = pacto_contract::error_chain(&err);
        assert!(text.contains(want), "{yaml}\n=> {text}\nwant {want}");
    }
}

#[test]
fn bare_files_and_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pub(dir.path(), "edge-1__k1.pub", 1);
    write_pub(dir.path(), "solo.pub", 2);
    std::fs::write(dir.path().join("notes.txt"), "ignored").expect("write");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    write_pub(&dir.path().join("sub"), "nested.pub", 3);
    let store = TrustStore::load(dir.path()).expect("loads");
    assert_eq!(store.key_ids().collect::<Vec<_>>(), ["k1", "solo"]);
    assert_eq!(store.entry("k1").expect("k1").producer_id, "edge-1");
    assert_eq!(store.entry("solo").expect("solo").producer_id, "solo");
    assert!(store.entry("k1").expect("k1").subjects.is_empty());

    let one = TrustStore::load(&dir.path().join("solo.pub")).expect("one file");
    assert_eq!(one.len(), 1);

    // a duplicate key id across producers
    write_pub(dir.path(), "edge-2__k1.pub", 4);
    let err = TrustStore::load(dir.path()).expect_err("duplicate");
    assert!(err.to_string().contains("duplicate key id \"k1\""), "{err}");

    let empty = tempfile::tempdir().expect("tempdir");
    let err = TrustStore::load(empty.path()).expect_err("empty");
    assert!(
        err.to_string().contains("the trust store is empty"),
        "{err}"
    );

    let err = TrustStore::load(&dir.path().join("notes.txt")).expect_err("not a key");
    assert!(matches!(err, TrustError::UnknownSource { .. }), "{err}");

    std::fs::write(dir.path().join("bad.pub"), "AAAA\n").expect("write");
    let err = TrustStore::load(&dir.path().join("bad.pub")).expect_err("short key");
    assert!(
        err.to_string()
            .contains("the public key is 3 bytes, expected 32"),
        "{err}"
    );
}
