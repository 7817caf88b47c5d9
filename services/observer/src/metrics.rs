//! The observer's Prometheus metrics (the shared RPC metrics come from `pacto-runtime`).

use std::sync::atomic::{AtomicUsize, Ordering};

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

/// Observations emitted, by dimension and outcome.
pub const OBSERVATIONS_TOTAL: &str = "pacto_observer_observations_total";
/// Kubernetes API queries that failed while observing.
pub const API_ERRORS_TOTAL: &str = "pacto_observer_api_errors_total";
/// Observe latency.
pub const OBSERVE_SECONDS: &str = "pacto_observer_observe_duration_seconds";
/// Objects known to the WatchTargets index, by kind.
pub const WATCH_INDEX_OBJECTS: &str = "pacto_observer_watch_index_objects";
/// Objects held by the reflector caches, by kind.
pub const CACHE_OBJECTS: &str = "pacto_observer_cache_objects";
/// WatchTargets notifications sent.
pub const TARGET_CHANGES_TOTAL: &str = "pacto_observer_target_changes_total";

/// Lookups in the memo of parsed contracts, by `result` (`hit`, `miss`).
pub const CONTRACT_MEMO_TOTAL: &str = "pacto_observer_contract_memo_total";

/// Node-agent reports received, by `result` (`accepted` or `refused`).
pub const NODE_REPORTS_TOTAL: &str = "pacto_observer_node_reports_total";
/// Node-agent report streams open now.
pub const NODE_AGENTS_CONNECTED: &str = "pacto_observer_node_agents_connected";

/// Kubernetes watch streams started by the process, by `kind` (e.g. `Service`, `Secret`).
pub const WATCH_STREAMS_TOTAL: &str = "pacto_observer_watch_streams_started_total";

static WATCH_STREAMS_STARTED: AtomicUsize = AtomicUsize::new(0);

/// Counts one started watch stream of `kind` (the counter [`WATCH_STREAMS_TOTAL`] and
/// [`watch_streams_started`]).
pub fn watch_stream_started(kind: &'static str) {
    WATCH_STREAMS_STARTED.fetch_add(1, Ordering::Relaxed);
    metrics::counter!(WATCH_STREAMS_TOTAL, "kind" => kind).increment(1);
}

/// How many watch streams this process has started.
pub fn watch_streams_started() -> usize {
    WATCH_STREAMS_STARTED.load(Ordering::Relaxed)
}

/// Describes the observer's own metrics.
pub fn describe() {
    describe_counter!(
        OBSERVATIONS_TOTAL,
        Unit::Count,
        "Observations emitted, by dimension and outcome."
    );
    describe_counter!(
        CONTRACT_MEMO_TOTAL,
        Unit::Count,
        "Lookups in the memo of parsed contracts, by result."
    );
    describe_counter!(
        API_ERRORS_TOTAL,
        Unit::Count,
        "Kubernetes API queries that failed while observing."
    );
    describe_histogram!(OBSERVE_SECONDS, Unit::Seconds, "Observe latency.");
    describe_gauge!(
        WATCH_INDEX_OBJECTS,
        Unit::Count,
        "Pactos and dependency edges in the WatchTargets index, by kind."
    );
    describe_gauge!(
        CACHE_OBJECTS,
        Unit::Count,
        "Objects held by the observer's reflector caches, by kind."
    );
    describe_counter!(
        WATCH_STREAMS_TOTAL,
        Unit::Count,
        "Kubernetes watch streams started by the observer, by kind."
    );
    describe_counter!(
        NODE_REPORTS_TOTAL,
        Unit::Count,
        "Node-agent reports received, by result (accepted or refused)."
    );
    describe_gauge!(
        NODE_AGENTS_CONNECTED,
        Unit::Count,
        "Node-agent report streams open now."
    );
    describe_counter!(
        TARGET_CHANGES_TOTAL,
        Unit::Count,
        "WatchTargets notifications sent."
    );
}
