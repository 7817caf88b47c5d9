//! `pacto-observer`: serves the Observer gRPC API over mTLS.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("a rustls crypto provider is already installed"))?;
    let args = pacto_observer::Args::parse();
    pacto_observer::run(args).await?;
    Ok(())
}
