//! Answers kept for a while (docs/design/evidence-server.md#limits): `/ready` (and the POST
//! readiness gate) and `/targets` read the registry, `/targets` under the store's commit lock, so
//! they are served from a [`Snapshot`] instead of one registry read per request. A snapshot is
//! refreshed when a request finds it older than its maximum age; one refresh runs at a time, and
//! the requests that arrive while it runs share its outcome. The refresh runs in its own task, so
//! a client that hangs up does not cancel it.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use tracing::Instrument as _;

use pacto_evidence::store::Readiness;

use crate::storage::{NotReady, RefreshFailed, TargetsUnavailable};

/// How long a readiness preflight answers `/ready` and the POST gate.
pub const READY_MAX_AGE: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Slot<V, E> {
    /// When the refresh that produced `value` started, and the value.
    value: Option<(Instant, Result<V, E>)>,
    /// Completed refreshes.
    generation: u64,
}

/// An outcome of a registry read, reused until it is `max_age` old.
#[derive(Debug)]
pub struct Snapshot<V, E> {
    max_age: Duration,
    slot: Arc<Mutex<Slot<V, E>>>,
    refreshing: Arc<tokio::sync::Mutex<()>>,
}

impl<V, E> Snapshot<V, E>
where
    V: Clone + Send + 'static,
    E: Clone + Send + 'static + From<RefreshFailed>,
{
    /// An empty snapshot; `Duration::ZERO` reads anew for every request (one at a time).
    pub fn new(max_age: Duration) -> Self {
        Self {
            max_age,
            slot: Arc::new(Mutex::new(Slot {
                value: None,
                generation: 0,
            })),
            refreshing: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot<V, E>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fresh(&self) -> Option<Result<V, E>> {
        let slot = self.lock();
        slot.value
            .as_ref()
            .filter(|(taken, _)| taken.elapsed() < self.max_age)
            .map(|(_, value)| value.clone())
    }

    /// The snapshot's outcome, refreshed by `refresh` first when it is missing or too old. A
    /// request that waited for a refresh another request started takes that refresh's outcome,
    /// however long it took.
    pub async fn get<F>(&self, refresh: impl FnOnce() -> F) -> Result<V, E>
    where
        F: Future<Output = Result<V, E>> + Send + 'static,
    {
        if let Some(value) = self.fresh() {
            return value;
        }
        let seen = self.lock().generation;
        let guard = Arc::clone(&self.refreshing).lock_owned().await;
        {
            let slot = self.lock();
            if slot.generation != seen
                && let Some((_, value)) = &slot.value
            {
                return value.clone();
            }
        }
        if let Some(value) = self.fresh() {
            return value;
        }
        let slot = Arc::clone(&self.slot);
        let future = refresh();
        let task = tokio::spawn(
            async move {
                let started = Instant::now();
                let value = future.await;
                {
                    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
                    slot.value = Some((started, value.clone()));
                    slot.generation += 1;
                }
                drop(guard);
                value
            }
            // Per refresh, awaited by the request that started it (which it outlives only if
            // that request is dropped): not a runtime task (docs/design/architecture.md#runtime).
            .instrument(tracing::info_span!("task", task = "snapshot-refresh")),
        );
        task.await
            .unwrap_or_else(|error| Err(RefreshFailed(error.to_string()).into()))
    }
}

/// The snapshots of one server.
#[derive(Debug)]
pub struct Snapshots {
    /// The readiness preflight: each subject's referrers mode, or why not ready.
    pub(crate) ready: Snapshot<Readiness, NotReady>,
    /// The `/targets` body (with its newline), or why no subject could be read.
    pub(crate) targets: Snapshot<Bytes, TargetsUnavailable>,
}

impl Snapshots {
    /// `/ready` kept [`READY_MAX_AGE`], `/targets` kept `targets_max_age` (`--targets-max-age`).
    pub fn new(targets_max_age: Duration) -> Self {
        Self {
            ready: Snapshot::new(READY_MAX_AGE),
            targets: Snapshot::new(targets_max_age),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::oneshot;

    use super::*;

    /// A failure of a refresh in these tests.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Down {
        Down,
        Refresh(RefreshFailed),
    }

    impl From<RefreshFailed> for Down {
        fn from(error: RefreshFailed) -> Self {
            Self::Refresh(error)
        }
    }

    /// A refresh that counts itself and finishes when `release` fires.
    fn held(
        calls: &Arc<AtomicUsize>,
        release: oneshot::Receiver<()>,
    ) -> impl Future<Output = Result<usize, Down>> + use<> {
        let calls = Arc::clone(calls);
        async move {
            let _ = release.await;
            Ok(calls.fetch_add(1, Ordering::SeqCst) + 1)
        }
    }

    /// Lets every spawned task run until it waits (one thread: each yield runs the queue).
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// Requests that arrive while a refresh runs share it, even when it takes longer than the
    /// maximum age (here zero: no answer is reused after it is given).
    #[tokio::test(flavor = "current_thread")]
    async fn requests_during_a_refresh_share_it_whatever_it_takes() {
        let snapshot = Arc::new(Snapshot::new(Duration::ZERO));
        let calls = Arc::new(AtomicUsize::new(0));
        let (release, released) = oneshot::channel();
        let mut released = Some(released);
        let requests: Vec<_> = (0..20)
            .map(|_| {
                let (snapshot, calls) = (Arc::clone(&snapshot), Arc::clone(&calls));
                let gate = released.take();
                tokio::spawn(async move {
                    snapshot
                        .get(move || held(&calls, gate.unwrap_or_else(|| oneshot::channel().1)))
                        .await
                })
            })
            .collect();
        settle().await;
        release.send(()).unwrap();
        for request in requests {
            assert_eq!(request.await.unwrap(), Ok(1));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // a request after it reads anew
        let (release, released) = oneshot::channel();
        release.send(()).unwrap();
        assert_eq!(snapshot.get(|| held(&calls, released)).await, Ok(2));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_is_reused_until_it_is_older_than_the_maximum_age() {
        let snapshot = Snapshot::new(Duration::from_mins(1));
        let calls = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let (release, released) = oneshot::channel();
            release.send(()).unwrap();
            assert_eq!(snapshot.get(|| held(&calls, released)).await, Ok(1));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_refresh_survives_the_request_that_started_it() {
        let snapshot = Arc::new(Snapshot::new(Duration::from_mins(1)));
        let calls = Arc::new(AtomicUsize::new(0));
        let (release, released) = oneshot::channel();
        let first = {
            let (snapshot, calls) = (Arc::clone(&snapshot), Arc::clone(&calls));
            tokio::spawn(async move { snapshot.get(move || held(&calls, released)).await })
        };
        settle().await;
        first.abort();
        release.send(()).unwrap();
        let (_, unused) = oneshot::channel();
        assert_eq!(snapshot.get(|| held(&calls, unused)).await, Ok(1));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn failures_are_kept_like_answers() {
        let snapshot: Snapshot<u8, Down> = Snapshot::new(Duration::from_mins(1));
        let first = snapshot.get(|| async { Err(Down::Down) }).await;
        let second = snapshot.get(|| async { Ok(1) }).await;
        assert_eq!((first, second), (Err(Down::Down), Err(Down::Down)));
    }
}
