//! URLs as they may be shown: the Evidence Server's URL (`pacto evidence push --url`, the
//! status-writer's `--evidence-url`) may carry credentials as userinfo
//! (`https://user:pass@host`); logs and errors show it with the userinfo replaced by `***`.

/// `url` with its userinfo (everything before the last `@` of the authority) replaced by `***`;
/// unchanged when it has none. Works on text that is not a valid URL too (the error that says
/// so must not print the credentials either).
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}***{}{tail}", &authority[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn userinfo_is_replaced_and_the_rest_kept() {
        for (given, shown) in [
            (
                "https://user:pass@evidence.example:8686/base?x=1",
                "https://***@evidence.example:8686/base?x=1",
            ),
            ("http://token@host", "http://***@host"),
            ("http://u:p%40ss@host/a@b", "http://***@host/a@b"),
            ("http://a@b:c@host#f@g", "http://***@host#f@g"),
            ("user:pass@host:8686", "***@host:8686"),
            ("ftp://u:secret@x", "ftp://***@x"),
            ("http://evidence:8686/", "http://evidence:8686/"),
            ("http://host/path@x", "http://host/path@x"),
            ("", ""),
        ] {
            assert_eq!(redact_url(given), shown, "{given}");
            assert!(!redact_url(given).contains("pass"), "{given}");
        }
    }
}
