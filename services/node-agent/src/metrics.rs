//! The agent's own metrics, served on the admin port's `/metrics` next to the shared process
//! metrics (docs/design/node-agent.md#publishing).

/// Socket events read from the source (snapshot entries included).
pub const EVENTS_TOTAL: &str = "pacto_node_agent_events_total";
/// Events the kernel could not deliver (ring buffer full), as the source counts them.
pub const EVENTS_DROPPED_TOTAL: &str = "pacto_node_agent_events_dropped_total";
/// Pods of this node the agent tracks.
pub const PODS_TRACKED: &str = "pacto_node_agent_pods_tracked";
/// Time to build and write one NodeRuntimeObservation status.
pub const PUBLISH_DURATION_SECONDS: &str = "pacto_node_agent_publish_duration_seconds";
/// Failed writes of the observation or the Lease, by object.
pub const WRITE_ERRORS_TOTAL: &str = "pacto_node_agent_write_errors_total";
/// Reports the observer acknowledged.
pub const REPORTS_ACKED_TOTAL: &str = "pacto_node_agent_reports_acked_total";
/// 1 while kernel collection runs, 0 when it failed.
pub const COLLECTION_RUNNING: &str = "pacto_node_agent_collection_running";
/// Observer endpoints (replicas) the agent streams its reports to, one stream each.
pub const REPORT_ENDPOINTS: &str = "pacto_node_agent_report_endpoints";
/// Report streams open now (one per observer endpoint when all are connected).
pub const REPORT_STREAMS_OPEN: &str = "pacto_node_agent_report_streams_open";

/// Describes the metrics above to the installed recorder.
pub fn describe() {
    metrics::describe_counter!(EVENTS_TOTAL, "Socket events read from the kernel collector");
    metrics::describe_counter!(
        EVENTS_DROPPED_TOTAL,
        "Socket events the kernel dropped because the ring buffer was full"
    );
    metrics::describe_gauge!(PODS_TRACKED, "Pods of this node the agent tracks");
    metrics::describe_histogram!(
        PUBLISH_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time to build and write one NodeRuntimeObservation status"
    );
    metrics::describe_counter!(
        WRITE_ERRORS_TOTAL,
        "Failed writes of the NodeRuntimeObservation or the Lease, by object"
    );
    metrics::describe_counter!(
        REPORTS_ACKED_TOTAL,
        "Node reports the observer acknowledged"
    );
    metrics::describe_gauge!(
        REPORT_ENDPOINTS,
        "Observer endpoints (replicas) the node agent streams its reports to"
    );
    metrics::describe_gauge!(
        REPORT_STREAMS_OPEN,
        "Report streams to observer endpoints open now"
    );
    metrics::describe_gauge!(
        COLLECTION_RUNNING,
        "1 while kernel collection runs, 0 when it failed to start"
    );
}
