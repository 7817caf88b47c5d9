//! Contract resolution through the contract-resolver, the only registry reader of contracts
//! (docs/design/evidence-server.md#resolution): one `Resolve` per envelope over mTLS gRPC, the
//! digest-pinned ContractRef as an OCI source. Anything but a valid contract is
//! `contract_resolution_failed`.

use pacto_engine::ContractAssertions;
use pacto_proto::resolver::{
    self, ContractRef, ResolveRequest, contract_resolver_client::ContractResolverClient,
    resolve_response::Result as Answer,
};
use pacto_runtime::grpc::{RetryPolicy, call_with_retries};
use tonic::transport::Channel;

/// A resolved contract: what evaluation and the record need.
#[derive(Debug, Clone)]
pub struct Contract {
    /// The engine input.
    pub assertions: ContractAssertions,
    /// `service.name` (the record's `service`).
    pub service_name: String,
}

/// Why a contract could not be resolved (`contract_resolution_failed`).
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The resolver answered with a gRPC error (unreachable, unauthorized, …).
    #[error("contract-resolver call failed: {code:?}: {message}")]
    Call {
        /// The gRPC status code.
        code: tonic::Code,
        /// The status message.
        message: String,
    },
    /// The contract is malformed or fails validation.
    #[error("contract {reference} is invalid: {message}")]
    Invalid {
        /// The reference.
        reference: String,
        /// The resolver's message.
        message: String,
    },
    /// The contract could not be obtained (missing, registry down, …).
    #[error("contract {reference} is unavailable: {reason}")]
    Unavailable {
        /// The reference.
        reference: String,
        /// The resolver's reason.
        reason: String,
    },
    /// The answer could not be used.
    #[error("contract-resolver answer for {reference} is unusable: {detail}")]
    Malformed {
        /// The reference.
        reference: String,
        /// What is wrong.
        detail: String,
    },
}

/// The contract-resolver client of the server.
#[derive(Debug, Clone)]
pub struct ContractResolver {
    client: ContractResolverClient<Channel>,
    retry: RetryPolicy,
    namespace: String,
}

impl ContractResolver {
    /// A resolver client over `channel`. `namespace` is sent as the request's namespace (the
    /// server's own; no pull Secret is ever named, so the resolver reads none).
    pub fn new(channel: Channel, retry: RetryPolicy, namespace: impl Into<String>) -> Self {
        Self {
            client: ContractResolverClient::new(channel)
                .max_decoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES)
                .max_encoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES),
            retry,
            namespace: namespace.into(),
        }
    }

    /// Resolves the digest-pinned `reference` (`oci://…@sha256:…`).
    pub async fn resolve(&self, reference: &str) -> Result<Contract, ResolveError> {
        let request = ResolveRequest {
            namespace: self.namespace.clone(),
            pacto_name: crate::RESOLVE_CALLER.to_owned(),
            contract_ref: Some(ContractRef {
                oci: reference.to_owned(),
                inline: String::new(),
                pull_secret_ref: String::new(),
            }),
            overrides: Vec::new(),
            max_age_seconds: 0,
        };
        let response = call_with_retries(&self.retry, || {
            let mut client = self.client.clone();
            let request = request.clone();
            async move { client.resolve(request).await }
        })
        .await
        .map_err(|status| ResolveError::Call {
            code: status.code(),
            message: status.message().to_owned(),
        })?
        .into_inner();
        contract_from(reference, response)
    }
}

fn contract_from(
    reference: &str,
    response: resolver::ResolveResponse,
) -> Result<Contract, ResolveError> {
    let malformed = |detail: String| ResolveError::Malformed {
        reference: reference.to_owned(),
        detail,
    };
    match response.result {
        None => Err(malformed("result: required".to_owned())),
        Some(Answer::Invalid(invalid)) => Err(ResolveError::Invalid {
            reference: reference.to_owned(),
            message: invalid.message,
        }),
        Some(Answer::Unavailable(unavailable)) => Err(ResolveError::Unavailable {
            reference: reference.to_owned(),
            reason: unavailable.reason,
        }),
        Some(Answer::Resolved(resolved)) => {
            let document = resolved
                .contract
                .ok_or_else(|| malformed("resolved.contract: required".to_owned()))?;
            let (_, contract) = pacto_contract::parse_contract(&document.yaml)
                .map_err(|e| malformed(format!("resolved.contract.yaml: {e}")))?;
            let assertions = ContractAssertions::try_from(&contract)
                .map_err(|e| malformed(format!("resolved.contract: {e}")))?;
            Ok(Contract {
                service_name: assertions.service_name.clone(),
                assertions,
            })
        }
    }
}
