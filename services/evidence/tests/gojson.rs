//! The golden vector of Go's string escaping (docs/design/envelopes.md#canonical-bytes): the
//! expected files under `tests/gojson-vector/` were written by Go's own `encoding/json`
//! (`tests/gojson-vector/generate.go`), not by this crate. Every control character, DEL, `<`,
//! `>`, `&`, U+2028, U+2029, non-ASCII text and invalid UTF-8.

use std::path::{Path, PathBuf};

use pacto_evidence::gojson;

fn vector(name: &str) -> Vec<u8> {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gojson-vector")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("utf-8")
}

#[test]
fn strings_are_escaped_exactly_as_go_escapes_them() {
    let input = utf8(vector("valid.txt"));
    let expected = utf8(vector("valid.json"));
    assert_eq!(gojson::string(&input), expected);
    let mut out = String::new();
    gojson::write_bytes(input.as_bytes(), &mut out);
    assert_eq!(out, expected);
    // the short forms Go 1.22 introduced are in the vector, not the long ones
    assert!(
        expected.contains("\\u0007\\b\\t\\n\\u000b\\f\\r"),
        "{expected}"
    );
}

#[test]
fn invalid_utf8_is_escaped_exactly_as_go_escapes_it() {
    let input = vector("invalid.bin");
    assert!(std::str::from_utf8(&input).is_err());
    let mut out = String::new();
    gojson::write_bytes(&input, &mut out);
    assert_eq!(out, utf8(vector("invalid.json")));
}
