//! Signed evidence envelopes, protocol `pacto.dev/evidence/v1` (docs/design/envelopes.md).
//!
//! A producer wraps an evidence set in an [`Envelope`], signs its canonical bytes with Ed25519
//! ([`sign`]) and sends it; a verifier decodes it strictly ([`Envelope::decode`]), checks it
//! against its [`TrustStore`] ([`verify`]) and, before storing it, against the accepted history
//! ([`ReplayIndex`]). [`admit`] runs every check that needs no registry, in the protocol's
//! order; each refusal has the protocol's stable [`ErrorCode`].
//!
//! The envelope part is pure apart from reading key and trust files a caller names and the
//! operating system's random source for key generation: no network, no clock (the caller passes
//! `now`). [`store`] is the registry side: records stored as OCI referrers of the contract
//! (docs/design/evidence-store.md); [`client`] the sending side: envelopes posted to an Evidence
//! Server (docs/design/envelopes.md#ingestion-client).
//!
//! - [`Envelope`], [`Producer`], [`Signature`], [`SignedEvidenceSet`], [`SignedObservation`]:
//!   the wire types; [`Envelope::canonical_bytes`] is what is signed;
//!   [`Envelope::to_json`] writes the envelope as Go would; [`Envelope::default_id`] is the
//!   CLI's default id.
//! - [`keys`]: key files, key ids, the identifier grammar, key generation.
//! - [`TrustStore`], [`TrustEntry`], [`ContractRef`]: trust, producer binding, subject and
//!   repository scopes.
//! - [`ReplayIndex`]: id uniqueness and per-producer sequences.
//! - [`glob`]: `path.Match` globs for subject scopes.
//! - [`client`]: [`IngestClient`], the one client of the Evidence Server's ingestion API.
//! - [`gojson`]: JSON string literals exactly as Go's `encoding/json` writes them.
//! - [`redact_url`]: a server URL as logs and errors show it (no userinfo credentials).
//! - [`store`]: [`Store`], [`Record`], [`Subject`]: evidence stored in the registry.

pub mod client;
mod codes;
mod envelope;
mod glob;
pub mod gojson;
pub mod keys;
mod redact;
mod replay;
pub mod store;
mod trust;
mod verify;

pub use client::{Acceptance, IngestClient, PostError};
pub use codes::ErrorCode;
pub use envelope::{
    ALGORITHM, API_VERSION, Envelope, EnvelopeError, KIND, MAX_ENVELOPE_BYTES,
    MAX_ENVELOPE_OBSERVATIONS, Producer, Signature, SignedEvidenceSet, SignedObservation,
};
pub use redact::redact_url;
pub use replay::{ReplayError, ReplayIndex};
pub use store::{
    CommitError, Committed, Readiness, Record, ReferrersMode, Retention, Scan, Store, StoreError,
    StoreOptions, Subject, Subjects, TargetsDto,
};
pub use trust::{
    ContractRef, ContractRefError, TRUST_API_VERSION, TrustEntry, TrustError, TrustStore,
};
pub use verify::{Admitted, Refusal, SignatureProblem, VerifyError, admit, sign, verify};
