//! Conversion from the `pacto-contract` model into [`ContractAssertions`] (docs/design/evaluation.md#engine-inputs).

use pacto_contract::model::Contract;

use crate::input::{CapabilityAssertion, ContractAssertions, InputError, NamedAssertion};

/// The engine input of a contract: the assertions `evaluate` checks.
///
/// Fails only on capabilities a valid contract cannot contain (an unknown `type`, or an
/// `extension` without `ref`), naming the field. A contract that passed validation always
/// converts.
impl TryFrom<&Contract> for ContractAssertions {
    type Error = InputError;

    fn try_from(contract: &Contract) -> Result<Self, Self::Error> {
        let capabilities = contract
            .capabilities
            .iter()
            .enumerate()
            .map(|(index, c)| {
                CapabilityAssertion::from_type(index, &c.kind, c.reference.as_deref())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            service_name: contract.service.name.clone(),
            interfaces: contract.interfaces.iter().map(|i| i.name.clone()).collect(),
            capabilities,
            dependencies: contract
                .dependencies
                .iter()
                .map(|d| NamedAssertion::new(d.name.clone(), d.required))
                .collect(),
            configurations: contract
                .configurations
                .iter()
                .map(|c| NamedAssertion::new(c.name.clone(), c.required))
                .collect(),
            workload: contract.workload.clone().filter(|w| !w.is_empty()),
            persistent: contract
                .state
                .as_ref()
                .is_some_and(|s| s.persistence.durability == "persistent"),
        })
    }
}
