//! The server's metrics (docs/metrics.md#evidence-server).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge};
use pacto_evidence::ErrorCode;

use pacto_evidence::store::{Readiness, ReferrersMode};

/// Envelopes accepted (202).
pub const ENVELOPES_ACCEPTED_TOTAL: &str = "pacto_evidence_envelopes_accepted_total";
/// Envelopes refused, by `code`.
pub const ENVELOPES_REFUSED_TOTAL: &str = "pacto_evidence_envelopes_refused_total";
/// Commit latency (scan, replay check, push, confirm), by `result` (`ok`, or the code).
pub const COMMIT_SECONDS: &str = "pacto_evidence_commit_duration_seconds";
/// The referrers mode of each subject: 1 for the mode in use, 0 for the other.
pub const REFERRERS_MODE: &str = "pacto_evidence_referrers_mode";

/// Describes the metrics (once the recorder is installed) and zeroes the refusal counters so
/// every code has a series from the start.
pub fn describe() {
    describe_counter!(
        ENVELOPES_ACCEPTED_TOTAL,
        Unit::Count,
        "Envelopes accepted and stored (202)."
    );
    describe_counter!(
        ENVELOPES_REFUSED_TOTAL,
        Unit::Count,
        "Envelopes refused, by stable error code."
    );
    describe_histogram!(
        COMMIT_SECONDS,
        Unit::Seconds,
        "Time to commit one record (scan, replay check, push, confirm), by result."
    );
    describe_gauge!(
        REFERRERS_MODE,
        "Referrers mode of each configured subject: 1 for the mode in use (api or tag-schema)."
    );
    counter!(ENVELOPES_ACCEPTED_TOTAL).absolute(0);
    for code in ErrorCode::ALL {
        counter!(ENVELOPES_REFUSED_TOTAL, "code" => code.as_str()).absolute(0);
    }
}

/// Counts a refusal.
pub fn refused(code: ErrorCode) {
    counter!(ENVELOPES_REFUSED_TOTAL, "code" => code.as_str()).increment(1);
}

/// Counts an acceptance.
pub fn accepted() {
    counter!(ENVELOPES_ACCEPTED_TOTAL).increment(1);
}

/// Records one commit's duration.
pub fn commit(seconds: f64, result: &'static str) {
    metrics::histogram!(COMMIT_SECONDS, "result" => result).record(seconds);
}

/// The last mode logged per subject (the log says when a subject's mode is first seen or
/// changes, not on every preflight).
static LOGGED: Mutex<BTreeMap<String, ReferrersMode>> = Mutex::new(BTreeMap::new());

/// Publishes the mode of each subject (gauge, and a log line when it is new or changed).
pub fn modes(readiness: &Readiness) {
    let modes: Vec<(String, ReferrersMode)> = readiness
        .subjects
        .iter()
        .map(|s| (s.subject.reference(), s.mode))
        .collect();
    {
        let mut logged = LOGGED.lock().unwrap_or_else(PoisonError::into_inner);
        for (subject, mode) in &modes {
            if logged.get(subject) != Some(mode) {
                tracing::info!(%subject, mode = mode.as_str(), "referrers mode");
                logged.insert(subject.clone(), *mode);
            }
        }
    }
    for (subject, current) in modes {
        for mode in ReferrersMode::ALL {
            gauge!(REFERRERS_MODE, "subject" => subject.clone(), "mode" => mode.as_str())
                .set(if mode == current { 1.0 } else { 0.0 });
        }
    }
}
