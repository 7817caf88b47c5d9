//! Replay protection (docs/design/envelopes.md#replay): an envelope id is accepted once across
//! the whole store, and a producer's sequence must be strictly greater than every sequence it
//! had accepted before, across all subjects and keys. A producer's first envelope may use any
//! sequence, 0 included.

use std::collections::{HashMap, HashSet};

use crate::codes::ErrorCode;

/// The accepted history, reduced to what replay checks need. Built from the stored records and
/// extended with each accepted envelope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayIndex {
    ids: HashSet<String>,
    max_sequence: HashMap<String, u64>,
}

/// A replayed envelope (`replay`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The id was accepted before.
    #[error("id: envelope {id:?} was already accepted")]
    DuplicateId {
        /// The id.
        id: String,
    },
    /// The sequence is not above the producer's highest accepted sequence.
    #[error(
        "sequence: {sequence} is not greater than {max}, the highest accepted for producer {producer:?}"
    )]
    StaleSequence {
        /// The producer.
        producer: String,
        /// The sequence received.
        sequence: u64,
        /// The highest accepted sequence.
        max: u64,
    },
}

impl ReplayError {
    /// The stable code: always `replay`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::Replay
    }
}

impl ReplayIndex {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks an envelope against the history (the id first, then the sequence).
    pub fn check(&self, id: &str, producer: &str, sequence: u64) -> Result<(), ReplayError> {
        if self.ids.contains(id) {
            return Err(ReplayError::DuplicateId { id: id.to_owned() });
        }
        if let Some(&max) = self.max_sequence.get(producer)
            && sequence <= max
        {
            return Err(ReplayError::StaleSequence {
                producer: producer.to_owned(),
                sequence,
                max,
            });
        }
        Ok(())
    }

    /// Records an accepted (or stored) envelope without checking it.
    pub fn record(&mut self, id: &str, producer: &str, sequence: u64) {
        self.ids.insert(id.to_owned());
        self.record_sequence(producer, sequence);
    }

    /// [`ReplayIndex::check`], then [`ReplayIndex::record`] on success.
    pub fn accept(&mut self, id: &str, producer: &str, sequence: u64) -> Result<(), ReplayError> {
        self.check(id, producer, sequence)?;
        self.record(id, producer, sequence);
        Ok(())
    }

    /// Forgets an id (its record left the retention, docs/design/evidence-store.md#retention)
    /// and keeps the producer's highest sequence: replaying that envelope is still refused by
    /// its sequence.
    pub fn forget(&mut self, id: &str) {
        self.ids.remove(id);
    }

    /// Raises a producer's highest accepted sequence without recording an id (the sequences of
    /// records that left the retention).
    pub fn record_sequence(&mut self, producer: &str, sequence: u64) {
        let max = self
            .max_sequence
            .entry(producer.to_owned())
            .or_insert(sequence);
        *max = (*max).max(sequence);
    }

    /// The highest accepted sequence of a producer.
    pub fn max_sequence(&self, producer: &str) -> Option<u64> {
        self.max_sequence.get(producer).copied()
    }

    /// The number of accepted ids.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing was accepted.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}
