//! Signing and verification (docs/design/envelopes.md#verify), and [`admit`]: every check of
//! ingestion that needs no registry, in the protocol's order.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature as Ed25519Signature, Signer as _, SigningKey, Verifier as _};
use pacto_engine::{Timestamp, ValidationErrors};

use crate::codes::ErrorCode;
use crate::envelope::{ALGORITHM, API_VERSION, Envelope, EnvelopeError, KIND, Signature};
use crate::trust::{ContractRef, ContractRefError, TrustEntry, TrustStore};

/// Signs the envelope in place with `key` over its canonical bytes (an empty apiVersion or
/// kind is filled in first). Setting `producer.keyId` is the caller's job.
pub fn sign(envelope: &mut Envelope, key: &SigningKey) -> Result<(), EnvelopeError> {
    if envelope.api_version.is_empty() {
        API_VERSION.clone_into(&mut envelope.api_version);
    }
    if envelope.kind.is_empty() {
        KIND.clone_into(&mut envelope.kind);
    }
    let bytes = envelope.canonical_bytes()?;
    let signature = key.sign(&bytes);
    envelope.signature = Some(Signature {
        algorithm: ALGORITHM.to_owned(),
        value: STANDARD.encode(signature.to_bytes()),
    });
    Ok(())
}

/// What is wrong with a signature value (never carries key or signature bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureProblem {
    /// Not padded standard base64.
    Encoding,
    /// Not 64 bytes.
    Length(usize),
    /// The canonical bytes could not be built.
    Canonical,
    /// Ed25519 verification failed (tampered content, another key, a corrupt signature).
    Mismatch,
}

impl std::fmt::Display for SignatureProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Encoding => f.write_str("signature.value is not standard base64"),
            Self::Length(n) => write!(f, "signature.value decodes to {n} bytes, expected 64"),
            Self::Canonical => f.write_str("the canonical bytes could not be built"),
            Self::Mismatch => f.write_str(
                "the signature does not match the envelope's canonical bytes under the key",
            ),
        }
    }
}

/// Why [`verify`] refused an envelope. All but `Structure` map to `unauthorized_producer`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The structure checks failed (`invalid_envelope`).
    #[error(transparent)]
    Structure(#[from] EnvelopeError),
    /// No `signature`.
    #[error("signature: the envelope is not signed")]
    Unsigned,
    /// `signature.algorithm` is not `Ed25519`.
    #[error("signature.algorithm: unsupported {found:?} (expected \"Ed25519\")")]
    BadAlgorithm {
        /// The algorithm named.
        found: String,
    },
    /// `producer.keyId` is not in the trust store.
    #[error("producer.keyId: key {key_id:?} is not trusted")]
    UnknownKey {
        /// The key id.
        key_id: String,
    },
    /// The signature does not verify.
    #[error("signature verification failed for key {key_id:?}: {problem}")]
    BadSignature {
        /// The key id.
        key_id: String,
        /// What failed.
        problem: SignatureProblem,
    },
    /// The key is bound to another producer.
    #[error("producer.id: {claimed:?} is not authorized for key {key_id:?} (bound to {bound:?})")]
    ProducerMismatch {
        /// The key id.
        key_id: String,
        /// The producer the key is bound to.
        bound: String,
        /// The producer the envelope claims.
        claimed: String,
    },
    /// The subject is outside the key's allowed subjects.
    #[error(
        "evidenceSet.Subject.name: {subject:?} is outside the subjects allowed for key {key_id:?}"
    )]
    SubjectNotAllowed {
        /// The key id.
        key_id: String,
        /// The subject name.
        subject: String,
    },
    /// `now` is after `expiresAt`.
    #[error("expiresAt: the envelope expired at {expires_at} (now {now})")]
    Expired {
        /// The expiry.
        expires_at: Timestamp,
        /// The verifier's clock.
        now: Timestamp,
    },
    /// `now` is before `issuedAt` (no clock-skew allowance).
    #[error("issuedAt: the envelope is not valid before {issued_at} (now {now})")]
    NotYetValid {
        /// The issue time.
        issued_at: Timestamp,
        /// The verifier's clock.
        now: Timestamp,
    },
}

impl VerifyError {
    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Structure(e) => e.code(),
            _ => ErrorCode::UnauthorizedProducer,
        }
    }
}

/// Verifies signature, producer binding, subject scope and freshness against `trust` at
/// `now`, in the protocol's order (the first failing check is reported). Returns the key's
/// trust entry.
pub fn verify<'t>(
    envelope: &Envelope,
    trust: &'t TrustStore,
    now: Timestamp,
) -> Result<&'t TrustEntry, VerifyError> {
    envelope.validate_structure()?;
    let signature = envelope.signature.as_ref().ok_or(VerifyError::Unsigned)?;
    if signature.algorithm != ALGORITHM {
        return Err(VerifyError::BadAlgorithm {
            found: signature.algorithm.clone(),
        });
    }
    let key_id = &envelope.producer.key_id;
    let entry = trust.entry(key_id).ok_or_else(|| VerifyError::UnknownKey {
        key_id: key_id.clone(),
    })?;
    let bad = |problem| VerifyError::BadSignature {
        key_id: key_id.clone(),
        problem,
    };
    let bytes = STANDARD
        .decode(&signature.value)
        .map_err(|_| bad(SignatureProblem::Encoding))?;
    let bytes: [u8; 64] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| bad(SignatureProblem::Length(bytes.len())))?;
    let message = envelope
        .canonical_bytes()
        .map_err(|_| bad(SignatureProblem::Canonical))?;
    // RFC 8032 Ed25519 as Go's crypto/ed25519.Verify: canonical S required, cofactorless
    // equation, small-order keys not rejected (verify_strict would refuse what Go accepts)
    entry
        .public_key
        .verify(&message, &Ed25519Signature::from_bytes(&bytes))
        .map_err(|_| bad(SignatureProblem::Mismatch))?;
    if !entry.producer_id.is_empty() && envelope.producer.id != entry.producer_id {
        return Err(VerifyError::ProducerMismatch {
            key_id: key_id.clone(),
            bound: entry.producer_id.clone(),
            claimed: envelope.producer.id.clone(),
        });
    }
    let subject = &envelope.evidence_set.subject.name;
    if !entry.subject_allowed(subject) {
        return Err(VerifyError::SubjectNotAllowed {
            key_id: key_id.clone(),
            subject: subject.clone(),
        });
    }
    if !envelope.expires_at.is_zero() && now > envelope.expires_at {
        return Err(VerifyError::Expired {
            expires_at: envelope.expires_at,
            now,
        });
    }
    if !envelope.issued_at.is_zero() && now < envelope.issued_at {
        return Err(VerifyError::NotYetValid {
            issued_at: envelope.issued_at,
            now,
        });
    }
    Ok(entry)
}

/// An envelope that passed every registry-free check of ingestion.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// The decoded envelope.
    pub envelope: Envelope,
    /// The key's trust entry.
    pub entry: TrustEntry,
    /// The ContractRef, parsed.
    pub contract_ref: ContractRef,
}

/// Why [`admit`] refused an envelope; [`Refusal::code`] is the protocol's stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Size, JSON, unknown keys, structure (`invalid_envelope`).
    #[error("invalid envelope")]
    Envelope(#[source] EnvelopeError),
    /// Signature, key, producer, subject, freshness (`unauthorized_producer`).
    #[error("unauthorized producer")]
    Verify(#[source] VerifyError),
    /// The evidence set failed validation (`invalid_evidence`).
    #[error("invalid evidence")]
    Evidence(#[source] ValidationErrors),
    /// The ContractRef policy (`contract_ref_rejected`).
    #[error("contract ref rejected")]
    ContractRef(#[source] ContractRefError),
}

impl Refusal {
    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Envelope(e) => e.code(),
            Self::Verify(e) => e.code(),
            Self::Evidence(_) => ErrorCode::InvalidEvidence,
            Self::ContractRef(e) => e.code(),
        }
    }
}

/// Decode, verify, validate the evidence set, then the ContractRef policy — ingestion's
/// steps 2–6, which need no registry. Replay is checked later, against the stored history
/// ([`crate::ReplayIndex`]).
pub fn admit(bytes: &[u8], trust: &TrustStore, now: Timestamp) -> Result<Admitted, Refusal> {
    let envelope = Envelope::decode(bytes).map_err(Refusal::Envelope)?;
    let entry = verify(&envelope, trust, now)
        .map_err(|e| match e {
            VerifyError::Structure(e) => Refusal::Envelope(e),
            e => Refusal::Verify(e),
        })?
        .clone();
    envelope
        .evidence_set
        .to_engine()
        .validate()
        .map_err(Refusal::Evidence)?;
    let contract_ref = entry
        .authorize_contract_ref(
            &envelope.producer.key_id,
            &envelope.evidence_set.contract_ref,
        )
        .map_err(Refusal::ContractRef)?;
    Ok(Admitted {
        envelope,
        entry,
        contract_ref,
    })
}
