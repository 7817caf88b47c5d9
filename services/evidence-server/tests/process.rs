//! The `pacto-evidence-server` binary refuses to start on bad configuration, naming what is wrong
//! (the flag, the file, the entry), before binding anything.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::process::Command;

fn start(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pacto-evidence-server"))
        .args([
            "--insecure",
            "--listen-address=127.0.0.1:0",
            "--admin-addr=127.0.0.1:0",
        ])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_configuration_stops_the_start_with_a_precise_error() {
    let dir = tempfile::tempdir().unwrap();
    let good_subject = format!(
        "--subject=oci://127.0.0.1:5000/team/svc@sha256:{}",
        "a".repeat(64)
    );

    // a trust path that does not exist
    let missing = dir.path().join("missing.yaml");
    let (ok, err) = start(&[&format!("--trust={}", missing.display()), &good_subject]);
    assert!(!ok);
    assert!(
        err.contains("--trust") && err.contains("missing.yaml"),
        "{err}"
    );

    // a trust configuration with an unknown apiVersion
    let trust = dir.path().join("trust.yaml");
    std::fs::write(
        &trust,
        "apiVersion: pacto.dev/evidence-trust/v0\nkeys: []\n",
    )
    .unwrap();
    let (ok, err) = start(&[&format!("--trust={}", trust.display()), &good_subject]);
    assert!(!ok);
    assert!(err.contains("apiVersion"), "{err}");

    // a valid trust directory, one subject with a tag instead of a digest
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let key = pacto_evidence::keys::generate().unwrap();
    std::fs::write(
        keys.join("ci__ci-1.pub"),
        pacto_evidence::keys::verifying_key_text(&key.verifying_key()),
    )
    .unwrap();
    let (ok, err) = start(&[
        &format!("--trust={}", keys.display()),
        &good_subject,
        "--subject=oci://127.0.0.1:5000/team/svc:1.0.0",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--subject") && err.contains("oci://127.0.0.1:5000/team/svc:1.0.0"),
        "{err}"
    );
}
