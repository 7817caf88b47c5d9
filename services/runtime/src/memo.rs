//! Bounded memos of pure work: what was parsed from a document, keyed by the document's exact
//! bytes ([`ParseMemo`]), and any result keyed by everything it depends on ([`Memo`])
//! (docs/design/crates.md#parse-memo).
//!
//! The status-writer receives the same effective contract on every pass of a Pacto and sends it
//! on to the observer and the evaluator, each of which parsed it again; the resolver validated
//! the same bundle again for every Resolve. Parsing and validating are pure functions of their
//! inputs, so keeping their results changes no answer. A key is the whole input, compared in full
//! on a hit (no hash collision can return another input's result); failures are never kept, so a
//! bad document is reported the same way each time. When full, an arbitrary entry makes room;
//! capacity 0 keeps nothing.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use metrics::counter;

/// Documents larger than this are parsed every time (a memo of a few hundred such documents
/// would hold tens of MiB); [`Memo`] users apply the same bound to what they keep.
pub const MAX_MEMO_DOCUMENT_BYTES: usize = 256 * 1024;

/// The capacity of every memo of the services (a few KiB each: Pactos with the same contract and
/// overrides share one entry); the evaluator's `--contract-cache-entries` defaults to it.
pub const DEFAULT_MEMO_ENTRIES: usize = 512;

/// Up to `capacity` results, each shared with its readers, by key.
#[derive(Debug)]
pub struct Memo<K, V> {
    capacity: usize,
    /// The counter of lookups, by `result` (`hit`, `miss`), and by `cache` when set.
    metric: &'static str,
    cache: Option<&'static str>,
    entries: Mutex<HashMap<K, Arc<V>>>,
}

impl<K: Hash + Eq, V> Memo<K, V> {
    /// A memo keeping at most `capacity` results (0: none), counting lookups in `metric`, with
    /// the label `cache` when given.
    pub fn new(capacity: usize, metric: &'static str, cache: Option<&'static str>) -> Self {
        Self {
            capacity,
            metric,
            cache,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The number of results kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, Arc<V>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, result: &'static str) {
        match self.cache {
            Some(cache) => counter!(self.metric, "cache" => cache, "result" => result).increment(1),
            None => counter!(self.metric, "result" => result).increment(1),
        }
    }

    /// The result kept for `key`, counted as a hit or a miss.
    pub fn get<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let found = if self.capacity == 0 {
            None
        } else {
            self.lock().get(key).cloned()
        };
        self.count(if found.is_some() { "hit" } else { "miss" });
        found
    }

    /// Keeps `value` for `key`, making room when full.
    pub fn insert(&self, key: K, value: Arc<V>)
    where
        K: Clone,
    {
        if self.capacity == 0 {
            return;
        }
        let mut entries = self.lock();
        if entries.len() >= self.capacity
            && !entries.contains_key(&key)
            && let Some(victim) = entries.keys().next().cloned()
        {
            entries.remove(&victim);
        }
        entries.insert(key, value);
    }
}

/// What was parsed from documents, by the documents' exact bytes; documents over
/// [`MAX_MEMO_DOCUMENT_BYTES`] are parsed every time.
#[derive(Debug)]
pub struct ParseMemo<V>(Memo<Vec<u8>, V>);

impl<V> ParseMemo<V> {
    /// A memo keeping at most `capacity` values (0: none), counting lookups in `metric`.
    pub fn new(capacity: usize, metric: &'static str) -> Self {
        Self(Memo::new(capacity, metric, None))
    }

    /// A memo counting lookups in `metric` with the label `cache`.
    pub fn labelled(capacity: usize, metric: &'static str, cache: &'static str) -> Self {
        Self(Memo::new(capacity, metric, Some(cache)))
    }

    /// The number of values kept.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value kept for `document` (always `None` for an oversized one).
    pub fn get(&self, document: &[u8]) -> Option<Arc<V>> {
        if document.len() > MAX_MEMO_DOCUMENT_BYTES {
            self.0.count("miss");
            return None;
        }
        self.0.get(document)
    }

    /// Keeps `value` for `document` (not an oversized one).
    pub fn insert(&self, document: &[u8], value: Arc<V>) {
        if document.len() <= MAX_MEMO_DOCUMENT_BYTES {
            self.0.insert(document.to_vec(), value);
        }
    }

    /// The value parsed from `document`: the kept one, or `parse()`'s, kept when it succeeds.
    /// The parse runs outside the lock; two first lookups of one document may both parse it.
    pub fn get_or_parse<E>(
        &self,
        document: &[u8],
        parse: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        if let Some(hit) = self.get(document) {
            return Ok(hit);
        }
        let parsed = Arc::new(parse()?);
        self.insert(document, Arc::clone(&parsed));
        Ok(parsed)
    }

    /// [`Self::get_or_parse`] for a document that may be absent: then `parse` runs (to report
    /// the absence its own way) and nothing is kept.
    pub fn get_or_parse_optional<E>(
        &self,
        document: Option<&[u8]>,
        parse: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        match document {
            Some(document) => self.get_or_parse(document, parse),
            None => parse().map(Arc::new),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    const METRIC: &str = "test_memo_lookups_total";

    fn parse_count(memo: &ParseMemo<String>, document: &str, parses: &Cell<u32>) -> Arc<String> {
        memo.get_or_parse(document.as_bytes(), || {
            parses.set(parses.get() + 1);
            Ok::<_, ()>(document.to_uppercase())
        })
        .unwrap()
    }

    #[test]
    fn a_document_is_parsed_once_and_the_value_shared() {
        let memo = ParseMemo::new(2, METRIC);
        let parses = Cell::new(0);
        let first = parse_count(&memo, "a", &parses);
        let again = parse_count(&memo, "a", &parses);
        assert_eq!(parses.get(), 1);
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(*again, "A");
    }

    #[test]
    fn a_full_memo_makes_room_and_never_grows_past_its_capacity() {
        let memo = ParseMemo::new(2, METRIC);
        let parses = Cell::new(0);
        for document in ["a", "b", "c", "d"] {
            parse_count(&memo, document, &parses);
        }
        assert_eq!(memo.len(), 2);
        assert_eq!(parses.get(), 4);
        // The newest is always kept.
        parse_count(&memo, "d", &parses);
        assert_eq!(parses.get(), 4);
    }

    #[test]
    fn failures_oversized_documents_and_capacity_zero_keep_nothing() {
        let memo = ParseMemo::<String>::new(4, METRIC);
        let failed: Result<_, &str> = memo.get_or_parse(b"bad", || Err("no"));
        assert_eq!(failed.unwrap_err(), "no");
        assert!(memo.is_empty());

        let big = "x".repeat(MAX_MEMO_DOCUMENT_BYTES + 1);
        let parses = Cell::new(0);
        parse_count(&memo, &big, &parses);
        parse_count(&memo, &big, &parses);
        assert_eq!(parses.get(), 2);
        assert!(memo.is_empty());

        let absent: Result<Arc<String>, &str> =
            memo.get_or_parse_optional(None, || Err("document: required"));
        assert_eq!(absent.unwrap_err(), "document: required");
        assert!(memo.is_empty());

        let off = ParseMemo::new(0, METRIC);
        parse_count(&off, "a", &parses);
        parse_count(&off, "a", &parses);
        assert_eq!(parses.get(), 4);
        assert!(off.is_empty());
    }

    #[test]
    fn a_memo_compares_whole_keys() {
        let memo: Memo<(String, u32), u32> = Memo::new(4, METRIC, Some("test"));
        memo.insert(("a".into(), 1), Arc::new(10));
        assert_eq!(memo.get(&("a".to_owned(), 1)).as_deref(), Some(&10));
        assert_eq!(memo.get(&("a".to_owned(), 2)), None);
    }
}
