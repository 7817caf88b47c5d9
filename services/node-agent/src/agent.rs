//! The agent's main loop: start collection, then drain events, follow the node's pods, and
//! publish the view every interval (docs/design/node-agent.md#publishing).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use pacto_api::{CollectionState, CollectionStatus, KernelInfo, NodeRuntimeObservationStatus};
use pacto_proto::observer::NodeReport;
use pacto_runtime::CancellationToken;
use pacto_runtime::backoff::Backoff;
use tokio::sync::watch;

use crate::aggregate::{Aggregator, Limits};
use crate::facts::{CollectionError, EventSource, HostScanner, HostView, SocketEvent};
use crate::pods::PodIndex;
use crate::publish::{self, LeaseSettings, Observations, RETRY_MIN};
use crate::report;

/// How often the event source is drained while events come slowly.
const DRAIN_EVERY: Duration = Duration::from_millis(100);
/// How soon the next drain comes while they come fast ([`next_drain_soon`]).
const DRAIN_SOON: Duration = Duration::from_millis(10);

/// Whether the next drain comes after [`DRAIN_SOON`] instead of [`DRAIN_EVERY`]: when `drained`
/// events in `since` (the time since the previous drain) would fill more than a quarter of the
/// ring buffer over a whole [`DRAIN_EVERY`]. A connection storm then cannot fill the buffer
/// between two drains unless the agent itself is starved of CPU
/// (docs/design/node-agent.md#kernel-program).
fn next_drain_soon(drained: usize, since: Duration) -> bool {
    let since = since.max(Duration::from_millis(1));
    let projected = drained as f64 * DRAIN_EVERY.as_secs_f64() / since.as_secs_f64();
    projected > (crate::kernel::RING_RECORDS / 4) as f64
}
/// Rescans the host at most this often when events name an unknown network namespace.
const RESCAN_MIN: Duration = Duration::from_secs(1);
/// At most one early report and early status write (a listener opened or closed between two
/// publishes) per this long (docs/design/node-agent.md#reports).
const EARLY_REPORT_MIN: Duration = Duration::from_secs(1);
/// While a pod's listener set is incomplete because it hit a bound (more listeners or listening
/// sockets than the agent keeps), a socket snapshot repairs it at most this often
/// (docs/design/node-agent.md#bounds).
const BOUND_RESYNC_EVERY: Duration = Duration::from_secs(30);
/// How long the start waits for the first list of the node's pods.
const PODS_WAIT: Duration = Duration::from_secs(10);

/// Starts the event source: the kernel collector in the binary, a scripted one in tests.
pub type SourceFactory =
    Box<dyn FnOnce() -> Result<Box<dyn EventSource>, CollectionError> + Send + 'static>;

/// What the agent does, from its flags.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The node this agent runs on (`NODE_NAME`).
    pub node_name: String,
    /// The agent namespace, where both objects live.
    pub namespace: String,
    /// `holderIdentity` of the Lease (the agent's pod name).
    pub holder: String,
    pub publish_interval: Duration,
    pub lease_renew: Duration,
    pub lease_duration_seconds: i32,
    /// Whether BTF exists here decides `kernel.btf`.
    pub btf_path: PathBuf,
    pub limits: Limits,
    /// How long pods that were running before collection started read "started after pod".
    pub warm_up: Duration,
}

/// Where the agent's results go besides the API server.
#[derive(Debug)]
pub struct Outputs {
    /// The latest report (sent after every publish attempt, written or not).
    pub reports: watch::Sender<Option<NodeReport>>,
    /// Count of statuses written to the API server.
    pub published: watch::Sender<u64>,
    /// What the observer replicas answered the report streams: written into each status as
    /// `reportStream` (docs/design/node-agent.md#operator-log).
    pub streams: publish::StreamStates,
}

impl AgentConfig {
    /// The Lease heartbeat's settings.
    pub(crate) fn lease_settings(&self) -> LeaseSettings {
        LeaseSettings {
            namespace: self.namespace.clone(),
            node: self.node_name.clone(),
            holder: self.holder.clone(),
            duration_seconds: self.lease_duration_seconds,
            renew_every: self.lease_renew,
        }
    }
}

fn kernel_info(btf_path: &std::path::Path) -> KernelInfo {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    KernelInfo {
        release,
        btf: btf_path.exists(),
    }
}

fn collection_status(started: &Result<(), CollectionError>) -> CollectionStatus {
    match started {
        Ok(()) => CollectionStatus {
            state: CollectionState::Running,
            reason: None,
            message: None,
        },
        Err(error) => CollectionStatus {
            state: CollectionState::Failed,
            reason: Some(error.reason().to_owned()),
            message: Some(error.to_string()),
        },
    }
}

/// The scanner, shared with the blocking task that runs each scan.
type SharedScanner = Arc<Mutex<Box<dyn HostScanner>>>;

/// Scans the host in a blocking task (a scan reads `/proc` of every process); `None` when it
/// failed (logged; the caller keeps its previous view).
async fn scan(scanner: &SharedScanner, with_sockets: bool) -> Option<HostView> {
    let scanner = Arc::clone(scanner);
    let scanned = tokio::task::spawn_blocking(move || {
        scanner
            .lock()
            .map_err(|_| std::io::Error::other("an earlier host scan panicked"))
            .and_then(|mut scanner| scanner.scan(with_sockets))
    })
    .await
    .unwrap_or_else(|join| {
        Err(std::io::Error::other(format!(
            "host scan task failed: {join}"
        )))
    });
    match scanned {
        Ok(view) => Some(view),
        Err(error) => {
            tracing::warn!(%error, with_sockets, "node-agent host scan failed; keeping the previous view");
            None
        }
    }
}

/// Runs the agent until `shutdown`: collection and the periodic publish, attributing events to
/// the node's pods as `pods_rx` tells them (the pod watch and the Lease heartbeat are runtime
/// tasks of their own, started first: [`crate::spawn_agent`]). Nothing here ends the process:
/// API and scan failures are logged and retried; a collection failure is published as
/// `collection.state: Failed`.
pub(crate) async fn run_agent(
    client: Client,
    config: AgentConfig,
    source: SourceFactory,
    scanner: Box<dyn HostScanner>,
    mut pods_rx: watch::Receiver<Option<PodIndex>>,
    outputs: Outputs,
    shutdown: CancellationToken,
) {
    crate::metrics::describe();
    let scanner: SharedScanner = Arc::new(Mutex::new(scanner));
    let mut agg = Aggregator::new(config.limits, config.warm_up);
    // The first pod list, so the start-up snapshot can be attributed at once.
    let _ = tokio::time::timeout(PODS_WAIT, pods_rx.wait_for(Option::is_some)).await;
    if let Some(index) = pods_rx.borrow_and_update().clone() {
        agg.set_pods(index.values().cloned());
    }

    // Collection: the source first (BTF → load → attach), then the snapshot.
    let started = tokio::task::spawn_blocking(source)
        .await
        .unwrap_or_else(|join| {
            Err(CollectionError::LoadFailed(format!(
                "collector start panicked: {join}"
            )))
        });
    let (mut source, started) = match started {
        Ok(source) => (Some(source), Ok(())),
        Err(error) => {
            tracing::error!(node = %config.node_name, reason = error.reason(), %error, "node-agent kernel collection failed; publishing collection Failed and keeping the heartbeat");
            (None, Err(error))
        }
    };
    let collection = collection_status(&started);
    metrics::gauge!(crate::metrics::COLLECTION_RUNNING).set(if started.is_ok() {
        1.0
    } else {
        0.0
    });
    // When the last socket snapshot was tried (docs/design/node-agent.md#aggregation: drops
    // and a failed start-up snapshot are repaired by one).
    let mut last_snapshot = Instant::now();
    if source.is_some() {
        match scan(&scanner, true).await {
            Some(view) => {
                metrics::counter!(crate::metrics::EVENTS_TOTAL)
                    .increment(view.snapshot.len() as u64);
                agg.start(view, Timestamp::now());
            }
            None => agg.start_without_snapshot(Timestamp::now()),
        }
        last_snapshot = Instant::now();
        tracing::info!(node = %config.node_name, "node-agent collection running");
    }
    let kernel = kernel_info(&config.btf_path);
    let streams = outputs.streams.clone();
    let status_at = |now: Timestamp| NodeRuntimeObservationStatus {
        last_published: Some(Time(now)),
        agent_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        kernel: Some(kernel.clone()),
        collection: Some(collection.clone()),
        report_stream: streams.status(),
        ..NodeRuntimeObservationStatus::default()
    };

    let mut observations = Observations::new(client, &config.namespace, &config.node_name);
    let mut drain = tokio::time::interval(DRAIN_EVERY);
    drain.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_publish = tokio::time::Instant::now();
    // A failed publish is retried from 1 s doubling up to the interval, its streak logged once
    // (docs/design/architecture.md#backoff).
    let mut backoff = Backoff::new(RETRY_MIN, config.publish_interval)
        .named("node-agent publish")
        .on_failure("node-agent could not publish its NodeRuntimeObservation; retrying")
        .on_recovery("node-agent published its observation again");
    let publish_span = tracing::info_span!("node-agent publish", node = %config.node_name);
    let mut last_scan = Instant::now();
    let mut buffer: Vec<SocketEvent> = Vec::new();
    let mut last_drain = Instant::now();
    let mut written = 0_u64;
    let mut last_report = Instant::now();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = drain.tick() => {
                if let Some(source) = source.as_mut() {
                    buffer.clear();
                    source.drain(&mut buffer);
                    if next_drain_soon(buffer.len(), last_drain.elapsed()) {
                        drain.reset_after(DRAIN_SOON);
                    }
                    last_drain = Instant::now();
                    let now = Timestamp::now();
                    metrics::counter!(crate::metrics::EVENTS_TOTAL).increment(buffer.len() as u64);
                    for event in buffer.drain(..) {
                        agg.apply(event, now);
                    }
                    let drops = source.drops();
                    metrics::counter!(crate::metrics::EVENTS_DROPPED_TOTAL).absolute(drops);
                    agg.note_drops(drops);
                    let since_snapshot = last_snapshot.elapsed();
                    let snapshot_due = (agg.wants_snapshot() && since_snapshot >= RESCAN_MIN)
                        || (agg.wants_listener_resync() && since_snapshot >= BOUND_RESYNC_EVERY);
                    if snapshot_due {
                        // Dropped events (or a failed start-up snapshot, or a pod beyond a
                        // listener bound): repair the listeners from a socket snapshot; events
                        // drained after it apply on top.
                        match scan(&scanner, true).await {
                            Some(view) => agg.resync_listeners(view, Timestamp::now()),
                            None => agg.snapshot_failed(),
                        }
                        last_snapshot = Instant::now();
                        last_scan = last_snapshot;
                    } else if agg.wants_scan() && last_scan.elapsed() >= RESCAN_MIN {
                        if let Some(view) = scan(&scanner, false).await {
                            agg.set_view(view, now);
                        }
                        last_scan = Instant::now();
                    }
                    // A listener opened or closed: report it now on the stream and write the
                    // object's status (together at most once per EARLY_REPORT_MIN), not at the
                    // next publish; the per-publish marks stay for that publish
                    // (docs/design/node-agent.md#reports).
                    if agg.listeners_changed() && last_report.elapsed() >= EARLY_REPORT_MIN {
                        let (pods, truncated) = agg.take_listeners_changed(now);
                        let status = NodeRuntimeObservationStatus {
                            pod_count: i32::try_from(pods.len()).unwrap_or(i32::MAX),
                            pods,
                            truncated,
                            ..status_at(now)
                        };
                        outputs.reports.send_replace(Some(report::to_report(&config.node_name, &status)));
                        last_report = Instant::now();
                        // While writes fail, the regular publish's retry (with its backoff)
                        // carries the view instead.
                        if !backoff.is_failing() {
                            match observations.publish(&status).await {
                                Ok(()) => {
                                    written += 1;
                                    outputs.published.send_replace(written);
                                }
                                Err(error) => {
                                    metrics::counter!(crate::metrics::WRITE_ERRORS_TOTAL, "object" => "NodeRuntimeObservation").increment(1);
                                    tracing::warn!(node = %config.node_name, %error, "node-agent could not write a listener change early; the next publish carries it");
                                }
                            }
                        }
                    }
                }
            }
            changed = pods_rx.changed() => {
                if changed.is_err() {
                    // The watch task ended (only on shutdown).
                    break;
                }
                if let Some(index) = pods_rx.borrow_and_update().clone() {
                    agg.set_pods(index.values().cloned());
                }
                if source.is_some() && let Some(view) = scan(&scanner, false).await {
                    agg.set_view(view, Timestamp::now());
                    last_scan = Instant::now();
                }
            }
            () = tokio::time::sleep_until(next_publish) => {
                let begun = Instant::now();
                let now = Timestamp::now();
                let mut status = status_at(now);
                if source.is_some() {
                    if let Some(view) = scan(&scanner, false).await {
                        agg.set_view(view, now);
                        last_scan = Instant::now();
                    }
                    let (pods, truncated) = agg.publish(now);
                    status.pod_count = i32::try_from(pods.len()).unwrap_or(i32::MAX);
                    status.pods = pods;
                    status.truncated = truncated;
                }
                metrics::gauge!(crate::metrics::PODS_TRACKED).set(agg.pods_tracked() as f64);
                outputs.reports.send_replace(Some(report::to_report(&config.node_name, &status)));
                last_report = Instant::now();
                match observations.publish(&status).await {
                    Ok(()) => {
                        publish_span.in_scope(|| backoff.succeeded());
                        written += 1;
                        outputs.published.send_replace(written);
                        next_publish = tokio::time::Instant::now() + config.publish_interval;
                    }
                    Err(error) => {
                        metrics::counter!(crate::metrics::WRITE_ERRORS_TOTAL, "object" => "NodeRuntimeObservation").increment(1);
                        next_publish = tokio::time::Instant::now()
                            + publish_span.in_scope(|| backoff.failed(&error));
                    }
                }
                metrics::histogram!(crate::metrics::PUBLISH_DURATION_SECONDS).record(begun.elapsed().as_secs_f64());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::RING_RECORDS;

    /// A quarter of the ring buffer per 100 ms is the line: below it the agent drains every
    /// 100 ms, above it every 10 ms, and the rate (not the count) decides, so a fast drain that
    /// found few events of a storm stays fast.
    #[test]
    fn storms_are_drained_soon_and_quiet_spells_every_100_ms() {
        let quarter = RING_RECORDS / 4;
        assert_eq!(RING_RECORDS, 14_563);
        assert!(!next_drain_soon(0, DRAIN_EVERY));
        assert!(!next_drain_soon(quarter, DRAIN_EVERY));
        assert!(next_drain_soon(quarter + 1, DRAIN_EVERY));
        // 10 ms after the last drain: 400 events is 4,000 per 100 ms, above the line.
        assert!(next_drain_soon(400, DRAIN_SOON));
        assert!(!next_drain_soon(300, DRAIN_SOON));
        // a drain that was late counts its events over the time they took
        assert!(!next_drain_soon(quarter * 2, DRAIN_EVERY * 3));
        assert!(!next_drain_soon(1, Duration::ZERO), "one event is no storm");
    }
}
