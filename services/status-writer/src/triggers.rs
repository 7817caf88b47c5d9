//! What makes a Pacto reconcile, and what follows its deletion: the Pacto watch (spec, labels
//! and annotations; not our own status writes), the watch of the PactoRevisions it owns, the
//! observer's WatchTargets notifications, and the namespaces entering the scope; the Pacto watch
//! also drops the gauges and the last-write memo of deleted Pactos ([`Deletions`]).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt as _, TryStreamExt};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use pacto_api::{Pacto, PactoRevision};
use pacto_proto::observer::WatchTargetsRequest;
use pacto_proto::observer::observer_client::ObserverClient;
use pacto_runtime::CancellationToken;
use pacto_runtime::backoff::{self, Backoff};
use pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES;
use pacto_runtime::watch::{WatchRetry, watch};

use tonic::transport::Channel;
use tracing::Instrument as _;

use crate::cause::Trigger;
use crate::context::Context;

/// The longest pause between retries of a failing Pacto watch: these watches drive reconciles,
/// so they come back within half a minute of the API server (about what kube's default backoff
/// allowed before the shared policy).
const WATCH_RETRY_MAX: Duration = Duration::from_secs(30);

/// The Pacto watch of the controller and its store: every update reaches the store, but only
/// changes of spec, labels or annotations reconcile (our own status-only updates do not; the
/// `kubectl annotate` nudge does). Objects enter the store trimmed of what nothing reads
/// (managed fields, the last-applied copy; docs/design/status.md#what-the-caches-keep).
pub fn pactos(
    api: Api<Pacto>,
    ctx: Arc<Context>,
) -> (
    Store<Pacto>,
    impl Stream<Item = Result<Pacto, watcher::Error>> + Send,
) {
    let (reader, writer) = kube::runtime::reflector::store();
    let mut deletions = Deletions::new(Arc::clone(&ctx));
    let stream = kube::runtime::reflector(
        writer,
        watch(api, watcher::Config::default())
            .retry(WatchRetry::new("Pacto").max_delay(WATCH_RETRY_MAX))
            .modify(crate::cached::trim_pacto)
            // Deletions and relists forget what the status-writer keeps per Pacto.
            .inspect(move |item| deletions.observe(item)),
    )
    .applied_objects()
    // Every stored object, our own status writes included, may let the memo drop a write
    // (docs/design/status.md#the-write-memo).
    .inspect_ok({
        let ctx = Arc::clone(&ctx);
        move |pacto| {
            if let Some(namespace) = pacto.namespace() {
                ctx.written.caught_up(&(namespace, pacto.name_any()), pacto);
            }
        }
    })
    .predicate_filter(
        spec_or_metadata,
        kube::runtime::utils::PredicateConfig::default(),
    )
    .inspect_ok(move |pacto| {
        if let Some(namespace) = pacto.namespace() {
            ctx.triggers
                .mark((namespace, pacto.name_any()), Trigger::Pacto);
        }
    });
    (reader, stream)
}

/// The watch of the PactoRevisions Pactos own: each applied revision reconciles its owner
/// (the controller maps it by owner reference), marked [`Trigger::Revision`]; every event also
/// feeds the revision index (docs/design/status.md#the-revision-index).
pub fn revisions(
    api: Api<PactoRevision>,
    ctx: Arc<Context>,
) -> impl Stream<Item = Result<PactoRevision, watcher::Error>> + Send {
    watch(api, watcher::Config::default())
        .retry(WatchRetry::new("PactoRevision").max_delay(WATCH_RETRY_MAX))
        .inspect({
            let ctx = Arc::clone(&ctx);
            move |item| ctx.revisions.observe(item)
        })
        .applied_objects()
        .inspect_ok(move |revision| {
            let Some(namespace) = revision.namespace() else {
                return;
            };
            for owner in revision.owner_references() {
                if owner.kind == "Pacto" {
                    ctx.triggers
                        .mark((namespace.clone(), owner.name.clone()), Trigger::Revision);
                }
            }
        })
}

/// The first pause before subscribing to WatchTargets again.
const WATCH_TARGETS_RETRY_MIN: Duration = Duration::from_millis(500);

/// The longest pause between attempts to (re)subscribe to WatchTargets: while unsubscribed the
/// status-writer hears of no target change, so it tries again soon (a cheap gRPC call).
const WATCH_TARGETS_RETRY_MAX: Duration = Duration::from_secs(5);

/// Streams the observer's WatchTargets notifications as reconcile triggers, from EVERY observer
/// replica (each sees the whole cluster; a notification from any of them reconciles the Pacto,
/// and a reconcile is idempotent): one subscription per endpoint of the observer's balanced
/// channel, started and stopped as endpoints come and go, each reconnecting with backoff until
/// `shutdown`. A subscription that opens while no other one is open is followed by a resync:
/// each Pacto in `pactos` is reconciled once (marked [`Trigger::WatchTargets`]), since the changes
/// made while no stream was open (observer not Ready yet, restarted, streams broken) were
/// announced to nobody; while another replica's stream stayed open, nothing was missed
/// (docs/design/status.md#triggers).
pub fn watch_targets(
    ctx: &Arc<Context>,
    pactos: Store<Pacto>,
    shutdown: CancellationToken,
) -> tokio::sync::mpsc::Receiver<ObjectRef<Pacto>> {
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    let endpoints = ctx.backends.observer_endpoints.endpoints();
    let ctx = Arc::clone(ctx);
    // Per leader term (the controller runs once per term), stopped by the term's token: not a
    // runtime task (docs/design/architecture.md#runtime).
    let span = tracing::info_span!("task", task = "watch-targets");
    tokio::spawn(
        async move {
            let open = Arc::new(AtomicUsize::new(0));
            pacto_runtime::balance::for_each_endpoint(
                endpoints,
                shutdown,
                "observer WatchTargets subscription",
                |addr, channel, token| {
                    // One per observer endpoint, joined by for_each_endpoint.
                    let span =
                        tracing::info_span!("task", task = "watch-targets-subscription", %addr);
                    tokio::spawn(
                        subscribe(Subscription {
                            ctx: Arc::clone(&ctx),
                            pactos: pactos.clone(),
                            addr,
                            channel,
                            tx: tx.clone(),
                            open: Arc::clone(&open),
                            token,
                        })
                        .instrument(span),
                    )
                },
                |_| {},
            )
            .await;
        }
        .instrument(span),
    );
    rx
}

/// One observer endpoint's WatchTargets subscription.
struct Subscription {
    ctx: Arc<Context>,
    pactos: Store<Pacto>,
    addr: SocketAddr,
    channel: Channel,
    tx: tokio::sync::mpsc::Sender<ObjectRef<Pacto>>,
    /// Subscriptions open now, over all endpoints.
    open: Arc<AtomicUsize>,
    token: CancellationToken,
}

/// Decrements the open-subscription count when a stream ends.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Subscribes to WatchTargets on one observer endpoint, reconnecting with backoff, until its
/// token is cancelled or the controller stops listening: a session under
/// [`backoff::retrying`], reset by each subscription that opens. Its failures are logged at
/// `debug` only: while unsubscribed every Pacto is still checked at its interval, and the
/// subscription that opens again reconciles what was missed (docs/design/architecture.md#backoff).
async fn subscribe(sub: Subscription) {
    let Subscription {
        ctx,
        pactos,
        addr,
        channel,
        tx,
        open,
        token,
    } = sub;
    let client = ObserverClient::new(channel)
        .max_decoding_message_size(GRPC_MAX_MESSAGE_BYTES)
        .max_encoding_message_size(GRPC_MAX_MESSAGE_BYTES);
    let backoff = Backoff::new(WATCH_TARGETS_RETRY_MIN, WATCH_TARGETS_RETRY_MAX)
        .on_failure("WatchTargets unavailable")
        .quietly();
    let span = tracing::info_span!("observer WatchTargets subscription", endpoint = %addr);
    let (ctx, pactos, tx, open, stop) = (&ctx, &pactos, &tx, &open, &token);
    let session = move |session: backoff::Session| {
        let mut client = client.clone();
        async move {
            let mut stream = match client.watch_targets(WatchTargetsRequest::default()).await {
                Ok(stream) => stream.into_inner(),
                Err(status) => return Err(Unavailable(status)),
            };
            session.healthy();
            let others = open.fetch_add(1, Ordering::SeqCst);
            let _open = Open(Arc::clone(open));
            if others == 0 {
                let missed: Vec<ObjectRef<Pacto>> = pactos
                    .state()
                    .iter()
                    .map(|p| ObjectRef::from_obj(&**p))
                    .collect();
                tracing::info!(
                    endpoint = %addr,
                    pactos = missed.len(),
                    "subscribed to the observer's WatchTargets; reconciling every Pacto once for the changes made while unsubscribed"
                );
                for obj in missed {
                    if let Some(namespace) = obj.namespace.clone() {
                        ctx.triggers
                            .mark((namespace, obj.name.clone()), Trigger::WatchTargets);
                    }
                    if tx.send(obj).await.is_err() {
                        // The controller stopped listening: no more subscriptions.
                        stop.cancel();
                        return Ok(());
                    }
                }
            } else {
                tracing::info!(
                    endpoint = %addr,
                    open = others + 1,
                    "subscribed to the observer's WatchTargets; another replica's stream stayed open, so nothing was missed"
                );
            }
            loop {
                match stream.message().await {
                    Ok(Some(change)) => {
                        tracing::debug!(endpoint = %addr, namespace = %change.namespace, pacto = %change.pacto_name, reason = %change.reason, "target changed");
                        ctx.triggers.mark(
                            (change.namespace.clone(), change.pacto_name.clone()),
                            Trigger::WatchTargets,
                        );
                        let obj = ObjectRef::new(&change.pacto_name).within(&change.namespace);
                        if tx.send(obj).await.is_err() {
                            stop.cancel();
                            return Ok(());
                        }
                    }
                    Ok(None) => return Ok(()),
                    Err(status) => {
                        tracing::debug!(endpoint = %addr, code = ?status.code(), "WatchTargets stream ended");
                        return Ok(());
                    }
                }
            }
        }
    };
    backoff::retrying(
        "observer WatchTargets subscription",
        backoff,
        token.clone(),
        session,
    )
    .instrument(span)
    .await;
}

/// A WatchTargets call the observer did not answer with a stream.
struct Unavailable(tonic::Status);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.0.code(), self.0.message())
    }
}

/// The Pactos of each namespace that enters the scope (docs/design/architecture.md#namespace-scope),
/// from the controller's store, marked as [`Trigger::Pacto`] (the scope's first listing of
/// them). `entered` must be subscribed before the controller starts, so that no entry falls
/// between a pass that found the namespace out of scope and the subscription. A subscriber that
/// lagged reconciles every Pacto in scope.
pub fn scope_entries(
    ctx: &Arc<Context>,
    pactos: Store<Pacto>,
    mut entered: tokio::sync::broadcast::Receiver<String>,
    shutdown: CancellationToken,
) -> tokio::sync::mpsc::Receiver<ObjectRef<Pacto>> {
    use tokio::sync::broadcast::error::RecvError;
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    let ctx = Arc::clone(ctx);
    // Per leader term, stopped by the term's token: not a runtime task
    // (docs/design/architecture.md#runtime).
    let span = tracing::info_span!("task", task = "scope-entries");
    tokio::spawn(
        async move {
            loop {
                let next = tokio::select! {
                    () = shutdown.cancelled() => return,
                    next = entered.recv() => next,
                };
                let wanted: Box<dyn Fn(&str) -> bool + Send> = match next {
                    Ok(namespace) => Box::new(move |ns| ns == namespace),
                    Err(RecvError::Lagged(_)) => {
                        let scope = ctx.scope.clone();
                        Box::new(move |ns| scope.admits(ns))
                    }
                    Err(RecvError::Closed) => return,
                };
                let refs: Vec<ObjectRef<Pacto>> = pactos
                    .state()
                    .iter()
                    .filter(|p| p.namespace().is_some_and(|ns| wanted(&ns)))
                    .map(|p| ObjectRef::from_obj(&**p))
                    .collect();
                for obj in refs {
                    if let Some(namespace) = obj.namespace.clone() {
                        ctx.triggers
                            .mark((namespace, obj.name.clone()), Trigger::Pacto);
                    }
                    if tx.send(obj).await.is_err() {
                        return;
                    }
                }
            }
        }
        .instrument(span),
    );
    rx
}

/// The predicate of the Pacto watch: generation (spec), labels and annotations.
#[allow(
    clippy::unnecessary_wraps,
    reason = "kube's Predicate is a Fn(&K) -> Option<u64>"
)]
fn spec_or_metadata(pacto: &Pacto) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    pacto.metadata.generation.hash(&mut hasher);
    pacto.metadata.labels.hash(&mut hasher);
    pacto.metadata.annotations.hash(&mut hasher);
    Some(hasher.finish())
}

/// What the status-writer remembers per Pacto (gauges, triggers, last write, failure streak),
/// forgotten when the Pacto goes: fed by the controller's own Pacto watch ([`pactos`]), whose
/// events it reads by reference (the controller only reconciles applied objects). A deletion
/// forgets that Pacto; after each (re)list, what belongs to Pactos missing from the listing is
/// dropped (deletions may have been missed while the watch was down).
pub(crate) struct Deletions {
    ctx: Arc<Context>,
    /// The keys listed since `Init`, until `InitDone`.
    listing: Option<BTreeSet<(String, String)>>,
}

fn key_of(pacto: &Pacto) -> (String, String) {
    (pacto.namespace().unwrap_or_default(), pacto.name_any())
}

impl Deletions {
    pub(crate) fn new(ctx: Arc<Context>) -> Self {
        Self { ctx, listing: None }
    }

    /// Reads one event of the Pacto watch.
    pub(crate) fn observe(&mut self, item: &Result<watcher::Event<Pacto>, watcher::Error>) {
        match item {
            Ok(watcher::Event::Init) => self.listing = Some(BTreeSet::new()),
            Ok(watcher::Event::InitApply(pacto)) => {
                self.listing
                    .get_or_insert_with(BTreeSet::new)
                    .insert(key_of(pacto));
            }
            Ok(watcher::Event::InitDone) => {
                let listing = self.listing.take().unwrap_or_default();
                self.reset(&listing);
            }
            Ok(watcher::Event::Apply(_)) => {}
            Ok(watcher::Event::Delete(pacto)) => self.delete(&key_of(pacto)),
            Err(error) => tracing::debug!(%error, "Pacto watch error"),
        }
    }

    fn delete(&self, key: &(String, String)) {
        let ctx = &self.ctx;
        if ctx.gauges.remove(&key.0, &key.1) {
            tracing::info!(namespace = %key.0, pacto = %key.1, "Pacto deleted; removed its metric series");
        }
        ctx.triggers.retain(|k| k != key);
        ctx.written.forget(key);
        ctx.backoff.forget(key);
    }

    fn reset(&self, listing: &BTreeSet<(String, String)>) {
        let ctx = &self.ctx;
        ctx.gauges.retain(listing);
        ctx.written.retain(|key| listing.contains(key));
        ctx.triggers.retain(|key| listing.contains(key));
        ctx.backoff.retain(|key| listing.contains(key));
    }
}
