//! The one place where the shared vocabulary enums change representation: the domain
//! [`engine::Severity`] (the registry in `pacto-contract`) and [`engine::ContractStatus`], their
//! proto enums, and the CRD enums of `pacto-api` (which carry the schema attributes the CRD
//! needs, so they stay separate types). The parity test below covers every value of every
//! representation.

#[cfg(feature = "crd")]
use pacto_api as api;
use pacto_engine as engine;

use super::FieldError;
use crate::evaluator;

/// Encodes a severity.
pub fn severity_to_proto(severity: engine::Severity) -> evaluator::Severity {
    match severity {
        engine::Severity::Error => evaluator::Severity::Error,
        engine::Severity::Warning => evaluator::Severity::Warning,
        engine::Severity::Info => evaluator::Severity::Info,
        engine::Severity::Unknown => evaluator::Severity::Unknown,
    }
}

/// Decodes a severity.
pub fn severity_from_proto(value: i32, field: &str) -> Result<engine::Severity, FieldError> {
    match evaluator::Severity::try_from(value) {
        Ok(evaluator::Severity::Error) => Ok(engine::Severity::Error),
        Ok(evaluator::Severity::Warning) => Ok(engine::Severity::Warning),
        Ok(evaluator::Severity::Info) => Ok(engine::Severity::Info),
        Ok(evaluator::Severity::Unknown) => Ok(engine::Severity::Unknown),
        Ok(evaluator::Severity::Unspecified) => Err(FieldError::new(field, "must be set")),
        Err(_) => Err(FieldError::new(field, format!("unknown value {value}"))),
    }
}

/// Encodes a contract status.
pub fn status_to_proto(status: engine::ContractStatus) -> evaluator::ContractStatus {
    use engine::ContractStatus as D;
    use evaluator::ContractStatus as P;
    match status {
        D::Compliant => P::Compliant,
        D::Warning => P::Warning,
        D::NonCompliant => P::NonCompliant,
        D::Reference => P::Reference,
        D::Unknown => P::Unknown,
        D::Invalid => P::Invalid,
        D::NotEvaluated => P::NotEvaluated,
    }
}

/// Decodes a contract status.
pub fn status_from_proto(value: i32, field: &str) -> Result<engine::ContractStatus, FieldError> {
    use engine::ContractStatus as D;
    use evaluator::ContractStatus as P;
    match P::try_from(value) {
        Ok(P::Compliant) => Ok(D::Compliant),
        Ok(P::Warning) => Ok(D::Warning),
        Ok(P::NonCompliant) => Ok(D::NonCompliant),
        Ok(P::Reference) => Ok(D::Reference),
        Ok(P::Unknown) => Ok(D::Unknown),
        Ok(P::Invalid) => Ok(D::Invalid),
        Ok(P::NotEvaluated) => Ok(D::NotEvaluated),
        Ok(P::Unspecified) => Err(FieldError::new(field, "must be set")),
        Err(_) => Err(FieldError::new(field, format!("unknown value {value}"))),
    }
}

/// A severity as written to `status.findings[].severity`.
#[cfg(feature = "crd")]
pub fn severity_to_crd(severity: engine::Severity) -> api::Severity {
    match severity {
        engine::Severity::Error => api::Severity::Error,
        engine::Severity::Warning => api::Severity::Warning,
        engine::Severity::Info => api::Severity::Info,
        engine::Severity::Unknown => api::Severity::Unknown,
    }
}

/// A severity read back from `status.findings[].severity`.
#[cfg(feature = "crd")]
pub fn severity_from_crd(severity: api::Severity) -> engine::Severity {
    match severity {
        api::Severity::Error => engine::Severity::Error,
        api::Severity::Warning => engine::Severity::Warning,
        api::Severity::Info => engine::Severity::Info,
        api::Severity::Unknown => engine::Severity::Unknown,
    }
}

/// A contract status as written to `status.contractStatus`.
#[cfg(feature = "crd")]
pub fn status_to_crd(status: engine::ContractStatus) -> api::ContractStatus {
    use api::ContractStatus as A;
    use engine::ContractStatus as D;
    match status {
        D::Compliant => A::Compliant,
        D::Warning => A::Warning,
        D::NonCompliant => A::NonCompliant,
        D::Reference => A::Reference,
        D::Unknown => A::Unknown,
        D::Invalid => A::Invalid,
        D::NotEvaluated => A::NotEvaluated,
    }
}

/// A contract status read back from `status.contractStatus`.
#[cfg(feature = "crd")]
pub fn status_from_crd(status: api::ContractStatus) -> engine::ContractStatus {
    use api::ContractStatus as A;
    use engine::ContractStatus as D;
    match status {
        A::Compliant => D::Compliant,
        A::Warning => D::Warning,
        A::NonCompliant => D::NonCompliant,
        A::Reference => D::Reference,
        A::Unknown => D::Unknown,
        A::Invalid => D::Invalid,
        A::NotEvaluated => D::NotEvaluated,
    }
}

#[cfg(all(test, feature = "crd"))]
mod tests {
    use super::*;

    /// The proto spelling of a wire name: `warning` → `SEVERITY_WARNING`,
    /// `NonCompliant` → `CONTRACT_STATUS_NON_COMPLIANT`.
    fn proto_name(prefix: &str, name: &str) -> String {
        let mut out = format!("{prefix}_");
        for (i, ch) in name.chars().enumerate() {
            if ch.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_uppercase());
        }
        out
    }

    fn crd_name<T: serde::Serialize>(value: &T) -> String {
        match serde_json::to_value(value) {
            Ok(serde_json::Value::String(s)) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    #[test]
    fn severities_agree_in_every_representation() {
        for severity in engine::Severity::ALL {
            let wire = severity_to_proto(severity);
            assert_eq!(
                wire.as_str_name(),
                proto_name("SEVERITY", severity.as_str())
            );
            assert_eq!(severity_from_proto(wire.into(), "s"), Ok(severity));
            let crd = severity_to_crd(severity);
            assert_eq!(crd_name(&crd), severity.as_str());
            assert_eq!(severity_from_crd(crd), severity);
        }
        for crd in api::Severity::ALL {
            assert_eq!(severity_to_crd(severity_from_crd(crd)), crd);
        }
        assert_eq!(engine::Severity::ALL.len(), api::Severity::ALL.len());
        let unset = severity_from_proto(evaluator::Severity::Unspecified.into(), "s");
        assert_eq!(unset, Err(FieldError::new("s", "must be set")));
        assert_eq!(
            severity_from_proto(99, "s"),
            Err(FieldError::new("s", "unknown value 99"))
        );
    }

    #[test]
    fn contract_statuses_agree_in_every_representation() {
        for status in engine::ContractStatus::ALL {
            let wire = status_to_proto(status);
            assert_eq!(
                wire.as_str_name(),
                proto_name("CONTRACT_STATUS", status.as_str())
            );
            assert_eq!(status_from_proto(wire.into(), "s"), Ok(status));
            let crd = status_to_crd(status);
            assert_eq!(crd.as_str(), status.as_str());
            assert_eq!(crd_name(&crd), status.as_str());
            assert_eq!(status_from_crd(crd), status);
        }
        for crd in api::ContractStatus::ALL {
            assert_eq!(status_to_crd(status_from_crd(crd)), crd);
        }
        assert_eq!(
            engine::ContractStatus::ALL.len(),
            api::ContractStatus::ALL.len()
        );
        let unset = status_from_proto(evaluator::ContractStatus::Unspecified.into(), "s");
        assert_eq!(unset, Err(FieldError::new("s", "must be set")));
    }
}
