//! Writes the generated CRD YAML into `charts/pacto-crds/templates/` (or the directory given
//! as the first argument).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(pacto_api::crdgen::default_output_dir, PathBuf::from);
    for path in pacto_api::crdgen::write_all(&dir)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}
