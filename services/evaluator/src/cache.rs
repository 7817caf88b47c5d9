//! The evaluator's memo of parsed contracts: `pacto_runtime::memo::ParseMemo` keyed by the exact
//! YAML bytes (docs/design/crates.md#parse-memo). The status-writer sends the same effective
//! contract on every pass of a Pacto, and parsing it (with the engine's assertions) is the
//! dominant cost of an Evaluate call.

use std::sync::Arc;

use pacto_contract::model::Contract;
use pacto_engine::ContractAssertions;
use pacto_proto::{
    common::ContractDocument,
    convert::{self, FieldError},
};
use pacto_runtime::memo::ParseMemo;

/// Cache lookups, by result (`hit`/`miss`).
pub const CONTRACT_CACHE_TOTAL: &str = "pacto_evaluator_contract_cache_total";

/// A contract parsed once: the typed model and the engine's assertions (or why they could not be
/// derived, reported only by Evaluate).
#[derive(Debug)]
pub struct ParsedContract {
    /// The typed model.
    pub contract: Contract,
    /// The engine's view, or the field error that prevents evaluation.
    pub assertions: Result<ContractAssertions, FieldError>,
}

impl ParsedContract {
    /// Parses a required contract document; `field` names it in errors.
    pub fn parse(document: Option<&ContractDocument>, field: &str) -> Result<Self, FieldError> {
        let contract = convert::contract_from_proto(document, field)?;
        let assertions = convert::assertions_from_contract(&contract, field);
        Ok(Self {
            contract,
            assertions,
        })
    }
}

/// The memo.
#[derive(Debug)]
pub struct ContractCache(ParseMemo<ParsedContract>);

impl ContractCache {
    /// A cache keeping at most `capacity` contracts (0 disables it).
    pub fn new(capacity: usize) -> Self {
        Self(ParseMemo::new(capacity, CONTRACT_CACHE_TOTAL))
    }

    /// Number of cached contracts.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The parsed contract for `document`, parsing it on a miss.
    pub fn get_or_parse(
        &self,
        document: Option<&ContractDocument>,
        field: &str,
    ) -> Result<Arc<ParsedContract>, FieldError> {
        self.0
            .get_or_parse_optional(document.map(|doc| doc.yaml.as_slice()), || {
                ParsedContract::parse(document, field)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(version: u32) -> ContractDocument {
        convert::contract_document(format!(
            "pactoVersion: \"2.0\"\nservice:\n  name: s\n  version: 1.0.{version}\n"
        ))
    }

    #[test]
    fn hits_share_the_parsed_contract_and_capacity_is_bounded() {
        let cache = ContractCache::new(2);
        let first = cache.get_or_parse(Some(&doc(1)), "contract").unwrap();
        let again = cache.get_or_parse(Some(&doc(1)), "contract").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(first.contract.service.version, "1.0.1");
        cache.get_or_parse(Some(&doc(2)), "contract").unwrap();
        cache.get_or_parse(Some(&doc(3)), "contract").unwrap();
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn errors_are_not_cached_and_zero_capacity_disables() {
        let cache = ContractCache::new(4);
        let broken = convert::contract_document("service: [");
        assert_eq!(
            cache
                .get_or_parse(Some(&broken), "contract")
                .unwrap_err()
                .field,
            "contract.yaml"
        );
        assert_eq!(
            cache
                .get_or_parse(None, "contract")
                .unwrap_err()
                .to_string(),
            "contract: required"
        );
        assert!(cache.is_empty());

        let disabled = ContractCache::new(0);
        let first = disabled.get_or_parse(Some(&doc(1)), "contract").unwrap();
        let again = disabled.get_or_parse(Some(&doc(1)), "contract").unwrap();
        assert!(!Arc::ptr_eq(&first, &again));
        assert!(disabled.is_empty());
    }
}
