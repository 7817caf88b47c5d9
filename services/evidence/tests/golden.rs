//! Golden vectors pinning the canonical bytes, the signature, the default id and the Go JSON
//! form of envelopes (docs/design/envelopes.md#golden-vectors).
//!
//! The expected files under `tests/vectors/<name>/` were written by Go's own `encoding/json`
//! and `crypto/ed25519` (`tests/vectors/generate.go`), not by this crate, so they also check
//! compatibility with Go signers and verifiers. Any drift of the canonical form fails here.

use std::path::{Path, PathBuf};

use pacto_engine::Timestamp;
use pacto_evidence::keys;
use pacto_evidence::{Envelope, TrustEntry, TrustStore, sign, verify};

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(path: &Path) -> String {
    String::from_utf8(read(path)).expect("utf-8")
}

/// Every vector directory; the list is fixed so that a lost vector fails too.
const NAMES: [&str; 4] = [
    "01-minimal",
    "02-empty-observations",
    "03-all-kinds",
    "04-escapes",
];

fn test_key() -> ed25519_dalek::SigningKey {
    keys::read_signing_key(&vectors().join("test.key")).expect("test key")
}

#[test]
fn the_vector_set_is_complete() {
    let mut found: Vec<String> = std::fs::read_dir(vectors())
        .expect("vectors dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().join("input.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(found, NAMES);
    let public = keys::read_verifying_key(&vectors().join("test.pub")).expect("test.pub");
    assert_eq!(
        public,
        test_key().verifying_key(),
        "test.pub is test.key's public key"
    );
}

#[test]
fn canonical_bytes_match_go() {
    for name in NAMES {
        let dir = vectors().join(name);
        let envelope = Envelope::decode(&read(&dir.join("input.json")))
            .unwrap_or_else(|e| panic!("{name}: decode: {e}"));
        let canonical = envelope.canonical_bytes().expect("canonical");
        let want = read(&dir.join("canonical.json"));
        assert!(
            canonical == want,
            "{name}: canonical bytes drifted\n got: {}\nwant: {}",
            String::from_utf8_lossy(&canonical),
            String::from_utf8_lossy(&want)
        );
    }
}

#[test]
fn signatures_match_go() {
    let key = test_key();
    for name in NAMES {
        let dir = vectors().join(name);
        let mut envelope = Envelope::decode(&read(&dir.join("input.json"))).expect("decode");
        sign(&mut envelope, &key).expect("sign");
        let signature = envelope.signature.expect("signed");
        assert_eq!(signature.algorithm, "Ed25519");
        assert_eq!(
            signature.value,
            text(&dir.join("signature.txt")).trim(),
            "{name}: signature drifted"
        );
    }
}

#[test]
fn go_signed_envelopes_verify_and_reencode_byte_for_byte() {
    let key = test_key();
    for name in NAMES {
        let dir = vectors().join(name);
        let signed = read(&dir.join("signed.json"));
        let envelope = Envelope::decode(&signed).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut trust = TrustStore::new();
        trust.insert(
            envelope.producer.key_id.clone(),
            TrustEntry::new(key.verifying_key(), envelope.producer.id.clone()),
        );
        // inside every vector's validity window
        let now = Timestamp::parse("2026-12-04T10:30:00Z").expect("now");
        verify(&envelope, &trust, now).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            envelope.to_json().as_bytes() == signed.as_slice(),
            "{name}: Go JSON form drifted\n got: {}\nwant: {}",
            envelope.to_json(),
            String::from_utf8_lossy(&signed)
        );
    }
}

#[test]
fn default_ids_match_go() {
    for name in NAMES {
        let dir = vectors().join(name);
        let envelope = Envelope::decode(&read(&dir.join("input.json"))).expect("decode");
        let id = Envelope::default_id(
            &envelope.producer.id,
            envelope.sequence,
            &envelope.evidence_set,
        );
        assert_eq!(
            id,
            text(&dir.join("id.txt")).trim(),
            "{name}: default id drifted"
        );
    }
}
