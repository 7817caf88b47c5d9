//! Fuzzes what the Evidence Server and `pacto evidence verify` run on a received body: the
//! strict envelope decode, verification against a trust store, evidence validation and the
//! ContractRef policy (`pacto_evidence::admit`), and the standalone evidence-set decode of
//! `pacto evidence sign`. Nothing may panic. A decoded envelope has canonical bytes, its own
//! JSON decodes back to the same envelope with the same canonical bytes, and once signed with
//! a trusted key it never fails on its signature.

use pacto_engine::Timestamp;
use pacto_evidence::{
    Envelope, MAX_ENVELOPE_BYTES, SignedEvidenceSet, TrustEntry, TrustStore, VerifyError, admit,
    keys, sign, verify,
};

/// The golden vectors' test key (services/evidence/tests/vectors/test.key).
const SEED: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// One fuzz input: panics on any broken property.
pub fn check(data: &[u8]) {
    let key = keys::parse_signing_key(std::path::Path::new("seed"), SEED).expect("seed");
    let now = Timestamp::parse("2026-12-04T10:30:00Z").expect("now");

    if let Ok(set) = SignedEvidenceSet::from_json(data) {
        let _ = set.content_id();
        let _ = set.to_engine().validate();
    }

    let Ok(envelope) = Envelope::decode(data) else {
        return;
    };
    let canonical = envelope
        .canonical_bytes()
        .expect("a decoded envelope has canonical bytes");
    let json = envelope.to_json();
    if json.len() <= MAX_ENVELOPE_BYTES {
        let again = Envelope::decode(json.as_bytes()).expect("its own JSON decodes");
        assert_eq!(again, envelope);
        assert_eq!(again.canonical_bytes().expect("canonical"), canonical);
    }

    let mut trust = TrustStore::new();
    trust.insert(
        envelope.producer.key_id.clone(),
        TrustEntry::new(key.verifying_key(), envelope.producer.id.clone()),
    );
    // as received (signed by anyone, or not at all)
    let _ = admit(data, &trust, now);
    // signed with the trusted key: only the freshness checks may refuse it
    let mut signed = envelope.clone();
    sign(&mut signed, &key).expect("sign");
    let at = if signed.issued_at.is_zero() {
        signed.expires_at
    } else {
        signed.issued_at
    };
    match verify(&signed, &trust, at) {
        Ok(_) | Err(VerifyError::Expired { .. } | VerifyError::NotYetValid { .. }) => {}
        Err(other) => panic!("a freshly signed envelope was refused: {other}"),
    }
}
