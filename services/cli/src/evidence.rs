//! `pacto evidence keygen | sign | verify | push` (docs/design/envelopes.md): key files, signing
//! an evidence set into an envelope, verifying an envelope as the Evidence Server would before
//! storing it, and sending one to an Evidence Server.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use pacto_engine::Timestamp;
use pacto_evidence::client::ClientError;
use pacto_evidence::keys::{self, KeyError};
use pacto_evidence::{
    Envelope, EnvelopeError, IngestClient, PostError, Producer, Refusal, SignedEvidenceSet,
    TrustError, TrustStore, admit, sign,
};

use crate::output::print_error;
use crate::{EXIT_ERROR, EXIT_INVALID, EXIT_OK, EvidenceCommand};

/// Why an evidence command failed.
#[derive(Debug, thiserror::Error)]
enum EvidenceError {
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error("{flag}: {message}")]
    Usage { flag: &'static str, message: String },
    /// The evidence set or envelope is refused (exit 1).
    #[error("[{code}] {message}")]
    Refused {
        code: pacto_evidence::ErrorCode,
        message: String,
    },
    /// The Evidence Server answered with an error: a 4xx refuses the envelope (exit 1), a 5xx
    /// is the server's failure (exit 2).
    #[error(
        "[{}] {url} answered {}: {}",
        .error.label(),
        .error.status().unwrap_or_default(),
        .error.message().unwrap_or_default()
    )]
    Server { url: String, error: PostError },
    /// The Evidence Server could not be reached or its answer not read (exit 2).
    #[error("{url}")]
    Unreachable {
        url: String,
        #[source]
        error: PostError,
    },
    /// The HTTP client could not be set up (exit 2).
    #[error(transparent)]
    Client(ClientError),
    /// `list` found malformed or badly signed records (exit 1).
    #[error("{subject}: partial: {problems}")]
    Partial { subject: String, problems: String },
    /// `list` could not read the registry (exit 2).
    #[error("{subject}: {error}")]
    Registry { subject: String, error: String },
}

impl EvidenceError {
    fn exit_code(&self) -> u8 {
        match self {
            Self::Refused { .. } | Self::Partial { .. } => EXIT_INVALID,
            Self::Server { error, .. }
                if error.status().is_some_and(|s| (400..500).contains(&s)) =>
            {
                EXIT_INVALID
            }
            _ => EXIT_ERROR,
        }
    }
}

fn envelope_refused(path: &Path, e: &EnvelopeError) -> EvidenceError {
    EvidenceError::Refused {
        code: e.code(),
        message: format!("{}: {e}", path.display()),
    }
}

/// Runs an evidence command and returns the exit code.
pub(crate) fn run(
    command: &EvidenceCommand,
    rt: &tokio::runtime::Runtime,
    registries: &crate::registry::Registries,
) -> u8 {
    let result = match command {
        EvidenceCommand::Keygen {
            out,
            producer,
            key_id,
            force,
        } => keygen(out, producer, key_id.as_deref(), *force),
        EvidenceCommand::Sign {
            evidence,
            key,
            key_id,
            producer,
            producer_version,
            sequence,
            ttl,
            id,
            issued_at,
        } => sign_command(&SignArgs {
            evidence,
            key,
            key_id: key_id.as_deref(),
            producer,
            producer_version: producer_version.as_deref(),
            sequence: *sequence,
            ttl,
            id: id.as_deref(),
            issued_at: issued_at.as_deref(),
        }),
        EvidenceCommand::Verify {
            envelope,
            trust,
            at,
        } => verify_command(envelope, trust, at.as_deref()),
        EvidenceCommand::Push {
            envelope,
            url,
            output,
        } => rt.block_on(push_command(envelope, url, registries.timeout(), *output)),
        EvidenceCommand::List {
            subject,
            trust,
            output,
        } => rt.block_on(list_command(subject, trust.as_deref(), *output, registries)),
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            print_error(&e);
            e.exit_code()
        }
    }
}

fn keygen(
    out: &Path,
    producer: &str,
    key_id: Option<&str>,
    force: bool,
) -> Result<(), EvidenceError> {
    // check the names before drawing a key, so a typo costs nothing
    keys::check_identifier(producer).map_err(|e| EvidenceError::Usage {
        flag: "--producer",
        message: e.to_string(),
    })?;
    if let Some(id) = key_id {
        keys::check_identifier(id).map_err(|e| EvidenceError::Usage {
            flag: "--key-id",
            message: e.to_string(),
        })?;
    }
    let key = keys::generate()?;
    let files = keys::write_key_pair(out, producer, key_id, &key, force)?;
    println!("key id:      {}", files.key_id);
    println!("private key: {}", files.private.display());
    println!("public key:  {}", files.public.display());
    Ok(())
}

fn read_input(path: &Path) -> Result<Vec<u8>, EvidenceError> {
    let io = |source| EvidenceError::Io {
        path: path.to_owned(),
        source,
    };
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).map_err(io)?;
        Ok(bytes)
    } else {
        std::fs::read(path).map_err(io)
    }
}

fn parse_time(flag: &'static str, text: &str) -> Result<Timestamp, EvidenceError> {
    Timestamp::parse(text).map_err(|e| EvidenceError::Usage {
        flag,
        message: e.to_string(),
    })
}

/// A Go-style duration of whole units: `24h`, `90m`, `1h30m`, `45s`, `1500ms`, `0`.
fn parse_ttl(text: &str) -> Result<chrono::Duration, EvidenceError> {
    let bad = |why: &str| EvidenceError::Usage {
        flag: "--ttl",
        message: format!("{text:?} is not a duration ({why}; e.g. 24h, 90m, 1h30m, 0)"),
    };
    if text == "0" {
        return Ok(chrono::Duration::zero());
    }
    let mut total = chrono::Duration::zero();
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad("empty"));
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let value: i64 = rest[..digits]
            .parse()
            .map_err(|_| bad("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "h" => chrono::Duration::try_hours(value),
            "m" => chrono::Duration::try_minutes(value),
            "s" => chrono::Duration::try_seconds(value),
            "ms" => chrono::Duration::try_milliseconds(value),
            "" => return Err(bad("missing unit")),
            _ => return Err(bad("units are h, m, s and ms")),
        }
        .ok_or_else(|| bad("too large"))?;
        total = total.checked_add(&part).ok_or_else(|| bad("too large"))?;
    }
    Ok(total)
}

struct SignArgs<'a> {
    evidence: &'a Path,
    key: &'a Path,
    key_id: Option<&'a str>,
    producer: &'a str,
    producer_version: Option<&'a str>,
    sequence: Option<u64>,
    ttl: &'a str,
    id: Option<&'a str>,
    issued_at: Option<&'a str>,
}

fn sign_command(args: &SignArgs<'_>) -> Result<(), EvidenceError> {
    let ttl = parse_ttl(args.ttl)?;
    let issued_at = match args.issued_at {
        Some(text) => parse_time("--issued-at", text)?,
        None => Timestamp::now(),
    };
    let key = keys::read_signing_key(args.key)?;
    let key_id = args
        .key_id
        .map_or_else(|| keys::default_key_id(&key.verifying_key()), str::to_owned);
    let bytes = read_input(args.evidence)?;
    let set =
        SignedEvidenceSet::from_json(&bytes).map_err(|e| envelope_refused(args.evidence, &e))?;
    set.to_engine()
        .validate()
        .map_err(|e| EvidenceError::Refused {
            code: pacto_evidence::ErrorCode::InvalidEvidence,
            message: format!("{}: {e}", args.evidence.display()),
        })?;
    let expires_at = if ttl > chrono::Duration::zero() {
        let at = issued_at
            .as_datetime()
            .checked_add_signed(ttl)
            .ok_or_else(|| EvidenceError::Usage {
                flag: "--ttl",
                message: "the expiry is out of range".into(),
            })?;
        Timestamp::from(at)
    } else {
        Timestamp::zero()
    };
    let sequence = match args.sequence {
        Some(n) => n,
        None => u64::try_from(issued_at.as_datetime().timestamp_millis()).map_err(|_| {
            EvidenceError::Usage {
                flag: "--sequence",
                message: "no default before 1970; pass --sequence".into(),
            }
        })?,
    };
    let id = args.id.map_or_else(
        || Envelope::default_id(args.producer, sequence, &set),
        str::to_owned,
    );
    let mut envelope = Envelope::new(
        id,
        Producer {
            id: args.producer.to_owned(),
            version: args.producer_version.unwrap_or_default().to_owned(),
            key_id,
        },
        sequence,
        issued_at,
        expires_at,
        set,
    );
    envelope
        .validate_structure()
        .map_err(|e| envelope_refused(args.evidence, &e))?;
    sign(&mut envelope, &key).map_err(|e| envelope_refused(args.evidence, &e))?;
    println!("{}", envelope.to_json());
    Ok(())
}

fn verify_command(path: &Path, trust: &Path, at: Option<&str>) -> Result<(), EvidenceError> {
    let now = match at {
        Some(text) => parse_time("--at", text)?,
        None => Timestamp::now(),
    };
    let store = TrustStore::load(trust)?;
    let bytes = read_input(path)?;
    let admitted = admit(&bytes, &store, now).map_err(|e: Refusal| EvidenceError::Refused {
        code: e.code(),
        message: format!("{}: {}", path.display(), pacto_contract::error_chain(&e)),
    })?;
    let envelope = &admitted.envelope;
    println!(
        "verified: envelope {:?} from producer {:?} (key {:?}, sequence {}), subject {:?}, contract {}",
        envelope.id,
        envelope.producer.id,
        envelope.producer.key_id,
        envelope.sequence,
        envelope.evidence_set.subject.name,
        envelope.evidence_set.contract_ref
    );
    Ok(())
}

/// `pacto evidence push`: the envelope checked, then sent through the one ingestion client
/// (`pacto_evidence::client`, docs/design/envelopes.md#ingestion-client).
async fn push_command(
    path: &Path,
    base: &str,
    timeout: std::time::Duration,
    output: crate::OutputFormat,
) -> Result<(), EvidenceError> {
    // Errors name the URL without its userinfo: `--url https://user:pass@host` sends the
    // credentials (as basic auth) but never prints them.
    let client = IngestClient::new(base, timeout).map_err(|e| match e {
        ClientError::Url { .. } => EvidenceError::Usage {
            flag: "--url",
            message: e.to_string(),
        },
        ClientError::Build(_) => EvidenceError::Client(e),
    })?;
    let bytes = read_input(path)?;
    // A malformed envelope is refused here, naming the field, before anything is sent.
    Envelope::decode(&bytes).map_err(|e| envelope_refused(path, &e))?;
    let url = client.shown_url().to_owned();
    match client.post(bytes).await {
        Ok(accepted) => {
            match output {
                crate::OutputFormat::Json => println!("{}", accepted.body.trim_end()),
                crate::OutputFormat::Text => println!(
                    "accepted: envelope {:?} at {}: compliance {}, {} finding{}",
                    accepted.id,
                    accepted.accepted_at,
                    accepted.compliance,
                    accepted.findings,
                    if accepted.findings == 1 { "" } else { "s" }
                ),
            }
            Ok(())
        }
        Err(error) => {
            if error.message().is_none() {
                return Err(EvidenceError::Unreachable { url, error });
            }
            if output == crate::OutputFormat::Json
                && let Some(body) = error.body()
            {
                println!("{}", body.trim_end());
            }
            Err(EvidenceError::Server { url, error })
        }
    }
}

/// What `list` says about a record's signature.
fn signature_status(
    record: &pacto_evidence::store::Record,
    trust: Option<&TrustStore>,
) -> (&'static str, Option<String>) {
    use pacto_evidence::VerifyError;
    let Some(trust) = trust else {
        return ("unverified", None);
    };
    // Freshness as of the acceptance: an old record is not refused for its age.
    match pacto_evidence::verify(&record.envelope, trust, record.accepted_at) {
        Ok(_) => ("verified", None),
        Err(VerifyError::UnknownKey { .. }) => ("unverified", None),
        Err(
            e @ (VerifyError::Unsigned
            | VerifyError::BadAlgorithm { .. }
            | VerifyError::BadSignature { .. }
            | VerifyError::Structure(_)),
        ) => ("bad-signature", Some(e.to_string())),
        Err(e) => ("refused", Some(e.to_string())),
    }
}

async fn list_command(
    subject: &str,
    trust: Option<&Path>,
    output: crate::OutputFormat,
    registries: &crate::registry::Registries,
) -> Result<(), EvidenceError> {
    use pacto_evidence::store::{HealthStatus, Store, StoreOptions, Subjects};
    let subjects = Subjects::parse(&[subject]).map_err(|e| EvidenceError::Usage {
        flag: "SUBJECT",
        message: pacto_contract::error_chain(&e),
    })?;
    let trust = trust.map(TrustStore::load).transpose()?;
    let registry_error = |error: String| EvidenceError::Registry {
        subject: subject.to_owned(),
        error,
    };
    let keychain = registries
        .keychain()
        .map_err(|e| registry_error(pacto_contract::error_chain(&e)))?;
    let store = Store::new(
        subjects,
        StoreOptions {
            client: registries.client_options(),
            ..StoreOptions::default()
        },
        &keychain,
    )
    .map_err(|e| registry_error(pacto_contract::error_chain(&e)))?;
    let scan = store.scan().await;
    if let Some(failed) = scan.failed.first() {
        return Err(registry_error(failed.error.clone()));
    }
    let mut rows = Vec::new();
    let mut bad_signatures = 0usize;
    for stored in &scan.records {
        let record = &stored.record;
        let (status, detail) = signature_status(record, trust.as_ref());
        if status == "bad-signature" {
            bad_signatures += 1;
        }
        let envelope = &record.envelope;
        rows.push(serde_json::json!({
            "digest": stored.digest,
            "id": envelope.id,
            "producer": envelope.producer.id,
            "keyId": envelope.producer.key_id,
            "sequence": envelope.sequence,
            "subject": envelope.evidence_set.subject.name,
            "compliance": record.compliance,
            "findings": record.findings.len(),
            "acceptedAt": record.accepted_at.to_rfc3339_nano(),
            "signature": status,
            "problem": detail,
        }));
    }
    let invalid: Vec<serde_json::Value> = scan
        .invalid
        .iter()
        .map(|a| serde_json::json!({"digest": a.digest, "reason": a.reason.to_string()}))
        .collect();
    let partial = scan.health.status != HealthStatus::Ready || bad_signatures > 0;
    let summary = if partial { "partial" } else { "complete" };
    match output {
        crate::OutputFormat::Json => {
            let document = serde_json::json!({
                "subject": subject,
                "summary": summary,
                "records": rows,
                "malformed": invalid,
                "foreign": scan.foreign,
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&document).unwrap_or_default()
            );
        }
        crate::OutputFormat::Text => {
            println!(
                "{subject}: {} record{}, {} malformed, {bad_signatures} with a bad signature ({summary})",
                rows.len(),
                if rows.len() == 1 { "" } else { "s" },
                invalid.len()
            );
            for row in &rows {
                println!(
                    "  {}  accepted {}  producer {} (key {}) sequence {}  subject {}  {}, {} finding(s)  {}{}",
                    row["digest"].as_str().unwrap_or_default(),
                    row["acceptedAt"].as_str().unwrap_or_default(),
                    row["producer"].as_str().unwrap_or_default(),
                    row["keyId"].as_str().unwrap_or_default(),
                    row["sequence"],
                    row["subject"].as_str().unwrap_or_default(),
                    row["compliance"].as_str().unwrap_or_default(),
                    row["findings"],
                    row["signature"].as_str().unwrap_or_default(),
                    row["problem"]
                        .as_str()
                        .map(|p| format!(": {p}"))
                        .unwrap_or_default(),
                );
            }
            for artifact in &invalid {
                println!(
                    "  {}  MALFORMED: {}",
                    artifact["digest"].as_str().unwrap_or_default(),
                    artifact["reason"].as_str().unwrap_or_default()
                );
            }
        }
    }
    if partial {
        return Err(EvidenceError::Partial {
            subject: subject.to_owned(),
            problems: format!(
                "{} malformed artifact(s), {bad_signatures} record(s) with a bad signature",
                invalid.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_durations() {
        for (text, seconds) in [
            ("24h", 86_400),
            ("90m", 5_400),
            ("1h30m", 5_400),
            ("45s", 45),
            ("0", 0),
        ] {
            assert_eq!(parse_ttl(text).unwrap().num_seconds(), seconds, "{text}");
        }
        assert_eq!(parse_ttl("1500ms").unwrap().num_milliseconds(), 1500);
        for bad in ["", "h", "10", "10d", "-1h", "1.5h", "99999999999999999999h"] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }
}
