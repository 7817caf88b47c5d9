//! Every refusal of the envelope protocol, each with its typed error and stable code
//! (docs/design/envelopes.md#refusals): wrong key, unknown key, replayed id and sequence,
//! expired and not-yet-valid envelopes, an unknown or mismatched producer, a subject out of
//! scope, an oversized body, a tampered payload, and the decode-time errors with their field
//! paths.

use std::path::Path;

use ed25519_dalek::SigningKey;
use pacto_engine::Timestamp;
use pacto_evidence::{
    Envelope, EnvelopeError, ErrorCode, MAX_ENVELOPE_BYTES, Producer, Refusal, ReplayError,
    ReplayIndex, SignatureProblem, SignedEvidenceSet, TrustEntry, TrustStore, VerifyError, admit,
    keys, sign, verify,
};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn key() -> SigningKey {
    keys::read_signing_key(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/test.key"))
        .expect("test key")
}

fn other_key() -> SigningKey {
    SigningKey::from_bytes(&[42u8; 32])
}

fn ts(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("timestamp")
}

fn evidence(subject: &str) -> SignedEvidenceSet {
    let text = format!(
        r#"{{"Subject":{{"kind":"service","name":"{subject}"}},"ContractRef":"oci://registry.example/acme/orders@{DIGEST}","Source":"edge","ObservedAt":"2026-12-04T09:59:30Z","Observations":[{{"kind":"CapabilityObserved","subject":{{"kind":"capability","name":"health"}},"outcome":"Observed","value":{{"present":true}},"provenance":{{"collector":"edge","detectedAt":"2026-12-04T09:59:00Z"}}}}]}}"#
    );
    SignedEvidenceSet::from_json(text.as_bytes()).expect("evidence set")
}

fn envelope(id: &str, producer: &str, key_id: &str, sequence: u64) -> Envelope {
    Envelope::new(
        id,
        Producer {
            id: producer.into(),
            version: "1.0.0".into(),
            key_id: key_id.into(),
        },
        sequence,
        ts("2026-12-04T10:00:00Z"),
        ts("2026-12-05T10:00:00Z"),
        evidence("shop/orders"),
    )
}

fn signed(mut e: Envelope, key: &SigningKey) -> Envelope {
    sign(&mut e, key).expect("sign");
    e
}

fn trust() -> TrustStore {
    let mut store = TrustStore::new();
    let mut entry = TrustEntry::new(key().verifying_key(), "edge-1");
    entry.subjects = vec!["shop/*".into()];
    entry.contract_repos = vec!["registry.example/acme".into()];
    store.insert("k1", entry);
    store
}

fn now() -> Timestamp {
    ts("2026-12-04T12:00:00Z")
}

fn refusal_of(bytes: &[u8]) -> Refusal {
    admit(bytes, &trust(), now()).expect_err("refused")
}

#[test]
fn a_valid_envelope_is_admitted() {
    let e = signed(envelope("id-1", "edge-1", "k1", 1), &key());
    let admitted = admit(e.to_json().as_bytes(), &trust(), now()).expect("admitted");
    assert_eq!(
        admitted.contract_ref.repository,
        "registry.example/acme/orders"
    );
    assert_eq!(admitted.envelope, e);
}

#[test]
fn wrong_key() {
    // signed with a key that is not the one trusted under k1
    let e = signed(envelope("id-1", "edge-1", "k1", 1), &other_key());
    let err = verify(&e, &trust(), now()).expect_err("refused");
    assert_eq!(
        err,
        VerifyError::BadSignature {
            key_id: "k1".into(),
            problem: SignatureProblem::Mismatch
        }
    );
    assert_eq!(err.code(), ErrorCode::UnauthorizedProducer);
    assert_eq!(
        refusal_of(e.to_json().as_bytes()).code().as_str(),
        "unauthorized_producer"
    );
}

#[test]
fn unknown_key_and_unknown_producer() {
    let e = signed(envelope("id-1", "edge-9", "k9", 1), &key());
    let err = verify(&e, &trust(), now()).expect_err("refused");
    assert_eq!(
        err,
        VerifyError::UnknownKey {
            key_id: "k9".into()
        }
    );
    assert_eq!(err.code(), ErrorCode::UnauthorizedProducer);
}

#[test]
fn producer_not_bound_to_the_key() {
    // a trusted key claiming another producer
    let e = signed(envelope("id-1", "edge-2", "k1", 1), &key());
    let err = verify(&e, &trust(), now()).expect_err("refused");
    assert_eq!(
        err,
        VerifyError::ProducerMismatch {
            key_id: "k1".into(),
            bound: "edge-1".into(),
            claimed: "edge-2".into()
        }
    );
    assert_eq!(err.code(), ErrorCode::UnauthorizedProducer);
}

#[test]
fn subject_out_of_scope() {
    let mut e = envelope("id-1", "edge-1", "k1", 1);
    e.evidence_set = evidence("billing/ledger");
    let e = signed(e, &key());
    let err = verify(&e, &trust(), now()).expect_err("refused");
    assert_eq!(
        err,
        VerifyError::SubjectNotAllowed {
            key_id: "k1".into(),
            subject: "billing/ledger".into()
        }
    );
    assert_eq!(err.code(), ErrorCode::UnauthorizedProducer);
    // a glob does not cross '/'
    let mut e = envelope("id-2", "edge-1", "k1", 2);
    e.evidence_set = evidence("shop/orders/extra");
    assert!(matches!(
        verify(&signed(e, &key()), &trust(), now()),
        Err(VerifyError::SubjectNotAllowed { .. })
    ));
}

#[test]
fn expired_and_not_yet_valid() {
    let e = signed(envelope("id-1", "edge-1", "k1", 1), &key());
    let expires = ts("2026-12-05T10:00:00Z");
    // the expiry instant itself is still valid (refused only after it)
    assert!(verify(&e, &trust(), expires).is_ok());
    let later = ts("2026-12-05T10:00:00.000000001Z");
    let err = verify(&e, &trust(), later).expect_err("expired");
    assert_eq!(
        err,
        VerifyError::Expired {
            expires_at: expires,
            now: later
        }
    );
    assert_eq!(err.code(), ErrorCode::UnauthorizedProducer);
    let early = ts("2026-12-04T09:59:59.999Z");
    let err = verify(&e, &trust(), early).expect_err("not yet valid");
    assert!(matches!(err, VerifyError::NotYetValid { .. }), "{err}");
    assert_eq!(err.code(), ErrorCode::UnauthorizedProducer);
    // zero times disable both checks
    let mut forever = envelope("id-2", "edge-1", "k1", 2);
    forever.issued_at = Timestamp::zero();
    forever.expires_at = Timestamp::zero();
    let forever = signed(forever, &key());
    assert!(verify(&forever, &trust(), ts("9999-01-01T00:00:00Z")).is_ok());
    assert!(verify(&forever, &trust(), ts("1970-01-01T00:00:00Z")).is_ok());
}

#[test]
fn replayed_id_and_sequence() {
    let mut index = ReplayIndex::new();
    index.accept("id-1", "edge-1", 5).expect("first");
    let err = index.check("id-1", "edge-1", 6).expect_err("replayed id");
    assert_eq!(err, ReplayError::DuplicateId { id: "id-1".into() });
    assert_eq!(err.code(), ErrorCode::Replay);
    assert_eq!(err.code().http_status(), 409);
    // ids are unique across producers too
    assert!(index.check("id-1", "edge-2", 0).is_err());
    let err = index.check("id-2", "edge-1", 5).expect_err("same sequence");
    assert_eq!(
        err,
        ReplayError::StaleSequence {
            producer: "edge-1".into(),
            sequence: 5,
            max: 5
        }
    );
    assert!(index.check("id-2", "edge-1", 4).is_err());
    index.accept("id-2", "edge-1", 6).expect("strictly greater");
    // a producer's first envelope may use any sequence, 0 included
    index.accept("id-3", "edge-2", 0).expect("first of edge-2");
    assert_eq!(index.max_sequence("edge-1"), Some(6));
    assert_eq!(index.len(), 3);
}

#[test]
fn key_rotation_keeps_the_producer_and_its_sequence() {
    let old = key();
    let new = other_key();
    let mut store = TrustStore::new();
    store.insert("k-old", TrustEntry::new(old.verifying_key(), "edge-1"));
    store.insert("k-new", TrustEntry::new(new.verifying_key(), "edge-1"));
    let mut index = ReplayIndex::new();
    let first = signed(envelope("id-1", "edge-1", "k-old", 1), &old);
    let second = signed(envelope("id-2", "edge-1", "k-new", 2), &new);
    for e in [&first, &second] {
        verify(e, &store, now()).expect("both keys trusted during rotation");
        index
            .accept(&e.id, &e.producer.id, e.sequence)
            .expect("fresh");
    }
    // a new key does not reset the producer's sequence
    let stale = signed(envelope("id-3", "edge-1", "k-old", 2), &old);
    verify(&stale, &store, now()).expect("still a valid signature");
    assert!(matches!(
        index.check(&stale.id, &stale.producer.id, stale.sequence),
        Err(ReplayError::StaleSequence { max: 2, .. })
    ));
    // retiring the old key
    store.remove("k-old");
    assert_eq!(
        verify(&first, &store, now()),
        Err(VerifyError::UnknownKey {
            key_id: "k-old".into()
        })
    );
    assert!(verify(&second, &store, now()).is_ok());
    // a new key id signed by the old key does not verify
    let forged = signed(envelope("id-4", "edge-1", "k-new", 3), &old);
    assert!(matches!(
        verify(&forged, &store, now()),
        Err(VerifyError::BadSignature { .. })
    ));
}

#[test]
fn oversized_body() {
    let e = signed(envelope("id-1", "edge-1", "k1", 1), &key());
    let mut body = e.to_json().into_bytes();
    // whitespace padding up to exactly the limit is still decoded and verified
    body.resize(MAX_ENVELOPE_BYTES, b' ');
    assert!(admit(&body, &trust(), now()).is_ok());
    body.push(b' ');
    let refusal = refusal_of(&body);
    assert_eq!(
        refusal,
        Refusal::Envelope(EnvelopeError::TooLarge {
            size: MAX_ENVELOPE_BYTES + 1
        })
    );
    assert_eq!(refusal.code(), ErrorCode::InvalidEnvelope);
    assert_eq!(refusal.code().http_status(), 400);
}

#[test]
fn too_many_observations() {
    // the smallest observation that decodes (provenance is checked later, by validation)
    let one = r#"{"kind":"CapabilityObserved","subject":{"kind":"capability","name":"h"},"outcome":"Failed"}"#;
    let build = |n: usize| {
        let list = vec![one; n].join(",");
        format!(
            r#"{{"apiVersion":"pacto.dev/evidence/v1","kind":"EvidenceEnvelope","id":"i","producer":{{"id":"edge-1","keyId":"k1"}},"evidenceSet":{{"Observations":[{list}]}}}}"#
        )
    };
    let at_limit = build(10_000);
    assert!(at_limit.len() <= MAX_ENVELOPE_BYTES, "{}", at_limit.len());
    assert!(Envelope::decode(at_limit.as_bytes()).is_ok());
    let over = build(10_001);
    assert!(over.len() <= MAX_ENVELOPE_BYTES, "{}", over.len());
    assert_eq!(
        Envelope::decode(over.as_bytes()),
        Err(EnvelopeError::TooManyObservations { count: 10_001 })
    );
}

#[test]
fn tampered_payload() {
    let e = signed(envelope("id-1", "edge-1", "k1", 1), &key());
    let text = e.to_json();
    // re-formatting is not tampering: the canonical bytes come from the decoded envelope
    let pretty = text.replace(",\"", ",\n  \"");
    assert!(admit(pretty.as_bytes(), &trust(), now()).is_ok());
    for (what, from, to) in [
        ("payload", "\"present\":true", "\"present\":false"),
        ("sequence", "\"sequence\":1", "\"sequence\":2"),
        ("subject", "shop/orders", "shop/ordersx"),
        ("expiry", "2026-12-05T10:00:00Z", "2026-12-06T10:00:00Z"),
        (
            "producer version",
            "\"version\":\"1.0.0\"",
            "\"version\":\"1.0.1\"",
        ),
    ] {
        assert!(text.contains(from), "{what}");
        let tampered = text.replacen(from, to, 1);
        let refusal = refusal_of(tampered.as_bytes());
        assert_eq!(
            refusal,
            Refusal::Verify(VerifyError::BadSignature {
                key_id: "k1".into(),
                problem: SignatureProblem::Mismatch
            }),
            "{what}"
        );
        assert_eq!(refusal.code(), ErrorCode::UnauthorizedProducer, "{what}");
    }
}

#[test]
fn signature_field_refusals() {
    let e = signed(envelope("id-1", "edge-1", "k1", 1), &key());
    let value = e.signature.clone().expect("signed").value;
    let mut unsigned = e.clone();
    unsigned.signature = None;
    assert_eq!(
        verify(&unsigned, &trust(), now()),
        Err(VerifyError::Unsigned)
    );
    let mut other_alg = e.clone();
    other_alg.signature.as_mut().expect("signed").algorithm = "RSA".into();
    assert_eq!(
        verify(&other_alg, &trust(), now()),
        Err(VerifyError::BadAlgorithm {
            found: "RSA".into()
        })
    );
    let mut not_b64 = e.clone();
    not_b64.signature.as_mut().expect("signed").value = "!!".into();
    let err = verify(&not_b64, &trust(), now()).expect_err("bad base64");
    assert!(matches!(
        err,
        VerifyError::BadSignature {
            problem: SignatureProblem::Encoding,
            ..
        }
    ));
    let mut short = e.clone();
    short.signature.as_mut().expect("signed").value = "AAAA".into();
    assert!(matches!(
        verify(&short, &trust(), now()),
        Err(VerifyError::BadSignature {
            problem: SignatureProblem::Length(3),
            ..
        })
    ));
    // no message carries signature or key bytes
    for err in [err, VerifyError::UnknownKey { key_id: "k".into() }] {
        let text = err.to_string();
        assert!(!text.contains(&value), "{text}");
    }
    let wrong = signed(envelope("id-1", "edge-1", "k1", 1), &other_key());
    let text = verify(&wrong, &trust(), now())
        .expect_err("wrong")
        .to_string();
    let sig = wrong.signature.expect("signed").value;
    assert!(!text.contains(&sig) && !text.contains(&sig[..16]), "{text}");
}

fn decode_err(text: &str) -> EnvelopeError {
    Envelope::decode(text.as_bytes()).expect_err("refused")
}

const HEAD: &str = r#""apiVersion":"pacto.dev/evidence/v1","kind":"EvidenceEnvelope","id":"i","producer":{"id":"p","keyId":"k"}"#;

fn field(err: &EnvelopeError) -> (&str, &str) {
    match err {
        EnvelopeError::Field { path, message } => (path, message),
        other => panic!("not a field error: {other}"),
    }
}

#[test]
fn decode_errors_name_the_field() {
    let obs = |body: &str| {
        decode_err(&format!(
            r#"{{{HEAD},"evidenceSet":{{"Observations":[{{"kind":"CapabilityObserved","subject":{{"kind":"capability","name":"h"}},"outcome":"Failed","provenance":{{"collector":"c","detectedAt":"2026-12-04T09:59:00Z"}}}},{body}]}}}}"#
        ))
    };
    let cases: Vec<(EnvelopeError, &str, &str)> = vec![
        (
            decode_err(&format!(r#"{{{HEAD},"extra":1}}"#)),
            "extra",
            "unknown field `extra`",
        ),
        (
            decode_err(
                r#"{"apiVersion":"pacto.dev/evidence/v1","kind":"EvidenceEnvelope","id":"i","producer":{"id":"p","keyId":"k","x":1}}"#,
            ),
            "producer.x",
            "unknown field `x`",
        ),
        (
            decode_err(&format!(r#"{{{HEAD},"id":"again"}}"#)),
            ".",
            "duplicate field `id`",
        ),
        (
            decode_err(&format!(r#"{{{HEAD},"signature":["Ed25519","AAAA"]}}"#)),
            "signature",
            "invalid type: array",
        ),
        (
            obs(r#"["CapabilityObserved",{"kind":"capability","name":"m"},"Failed"]"#),
            "evidenceSet.Observations[1]",
            "invalid type: array",
        ),
        (
            decode_err(&format!(r#"{{{HEAD},"sequence":-1}}"#)),
            "sequence",
            "invalid value",
        ),
        (
            decode_err(&format!(r#"{{{HEAD},"issuedAt":"yesterday"}}"#)),
            "issuedAt",
            "not an RFC3339 timestamp",
        ),
        (
            decode_err(&format!(
                r#"{{{HEAD},"evidenceSet":{{"SubjectMissing":true}}}}"#
            )),
            "evidenceSet.SubjectMissing",
            "unknown field",
        ),
        (
            obs(
                r#"{"kind":"CapabilityObserved","subject":{"kind":"capability","name":"m"},"outcome":"Failed","detail":"x","provenance":{"collector":"c","detectedAt":"2026-12-04T09:59:00Z"}}"#,
            ),
            "evidenceSet.Observations[1].detail",
            "unknown field `detail`",
        ),
        (
            obs(
                r#"{"kind":"CapabilityObserved","subject":{"kind":"capability","name":"m"},"outcome":"Gone","provenance":{"collector":"c","detectedAt":"2026-12-04T09:59:00Z"}}"#,
            ),
            "evidenceSet.Observations[1].outcome",
            "unknown outcome \"Gone\"",
        ),
        (
            obs(
                r#"{"kind":"CapabilityObserved","subject":{"kind":"interface","name":"m"},"outcome":"Failed","provenance":{"collector":"c","detectedAt":"2026-12-04T09:59:00Z"}}"#,
            ),
            "evidenceSet.Observations[1].subject.kind",
            "does not pair with kind CapabilityObserved",
        ),
        (
            obs(
                r#"{"kind":"CapabilityObserved","subject":{"kind":"capability","name":"m"},"outcome":"Failed","value":null,"provenance":{"collector":"c","detectedAt":"2026-12-04T09:59:00Z"}}"#,
            ),
            "evidenceSet.Observations[1].value",
            "must not carry a value",
        ),
        (
            obs(
                r#"{"kind":"CapabilityObserved","subject":{"kind":"capability","name":"m"},"outcome":"Observed","value":{"present":true,"extra":1},"provenance":{"collector":"c","detectedAt":"2026-12-04T09:59:00Z"}}"#,
            ),
            "evidenceSet.Observations[1].value",
            "unknown field `extra`",
        ),
        (
            obs(
                r#"{"kind":"CapabilityObserved","subject":{"kind":"capability","name":"m"},"outcome":"Failed","provenance":{"collector":"c","detectedAt":"later"}}"#,
            ),
            "evidenceSet.Observations[1].provenance.detectedAt",
            "not an RFC3339 timestamp",
        ),
    ];
    for (err, want_path, want_message) in cases {
        let (path, message) = field(&err);
        assert_eq!(path, want_path, "{err}");
        assert!(message.contains(want_message), "{err}");
        assert_eq!(err.code(), ErrorCode::InvalidEnvelope);
    }
}

#[test]
fn structure_and_trailing_data() {
    assert!(matches!(
        decode_err(&format!("{{{HEAD}}} }}")),
        EnvelopeError::TrailingData { .. }
    ));
    assert!(matches!(
        decode_err(&format!("{{{HEAD}}}]")),
        EnvelopeError::TrailingData { .. }
    ));
    assert!(Envelope::decode(format!("{{{HEAD}}}\n").as_bytes()).is_ok());
    assert_eq!(
        decode_err(r#"{"apiVersion":"pacto.dev/evidence/v2"}"#),
        EnvelopeError::UnsupportedVersion {
            found: "pacto.dev/evidence/v2".into()
        }
    );
    assert_eq!(
        decode_err(r#"{"apiVersion":"pacto.dev/evidence/v1","kind":"Envelope"}"#),
        EnvelopeError::UnsupportedKind {
            found: "Envelope".into()
        }
    );
    for (text, field) in [
        (
            r#"{"apiVersion":"pacto.dev/evidence/v1","kind":"EvidenceEnvelope","producer":{"id":"p","keyId":"k"}}"#,
            "id",
        ),
        (
            r#"{"apiVersion":"pacto.dev/evidence/v1","kind":"EvidenceEnvelope","id":"i","producer":{"keyId":"k"}}"#,
            "producer.id",
        ),
        (
            r#"{"apiVersion":"pacto.dev/evidence/v1","kind":"EvidenceEnvelope","id":"i","producer":{"id":"p"}}"#,
            "producer.keyId",
        ),
    ] {
        assert_eq!(decode_err(text), EnvelopeError::MissingField { field });
    }
    for text in ["[1]", ""] {
        let err = decode_err(text);
        assert_eq!(field(&err).0, ".", "{err}");
    }
}

#[test]
fn invalid_evidence_and_contract_ref() {
    let mut e = envelope("id-1", "edge-1", "k1", 1);
    e.evidence_set.source = String::new();
    let refusal = refusal_of(signed(e, &key()).to_json().as_bytes());
    assert!(matches!(refusal, Refusal::Evidence(_)), "{refusal}");
    assert_eq!(refusal.code(), ErrorCode::InvalidEvidence);
    assert_eq!(refusal.code().http_status(), 422);
    assert!(
        pacto_contract::error_chain(&refusal).contains("Source: must not be empty"),
        "{refusal}"
    );

    for contract_ref in [
        "oci://registry.example/other/orders@".to_owned() + DIGEST,
        "oci://registry.example/acme/orders:1.0.0".to_owned(),
    ] {
        let mut e = envelope("id-1", "edge-1", "k1", 1);
        e.evidence_set.contract_ref = contract_ref.clone();
        let refusal = refusal_of(signed(e, &key()).to_json().as_bytes());
        assert!(matches!(refusal, Refusal::ContractRef(_)), "{refusal}");
        assert_eq!(
            refusal.code(),
            ErrorCode::ContractRefRejected,
            "{contract_ref}"
        );
    }
}

#[test]
fn verification_order_decides_which_error_wins() {
    // unknown key beats a bad signature; producer mismatch beats subject scope and expiry
    let e = signed(envelope("id-1", "edge-1", "k9", 1), &other_key());
    assert!(matches!(
        verify(&e, &trust(), now()),
        Err(VerifyError::UnknownKey { .. })
    ));
    let mut e = envelope("id-1", "edge-2", "k1", 1);
    e.evidence_set = evidence("billing/ledger");
    let e = signed(e, &key());
    assert!(matches!(
        verify(&e, &trust(), ts("2030-01-01T00:00:00Z")),
        Err(VerifyError::ProducerMismatch { .. })
    ));
}
