//! The resolver's own Prometheus metrics (the runtime describes the shared RPC metrics).

use metrics::{Unit, describe_counter, describe_histogram};

/// Resolves, by source (`inline`, `oci`, `none`) and outcome (`resolved`, `invalid`,
/// `unavailable`).
pub const RESOLVES_TOTAL: &str = "pacto_resolver_resolves_total";
/// Time to answer a Resolve, by outcome.
pub const RESOLVE_SECONDS: &str = "pacto_resolver_resolve_duration_seconds";
/// Registry operations issued, by kind (`manifest_head`, `tags_list`, `bundle_pull`; a pull is
/// one operation of several HTTP requests: manifest, layer and config blobs).
pub const REGISTRY_REQUESTS_TOTAL: &str = "pacto_resolver_registry_requests_total";
/// Cache lookups, by cache (`bundle`, `tags`, `digest`) and result (`hit`, `miss`).
pub const CACHE_LOOKUPS_TOTAL: &str = "pacto_resolver_cache_lookups_total";
/// Registry operations a request did not issue because it joined an identical one in flight,
/// by kind (`manifest_head`, `tags_list`, `bundle_pull`; docs/design/resolution.md#shared-resolves).
pub const MERGED_REQUESTS_TOTAL: &str = "pacto_resolver_merged_requests_total";
/// Requests answered with a remembered registry failure instead of a registry request, by kind.
pub const FAILURE_CACHE_HITS_TOTAL: &str = "pacto_resolver_failure_cache_hits_total";
/// Pull-secret reads, by result (`ok`, `error`).
pub const SECRET_READS_TOTAL: &str = "pacto_resolver_secret_reads_total";

/// Describes every metric of this crate (so `# HELP`/`# TYPE` lines are exported).
pub fn describe() {
    describe_counter!(
        RESOLVES_TOTAL,
        Unit::Count,
        "Contract resolutions, by source (inline, oci, none) and outcome (resolved, invalid, unavailable)."
    );
    describe_histogram!(
        RESOLVE_SECONDS,
        Unit::Seconds,
        "Time to resolve a contract reference, by outcome."
    );
    describe_counter!(
        REGISTRY_REQUESTS_TOTAL,
        Unit::Count,
        "Registry operations issued, by kind (manifest_head, tags_list, bundle_pull)."
    );
    describe_counter!(
        CACHE_LOOKUPS_TOTAL,
        Unit::Count,
        "Cache lookups, by cache (bundle, tags, digest) and result (hit, miss)."
    );
    describe_counter!(
        MERGED_REQUESTS_TOTAL,
        Unit::Count,
        "Registry operations not issued because an identical one was in flight and its answer was shared, by kind (manifest_head, tags_list, bundle_pull)."
    );
    describe_counter!(
        FAILURE_CACHE_HITS_TOTAL,
        Unit::Count,
        "Requests answered with a remembered registry failure (within --failure-cache-ttl) instead of a registry request, by kind (manifest_head, tags_list, bundle_pull)."
    );
    describe_counter!(
        SECRET_READS_TOTAL,
        Unit::Count,
        "Pull-secret GETs against the Kubernetes API, by result (ok, error)."
    );
}
