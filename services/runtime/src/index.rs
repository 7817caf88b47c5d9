//! Watches into indexes (feature `watch`; docs/design/observation.md#watches-and-indexes).
//!
//! An [`Index`] is what a service keeps of one watched kind: a cache, a set of names, a map of
//! what attribution needs. It is told three things: an object was applied, an object was
//! deleted, and — after each (re)list of the watch — the whole listing, which replaces what it
//! held (objects deleted while the watch was down are gone). [`run_index`] drives an index from
//! a watch stream ([`crate::watch::watch`]) until shutdown, as a task of the service's runtime
//! (`rt.spawn(name, run_index(…))`, or [`crate::Tasks::spawn`] from deeper down), so the drain
//! joins it: the listing is buffered here, once,
//! between the watcher's `Init` and `InitDone`, so no index sees a half list. Errors are logged
//! and backed off by the stream's retry policy; an index that reports the health of its watch
//! hears of them through [`Index::failed`].
//!
//! One stream feeds several indexes as a tuple `(a, b)` or a `Vec` of them (each but the last
//! gets a clone of the object); an `Option` of an index is an index that may be absent.

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, Event};
use tokio_util::sync::CancellationToken;

/// What a service keeps of one watched kind `K` (see the module documentation).
pub trait Index<K> {
    /// `object` was created or changed.
    fn apply(&mut self, object: K);

    /// `object` was deleted (its last known state).
    fn delete(&mut self, object: K);

    /// The watch (re)listed: `listing` is every object there is now, replacing what the index
    /// held.
    fn reset(&mut self, listing: Vec<K>);

    /// The watch failed with `error` (already logged and backed off by the stream); the index
    /// keeps what it holds. By default nothing more happens.
    fn failed(&mut self, error: &watcher::Error) {
        let _ = error;
    }
}

impl<K, I: Index<K> + ?Sized> Index<K> for Box<I> {
    fn apply(&mut self, object: K) {
        (**self).apply(object);
    }

    fn delete(&mut self, object: K) {
        (**self).delete(object);
    }

    fn reset(&mut self, listing: Vec<K>) {
        (**self).reset(listing);
    }

    fn failed(&mut self, error: &watcher::Error) {
        (**self).failed(error);
    }
}

impl<K, I: Index<K>> Index<K> for Option<I> {
    fn apply(&mut self, object: K) {
        if let Some(index) = self {
            index.apply(object);
        }
    }

    fn delete(&mut self, object: K) {
        if let Some(index) = self {
            index.delete(object);
        }
    }

    fn reset(&mut self, listing: Vec<K>) {
        if let Some(index) = self {
            index.reset(listing);
        }
    }

    fn failed(&mut self, error: &watcher::Error) {
        if let Some(index) = self {
            index.failed(error);
        }
    }
}

/// Two indexes fed by one stream: `A` gets a clone, `B` the object.
impl<K: Clone, A: Index<K>, B: Index<K>> Index<K> for (A, B) {
    fn apply(&mut self, object: K) {
        self.0.apply(object.clone());
        self.1.apply(object);
    }

    fn delete(&mut self, object: K) {
        self.0.delete(object.clone());
        self.1.delete(object);
    }

    fn reset(&mut self, listing: Vec<K>) {
        self.0.reset(listing.clone());
        self.1.reset(listing);
    }

    fn failed(&mut self, error: &watcher::Error) {
        self.0.failed(error);
        self.1.failed(error);
    }
}

/// Any number of indexes fed by one stream, in order: each but the last gets a clone.
impl<K: Clone, I: Index<K>> Index<K> for Vec<I> {
    fn apply(&mut self, object: K) {
        if let Some((last, rest)) = self.split_last_mut() {
            for index in rest {
                index.apply(object.clone());
            }
            last.apply(object);
        }
    }

    fn delete(&mut self, object: K) {
        if let Some((last, rest)) = self.split_last_mut() {
            for index in rest {
                index.delete(object.clone());
            }
            last.delete(object);
        }
    }

    fn reset(&mut self, listing: Vec<K>) {
        if let Some((last, rest)) = self.split_last_mut() {
            for index in rest {
                index.reset(listing.clone());
            }
            last.reset(listing);
        }
    }

    fn failed(&mut self, error: &watcher::Error) {
        for index in self {
            index.failed(error);
        }
    }
}

/// The listing of a watch in progress: between `Init` and `InitDone`.
#[derive(Debug)]
struct Listing<K>(Option<Vec<K>>);

impl<K> Listing<K> {
    /// Hands one item of the stream to `index`, buffering a listing until it completes.
    fn feed(&mut self, index: &mut impl Index<K>, item: Result<Event<K>, watcher::Error>) {
        match item {
            Ok(Event::Init) => self.0 = Some(Vec::new()),
            Ok(Event::InitApply(object)) => self.0.get_or_insert_with(Vec::new).push(object),
            Ok(Event::InitDone) => index.reset(self.0.take().unwrap_or_default()),
            Ok(Event::Apply(object)) => index.apply(object),
            Ok(Event::Delete(object)) => index.delete(object),
            Err(error) => index.failed(&error),
        }
    }
}

/// Feeds `index` from `stream` until `shutdown` or the end of the stream (see the module
/// documentation): the future a runtime task runs.
pub async fn run_index<K, S, I>(stream: S, mut index: I, shutdown: CancellationToken)
where
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
    I: Index<K>,
{
    let mut stream = std::pin::pin!(stream);
    let mut listing = Listing(None);
    loop {
        let item = tokio::select! {
            () = shutdown.cancelled() => return,
            item = stream.next() => item,
        };
        let Some(item) = item else { return };
        listing.feed(&mut index, item);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records what it is told, as text.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Recorder {
        fn seen(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl Index<&'static str> for Recorder {
        fn apply(&mut self, object: &'static str) {
            self.0.lock().unwrap().push(format!("apply {object}"));
        }

        fn delete(&mut self, object: &'static str) {
            self.0.lock().unwrap().push(format!("delete {object}"));
        }

        fn reset(&mut self, listing: Vec<&'static str>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("reset {}", listing.join(",")));
        }

        fn failed(&mut self, _: &watcher::Error) {
            self.0.lock().unwrap().push("failed".to_owned());
        }
    }

    fn events() -> Vec<Result<Event<&'static str>, watcher::Error>> {
        vec![
            Ok(Event::Init),
            Ok(Event::InitApply("a")),
            Ok(Event::InitApply("b")),
            Ok(Event::InitDone),
            Ok(Event::Apply("c")),
            Ok(Event::Delete("a")),
            Err(watcher::Error::NoResourceVersion),
            // A relist that fails half way restarts with a new Init: the half list is dropped.
            Ok(Event::Init),
            Ok(Event::InitApply("x")),
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::Init),
            Ok(Event::InitApply("b")),
            Ok(Event::InitApply("c")),
            Ok(Event::InitDone),
            // An empty list is a reset to nothing.
            Ok(Event::Init),
            Ok(Event::InitDone),
        ]
    }

    const SEEN: [&str; 7] = [
        "reset a,b",
        "apply c",
        "delete a",
        "failed",
        "failed",
        "reset b,c",
        "reset ",
    ];

    #[tokio::test]
    async fn the_listing_is_buffered_once_and_every_index_of_a_fan_out_sees_the_same() {
        let (first, second, third) = (
            Recorder::default(),
            Recorder::default(),
            Recorder::default(),
        );
        let indexes = (
            first.clone(),
            vec![Some(second.clone()), None, Some(third.clone())],
        );
        tokio::spawn(run_index(
            futures::stream::iter(events()),
            indexes,
            CancellationToken::new(),
        ))
        .await
        .unwrap();
        // The end of the stream ended the task.
        let want: Vec<String> = SEEN.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(first.seen(), want);
        assert_eq!(second.seen(), want);
        assert_eq!(third.seen(), want);
    }

    #[tokio::test]
    async fn shutdown_stops_the_task_while_the_stream_is_quiet() {
        let shutdown = CancellationToken::new();
        let stream =
            futures::stream::iter(vec![Ok(Event::Apply("a"))]).chain(futures::stream::pending());
        let task = tokio::spawn(run_index(stream, Recorder::default(), shutdown.clone()));
        shutdown.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("the task ends at shutdown")
            .unwrap();
    }
}
