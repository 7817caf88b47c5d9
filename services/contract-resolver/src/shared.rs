//! Shared registry answers (docs/design/resolution.md#shared-resolves): the latest answer of each
//! registry operation (success or failure, with its time), and the operations in flight, so that
//! identical concurrent requests share one registry round trip.
//!
//! * An answer is reused when it is younger than what the request accepts ([`Freshness`]): a
//!   success up to `ok`, a failure up to `failure` (the request's max age, capped by
//!   `--failure-cache-ttl`). The latest answer replaces the previous one, so a failure hides an
//!   older success and the other way round.
//! * Otherwise the request joins the operation in flight for the same key, or starts it. The
//!   first request runs it ([`tokio::sync::OnceCell`]); the others wait for its answer. When the
//!   running request goes away (its client cancelled), the cell stays empty and a waiting request
//!   runs the operation itself, so a cancelled leader never poisons its followers. The last
//!   request to leave a flight removes it from the map.
//!
//! Keys carry the salted [`crate::cache::CredentialScope`], so requests with other credentials
//! never share an answer.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use metrics::counter;
use tokio::sync::OnceCell;

use crate::cache::TtlCache;
use crate::metrics::{CACHE_LOOKUPS_TOTAL, FAILURE_CACHE_HITS_TOTAL, MERGED_REQUESTS_TOTAL};
use crate::registry::RegistryError;

/// A registry answer, shareable between requests.
pub type Answer<V> = Result<V, Arc<RegistryError>>;

/// How old an answer a request accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// The oldest successful answer used.
    pub ok: Duration,
    /// The oldest failure used.
    pub failure: Duration,
}

/// Whether a stored answer of age `age` is young enough for a request accepting `accept`.
fn accepts<V>(answer: &Answer<V>, age: Duration, accept: Freshness) -> bool {
    match answer {
        Ok(_) => age < accept.ok,
        Err(_) => age < accept.failure,
    }
}

type Cell<V> = Arc<OnceCell<Answer<V>>>;
type Flights<K, V> = Mutex<HashMap<K, Cell<V>>>;

/// The answers and in-flight operations of one kind of registry operation.
pub struct Shared<K, V> {
    /// `cache` label of the lookups counter (`digest`, `tags`, `bundle`).
    cache: &'static str,
    /// `kind` label of the merged and failure-hit counters (the registry operation).
    kind: &'static str,
    answers: TtlCache<K, Answer<V>>,
    /// Which answers are stored (the others serve only the requests of their flight).
    keep: fn(&Answer<V>) -> bool,
    flights: Flights<K, V>,
}

impl<K, V> std::fmt::Debug for Shared<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("cache", &self.cache)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Shared<K, V> {
    /// Shares answers kept in `answers` (its TTL and bounds apply to successes and failures
    /// alike), counted under `cache` (lookups) and `kind` (merged requests, failure hits).
    pub fn new(cache: &'static str, kind: &'static str, answers: TtlCache<K, Answer<V>>) -> Self {
        Self {
            cache,
            kind,
            answers,
            keep: |_| true,
            flights: Mutex::new(HashMap::new()),
        }
    }

    /// Stores only the answers `keep` accepts (docs/design/resolution.md#memory: a bundle only
    /// once its `pacto.yaml` parsed).
    #[must_use]
    pub fn with_keep(mut self, keep: fn(&Answer<V>) -> bool) -> Self {
        self.keep = keep;
        self
    }

    /// The answer for `key`: a stored one `accept` allows, else the answer of the operation in
    /// flight for `key`, else the answer of `fetch` (run here and shared with whoever joins).
    pub async fn get<F, Fut>(&self, key: &K, accept: Freshness, fetch: F) -> Answer<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, RegistryError>>,
    {
        if let Some((answer, age)) = self.answers.get_aged(key, Instant::now()) {
            match &answer {
                Ok(_) if age < accept.ok => {
                    counter!(CACHE_LOOKUPS_TOTAL, "cache" => self.cache, "result" => "hit")
                        .increment(1);
                    return answer;
                }
                Err(_) if age < accept.failure => {
                    counter!(FAILURE_CACHE_HITS_TOTAL, "kind" => self.kind).increment(1);
                    return answer;
                }
                _ => {}
            }
        }
        counter!(CACHE_LOOKUPS_TOTAL, "cache" => self.cache, "result" => "miss").increment(1);
        let flight = Flight::join(&self.flights, key);
        let mut led = false;
        let answer = flight
            .cell()
            .get_or_init(|| {
                led = true;
                async {
                    // A flight that finished between this request's lookup above and its join
                    // stored its answer before it ended: take that rather than ask again
                    // (docs/design/resolution.md#shared-resolves, joining late).
                    if let Some((answer, age)) = self.answers.get_aged(key, Instant::now())
                        && accepts(&answer, age, accept)
                    {
                        return answer;
                    }
                    let answer = fetch().await.map_err(Arc::new);
                    if (self.keep)(&answer) {
                        self.answers
                            .insert(key.clone(), answer.clone(), Instant::now());
                    }
                    answer
                }
            })
            .await
            .clone();
        if !led {
            counter!(MERGED_REQUESTS_TOTAL, "kind" => self.kind).increment(1);
        }
        answer
    }

    /// Operations in flight (what the tests read to see that entries are removed).
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One request's membership of a flight; leaving removes the flight when nobody else is in it.
struct Flight<'a, K: Hash + Eq, V> {
    flights: &'a Flights<K, V>,
    key: &'a K,
    cell: Option<Cell<V>>,
}

impl<'a, K: Hash + Eq + Clone, V> Flight<'a, K, V> {
    /// Joins the flight for `key`, or starts one when none is running (a finished flight whose
    /// last followers have not left yet counts as none: its answer is stored already).
    fn join(flights: &'a Flights<K, V>, key: &'a K) -> Self {
        let mut map = flights.lock().unwrap_or_else(PoisonError::into_inner);
        let cell = match map.get(key) {
            Some(cell) if !cell.initialized() => Arc::clone(cell),
            _ => {
                let cell = Arc::new(OnceCell::new());
                map.insert(key.clone(), Arc::clone(&cell));
                cell
            }
        };
        Self {
            flights,
            key,
            cell: Some(cell),
        }
    }

    fn cell(&self) -> &OnceCell<Answer<V>> {
        // Set in `join`, taken only in `drop`.
        self.cell.as_deref().unwrap_or_else(|| unreachable!())
    }
}

impl<K: Hash + Eq, V> Drop for Flight<'_, K, V> {
    fn drop(&mut self) {
        // Every clone and drop of a flight's cell happens under the lock, so the count is exact.
        let mut map = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cell) = self.cell.take() {
            let last = map.get(self.key).is_some_and(|c| Arc::ptr_eq(c, &cell))
                && Arc::strong_count(&cell) == 2;
            drop(cell);
            if last {
                map.remove(self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use pacto_oci::ErrorClass;

    use super::*;

    fn shared() -> Arc<Shared<&'static str, u32>> {
        Arc::new(Shared::new(
            "digest",
            "manifest_head",
            TtlCache::new(Duration::from_hours(1), 16),
        ))
    }

    const ANY: Freshness = Freshness {
        ok: Duration::from_hours(1),
        failure: Duration::from_hours(1),
    };
    const FRESH: Freshness = Freshness {
        ok: Duration::ZERO,
        failure: Duration::ZERO,
    };

    /// Waits until `done` holds, failing the test after a deadline.
    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after 10s waiting for {what}"
            );
            tokio::task::yield_now().await;
        }
    }

    /// Holders of `key`'s flight: the map, the leader and each follower; `None` when no flight.
    fn holders(shared: &Shared<&'static str, u32>, key: &'static str) -> Option<usize> {
        shared
            .flights
            .lock()
            .expect("lock")
            .get(&key)
            .map(Arc::strong_count)
    }

    fn not_found() -> RegistryError {
        RegistryError::Status {
            reference: "r/x:1".into(),
            status: 404,
            class: ErrorClass::NotFound,
        }
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_fetch_and_leave_no_flight_behind() {
        let shared = shared();
        let fetches = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(tokio::sync::Notify::new());
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let (shared, fetches, gate) =
                (Arc::clone(&shared), Arc::clone(&fetches), Arc::clone(&gate));
            tasks.spawn(async move {
                shared
                    .get(&"k", FRESH, || async {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        gate.notified().await;
                        Ok(7)
                    })
                    .await
            });
        }
        // Release the leader once all 50 have joined its flight (the map holds one more).
        until("all 50 requests in one flight", || {
            holders(&shared, "k") == Some(51)
        })
        .await;
        gate.notify_one();
        while let Some(answer) = tasks.join_next().await {
            assert_eq!(answer.expect("task").expect("answer"), 7);
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        assert_eq!(shared.in_flight(), 0);
        // The stored answer serves a request that accepts its age; a fresh one fetches.
        let again = shared.get(&"k", ANY, || async { Ok(8) }).await;
        assert_eq!(again.expect("answer"), 7);
        let fresh = shared.get(&"k", FRESH, || async { Ok(9) }).await;
        assert_eq!(fresh.expect("answer"), 9);
    }

    #[tokio::test]
    async fn a_cancelled_leader_does_not_poison_its_followers() {
        let shared = shared();
        let started = Arc::new(tokio::sync::Notify::new());
        let leader = {
            let (shared, started) = (Arc::clone(&shared), Arc::clone(&started));
            tokio::spawn(async move {
                shared
                    .get(&"k", FRESH, || async {
                        started.notify_one();
                        std::future::pending::<Result<u32, RegistryError>>().await
                    })
                    .await
            })
        };
        started.notified().await;
        let follower = {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move { shared.get(&"k", FRESH, || async { Ok(5) }).await })
        };
        // The follower has joined the leader's flight.
        until("the follower to join the leader's flight", || {
            holders(&shared, "k") == Some(3)
        })
        .await;
        leader.abort();
        assert!(leader.await.expect_err("aborted").is_cancelled());
        assert_eq!(follower.await.expect("task").expect("answer"), 5);
        assert_eq!(shared.in_flight(), 0);

        // Everyone gone before an answer: the flight is removed too.
        let lonely = {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move { shared.get(&"other", FRESH, std::future::pending).await })
        };
        until("the flight to start", || shared.in_flight() > 0).await;
        lonely.abort();
        assert!(lonely.await.expect_err("aborted").is_cancelled());
        assert_eq!(shared.in_flight(), 0);
    }

    #[tokio::test]
    async fn failures_are_shared_within_what_the_request_accepts_and_the_latest_answer_wins() {
        let shared = shared();
        let fetches = AtomicUsize::new(0);
        let failing = || async {
            fetches.fetch_add(1, Ordering::SeqCst);
            Err::<u32, _>(not_found())
        };
        let first = shared.get(&"k", FRESH, failing).await.expect_err("failure");
        let within = Freshness {
            ok: Duration::from_hours(1),
            failure: Duration::from_hours(1),
        };
        let again = shared
            .get(&"k", within, failing)
            .await
            .expect_err("failure");
        assert!(Arc::ptr_eq(&first, &again), "the same error, remembered");
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        // No failure age accepted (fresh, or the failure cache disabled): asked again.
        let disabled = Freshness {
            ok: Duration::from_hours(1),
            failure: Duration::ZERO,
        };
        let answer = shared.get(&"k", disabled, || async { Ok(3) }).await;
        assert_eq!(answer.expect("answer"), 3);
        // The success replaced the failure.
        assert_eq!(shared.get(&"k", within, failing).await.expect("answer"), 3);
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        // And a newer failure hides the older success from a request that accepts failures.
        shared.get(&"k", FRESH, failing).await.expect_err("failure");
        shared
            .get(&"k", within, failing)
            .await
            .expect_err("failure");
        assert_eq!(fetches.load(Ordering::SeqCst), 2);
    }
}
