//! The kube-runtime controller over `Pacto` (and owned `PactoRevision`s): its triggers
//! ([`crate::triggers`]) and its error policy over the shared [`Context`]. One pass is
//! [`crate::reconcile::reconcile`].

use std::sync::Arc;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use metrics::counter;
use pacto_api::{Pacto, PactoRevision};
use pacto_runtime::CancellationToken;
use tracing::Instrument as _;

pub use crate::context::{Context, DEFAULT_CONCURRENT_RECONCILES};
use crate::metrics::{RECONCILE_ERRORS_TOTAL, RECONCILES_TOTAL};
pub use crate::reconcile::backends::Backends;
use crate::reconcile::{ReconcileError, reconcile};
use crate::triggers;

/// Requeue policy for API errors (the controller's retry): 5 s after the first failed pass of a
/// Pacto, doubling per consecutive failure up to its check interval; a clean pass resets it
/// (docs/design/status.md#requeue).
#[allow(
    clippy::needless_pass_by_value,
    reason = "the signature kube's Controller::run calls"
)]
pub fn error_policy(pacto: Arc<Pacto>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let key = (pacto.namespace().unwrap_or_default(), pacto.name_any());
    let _span = tracing::info_span!("reconcile", namespace = %key.0, pacto = %key.1).entered();
    let delay = ctx.backoff.pass_failed(&pacto, key);
    tracing::warn!(
        error = %pacto_runtime::tls::error_chain(error),
        retry_in = ?delay,
        "reconcile failed"
    );
    counter!(RECONCILES_TOTAL, "result" => "error").increment(1);
    counter!(RECONCILE_ERRORS_TOTAL, "step" => error.label()).increment(1);
    Action::requeue(delay)
}

/// Runs the controller until `shutdown`: Pactos (all namespaces, or `namespace`), owned
/// PactoRevisions and the observer's target notifications; removes the gauges of deleted Pactos.
pub async fn run(ctx: Arc<Context>, namespace: Option<String>, shutdown: CancellationToken) {
    let client = ctx.client.clone();
    let namespace = namespace.as_deref();
    let (pactos, revisions): (Api<Pacto>, Api<PactoRevision>) = match namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        ),
        None => (Api::all(client.clone()), Api::all(client)),
    };
    let entered = ctx.scope.subscribe();
    let (reader, stream) = triggers::pactos(pactos, Arc::clone(&ctx));
    let mut targets = triggers::watch_targets(&ctx, reader.clone(), shutdown.clone());
    let mut scope = triggers::scope_entries(&ctx, reader.clone(), entered, shutdown.clone());
    let target_stream = futures::stream::select(
        futures::stream::poll_fn(move |cx| targets.poll_recv(cx)),
        futures::stream::poll_fn(move |cx| scope.poll_recv(cx)),
    );
    let stop = shutdown.clone();
    Controller::for_stream(stream, reader)
        .with_config(kube::runtime::controller::Config::default().concurrency(ctx.concurrency))
        .owns_stream(triggers::revisions(revisions, Arc::clone(&ctx)))
        .reconcile_on(target_stream)
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(reconcile_in_span, error_policy, ctx)
        .for_each(|result| {
            match result {
                Ok((object, _)) => tracing::debug!(pacto = %object.name, "reconciled"),
                Err(error) => tracing::debug!(%error, "controller event"),
            }
            futures::future::ready(())
        })
        .await;
}

/// One pass in a `reconcile` span with the Pacto's namespace and name.
fn reconcile_in_span(
    pacto: Arc<Pacto>,
    ctx: Arc<Context>,
) -> impl std::future::Future<Output = Result<Action, ReconcileError>> {
    let span = tracing::info_span!(
        "reconcile",
        namespace = %pacto.namespace().unwrap_or_default(),
        pacto = %pacto.name_any(),
    );
    reconcile(pacto, ctx).instrument(span)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use std::time::Duration;

    use pacto_runtime::balance::BalanceConfig;
    use pacto_runtime::grpc::{self, ChannelSpec, RetryPolicy, Transport};

    use super::*;
    use crate::gauges::Gauges;
    use crate::reconcile::requeue::BACKOFF_BASE;

    /// A context whose API server and backends all refuse connections.
    async fn unreachable() -> Arc<Context> {
        pacto_testenv::controlplane::ensure_crypto_provider();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let url = format!("http://{addr}");
        let client =
            kube::Client::try_from(kube::Config::new(url.parse().unwrap())).expect("client");
        let channel = || {
            let spec = ChannelSpec {
                address: url.clone(),
                server_name: None,
                connect_timeout: Duration::from_secs(1),
                request_timeout: Duration::from_secs(1),
            };
            grpc::balanced_channel(&spec, &Transport::Insecure, BalanceConfig::new("test")).unwrap()
        };
        let backends = Backends::new(
            channel(),
            channel(),
            channel(),
            RetryPolicy {
                max_retries: 0,
                min_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(1),
            },
        );
        Arc::new(Context::new(client, backends, Gauges::new(), None, None))
    }

    #[tokio::test]
    async fn a_failed_status_write_fails_the_pass_without_report_and_retries_after_the_base() {
        let ctx = unreachable().await;
        let pacto = Arc::new(
            pacto_api::testing::PactoBuilder::inline("orders", "x")
                .namespace("shop")
                .build(),
        );
        let error = reconcile(Arc::clone(&pacto), Arc::clone(&ctx))
            .await
            .expect_err("the status write cannot succeed");
        assert_eq!(error.label(), "apply_status", "{error}");
        // The pass counts, but nothing of the unwritten status is remembered or reported.
        assert_eq!((ctx.reconciles(), ctx.status_writes()), (1, 0));
        let key = ("shop".to_owned(), "orders".to_owned());
        assert!(ctx.written.unseen(&key, &pacto).is_none());
        assert!(!ctx.gauges.render().contains("orders"));
        // The controller retries it after the backoff base, not at the check interval.
        assert_eq!(
            error_policy(pacto, &error, ctx),
            Action::requeue(BACKOFF_BASE)
        );
    }

    #[tokio::test]
    async fn persistent_api_errors_back_off_exponentially_up_to_the_interval_and_reset() {
        let ctx = unreachable().await;
        let pacto = |name: &str| {
            Arc::new(
                pacto_api::testing::PactoBuilder::inline(name, "x")
                    .namespace("shop")
                    .check_interval(60)
                    .build(),
            )
        };
        let (orders, billing) = (pacto("orders"), pacto("billing"));
        let error = reconcile(Arc::clone(&orders), Arc::clone(&ctx))
            .await
            .expect_err("the status write cannot succeed");
        let requeue = |p: &Arc<Pacto>| error_policy(Arc::clone(p), &error, Arc::clone(&ctx));
        // Each failed pass of the same Pacto doubles the wait, up to its check interval.
        let waits: Vec<Action> = (0..6).map(|_| requeue(&orders)).collect();
        assert_eq!(
            waits,
            [5, 10, 20, 40, 60, 60].map(|s| Action::requeue(Duration::from_secs(s)))
        );
        // Another Pacto's streak is its own.
        assert_eq!(requeue(&billing), Action::requeue(BACKOFF_BASE));
        // A pass that went through (it ends by computing its requeue) starts the streak anew.
        let key = ("shop".to_owned(), "orders".to_owned());
        let clean = crate::model::Resolution::Unavailable {
            message: String::new(),
            policy: None,
        };
        ctx.backoff.next(&orders, key, &clean, None);
        assert_eq!(requeue(&orders), Action::requeue(BACKOFF_BASE));
        assert_eq!(
            requeue(&billing),
            Action::requeue(BACKOFF_BASE * 2),
            "untouched by the other Pacto's clean pass"
        );
    }
}
