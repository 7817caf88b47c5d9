//! Decoding of tag-list pages (`GET /v2/<name>/tags/list?n=…&last=…`) into one de-duplicated list
//! (docs/design/resolution.md#hostile-registries). Kept apart from the HTTP client so that the
//! decoding is a pure function of the page bodies (and can be fuzzed as one).

use std::collections::HashSet;

/// Tags asked for per page (`n=`).
pub const TAG_PAGE_SIZE: usize = 1000;

/// The tags gathered from the pages of one tag list, in the order first seen.
///
/// A page adds only the tags that sort after the previous page's last tag and were not seen
/// before, so a registry that repeats or reorders tags across pages cannot make the list grow
/// past what it really holds; de-duplication is linear (a hash set).
#[derive(Debug, Default)]
pub struct TagPages {
    tags: Vec<String>,
    seen: HashSet<String>,
    last: Option<String>,
}

/// A page body that is not a tag list: where JSON decoding stopped (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPage {
    /// Line of the error.
    pub line: usize,
    /// Column of the error.
    pub column: usize,
}

impl TagPages {
    /// No tags yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The `last=` value of the next page request (`None` before the first page).
    pub fn last(&self) -> Option<&str> {
        self.last.as_deref()
    }

    /// Decodes one page body (`{"tags": [...]}`; `null` or a missing `tags` is an empty page)
    /// and adds its new tags. Returns whether another page should be fetched: only when the page
    /// was full and added something.
    pub fn add_page(&mut self, body: &[u8]) -> Result<bool, BadPage> {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let page: Page = serde_json::from_slice(body).map_err(|e| BadPage {
            line: e.line(),
            column: e.column(),
        })?;
        let page = page.tags.unwrap_or_default();
        let received = page.len();
        let before = self.tags.len();
        for t in page {
            if self.last.as_deref().is_none_or(|l| t.as_str() > l) && self.seen.insert(t.clone()) {
                self.tags.push(t);
            }
        }
        if self.tags.len() == before || received < TAG_PAGE_SIZE {
            return Ok(false);
        }
        self.last = self.tags[before..].iter().max().cloned();
        Ok(true)
    }

    /// How many distinct tags were gathered.
    pub fn len(&self) -> usize {
        self.tags.len()
    }

    /// Whether no tag was gathered.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// The gathered tags.
    pub fn into_tags(self) -> Vec<String> {
        self.tags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(tags: impl IntoIterator<Item = String>) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({ "tags": tags.into_iter().collect::<Vec<_>>() }))
            .expect("json")
    }

    #[test]
    fn full_pages_continue_after_their_highest_tag_and_repeats_are_dropped() {
        let mut pages = TagPages::new();
        let first: Vec<String> = (0..TAG_PAGE_SIZE).map(|i| format!("a{i:04}")).collect();
        assert_eq!(pages.add_page(&page(first.clone())), Ok(true));
        assert_eq!(pages.last(), Some("a0999"));
        // A registry that ignores `last=` and sends the first page again adds nothing: stop.
        assert_eq!(pages.add_page(&page(first)), Ok(false));
        assert_eq!(pages.len(), TAG_PAGE_SIZE);
    }

    #[test]
    fn short_null_and_bad_pages() {
        let mut pages = TagPages::new();
        assert_eq!(pages.add_page(br#"{"tags":null}"#), Ok(false));
        assert_eq!(pages.add_page(br#"{"name":"x"}"#), Ok(false));
        assert_eq!(
            pages.add_page(br#"{"tags":["1.0.0","1.0.0","2.0"]}"#),
            Ok(false)
        );
        assert_eq!(pages.into_tags(), ["1.0.0", "2.0"]);
        let mut pages = TagPages::new();
        assert_eq!(
            pages.add_page(b"{\n \"tags\": 7}"),
            Err(BadPage {
                line: 2,
                column: 10
            })
        );
        assert!(pages.is_empty());
    }
}
