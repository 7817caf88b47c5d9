//! What a service binary is: its crate version, the commit and the build time, captured by the
//! crate's build script (`services/runtime/build-info.rs`) and served on the admin port as
//! `/version` (docs/upgrade.md, "Versions").

use std::fmt::Write as _;

/// A binary's build metadata. Build it with [`crate::build_info!`] in the service crate, whose
/// build script sets the variables it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// The crate (`pacto-observer`, …).
    pub name: &'static str,
    /// The crate's version, which is the release's version.
    pub version: &'static str,
    /// The git commit built (`unknown` outside a checkout).
    pub commit: &'static str,
    /// The build time, RFC 3339 UTC (`SOURCE_DATE_EPOCH` when set).
    pub build_time: &'static str,
}

impl BuildInfo {
    /// The `/version` body: one JSON object, with a newline.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"name\":{},\"version\":{},\"commit\":{},\"buildTime\":{}}}\n",
            json_string(self.name),
            json_string(self.version),
            json_string(self.commit),
            json_string(self.build_time)
        )
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The [`BuildInfo`] of the crate this is expanded in. That crate's build script must run
/// `emit_build_info()` of `services/runtime/build-info.rs`; without it the build fails naming
/// `PACTO_BUILD_COMMIT`.
#[macro_export]
macro_rules! build_info {
    () => {
        $crate::build_info::BuildInfo {
            name: env!("CARGO_PKG_NAME"),
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("PACTO_BUILD_COMMIT"),
            build_time: env!("PACTO_BUILD_TIME"),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    // The build script's own functions, tested here (they are not part of this crate).
    mod script {
        #![allow(dead_code)]
        include!("../build-info.rs");

        #[test]
        fn build_times_are_rfc3339_utc() {
            assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
            assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
            assert_eq!(rfc3339_utc(1_796_398_245), "2026-12-04T15:30:45Z");
            assert_eq!(rfc3339_utc(-1), "1969-12-31T23:59:59Z");
        }
    }

    #[test]
    fn the_version_body_is_one_json_object() {
        let info = BuildInfo {
            name: "pacto-x",
            version: "1.2.3",
            commit: "abc\"d",
            build_time: "2026-12-04T16:50:45Z",
        };
        assert_eq!(
            info.to_json(),
            "{\"name\":\"pacto-x\",\"version\":\"1.2.3\",\"commit\":\"abc\\\"d\",\
             \"buildTime\":\"2026-12-04T16:50:45Z\"}\n"
        );
    }
}
