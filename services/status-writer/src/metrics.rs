//! The names of the process metrics of the status-writer (the per-Pacto contract gauges are in
//! [`crate::gauges`]).

/// Reconciles, by result (`ok`, `unknown_backend`, `error`).
pub const RECONCILES_TOTAL: &str = "pacto_status_writer_reconciles_total";
/// Reconciles started, by trigger (`pacto`, `watch_targets`, `requeue`).
pub const TRIGGERS_TOTAL: &str = "pacto_status_writer_triggers_total";
/// Reconcile errors, by step.
pub const RECONCILE_ERRORS_TOTAL: &str = "pacto_status_writer_reconcile_errors_total";
/// Reconcile duration.
pub const RECONCILE_SECONDS: &str = "pacto_status_writer_reconcile_seconds";
/// Status writes (server-side applies) made.
pub const STATUS_WRITES_TOTAL: &str = "pacto_status_writer_status_writes_total";
/// Backend calls that failed, by backend.
pub const BACKEND_FAILURES_TOTAL: &str = "pacto_status_writer_backend_failures_total";
/// Lookups in the memo of parsed contracts, by result (`hit`, `miss`;
/// docs/design/crates.md#parse-memo).
pub const CONTRACT_MEMO_TOTAL: &str = "pacto_status_writer_contract_memo_total";
/// Events that could not be written (best effort: logged, the reconcile goes on).
pub const EVENT_FAILURES_TOTAL: &str = "pacto_status_writer_event_failures_total";
/// Events recorded on Pactos, by namespace and reason: each new occurrence once (a replay of an
/// occurrence already counted is not one; docs/design/status.md#exactly-once-events).
pub const EVENTS_TOTAL: &str = "pacto_status_writer_events_total";

/// Evidence records delivered to the Evidence Server, by result (`accepted`: 202; `replay`: 409,
/// already stored) (docs/design/status.md#evidence-producer).
pub const EVIDENCE_SENT_TOTAL: &str = "pacto_status_writer_evidence_sent_total";
/// Evidence records the Evidence Server refused (a 4xx other than replay; not retried), by code.
pub const EVIDENCE_FAILED_TOTAL: &str = "pacto_status_writer_evidence_failed_total";
/// Evidence records dropped, by reason (`queue_full`, `shutdown`).
pub const EVIDENCE_DROPPED_TOTAL: &str = "pacto_status_writer_evidence_dropped_total";
/// Attempts to send an evidence record retried after a 5xx or a transport error.
pub const EVIDENCE_RETRIES_TOTAL: &str = "pacto_status_writer_evidence_retries_total";

/// PolicyReports written (`--policy-reports`; none in a steady state,
/// docs/design/status.md#policyreports).
pub const POLICY_REPORT_WRITES_TOTAL: &str = "pacto_status_writer_policy_report_writes_total";
/// PolicyReports that could not be read or written (logged; the reconcile goes on).
pub const POLICY_REPORT_FAILURES_TOTAL: &str = "pacto_status_writer_policy_report_failures_total";

/// Revision-mirror passes finished.
pub const MIRROR_PASSES_TOTAL: &str = "pacto_status_writer_mirror_passes_total";

/// 1 while this replica holds the leader Lease and works, else 0 (docs/design/status.md#leader-election).
pub const LEADER: &str = "pacto_status_writer_leader";
/// Leader terms started by this replica (a term ends when the Lease is taken or not renewed in
/// time; a transient renewal error does not end it).
pub const LEADER_TERMS_TOTAL: &str = "pacto_status_writer_leader_terms_total";

/// Describes the process metrics of this crate (for `# HELP`).
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        RECONCILES_TOTAL,
        Unit::Count,
        "Reconciles of Pactos, by result."
    );
    describe_counter!(
        CONTRACT_MEMO_TOTAL,
        Unit::Count,
        "Lookups in the memo of parsed contracts, by result."
    );
    describe_counter!(
        TRIGGERS_TOTAL,
        Unit::Count,
        "Reconciles started, by what triggered them."
    );
    describe_counter!(
        RECONCILE_ERRORS_TOTAL,
        Unit::Count,
        "Reconciles that failed with a Kubernetes API error, by step."
    );
    describe_histogram!(
        RECONCILE_SECONDS,
        Unit::Seconds,
        "Duration of one Pacto reconcile."
    );
    describe_counter!(
        STATUS_WRITES_TOTAL,
        Unit::Count,
        "Pacto status writes (server-side applies); 0 per steady-state reconcile."
    );
    describe_counter!(
        POLICY_REPORT_WRITES_TOTAL,
        Unit::Count,
        "PolicyReports written (--policy-reports); 0 per steady-state reconcile."
    );
    describe_counter!(
        POLICY_REPORT_FAILURES_TOTAL,
        Unit::Count,
        "PolicyReports that could not be read or written (logged; the reconcile goes on)."
    );
    describe_counter!(
        MIRROR_PASSES_TOTAL,
        Unit::Count,
        "Revision-mirror passes finished (TagOverwritten checks)."
    );
    describe_counter!(
        BACKEND_FAILURES_TOTAL,
        Unit::Count,
        "Backend gRPC calls that failed (recorded as Unknown), by backend."
    );
    describe_gauge!(
        LEADER,
        "1 while this replica holds the leader Lease and reconciles, else 0."
    );
    describe_counter!(
        LEADER_TERMS_TOTAL,
        Unit::Count,
        "Leader terms started by this replica (one per acquisition of the Lease)."
    );
    describe_counter!(
        EVENTS_TOTAL,
        Unit::Count,
        "Events recorded on Pactos, by namespace and reason (a replayed occurrence is not counted)."
    );
    describe_counter!(
        EVIDENCE_SENT_TOTAL,
        Unit::Count,
        "Evidence records of verdict changes delivered to the Evidence Server, by result (accepted, replay)."
    );
    describe_counter!(
        EVIDENCE_FAILED_TOTAL,
        Unit::Count,
        "Evidence records the Evidence Server refused (not retried), by error code."
    );
    describe_counter!(
        EVIDENCE_DROPPED_TOTAL,
        Unit::Count,
        "Evidence records dropped, by reason (queue_full, shutdown)."
    );
    describe_counter!(
        EVIDENCE_RETRIES_TOTAL,
        Unit::Count,
        "Evidence record sends retried after a server error or a transport failure."
    );
    describe_counter!(
        EVENT_FAILURES_TOTAL,
        Unit::Count,
        "Events on Pactos that could not be written (logged; the reconcile goes on)."
    );
}
