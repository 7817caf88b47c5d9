//! Fuzzes tag-list decoding as the registry client pages through a repository: the input is split
//! into page bodies at 0xFF bytes (never part of a JSON text), each bounded by the client's
//! default page limit, at most `max_tag_pages` of them. Then the highest semver tag is selected as
//! resolution does. Nothing may panic; the list holds no duplicate, every page that asks for
//! another one moves `last=` strictly forward (so paging ends), and a selected tag is in the list.

use std::collections::HashSet;

use pacto_contract::version::{Constraint, select_highest_tag};
use pacto_oci::{ClientOptions, TagPages};

/// One fuzz input: panics on any broken property.
pub fn check(data: &[u8]) {
    let options = ClientOptions::default();
    let mut pages = TagPages::new();
    for body in data.split(|b| *b == 0xFF).take(options.max_tag_pages) {
        if body.len() as u64 > options.max_tag_page_bytes {
            return;
        }
        let last = pages.last().map(str::to_owned);
        let before = pages.len();
        match pages.add_page(body) {
            Err(_) => return,
            Ok(more) => {
                assert!(pages.len() >= before);
                if !more {
                    break;
                }
                assert!(pages.len() > before);
                let next = pages.last().expect("a full page sets last");
                assert!(
                    last.as_deref().is_none_or(|l| next > l),
                    "last= must advance"
                );
            }
        }
    }
    let tags = pages.into_tags();
    let distinct: HashSet<&str> = tags.iter().map(String::as_str).collect();
    assert_eq!(distinct.len(), tags.len(), "tags are de-duplicated");
    let constraint = tags.first().and_then(|t| Constraint::parse(t).ok());
    for c in [None, constraint.as_ref()] {
        if let Ok(tag) = select_highest_tag(tags.iter().map(String::as_str), c) {
            assert!(distinct.contains(tag));
        }
    }
}
