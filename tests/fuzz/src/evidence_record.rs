//! Fuzzes the evidence store's read side on a stored payload (docs/design/evidence-store.md#read-side-validation):
//! the strict record decode with its subject checks, and the `/targets` projection of what it
//! accepts. Nothing may panic. A record that decodes writes a payload that decodes back to the
//! same record, and its artifact is deterministic.

use pacto_evidence::store::{Record, Subject};
use pacto_oci::ArtifactDescriptor;

const SUBJECT: &str = "oci://registry.example/acme/orders@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// One fuzz input: panics on any broken property.
pub fn check(data: &[u8]) {
    let subject = Subject::parse(SUBJECT).expect("subject");
    let _ = Record::from_payload(data, &subject);
    let Ok(record) = Record::decode_payload(data) else {
        return;
    };
    let payload = record.to_payload();
    let again = Record::decode_payload(&payload).expect("its own payload decodes");
    assert_eq!(again, record);
    let descriptor = ArtifactDescriptor {
        media_type: "application/vnd.oci.image.manifest.v1+json".to_owned(),
        digest: subject.digest().to_owned(),
        size: 1,
        artifact_type: None,
    };
    assert_eq!(record.artifact(&descriptor), again.artifact(&descriptor));
}
