//! Subject globs with the semantics of Go's `path.Match` (docs/design/envelopes.md#trust):
//! `*` matches any run of characters other than `/`, `?` one character other than `/`,
//! `[…]` a class (`^` negates, `a-z` ranges, `\` escapes), `\x` the character `x`.
//! A malformed pattern is an error, also when an earlier part already failed to match.

/// The pattern is malformed (unterminated class, bad range, trailing `\`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pattern:?} is not a valid glob (path.Match syntax)")]
pub struct PatternError {
    /// The pattern.
    pub pattern: String,
}

#[derive(Debug)]
struct Bad;

/// Whether `name` matches `pattern`.
pub fn matches(pattern: &str, name: &str) -> Result<bool, PatternError> {
    match_bytes(pattern.as_bytes(), name.as_bytes()).map_err(|Bad| PatternError {
        pattern: pattern.to_owned(),
    })
}

/// Checks the syntax of a pattern.
pub fn validate(pattern: &str) -> Result<(), PatternError> {
    matches(pattern, "").map(|_| ())
}

/// One character (as a code point, or U+FFFD for an invalid byte) and its length.
fn decode(bytes: &[u8]) -> (char, usize) {
    let width = match bytes.first() {
        None => return (char::REPLACEMENT_CHARACTER, 0),
        Some(b) if *b < 0x80 => 1,
        Some(b) if *b >> 5 == 0b110 => 2,
        Some(b) if *b >> 4 == 0b1110 => 3,
        Some(b) if *b >> 3 == 0b11110 => 4,
        Some(_) => return (char::REPLACEMENT_CHARACTER, 1),
    };
    match bytes
        .get(..width)
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| s.chars().next())
    {
        Some(c) => (c, width),
        None => (char::REPLACEMENT_CHARACTER, 1),
    }
}

/// Splits off the next chunk: leading stars, then everything up to the next unescaped `*`
/// outside a class.
fn scan_chunk(pattern: &[u8]) -> (bool, &[u8], &[u8]) {
    let mut pattern = pattern;
    let mut star = false;
    while let Some((b'*', rest)) = pattern.split_first() {
        pattern = rest;
        star = true;
    }
    let mut in_class = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            // the escaped byte is skipped (a trailing '\' is reported by match_chunk)
            b'\\' if i + 1 < pattern.len() => i += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'*' if !in_class => break,
            _ => {}
        }
        i += 1;
    }
    (star, &pattern[..i], &pattern[i..])
}

/// A class member: one (possibly escaped) character; the rest of the chunk must not be empty.
fn class_char(chunk: &[u8]) -> Result<(char, &[u8]), Bad> {
    let mut chunk = chunk;
    match chunk.first() {
        None | Some(b'-' | b']') => return Err(Bad),
        Some(b'\\') => {
            chunk = &chunk[1..];
            if chunk.is_empty() {
                return Err(Bad);
            }
        }
        Some(_) => {}
    }
    let (c, n) = decode(chunk);
    if c == char::REPLACEMENT_CHARACTER && n == 1 && chunk[0] >= 0x80 {
        return Err(Bad);
    }
    let rest = &chunk[n..];
    if rest.is_empty() {
        return Err(Bad);
    }
    Ok((c, rest))
}

/// Matches one chunk at the start of `s`; `Some(rest)` on a match. The whole chunk is parsed
/// even after a mismatch so that syntax errors are always found.
fn match_chunk<'a>(chunk: &[u8], s: &'a [u8]) -> Result<Option<&'a [u8]>, Bad> {
    let mut chunk = chunk;
    let mut s = s;
    let mut failed = false;
    while let Some(&first) = chunk.first() {
        if !failed && s.is_empty() {
            failed = true;
        }
        match first {
            b'[' => {
                let mut r = char::REPLACEMENT_CHARACTER;
                if !failed {
                    let (c, n) = decode(s);
                    r = c;
                    s = &s[n..];
                }
                chunk = &chunk[1..];
                let mut negated = false;
                if chunk.first() == Some(&b'^') {
                    negated = true;
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if chunk.first() == Some(&b']') && ranges > 0 {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = class_char(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if chunk.first() == Some(&b'-') {
                        let (h, rest) = class_char(&chunk[1..])?;
                        hi = h;
                        chunk = rest;
                    }
                    if lo <= r && r <= hi {
                        matched = true;
                    }
                    ranges += 1;
                }
                if matched == negated {
                    failed = true;
                }
            }
            b'?' => {
                if !failed {
                    if s[0] == b'/' {
                        failed = true;
                    }
                    let (_, n) = decode(s);
                    s = &s[n..];
                }
                chunk = &chunk[1..];
            }
            _ => {
                if first == b'\\' {
                    chunk = &chunk[1..];
                    if chunk.is_empty() {
                        return Err(Bad);
                    }
                }
                if !failed {
                    if chunk[0] != s[0] {
                        failed = true;
                    }
                    s = &s[1..];
                }
                chunk = &chunk[1..];
            }
        }
    }
    Ok(if failed { None } else { Some(s) })
}

fn match_bytes(pattern: &[u8], name: &[u8]) -> Result<bool, Bad> {
    let mut pattern = pattern;
    let mut name = name;
    'chunks: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // a trailing star matches the rest of the name unless it crosses a '/'
            return Ok(!name.contains(&b'/'));
        }
        let here = match_chunk(chunk, name)?;
        if let Some(t) = here
            && (t.is_empty() || !pattern.is_empty())
        {
            name = t;
            continue;
        }
        if star {
            let mut i = 0;
            while i < name.len() && name[i] != b'/' {
                if let Some(t) = match_chunk(chunk, &name[i + 1..])? {
                    if pattern.is_empty() && !t.is_empty() {
                        i += 1;
                        continue;
                    }
                    name = t;
                    continue 'chunks;
                }
                i += 1;
            }
        }
        // no match: the rest of the pattern must still be well-formed
        while !pattern.is_empty() {
            let (_, chunk, rest) = scan_chunk(pattern);
            pattern = rest;
            match_chunk(chunk, b"")?;
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_match_semantics() {
        let cases: &[(&str, &str, bool)] = &[
            ("abc", "abc", true),
            ("*", "abc", true),
            ("*c", "abc", true),
            ("a*", "a", true),
            ("a*", "abc", true),
            ("a*", "ab/c", false),
            ("a*/b", "abc/b", true),
            ("a*/b", "a/c/b", false),
            ("a*b*c*d*e*/f", "axbxcxdxe/f", true),
            ("a*b*c*d*e*/f", "axbxcxdxexxx/f", true),
            ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", false),
            ("a*b?c*x", "abxbbxdbxebxczzx", true),
            ("a*b?c*x", "abxbbxdbxebxczzy", false),
            ("ab[c]", "abc", true),
            ("ab[b-d]", "abc", true),
            ("ab[e-g]", "abc", false),
            ("ab[^c]", "abc", false),
            ("ab[^b-d]", "abc", false),
            ("ab[^e-g]", "abc", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "ab", false),
            ("a?b", "a☺b", true),
            ("a[^a]b", "a☺b", true),
            ("a???b", "a☺b", false),
            ("a[^a][^a][^a]b", "a☺b", false),
            ("[a-ζ]*", "α", true),
            ("*[a-ζ]", "A", false),
            ("a?b", "a/b", false),
            ("a*b", "a/b", false),
            ("[\\]a]", "]", true),
            ("[\\-]", "-", true),
            ("[x\\-]", "x", true),
            ("[x\\-]", "-", true),
            ("[x\\-]", "z", false),
            ("[\\-x]", "x", true),
            ("*x", "xxx", true),
            ("prod/*", "prod/orders", true),
            ("prod/*", "staging/orders", false),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(matches(pattern, name), Ok(*want), "{pattern} ~ {name}");
        }
    }

    #[test]
    fn malformed_patterns_are_errors() {
        for (pattern, name) in [
            ("[]a]", "]"),
            ("[-]", "-"),
            ("[x-]", "x"),
            ("[x-]", "-"),
            ("[x-]", "z"),
            ("[-x]", "x"),
            ("[-x]", "-"),
            ("[-x]", "a"),
            ("\\", "a"),
            ("[a-b-c]", "a"),
            ("[", "a"),
            ("[^", "a"),
            ("[^bc", "a"),
            ("a[", "a"),
            ("a[", "ab"),
            ("a[", "x"),
            ("a/b[", "x"),
            ("*x]", "x]"),
        ] {
            if pattern == "*x]" {
                // a lone ']' outside a class is a literal
                assert_eq!(matches(pattern, name), Ok(true));
                continue;
            }
            assert!(matches(pattern, name).is_err(), "{pattern} ~ {name}");
            assert!(validate(pattern).is_err(), "{pattern}");
        }
    }
}
