//! Response bodies as Go's `json.Encoder` writes them (docs/design/evidence-server.md#bodies):
//! map keys sorted, HTML-escaped strings, one trailing newline. Every JSON body of the API is
//! built here, so the byte-exact forms live in one place.

use std::fmt::Write as _;

use pacto_evidence::ErrorCode;

/// A JSON string literal with Go's `encoding/json` escaping (`<`, `>`, `&`, U+2028 and U+2029
/// escaped; `\n`, `\r`, `\t` short; other controls `\u00xx`).
pub fn go_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

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
    fn strings_are_escaped_as_go_does() {
        assert_eq!(
            go_string("a<b>&\"\\\n\r\t\u{1}\u{2028}\u{2029}é"),
            "\"a\\u003cb\\u003e\\u0026\\\"\\\\\\n\\r\\t\\u0001\\u2028\\u2029é\""
        );
    }

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
