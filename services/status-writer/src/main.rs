//! `pacto-status-writer`: the reconcile hub over Pacto.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("a rustls crypto provider is already installed"))?;
    let args = pacto_status_writer::Args::parse();
    pacto_status_writer::run(args).await?;
    Ok(())
}
