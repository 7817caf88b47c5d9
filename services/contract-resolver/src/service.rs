//! The gRPC edge: wire requests → domain inputs (rejecting bad fields with `InvalidArgument`
//! naming them), domain outcomes → wire responses.

use std::sync::Arc;
use std::time::Duration;

use pacto_contract::ConfigurationOverride;
use pacto_contract::ValidationReport;
use pacto_proto::common::{ValidationIssue, ValidationResult};
use pacto_proto::convert::{FieldError, contract_document};
use pacto_proto::resolver::{
    self as wire, ListRevisionsRequest, ListRevisionsResponse, ResolveRequest, ResolveResponse,
    contract_resolver_server::ContractResolver, resolve_response,
};
use pacto_runtime::metrics::RpcTimer;
use tonic::{Request, Response, Status};

use crate::SERVICE_NAME;
use crate::outcome::{
    Class, ContractSource, ListInput, Outcome, ResolutionPolicy, ResolveError, ResolveInput,
};
use crate::resolve::{Resolver, TagRevision};

fn required(value: &str, field: &str) -> Result<String, FieldError> {
    if value.trim().is_empty() {
        Err(FieldError::new(field, "required"))
    } else {
        Ok(value.trim().to_owned())
    }
}

fn optional(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// Validates a Resolve request into a domain input.
pub fn resolve_input(request: &ResolveRequest) -> Result<ResolveInput, FieldError> {
    let namespace = required(&request.namespace, "namespace")?;
    let pacto_name = required(&request.pacto_name, "pacto_name")?;
    let contract_ref = request
        .contract_ref
        .as_ref()
        .ok_or_else(|| FieldError::new("contract_ref", "required"))?;
    let overrides = request
        .overrides
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let name = required(&o.name, &format!("overrides[{i}].name"))?;
            if o.values.is_empty() {
                return Err(FieldError::new(
                    format!("overrides[{i}].values"),
                    "at least one value is required",
                ));
            }
            Ok(ConfigurationOverride {
                name,
                values: o
                    .values
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ResolveInput {
        namespace,
        pacto_name,
        source: ContractSource::from_fields(&contract_ref.oci, &contract_ref.inline),
        pull_secret: optional(&contract_ref.pull_secret_ref),
        overrides,
        constraint: None,
        max_age: Duration::from_secs(u64::from(request.max_age_seconds)),
    })
}

/// Validates a ListRevisions request into a domain input.
pub fn list_input(request: &ListRevisionsRequest) -> Result<ListInput, FieldError> {
    Ok(ListInput {
        namespace: required(&request.namespace, "namespace")?,
        pacto_name: required(&request.pacto_name, "pacto_name")?,
        oci: required(&request.oci, "oci")?,
        pull_secret: optional(&request.pull_secret_ref),
        tags: request
            .tags
            .iter()
            .enumerate()
            .map(|(i, t)| required(t, &format!("tags[{i}]")))
            .collect::<Result<_, _>>()?,
        max_age: Duration::from_secs(u64::from(request.max_age_seconds)),
    })
}

fn policy_to_proto(policy: ResolutionPolicy) -> wire::ResolutionPolicy {
    match policy {
        ResolutionPolicy::None => wire::ResolutionPolicy::Unspecified,
        ResolutionPolicy::Latest => wire::ResolutionPolicy::Latest,
        ResolutionPolicy::PinnedTag => wire::ResolutionPolicy::PinnedTag,
        ResolutionPolicy::PinnedDigest => wire::ResolutionPolicy::PinnedDigest,
    }
}

/// A validation report as written to `status.validation`.
pub fn report_to_proto(report: &ValidationReport) -> ValidationResult {
    let issues = |list: &[pacto_contract::Finding]| {
        list.iter()
            .map(|f| ValidationIssue {
                code: f.code.clone(),
                path: f.path.clone(),
                message: f.message.clone(),
            })
            .collect()
    };
    ValidationResult {
        valid: report.is_valid(),
        errors: issues(&report.errors),
        warnings: issues(&report.warnings),
    }
}

/// Encodes an outcome.
pub fn outcome_to_proto(outcome: Outcome) -> ResolveResponse {
    let result = match outcome {
        Outcome::Resolved(r) => resolve_response::Result::Resolved(wire::Resolved {
            contract: Some(contract_document(r.effective_yaml)),
            raw_yaml: r.raw_yaml,
            resolved_ref: r.resolved_ref,
            digest: r.digest,
            resolution_policy: policy_to_proto(r.policy).into(),
            validation: Some(report_to_proto(&r.report)),
            configuration_schemas: r.configuration_schemas.into_iter().collect(),
            content_hash: r.content_hash,
        }),
        Outcome::Invalid {
            message,
            report,
            policy,
        } => resolve_response::Result::Invalid(wire::Invalid {
            message,
            validation: Some(report_to_proto(&report)),
            resolution_policy: policy_to_proto(policy).into(),
        }),
        Outcome::Unavailable { reason, policy } => {
            resolve_response::Result::Unavailable(wire::Unavailable {
                reason,
                resolution_policy: policy_to_proto(policy).into(),
            })
        }
    };
    ResolveResponse {
        result: Some(result),
    }
}

fn revision_to_proto(r: TagRevision) -> wire::TagRevision {
    wire::TagRevision {
        tag: r.tag,
        resolved_ref: r.resolved_ref,
        digest: r.digest,
        error: r.error,
        transient: r.transient,
        version: r.version,
        content_hash: r.content_hash,
        service_name: r.service_name,
    }
}

/// The gRPC status of a ListRevisions failure that concerns the whole request.
pub fn list_error_status(error: &ResolveError) -> Status {
    match (error, error.class()) {
        (ResolveError::Reference { .. }, _) => {
            Status::invalid_argument(format!("oci: {}", error.message()))
        }
        (_, Class::Unavailable) => Status::unavailable(error.message()),
        (_, Class::Invalid) => Status::failed_precondition(error.message()),
    }
}

/// The ContractResolver gRPC service.
#[derive(Debug, Clone)]
pub struct ResolverService {
    resolver: Arc<Resolver>,
}

impl ResolverService {
    /// Serves `resolver`.
    pub fn new(resolver: Arc<Resolver>) -> Self {
        Self { resolver }
    }
}

#[tonic::async_trait]
impl ContractResolver for ResolverService {
    #[tracing::instrument(name = "Resolve", skip_all, fields(
        namespace = %request.get_ref().namespace,
        pacto = %request.get_ref().pacto_name,
    ))]
    async fn resolve(
        &self,
        request: Request<ResolveRequest>,
    ) -> Result<Response<ResolveResponse>, Status> {
        let timer = RpcTimer::start(SERVICE_NAME, "Resolve");
        let result = match resolve_input(request.get_ref()) {
            Err(error) => {
                tracing::info!(%error, "rejected Resolve request");
                Err(Status::from(error))
            }
            Ok(input) => Ok(outcome_to_proto(self.resolver.resolve(&input).await)),
        };
        timer.finish(result).map(Response::new)
    }

    #[tracing::instrument(name = "ListRevisions", skip_all, fields(
        namespace = %request.get_ref().namespace,
        pacto = %request.get_ref().pacto_name,
    ))]
    async fn list_revisions(
        &self,
        request: Request<ListRevisionsRequest>,
    ) -> Result<Response<ListRevisionsResponse>, Status> {
        let timer = RpcTimer::start(SERVICE_NAME, "ListRevisions");
        let result = match list_input(request.get_ref()) {
            Err(error) => {
                tracing::info!(%error, "rejected ListRevisions request");
                Err(Status::from(error))
            }
            Ok(input) => match self.resolver.list_revisions(&input).await {
                Ok(revisions) => Ok(ListRevisionsResponse {
                    revisions: revisions.into_iter().map(revision_to_proto).collect(),
                }),
                Err(error) => {
                    tracing::info!(namespace = %input.namespace, pacto = %input.pacto_name, %error, "ListRevisions failed");
                    Err(list_error_status(&error))
                }
            },
        };
        timer.finish(result).map(Response::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ResolveRequest {
        ResolveRequest {
            namespace: "team".into(),
            pacto_name: "svc".into(),
            contract_ref: Some(wire::ContractRef {
                oci: "ghcr.io/acme/svc".into(),
                inline: String::new(),
                pull_secret_ref: " ".into(),
            }),
            overrides: vec![wire::ConfigurationOverride {
                name: "app".into(),
                values: [("k".to_owned(), "v".to_owned())].into(),
            }],
            max_age_seconds: 300,
        }
    }

    #[test]
    fn requests_are_validated_with_field_names() {
        let input = resolve_input(&request()).expect("valid");
        assert_eq!(input.source, ContractSource::Oci("ghcr.io/acme/svc".into()));
        assert_eq!(input.pull_secret, None);
        assert_eq!(input.overrides[0].values["k"], "v");
        assert_eq!(input.max_age, Duration::from_mins(5));
        let fresh = ResolveRequest {
            max_age_seconds: 0,
            ..request()
        };
        assert_eq!(
            resolve_input(&fresh).expect("valid").max_age,
            Duration::ZERO
        );

        let mut r = request();
        r.namespace.clear();
        assert_eq!(resolve_input(&r).unwrap_err().field, "namespace");
        let mut r = request();
        r.contract_ref = None;
        assert_eq!(resolve_input(&r).unwrap_err().field, "contract_ref");
        let mut r = request();
        r.overrides[0].values.clear();
        assert_eq!(resolve_input(&r).unwrap_err().field, "overrides[0].values");
        let mut r = request();
        r.overrides[0].name = String::new();
        assert_eq!(resolve_input(&r).unwrap_err().field, "overrides[0].name");

        let list = ListRevisionsRequest {
            namespace: "n".into(),
            pacto_name: "p".into(),
            oci: String::new(),
            pull_secret_ref: String::new(),
            tags: vec![],
            max_age_seconds: 0,
        };
        assert_eq!(list_input(&list).unwrap_err().field, "oci");
    }

    #[test]
    fn outcomes_are_encoded() {
        let response = outcome_to_proto(Outcome::Unavailable {
            reason: "down".into(),
            policy: ResolutionPolicy::Latest,
        });
        match response.result {
            Some(resolve_response::Result::Unavailable(u)) => {
                assert_eq!(u.reason, "down");
                assert_eq!(u.resolution_policy(), wire::ResolutionPolicy::Latest);
            }
            other => panic!("{other:?}"),
        }
        let status = list_error_status(&ResolveError::NoSource);
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    }
}
