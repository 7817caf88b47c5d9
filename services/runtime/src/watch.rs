//! Kubernetes watches that retry with backoff (feature `watch`;
//! docs/design/observation.md#watches-and-indexes).
//!
//! [`watch`] is the one way a Pacto service opens a watch: `kube`'s watcher of one kind, retried
//! by the shared [`WatchRetry`] policy and polled inside a `watch` span naming the kind. Its
//! stream goes either into [`crate::index`] (the objects kept by an [`Index`](crate::index::Index),
//! the usual case) or, as it is, to `kube::runtime::Controller`.
//!
//! A `kube` watcher stream yields an error and, polled again, retries at once. [`WatchRetry`] is
//! the policy every Pacto service applies instead: the services' one
//! [`Backoff`] from [`RETRY_MIN`] doubling to [`RETRY_MAX`], reset by a completed list or any event. Only the first error of a
//! failing streak is logged at `warn` (a refusal for lack of RBAC rights with its own message);
//! repeats go to `debug`, so a refused watch neither spins nor floods the log.
//!
//! [`RetryingWatch`] is the stream [`watch`] returns: the items pass through unchanged (errors
//! included, so the caller can record them) and the stream waits out the delay before it polls
//! the watcher again. It stands in for `kube`'s `.default_backoff()`.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::Stream;
use kube::Api;
use kube::Resource;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

use crate::backoff::Backoff;

/// First delay after a watch error.
pub const RETRY_MIN: Duration = Duration::from_secs(1);
/// Longest delay between retries of a failing watch.
pub const RETRY_MAX: Duration = Duration::from_mins(5);

/// How a failed API call reads in logs and user-facing messages: for an error the API server
/// answered, its own Status text (`<message>: <reason>`, as kubectl prints it) rather than
/// kube's rendering, which appends the debug form of the whole Status object.
pub fn error_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.to_string(),
        other => other.to_string(),
    }
}

/// Whether the API server refused a request for lack of RBAC rights (HTTP 403).
pub fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_forbidden())
}

/// The text of a watch error: the API server's own answer where there is one.
pub fn watch_error_text(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => error_text(e),
        watcher::Error::WatchError(status) => status.to_string(),
        watcher::Error::NoResourceVersion => error.to_string(),
    }
}

/// Whether a watch error is the API server refusing the list or watch for lack of RBAC rights.
pub fn watch_error_is_forbidden(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => is_forbidden(e),
        watcher::Error::WatchError(status) => status.is_forbidden(),
        watcher::Error::NoResourceVersion => false,
    }
}

/// Whether a watch error is the API server saying the watch's resourceVersion has expired
/// (HTTP 410 Gone: etcd compacted past it, e.g. across an API server restart). The watcher lists
/// again by itself; nothing is lost.
pub fn watch_error_is_expired(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::WatchError(status) => status.code == 410,
        _ => false,
    }
}

/// What a refused watch logs by default.
const FORBIDDEN_MESSAGE: &str = "watch forbidden: the service's ClusterRole (or Role) is missing this kind; retrying with backoff";

/// Retry policy of one watch (see the module documentation).
#[derive(Debug, Clone)]
pub struct WatchRetry {
    kind: Cow<'static, str>,
    forbidden_message: String,
    /// The delays (the one backoff of the services, docs/design/architecture.md#backoff); the
    /// lines are this policy's own.
    backoff: Backoff,
    failing: bool,
}

impl WatchRetry {
    /// A healthy watch of `kind` (the `kind` field of its log lines).
    pub fn new(kind: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: kind.into(),
            forbidden_message: FORBIDDEN_MESSAGE.to_owned(),
            backoff: Backoff::new(RETRY_MIN, RETRY_MAX),
            failing: false,
        }
    }

    /// Caps the delay between retries at `max` instead of [`RETRY_MAX`] (a watch that drives
    /// reconciles, whose outage should end within seconds of the API server's return).
    #[must_use]
    pub fn max_delay(mut self, max: Duration) -> Self {
        self.backoff = Backoff::new(RETRY_MIN, max.max(RETRY_MIN));
        self
    }

    /// Logs `message` (instead of the generic one) when the API server refuses the watch for
    /// lack of rights, e.g. to name the setting that grants them.
    #[must_use]
    pub fn when_forbidden(mut self, message: impl Into<String>) -> Self {
        self.forbidden_message = message.into();
        self
    }

    /// The kind this policy retries.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The watch delivered a list or an event: the next error starts a new streak.
    pub fn succeeded(&mut self) {
        self.backoff.reset();
        self.failing = false;
    }

    /// Records an error and returns how long to wait before the watch retries.
    pub fn failed(&mut self, error: &watcher::Error) -> Duration {
        let delay = self.backoff.next_delay();
        if watch_error_is_expired(error) {
            // Logged every time, even within a failing streak: it is the proof that the state
            // was listed again rather than resumed (docs/design/architecture.md#failure-handling).
            tracing::info!(kind = %self.kind, %error, "watch expired (410 Gone); listing again");
        } else if self.failing {
            tracing::debug!(kind = %self.kind, %error, ?delay, "watch still failing");
        } else if watch_error_is_forbidden(error) {
            tracing::warn!(kind = %self.kind, %error, "{}", self.forbidden_message);
        } else {
            tracing::warn!(kind = %self.kind, %error, "watch error; retrying with backoff");
        }
        self.failing = true;
        delay
    }

    /// Whether the watch is in a failing streak.
    pub fn is_failing(&self) -> bool {
        self.failing
    }

    /// Feeds one item of a watch stream to the policy: a completed list, an applied or a
    /// deleted object resets it; an error returns the delay before the next poll.
    pub fn observe<K>(&mut self, item: &Result<Event<K>, watcher::Error>) -> Option<Duration> {
        match item {
            Ok(Event::InitDone | Event::Apply(_) | Event::Delete(_)) => {
                self.succeeded();
                None
            }
            Ok(Event::Init | Event::InitApply(_)) => None,
            Err(error) => Some(self.failed(error)),
        }
    }
}

/// The watch of `K` by `api` with `config`: `kube`'s watcher retried by [`WatchRetry`] under the
/// kind's own name (`Pod`, `Lease`; replace the policy with [`RetryingWatch::retry`]). Feed it to
/// an index with [`crate::index::run_index`] (a runtime task).
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> RetryingWatch<impl Stream<Item = Result<Event<K>, watcher::Error>> + Send>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    RetryingWatch::new(watcher::watcher(api, config), WatchRetry::new(kind))
}

/// A watch stream that waits out its [`WatchRetry`] delay after each error, polled inside a
/// `watch` span naming its kind.
pub struct RetryingWatch<S> {
    inner: Pin<Box<S>>,
    retry: WatchRetry,
    span: tracing::Span,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> RetryingWatch<S> {
    fn new(inner: S, retry: WatchRetry) -> Self {
        let span = tracing::info_span!("watch", kind = %retry.kind());
        Self {
            inner: Box::pin(inner),
            retry,
            span,
            sleep: None,
        }
    }

    /// Retries with `retry` instead (e.g. a shorter cap, a hint for a refused watch).
    #[must_use]
    pub fn retry(self, retry: WatchRetry) -> Self {
        Self {
            span: tracing::info_span!("watch", kind = %retry.kind()),
            retry,
            ..self
        }
    }

    /// The retry policy.
    pub fn policy(&self) -> &WatchRetry {
        &self.retry
    }
}

impl<S> std::fmt::Debug for RetryingWatch<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryingWatch")
            .field("retry", &self.retry)
            .field("waiting", &self.sleep.is_some())
            .finish_non_exhaustive()
    }
}

impl<S, K> Stream for RetryingWatch<S>
where
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    type Item = Result<Event<K>, watcher::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let _entered = this.span.enter();
        if let Some(sleep) = this.sleep.as_mut() {
            ready!(sleep.as_mut().poll(cx));
            this.sleep = None;
        }
        let item = ready!(this.inner.as_mut().poll_next(cx));
        if let Some(item) = &item
            && let Some(delay) = this.retry.observe(item)
        {
            this.sleep = Some(Box::pin(tokio::time::sleep(delay)));
        }
        Poll::Ready(item)
    }
}

/// Retry for any stream of watch events (a watcher built by hand in a test, or one [`watch`]
/// cannot build).
pub trait WatchRetryExt<K>: Stream<Item = Result<Event<K>, watcher::Error>> + Sized {
    /// Retries with the default [`WatchRetry`] policy of `kind`.
    fn with_backoff(self, kind: &'static str) -> RetryingWatch<Self> {
        self.with_retry(WatchRetry::new(kind))
    }

    /// Retries with `retry`.
    fn with_retry(self, retry: WatchRetry) -> RetryingWatch<Self> {
        RetryingWatch::new(self, retry)
    }
}

impl<S, K> WatchRetryExt<K> for S where S: Stream<Item = Result<Event<K>, watcher::Error>> {}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("refused", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn watch_errors_classify_forbidden() {
        let cases = [
            (
                "list forbidden",
                watcher::Error::InitialListFailed(api_error(403, "Forbidden")),
                true,
            ),
            (
                "watch start forbidden",
                watcher::Error::WatchStartFailed(api_error(403, "Forbidden")),
                true,
            ),
            (
                "watch event forbidden",
                watcher::Error::WatchError(
                    kube::core::Status::failure("no", "Forbidden")
                        .with_code(403)
                        .boxed(),
                ),
                true,
            ),
            (
                "list gone",
                watcher::Error::InitialListFailed(api_error(410, "Gone")),
                false,
            ),
            (
                "stream failed",
                watcher::Error::WatchFailed(api_error(500, "InternalError")),
                false,
            ),
            (
                "no resource version",
                watcher::Error::NoResourceVersion,
                false,
            ),
        ];
        for (name, error, forbidden) in cases {
            assert_eq!(watch_error_is_forbidden(&error), forbidden, "{name}");
        }
    }

    #[test]
    fn errors_read_as_the_api_server_wrote_them() {
        let status =
            kube::core::Status::failure("endpointslices is forbidden", "Forbidden").with_code(403);
        let error = kube::Error::Api(Box::new(status));
        assert!(is_forbidden(&error));
        assert_eq!(error_text(&error), "endpointslices is forbidden: Forbidden");
        let error = watcher::Error::InitialListFailed(error);
        assert_eq!(
            watch_error_text(&error),
            "endpointslices is forbidden: Forbidden"
        );
        let other = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert!(!is_forbidden(&other));
        assert_eq!(error_text(&other), other.to_string());
    }

    #[test]
    fn watch_retry_backs_off_exponentially_to_the_cap_and_resets_on_success() {
        let error = watcher::Error::InitialListFailed(api_error(403, "Forbidden"));
        let mut retry = WatchRetry::new("Secret").when_forbidden("Secret watch forbidden");
        assert!(!retry.is_failing());
        let delays: Vec<Duration> = (0..12).map(|_| retry.failed(&error)).collect();
        assert!(retry.is_failing());
        let seconds: Vec<u64> = delays.iter().map(Duration::as_secs).collect();
        assert_eq!(
            seconds,
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300],
            "doubling from 1 s, capped at 5 min"
        );
        retry.succeeded();
        assert!(!retry.is_failing());
        assert_eq!(retry.failed(&error), RETRY_MIN);
    }

    #[test]
    fn a_lower_cap_bounds_the_delay() {
        let error = watcher::Error::WatchFailed(api_error(500, "InternalError"));
        let mut retry = WatchRetry::new("Pacto").max_delay(Duration::from_secs(30));
        let seconds: Vec<u64> = (0..8).map(|_| retry.failed(&error).as_secs()).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn list_events_do_not_reset_a_failing_streak_but_a_completed_list_does() {
        let mut retry = WatchRetry::new("Pod");
        let error: Result<Event<()>, _> = Err(watcher::Error::NoResourceVersion);
        assert_eq!(retry.observe(&error), Some(RETRY_MIN));
        assert_eq!(retry.observe(&Ok(Event::<()>::Init)), None);
        assert_eq!(retry.observe(&Ok(Event::InitApply(()))), None);
        assert!(retry.is_failing());
        assert_eq!(retry.observe(&error), Some(RETRY_MIN * 2));
        assert_eq!(retry.observe(&Ok(Event::<()>::InitDone)), None);
        assert!(!retry.is_failing());
        assert_eq!(retry.observe(&Ok(Event::Apply(()))), None);
        assert_eq!(retry.observe(&error), Some(RETRY_MIN));
    }

    #[tokio::test]
    async fn the_stream_passes_errors_through_and_waits_before_the_next_poll() {
        let items: Vec<Result<Event<()>, watcher::Error>> = vec![
            Err(watcher::Error::NoResourceVersion),
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::InitDone),
            Err(watcher::Error::NoResourceVersion),
        ];
        let mut stream = futures::stream::iter(items).with_backoff("Pod");
        let started = tokio::time::Instant::now();
        let mut seen = Vec::new();
        while let Some(item) = stream.next().await {
            seen.push((item.is_ok(), started.elapsed().as_secs()));
        }
        // 1 s after the first error, 2 s more after the second, none after the list completed
        // (the last error's delay is only waited out before a next poll, which ends the stream).
        // Real time: whole seconds, each sleep overshoots by far less than one.
        assert_eq!(seen, [(false, 0), (false, 1), (true, 3), (false, 3)]);
    }
}
