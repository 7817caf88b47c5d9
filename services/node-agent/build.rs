//! Compiles libbpf-programs/sockwatch.bpf.c with clang into OUT_DIR
//! (docs/design/node-agent.md#kernel-program). Without clang the committed
//! libbpf-programs/prebuilt/sockwatch.bpf.o is used and a cargo warning says so, unless
//! SOCKWATCH_REQUIRE_CLANG=1 (CI), which turns a missing or failing clang into a build error.
//!
//! The output is byte-reproducible: clang runs with the crate directory as its cwd (cargo's
//! default for build scripts) and maps that directory to `.`, so no absolute path ends up in
//! the object's BTF line info.
use std::{env, path::PathBuf, process::Command};

// The build metadata `/version` reports (PACTO_BUILD_COMMIT, PACTO_BUILD_TIME).
include!("../runtime/build-info.rs");

const PROGRAM: &str = "sockwatch";

fn main() {
    emit_build_info();
    let manifest =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let src_dir = manifest.join("libbpf-programs");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = env::var("BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let strip = env::var("BPF_STRIP").unwrap_or_else(|_| "llvm-strip".into());
    let require = env::var("SOCKWATCH_REQUIRE_CLANG").is_ok_and(|v| v == "1");
    for var in ["BPF_CLANG", "BPF_STRIP", "SOCKWATCH_REQUIRE_CLANG"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    for file in [
        format!("{PROGRAM}.bpf.c"),
        format!("{PROGRAM}.h"),
        format!("prebuilt/{PROGRAM}.bpf.o"),
    ] {
        println!("cargo:rerun-if-changed={}", src_dir.join(file).display());
    }
    println!("cargo::rustc-check-cfg=cfg(bpf_built_from_source)");

    // The object is the same for every target (docs/design/node-agent.md#architectures): the
    // program reads its arguments through BPF_PROG (tp_btf), never through the pt_regs layout
    // that __TARGET_ARCH_* selects, and every struct field it reads is a CO-RE relocation. The
    // macro still names the target so that bpf_tracing.h's register macros would be right, and
    // the asm/ headers (only the fixed-size integer types) are the build machine's own.
    let target_arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        other => panic!("the kernel program is built for x86_64 and aarch64 only, not {other:?}"),
    };
    let host = env::var("HOST").expect("cargo sets HOST");
    let host_multiarch = match host.split('-').next() {
        Some("aarch64") => "aarch64-linux-gnu",
        _ => "x86_64-linux-gnu",
    };

    let src = src_dir.join(format!("{PROGRAM}.bpf.c"));
    let obj = out.join(format!("{PROGRAM}.bpf.o"));
    let compiled = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-D__TARGET_ARCH_{target_arch}"))
        .arg(format!("-ffile-prefix-map={}=.", manifest.display()))
        .arg("-I")
        .arg(&src_dir)
        .arg("-I")
        .arg(format!("/usr/include/{host_multiarch}"))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .current_dir(&manifest)
        .status();
    match compiled {
        Ok(status) if status.success() => {
            // Drop DWARF; the .BTF and .BTF.ext sections that CO-RE needs stay.
            let stripped = Command::new(&strip).arg("-g").arg(&obj).status();
            assert!(
                stripped.is_ok_and(|s| s.success()),
                "{strip} -g {} failed (set BPF_STRIP to an llvm-strip)",
                obj.display()
            );
            println!("cargo:rustc-cfg=bpf_built_from_source");
        }
        other => {
            assert!(
                !require,
                "clang failed or is missing ({other:?}) and SOCKWATCH_REQUIRE_CLANG=1"
            );
            let prebuilt = src_dir.join("prebuilt").join(format!("{PROGRAM}.bpf.o"));
            println!(
                "cargo:warning=clang unavailable ({other:?}); using {}",
                prebuilt.display()
            );
            std::fs::copy(&prebuilt, &obj).expect("the committed prebuilt object is readable");
        }
    }
}
