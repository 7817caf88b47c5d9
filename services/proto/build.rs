//! Compiles `../../proto/pacto/**/*.proto` with protox (pure Rust, no protoc) and generates the
//! prost messages and tonic clients/servers.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "pacto/common/v1/contract.proto",
    "pacto/common/v1/evidence.proto",
    "pacto/evaluator/v1/evaluator.proto",
    "pacto/observer/v1/observer.proto",
    "pacto/resolver/v1/resolver.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    println!("cargo:rerun-if-changed={}", root.display());
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={}", root.join(proto).display());
    }
    let descriptors = protox::compile(PROTOS, [&root])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
