//! Captures the build metadata `/version` and `pacto version` report (services/runtime/build-info.rs).

include!("../runtime/build-info.rs");

fn main() {
    emit_build_info();
}
