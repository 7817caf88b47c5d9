//! Response bodies as Go's `json.Encoder` writes them (docs/design/evidence-server.md#bodies):
//! map keys sorted, HTML-escaped strings, one trailing newline. Every JSON body of the API is
//! built here, so the byte-exact forms live in one place; strings are written by the one Go-JSON
//! encoder, `pacto_evidence::gojson` (docs/design/envelopes.md#canonical-bytes).

use pacto_evidence::ErrorCode;
use pacto_evidence::gojson::string as go_string;

/// `{"status":"<status>"}` + newline (`/health`, `/ready`).
pub fn status(status: &str) -> String {
    format!("{{\"status\":{}}}\n", go_string(status))
}

/// `{"code":…,"message":…}` + newline: every refusal.
pub fn error(code: ErrorCode) -> String {
    format!(
        "{{\"code\":{},\"message\":{}}}\n",
        go_string(code.as_str()),
        go_string(message(code))
    )
}

/// The fixed, generic message of each code (the detail goes to the server's log only).
pub fn message(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidEnvelope => "envelope could not be decoded",
        ErrorCode::UnauthorizedProducer => "producer is not authorized",
        ErrorCode::InvalidEvidence => "evidence set is invalid",
        ErrorCode::ContractRefRejected => "contract reference is not accepted",
        ErrorCode::ContractResolutionFailed => "contract could not be resolved",
        ErrorCode::Replay => "envelope was already accepted",
        ErrorCode::RegistryUnavailable => "registry is unavailable",
        ErrorCode::RegistryIncomplete => "registry holds invalid evidence artifacts",
        ErrorCode::StoreDegraded => "evidence could not be stored",
        ErrorCode::StoreNotReady => "evidence store is not ready",
        ErrorCode::InternalError => "internal error",
    }
}

/// The 202 body: `{"acceptedAt","compliance","findings","id"}` (sorted) + newline.
pub fn accepted(accepted_at: &str, compliance: &str, findings: usize, id: &str) -> String {
    format!(
        "{{\"acceptedAt\":{},\"compliance\":{},\"findings\":{findings},\"id\":{}}}\n",
        go_string(accepted_at),
        go_string(compliance),
        go_string(id)
    )
}

/// `{"producers":[…]}` + newline, sorted; `null` when none is configured (Go's nil slice).
pub fn producers(producers: &[String]) -> String {
    if producers.is_empty() {
        return "{\"producers\":null}\n".to_owned();
    }
    let mut sorted: Vec<&String> = producers.iter().collect();
    sorted.sort();
    let items: Vec<String> = sorted.iter().map(|p| go_string(p)).collect();
    format!("{{\"producers\":[{}]}}\n", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_byte_exact() {
        assert_eq!(status("ok"), "{\"status\":\"ok\"}\n");
        assert_eq!(
            error(ErrorCode::Replay),
            "{\"code\":\"replay\",\"message\":\"envelope was already accepted\"}\n"
        );
        assert_eq!(
            accepted("2026-12-04T10:00:00Z", "Compliant", 0, "id-<1>"),
            "{\"acceptedAt\":\"2026-12-04T10:00:00Z\",\"compliance\":\"Compliant\",\"findings\":0,\"id\":\"id-\\u003c1\\u003e\"}\n"
        );
        assert_eq!(producers(&[]), "{\"producers\":null}\n");
        assert_eq!(
            producers(&["b".to_owned(), "a".to_owned()]),
            "{\"producers\":[\"a\",\"b\"]}\n"
        );
    }

    #[test]
    fn every_code_has_a_distinct_message() {
        let mut messages: Vec<&str> = ErrorCode::ALL.iter().map(|c| message(*c)).collect();
        messages.sort_unstable();
        messages.dedup();
        assert_eq!(messages.len(), ErrorCode::ALL.len());
    }
}
