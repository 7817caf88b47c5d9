// The build metadata of a released binary (docs/upgrade.md, "Versions"), shared by the build
// scripts of the service crates and the CLI: `include!("../runtime/build-info.rs")`, then
// `emit_build_info()` from `main`. It sets, for the crate's compilation,
//
//   PACTO_BUILD_COMMIT  `$PACTO_BUILD_COMMIT` if set (scripts/release.sh sets it), else
//                       `git rev-parse HEAD` of the checkout, else `unknown`;
//   PACTO_BUILD_TIME    RFC 3339 UTC of `$SOURCE_DATE_EPOCH` if set (reproducible builds;
//                       scripts/release.sh sets it to the commit's time), else of now.
//
// The script reruns only when those variables change (or this file): a local build keeps the
// commit and time of the build that last ran it; a release build always names its commit.

/// Emits `cargo:rustc-env` for PACTO_BUILD_COMMIT and PACTO_BUILD_TIME (see the file comment).
fn emit_build_info() {
    println!("cargo:rerun-if-env-changed=PACTO_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let commit = std::env::var("PACTO_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            let out = std::process::Command::new("git")
                .args(["rev-parse", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let epoch = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.trim().parse::<i64>().unwrap_or_else(|_| {
            panic!("SOURCE_DATE_EPOCH must be seconds since 1970-01-01 UTC, not '{v}'")
        }),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0)),
    };
    println!("cargo:rustc-env=PACTO_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=PACTO_BUILD_TIME={}", rfc3339_utc(epoch));
}

/// `epoch` seconds as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian calendar, days from civil).
fn rfc3339_utc(epoch: i64) -> String {
    let days = epoch.div_euclid(86_400);
    let secs = epoch.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}
